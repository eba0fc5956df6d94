"""Chapter 08's multi-layer perceptron for MNIST: 784 -> 256 -> relu -> 10.

The notebook builds it inline to show how layers hold their weights; the data-parallel training of
chapter 14 (tinyedu/multi/data_parallel.py, tinyedu/distributed_train.py) trains this same model.
"""

from __future__ import annotations

from tinyedu.nn import Linear
from tinyedu.tensor import Tensor


class MnistMLP:
    def __init__(self, hidden: int = 256) -> None:
        self.l1 = Linear(784, hidden)
        self.l2 = Linear(hidden, 10)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x.flatten(1)).relu())  # (N, 28, 28) -> (N, 784) -> (N, hidden) -> (N, 10)
