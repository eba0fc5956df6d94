"""Convolution as one Function, whose forward and both gradients are window products.

Built from views, a multiply and a sum (as `Tensor._pool` builds pooling), a convolution gets a
correct gradient from the chain rule, but a slow one for the input: the gradient of a window view
is "add every window back where it came from" (col2im), which needs the gradient of every window
element, (N, C_in, *out, *k) numbers written and read again. Written by hand, the input's
gradient is itself a convolution: the output gradient, spread out by the stride and padded, slid
over by the flipped weight with its in and out channels swapped. So all three are the same
kernel shape, which the heuristics (tinyedu/codegen/heuristics.py, `_conv_optimizations`) know:

    forward        out[n, o, y, x]  = sum over c, i, j of  x[n, c, y*s + i*d, x*s + j*d] w[o, c, i, j]
    weight grad    dw[o, c, i, j]   = sum over n, y, x of  g[n, o, y, x] x[n, c, y*s + i*d, x*s + j*d]
    input grad     dx = the forward applied to g (spread, padded) and w (flipped, transposed)

The input arrives padded (padding is a Tensor op before this one; its gradient is a crop); a large
one is copied out with its zeros written before the windows are cut (`dense_padding`).
"""

from __future__ import annotations

from tinyedu.core.function import Function
from tinyedu.core.ops import BinaryOps, ReduceOps
from tinyedu.lazy import LazyBuffer


def windows(x: LazyBuffer, kernel: tuple[int, ...], stride: tuple[int, ...],
            dilation: tuple[int, ...]) -> LazyBuffer:
    """(..., *spatial) -> (..., *out, *kernel): the sliding windows, as views only.

    The same trick as `Tensor._windows`, on LazyBuffers: repeat an axis k times, lay the copies end
    to end, pad, and cut into rows `dilation` longer, so row i starts i*dilation further in; keep
    every stride-th start. The shape simplifier merges the views into one (strides (s, d)).
    """
    nd = len(kernel)
    first = len(x.shape) - nd
    for k, s, d in zip(kernel, stride, dilation, strict=True):
        n = x.shape[first]
        out = (n - d * (k - 1) - 1) // s + 1
        x = x.permute((*range(first), *range(first + 1, len(x.shape)), first))  # this axis last
        batch = x.shape[:-1]
        rows = x.reshape((*batch, 1, n)).expand((*batch, k, n))
        if k > 1:
            flat = rows.reshape((*batch, k * n)).pad(((0, 0),) * len(batch) + ((0, k * d),))
            rows = flat.reshape((*batch, k, n + d))
        rows = rows.shrink(tuple((0, b) for b in batch) + ((0, k), (0, (out - 1) * s + 1)))
        rows = rows.stride((1,) * (len(batch) + 1) + (s,))  # (..., k, out)
        x = rows.permute((*range(len(batch)), len(batch) + 1, len(batch)))  # (..., out, k)
    outs = [first + 2 * i for i in range(nd)]
    return x.permute((*range(first), *outs, *(o + 1 for o in outs)))


