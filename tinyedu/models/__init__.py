"""Models built from tinyedu.nn and Tensor ops: a decoder-only Transformer, a GPT for text (with its
KV-cache decoding, speculative decoding and int8 weights), an LSTM and a small ResNet,
each with the task it trains on (tinyedu.models.tasks), and chapter 08's CNN, which the export tests
use. The Transformer, the LSTM and the ResNet name their weights as their PyTorch twins do, so the
same state dict loads into
both (the tests compare outputs and gradients)."""

from tinyedu.models.cnn import MnistCNN
from tinyedu.models.generate import speculative_generate
from tinyedu.models.gpt import GPT, best_bigram_loss, bigram_loss, train_gpt
from tinyedu.models.lstm import LSTM, LSTMCell, LSTMRegressor, lstm_cell
from tinyedu.models.quantize import quantize_int8
from tinyedu.models.resnet import BasicBlock, ResNet
from tinyedu.models.transformer import Block, CausalSelfAttention, Transformer, attention, causal_mask

__all__ = ["Transformer", "Block", "CausalSelfAttention", "attention", "causal_mask", "LSTM", "LSTMCell",
           "LSTMRegressor", "lstm_cell", "ResNet", "BasicBlock", "MnistCNN", "GPT", "train_gpt",
           "bigram_loss", "best_bigram_loss", "speculative_generate", "quantize_int8"]
