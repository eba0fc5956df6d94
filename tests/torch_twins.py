"""PyTorch twins of tinyedu.models, written with torch's own building blocks (F.scaled_dot_product_attention,
nn.LSTM, nn.BatchNorm2d), with the same attribute names, so the same state dict loads into both."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tinyedu.nn.state import get_state_dict


def load_from(ours: object, theirs: nn.Module) -> nn.Module:
    """Give the torch module our tensors (every name must match: strict)."""
    theirs.load_state_dict({name: torch.tensor(t.numpy()) for name, t in get_state_dict(ours).items()})
    return theirs


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch, length, dim = x.shape
        heads = self.qkv(x).reshape(batch, length, 3, self.n_heads, dim // self.n_heads)
        q, k, v = heads.permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        # the weights, for the drawings, by the textbook formula (the output above does not use them)
        scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
        future = torch.ones(length, length, dtype=torch.bool).triu(1)
        weights = scores.masked_fill(future, float("-inf")).softmax(-1)
        return self.proj(out.transpose(1, 2).reshape(batch, length, dim)), weights


class MLP(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc, self.proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(dim), CausalSelfAttention(dim, n_heads)
        self.ln2, self.mlp = nn.LayerNorm(dim), MLP(dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        attended, weights = self.attn(self.ln1(x))
        x = x + attended
        return x + self.mlp(self.ln2(x)), weights


class Transformer(nn.Module):
    def __init__(self, vocab_size: int, block_size: int, dim: int, n_heads: int, n_layers: int):
        super().__init__()
        self.tok_emb, self.pos_emb = nn.Embedding(vocab_size, dim), nn.Embedding(block_size, dim)
        self.blocks = nn.ModuleList([Block(dim, n_heads) for _ in range(n_layers)])
        self.ln_f, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab_size)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        x = self.tok_emb(tokens) + self.pos_emb(torch.arange(tokens.shape[1]))
        maps = []
        for block in self.blocks:
            x, weights = block(x)
            maps.append(weights)
        return self.head(self.ln_f(x)), maps


class LSTMRegressor(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0][:, -1]).reshape(x.shape[0])


class BasicBlock(nn.Module):
    """torchvision's BasicBlock."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                                            nn.BatchNorm2d(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    def __init__(self, widths: tuple[int, ...], num_classes: int = 10, in_channels: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.layers = nn.ModuleList([BasicBlock(widths[max(k - 1, 0)], w, 1 if k == 0 else 2)
                                     for k, w in enumerate(widths)])
        self.fc = nn.Linear(widths[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        for block in self.layers:
            x = block(x)
        return self.fc(x.mean((2, 3)))


def numpy_of(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()