def window_products(x: LazyBuffer, weight: LazyBuffer, stride: tuple[int, ...], dilation: tuple[int, ...],
                    groups: int) -> LazyBuffer:
    """The convolution of (N, C_in, *spatial) x with a (C_out, C_in/groups, *k) weight: (N, C_out,
    *out). A broadcast multiply and a sum with every axis kept apart (no im2col matrix), so each
    input is one view with a stride per axis: the kernel reads x along the output's x and the
    weight as broadcasts, and the heuristics see the window axes."""
    nd = len(weight.shape) - 2
    n, (cout, cin_g), kernel = x.shape[0], weight.shape[:2], weight.shape[2:]
    win = windows(x, kernel, stride, dilation)  # (n, cin, *out, *k)
    out = win.shape[2:2 + nd]
    cols = win.reshape((n, groups, 1, cin_g, *out, *kernel))
    cols = cols.permute((0, 1, 2, *range(4, 4 + nd), 3, *range(4 + nd, 4 + 2 * nd)))  # n, g, 1, *out, c, *k
    full = (n, groups, cout // groups, *out, cin_g, *kernel)
    w = weight.reshape((1, groups, cout // groups, *(1,) * nd, cin_g, *kernel)).expand(full)
    summed = cols.expand(full).e(BinaryOps.MUL, w).r(ReduceOps.SUM, tuple(range(3 + nd, 4 + 2 * nd)))
    return summed.reshape((n, cout, *out))


class Conv(Function):
    """conv(x, weight) for an already padded x, with the gradients above."""

    def forward(self, x: LazyBuffer, weight: LazyBuffer, stride: tuple[int, ...], dilation: tuple[int, ...],
                groups: int) -> LazyBuffer:
        x = dense_padding(x)
        self.x, self.weight, self.stride, self.dilation, self.groups = x, weight, stride, dilation, groups
        return window_products(x, weight, stride, dilation, groups)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, LazyBuffer | None]:
        dx = self._input_grad(grad) if self.needs_input_grad[0] else None
        dw = self._weight_grad(_channels_last(grad)) if self.needs_input_grad[1] else None
        return dx, dw

    def _weight_grad(self, grad: LazyBuffer) -> LazyBuffer:
        """dw[o, c, *k] = sum over n and *out of grad[n, o, *out] * window[n, c, *out, *k], within a
        group: the windows of x against the output gradient, summed over the batch and positions."""
        nd, groups = len(self.weight.shape) - 2, self.groups
        n, (cout, cin_g), kernel = self.x.shape[0], self.weight.shape[:2], self.weight.shape[2:]
        win = windows(self.x, kernel, self.stride, self.dilation)  # (n, cin, *out, *k)
        out = win.shape[2:2 + nd]
        full = (n, groups, cout // groups, cin_g, *kernel, *out)
        cols = win.reshape((n, groups, 1, cin_g, *out, *kernel))
        cols = cols.permute((0, 1, 2, 3, *range(4 + nd, 4 + 2 * nd), *range(4, 4 + nd))).expand(full)
        g = grad.reshape((n, groups, cout // groups, 1, *(1,) * nd, *out)).expand(full)
        axes = (0, *range(4 + nd, 4 + 2 * nd))  # the batch and the output positions
        return cols.e(BinaryOps.MUL, g).r(ReduceOps.SUM, axes).reshape(self.weight.shape)

    def _input_grad(self, grad: LazyBuffer) -> LazyBuffer:
        """The transposed convolution: spread grad by the stride (stride - 1 zeros between
        neighbours), pad it by dilation*(k-1) on each side (and up to x's size after), and convolve
        with stride 1 and the weight flipped, its in and out channels swapped within each group."""
        nd, groups = len(self.weight.shape) - 2, self.groups
        (cout, cin_g), kernel = self.weight.shape[:2], self.weight.shape[2:]
        for axis, s in enumerate(self.stride, start=2):
            if s > 1:  # (.., m) -> (.., m, 1) -pad-> (.., m, s) -> (.., m*s), minus the s-1 trailing zeros
                shape = grad.shape
                spread = grad.reshape((*shape[:axis + 1], 1, *shape[axis + 1:]))
                spread = spread.pad(tuple((0, s - 1) if a == axis + 1 else (0, 0)
                                          for a in range(len(shape) + 1)))
                grad = spread.reshape((*shape[:axis], shape[axis] * s, *shape[axis + 1:]))
                grad = grad.shrink(tuple((0, (shape[a] - 1) * s + 1) if a == axis else (0, shape[a])
                                         for a in range(len(shape))))
        spans = [d * (k - 1) for k, d in zip(kernel, self.dilation, strict=True)]
        sizes = zip(spans, grad.shape[2:], self.x.shape[2:], strict=True)
        pads = [(span, size - g) for span, g, size in sizes]  # after: span, and up to x's size
        grad = grad.pad(((0, 0), (0, 0), *pads))
        w = self.weight.reshape((groups, cout // groups, cin_g, *kernel))
        w = w.permute((0, 2, 1, *range(3, 3 + nd)))
        w = w.stride((1, 1, 1, *(-1,) * nd)).reshape((groups * cin_g, cout // groups, *kernel))
        return window_products(grad, w, (1,) * nd, self.dilation, groups)


DENSE_PADDING_MIN = 1 << 16  # padded inputs from this many elements are copied out (see dense_padding)


def dense_padding(x: LazyBuffer) -> LazyBuffer:
    """A large padded input, copied once into memory of its own with its zeros written out.

    As a view, the padding is a condition on every load of the convolution's inner loop (is this
    element inside the image?), and a load behind a condition is a branch the C compiler cannot
    fold into the multiply-add: the 3x3 convolutions of bench/bench_cpu.py ran about 2x slower so.
    The copy costs a kernel and one pass over the input, which the forward and the weight's
    gradient then share; below DENSE_PADDING_MIN elements the launch would cost more than the
    branches save, and the padding stays a view (one kernel, its loads masked).
    """
    padded = any(v.mask is not None for v in x.st.views)
    return x.contiguous() if padded and x.size >= DENSE_PADDING_MIN else x


def _channels_last(grad: LazyBuffer) -> LazyBuffer:
    """The output gradient (N, C_out, *out) stored with the channels innermost (a copy), seen in its
    usual shape: the weight's gradient reads it as vectors along C_out (its vector axis), which the
    usual layout would make gathers, prod(out) elements apart. (The input's gradient broadcasts
    single elements of it, and reads them best in the usual layout.)"""
    nd = len(grad.shape) - 2
    last = grad.permute((0, *range(2, 2 + nd), 1)).contiguous()
    return last.permute((0, nd + 1, *range(1, 1 + nd)))
