"""Models built from tinyedu.nn and Tensor ops: a decoder-only Transformer, an LSTM and a small ResNet,
each with the task it trains on (tinyedu.models.tasks). Every model names its weights as its PyTorch
twin does, so the same state dict loads into both (the tests compare outputs and gradients)."""

from tinyedu.models.lstm import LSTM, LSTMCell, LSTMRegressor, lstm_cell
from tinyedu.models.resnet import BasicBlock, ResNet
from tinyedu.models.transformer import Block, CausalSelfAttention, Transformer, attention, causal_mask

__all__ = ["Transformer", "Block", "CausalSelfAttention", "attention", "causal_mask", "LSTM", "LSTMCell",
           "LSTMRegressor", "lstm_cell", "ResNet", "BasicBlock"]
