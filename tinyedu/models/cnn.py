"""Chapter 08's small CNN for 28x28 digits: two convolution blocks and a linear head.

    x (N, 1, 28, 28)
    conv 3x3 (1 -> 8), BatchNorm, relu, max-pool 2     -> (N, 8, 13, 13)
    conv 3x3 (8 -> 16), BatchNorm, relu, max-pool 2    -> (N, 16, 5, 5)
    flatten, Linear(400, 10)                           -> logits (N, 10)

Chapter 08 builds it in the notebook and trains it; the export tests and `bench/bench_export.py`
use this copy, so they all export the same network.
"""

from __future__ import annotations

from tinyedu.nn import BatchNorm2d, Conv2d, Linear
from tinyedu.tensor import Tensor


class MnistCNN:
    def __init__(self) -> None:
        self.conv1, self.bn1 = Conv2d(1, 8, 3), BatchNorm2d(8)
        self.conv2, self.bn2 = Conv2d(8, 16, 3), BatchNorm2d(16)
        self.head = Linear(16 * 5 * 5, 10)

    def __call__(self, x: Tensor) -> Tensor:
        x = self.bn1(self.conv1(x)).relu().max_pool2d(2)
        x = self.bn2(self.conv2(x)).relu().max_pool2d(2)
        return self.head(x.flatten(1))
