"""A small ResNet for 28x28 digits: residual blocks of convolution and BatchNorm.

He et al. (2015) made very deep networks trainable with one change: each block computes a
*correction* F(x) that is added to its input, out = relu(F(x) + shortcut(x)). If a block has
nothing useful to add it can learn F = 0 and pass x through, so stacking blocks never makes the
network worse, and the gradient flows back through the additions unchanged.

    x (N, 1, 28, 28)
    stem: conv 3x3 (1 -> w0), BatchNorm, relu, max-pool 2          -> (N, w0, 14, 14)
    stage k: BasicBlock(w_{k-1} -> w_k, stride 1 for the first, 2 after)   -> 14x14, 7x7, 4x4
    global average pool, Linear(w_last, 10)                        -> logits (N, 10)

BasicBlock is torchvision's (conv3x3-BN-relu-conv3x3-BN, plus a 1x1 conv and BN on the shortcut
when the shape changes), with torchvision's names, so the tests load the same weights into a PyTorch
twin and compare outputs, gradients and BatchNorm's running statistics.
"""

from __future__ import annotations

from typing import Sequence

from tinyedu.nn import BatchNorm2d, Conv2d, Linear
from tinyedu.tensor import Tensor


# --8<-- [start:block]
class BasicBlock:
    """out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1):
        self.conv1 = Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = BatchNorm2d(out_channels)
        self.conv2 = Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = BatchNorm2d(out_channels)
        # the identity when the shape stays; a strided 1x1 convolution (a learned projection) when not
        self.downsample: list = []
        if stride != 1 or in_channels != out_channels:
            self.downsample = [Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                               BatchNorm2d(out_channels)]

    def __call__(self, x: Tensor) -> Tensor:
        out = self.bn1(self.conv1(x)).relu().contiguous()  # (stored: see ResNet.__call__)
        out = self.bn2(self.conv2(out))
        shortcut = self.downsample[1](self.downsample[0](x)) if self.downsample else x
        return (out + shortcut).relu().contiguous()
# --8<-- [end:block]


# --8<-- [start:resnet]
class ResNet:
    """Stem, one BasicBlock per entry of `widths` (the first keeps the resolution, each later one halves
    it), global average pooling and a linear classifier."""

    def __init__(self, widths: Sequence[int] = (16, 32, 64), num_classes: int = 10, in_channels: int = 1):
        widths = tuple(widths)
        if not widths or any(not isinstance(w, int) or isinstance(w, bool) or w < 1 for w in widths):
            raise ValueError(f"ResNet: widths must be a non-empty list of positive ints, got {widths!r}")
        self.conv1 = Conv2d(in_channels, widths[0], 3, padding=1, bias=False)
        self.bn1 = BatchNorm2d(widths[0])
        self.layers = [BasicBlock(widths[max(k - 1, 0)], w, stride=1 if k == 0 else 2)
                       for k, w in enumerate(widths)]
        self.fc = Linear(widths[-1], num_classes)

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim != 4:
            raise ValueError(f"ResNet: expected images (N, C, H, W), got shape {x.shape}")
        # Each activation that a convolution reads is stored (`contiguous`): a convolution reads every
        # input value 9 x C_out times, and its weight gradient would otherwise recompute BatchNorm and
        # relu inside the reduction for each read, through padded windows (a training step measured
        # 3x slower that way).
        x = self.bn1(self.conv1(x)).relu().max_pool2d(2).contiguous()
        for block in self.layers:
            x = block(x)
        return self.fc(x.mean((2, 3)))  # global average pooling: one number per channel
# --8<-- [end:resnet]


__all__ = ["BasicBlock", "ResNet"]
