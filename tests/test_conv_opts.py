"""The CPU heuristics' opts for a convolution (tinyedu/codegen/heuristics.py): a register block of
two vectors of output channels, and a padded copy whose rows are unrolled; and the C renderer's
reads from one base pointer, `(data1+alu)[k]`, that make the 64-channel block fast. Each case checks
the opts or source and the result against an independent oracle (PyTorch in float64, numpy), run
with exactly those opts on the C device, whatever the default device is."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
import torch

from tinyedu import Tensor, dtypes
from tinyedu.codegen import heuristics
from tinyedu.codegen.opts import Opt, OptOps
from tinyedu.core.ops import BinaryOps, LoadOps, MemBuffer, TernaryOps
from tinyedu.core.uops import Loop, UOp, UOps
from tinyedu.engine.lower import heuristic_opts, lower, new_kernel
from tinyedu.engine.schedule import create_schedule
from tinyedu.renderer.cstyle import render_c
from tinyedu.runtime.device import Buffer, Device, DeviceUnavailable
from tinyedu.runtime.ops_c import Compiler


@pytest.fixture(scope="module")
def c_device():
    try:
        Device["C"].check_runnable()
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))
    return Device["C"]


def kernel_asts(t: Tensor) -> list:
    return [i.ast for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)]


def run_with_heuristics(ast, backend, inputs: list[np.ndarray], out_size: int) -> tuple[np.ndarray, list]:
    """Run `ast` on the C device with the heuristics' opts (one thread), on these input arrays."""
    opts = heuristic_opts(new_kernel(ast, backend), backend.vector_width, 1)
    program = lower("C", ast, opts, threads=1)
    out = Buffer("C", out_size, ast.arg.dtype)
    buffers = [out] + [Buffer("C", a.size, ast.arg.dtype).copyin(a.ravel()) for a in inputs]
    program.runner(buffers)
    return out.as_numpy().copy(), opts


@pytest.mark.parametrize("cout, vectors", [(32, 2), (48, 1)])  # 48 = 3 vectors of 16: no pair of them
def test_a_convolution_blocks_two_vectors_of_channels_and_matches_torch(c_device, cout: int,
                                                                          vectors: int) -> None:
    if c_device.vector_width != 16:
        pytest.skip("the block sizes asserted here are those of a 16-lane (AVX-512) vector")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2, 16, 28, 30)).astype(np.float32)  # already padded: no copy kernel
    W = rng.standard_normal((cout, 16, 3, 3)).astype(np.float32)
    out = Tensor.empty(*X.shape).conv2d(Tensor.empty(*W.shape))
    (ast,) = kernel_asts(out)
    result, opts = run_with_heuristics(ast, c_device, [X, W], int(np.prod(out.shape)))
    upcasts = [o for o in opts if o.op is OptOps.UPCAST]
    assert upcasts[0].amount == 16 and (upcasts[1].amount == 2) == (vectors == 2)
    lanes = np.prod([o.amount for o in upcasts])
    assert lanes // 16 <= heuristics.ACCUMULATORS
    expected = torch.nn.functional.conv2d(torch.from_numpy(X).double(), torch.from_numpy(W).double())
    np.testing.assert_allclose(result.reshape(out.shape), expected.numpy(), rtol=1e-5, atol=1e-4)


def test_the_weight_gradient_with_two_vectors_of_channels_matches_torch() -> None:
    rng = np.random.default_rng(1)
    X = rng.standard_normal((2, 16, 28, 28)).astype(np.float32)
    W = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    x, w = Tensor(X, requires_grad=True), Tensor(W, requires_grad=True)
    (x.conv2d(w, padding=1) ** 2).sum().backward()
    tx, tw = torch.from_numpy(X).double().requires_grad_(), torch.from_numpy(W).double().requires_grad_()
    (torch.nn.functional.conv2d(tx, tw, padding=1) ** 2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shape", [(4, 16, 28, 28), (2, 8, 31, 17)])  # rows 30 (even) and 19 (odd, prime)
def test_a_padded_copy_unrolls_its_rows_and_equals_numpys_pad(c_device, shape: tuple) -> None:
    X = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    padded = Tensor.empty(*shape).pad2d((1, 1, 1, 1)).contiguous()
    (ast,) = kernel_asts(padded)
    result, opts = run_with_heuristics(ast, c_device, [X], int(np.prod(padded.shape)))
    row = shape[-1] + 2
    if row % 2 == 0 or row % 3 == 0:
        assert opts and opts[0].op is OptOps.UPCAST and opts[0].amount in (2, 3)
    else:
        assert opts == []  # no divisor to unroll by: the copy stays as written
    expected = np.pad(X, ((0, 0), (0, 0), (1, 1), (1, 1)))
    np.testing.assert_array_equal(result.reshape(padded.shape), expected)


def lowered_source(ast, backend) -> str:
    return lower("C", ast, heuristic_opts(new_kernel(ast, backend), backend.vector_width, 1),
                 threads=1).source


def test_a_64_channel_convolution_reads_its_image_through_one_base_pointer(c_device) -> None:
    """The ResNet block's 3x3 convolution at 64 channels: the register block reads its image row as
    offsets from one base, `(data1+aluN)[1]` ... (tinyedu/renderer/cstyle.py, `pointer_offsets`),
    so the compiler keeps one address for them; the result is PyTorch's, in float64."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((2, 64, 10, 10)).astype(np.float32)  # already padded: no copy kernel
    W = rng.standard_normal((64, 64, 3, 3)).astype(np.float32) * 0.1
    out = Tensor.empty(*X.shape).conv2d(Tensor.empty(*W.shape))
    (ast,) = kernel_asts(out)
    source = lowered_source(ast, c_device)
    bases = re.findall(r"\(data1\+(\w+)\)\[(\d+)\]", source)
    if c_device.vector_width == 16:  # a register block of 8 image positions along a row
        base = bases[0][0]
        assert {int(k) for b, k in bases if b == base} == set(range(1, 8))
        assert not re.search(r"data1\[\w+\+\d+\]", source)  # no offset left as an int sum
    result, _ = run_with_heuristics(ast, c_device, [X, W], int(np.prod(out.shape)))
    expected = torch.nn.functional.conv2d(torch.from_numpy(X).double(), torch.from_numpy(W).double())
    np.testing.assert_allclose(result.reshape(out.shape), expected.numpy(), rtol=1e-5, atol=1e-4)


def test_only_a_group_of_offsets_from_one_base_becomes_a_base_pointer(c_device) -> None:
    """One read at `base + c` stays `data1[base+c]`; two or more reads of one buffer around one base
    are written from that base, gated ones included (C evaluates the read only where the gate is
    true, so the padding's out-of-range addresses are still never formed into a read). Checked
    against numpy on a padded copy (gated group) and a shifted copy (a single offset)."""
    X = np.random.default_rng(4).standard_normal((2, 8, 30, 30)).astype(np.float32)
    padded = Tensor.empty(*X.shape).pad2d((1, 1, 1, 1)).contiguous()  # rows of 32: unrolled by 2
    (ast,) = kernel_asts(padded)
    source = lowered_source(ast, c_device)
    assert re.search(r"\? \(data1\+\w+\)\[-?\d+\] : 0\.0f", source)  # a gated read from the group's base
    result, _ = run_with_heuristics(ast, c_device, [X], int(np.prod(padded.shape)))
    np.testing.assert_array_equal(result.reshape(padded.shape), np.pad(X, ((0, 0), (0, 0), (1, 1), (1, 1))))

    Y = np.random.default_rng(5).standard_normal(64).astype(np.float32)
    shifted = (Tensor.empty(64)[3:] * 2).contiguous()  # reads data1[gidx0+3] once: nothing to share
    (ast,) = kernel_asts(shifted)
    source = lower("C", ast, [], threads=1).source
    assert "(data1+" not in source and re.search(r"data1\[gidx0\+3\]", source)
    out = Buffer("C", 61, ast.arg.dtype)
    lower("C", ast, [], threads=1).runner([out, Buffer("C", 64, ast.arg.dtype).copyin(Y)])
    np.testing.assert_array_equal(out.as_numpy(), Y[3:] * 2)


def test_a_group_base_that_is_a_where_is_a_variable_of_its_own(c_device) -> None:
    """`out[i] = x[b+1] + x[b+2]` with the base `b = i < 4 ? 2*i : i` (a WHERE, which C writes
    `c?x:y`; inlined, `data1+c?x:y` would read as `(data1+c)?x:y`): a group's base has two users,
    so it is a variable of its own, and the reads are `(data1+alu0)[1]`, `(data1+alu0)[2]`.
    Hand-built UOps, compiled and run against numpy."""
    i32, f32 = dtypes.int32, dtypes.float32
    out, x = UOp(UOps.DEFINE_GLOBAL, f32, (), 0), UOp(UOps.DEFINE_GLOBAL, f32, (), 1)
    const = {n: UOp(UOps.CONST, i32, (), n) for n in (0, 1, 2, 4, 8)}
    i = UOp(UOps.RANGE, i32, (const[0], const[8]), Loop("gidx0"))
    small = UOp(UOps.ALU, dtypes.bool, (i, const[4]), BinaryOps.CMPLT)
    base = UOp(UOps.ALU, i32, (small, UOp(UOps.ALU, i32, (i, const[2]), BinaryOps.MUL), i), TernaryOps.WHERE)
    reads = [UOp(UOps.LOAD, f32, (x, UOp(UOps.ALU, i32, (base, const[k]), BinaryOps.ADD))) for k in (1, 2)]
    total = UOp(UOps.ALU, f32, tuple(reads), BinaryOps.ADD)
    uops = [out, x, *const.values(), i, small, base.src[1], base, *(r.src[1] for r in reads), *reads, total,
            UOp(UOps.STORE, None, (out, i, total)), UOp(UOps.ENDRANGE, None, (i,))]
    uops = [u for n, u in enumerate(uops) if u not in uops[:n]]
    source = render_c("shifted_reads", uops)
    assert re.search(r"int (alu\d+) = \(gidx0<4\)\?.*\n.*= \(data1\+\1\)\[1\];", source), source
    X = np.arange(16, dtype=np.float32) * 1.5
    got = np.zeros(8, np.float32)
    function = Compiler().load(source).shifted_reads
    function(got.ctypes.data_as(ctypes.c_void_p), X.ctypes.data_as(ctypes.c_void_p))
    b = np.where(np.arange(8) < 4, 2 * np.arange(8), np.arange(8))
    np.testing.assert_array_equal(got, X[b + 1] + X[b + 2])


def test_a_convolution_with_whole_vector_rows_is_vectorized_along_its_rows(c_device) -> None:
    """Output rows of 32 (two 16-lane vectors): the row is the vector (the image read as vectors,
    the filter broadcast, the outputs stored as vectors), times 8 output channels. Each output's sum
    keeps its order, so the result is exactly the channel form's, and PyTorch's in float64."""
    rng = np.random.default_rng(6)
    X = rng.standard_normal((2, 64, 6, 34)).astype(np.float32)  # already padded: no copy kernel
    W = rng.standard_normal((64, 64, 3, 3)).astype(np.float32) * 0.1
    out = Tensor.empty(*X.shape).conv2d(Tensor.empty(*W.shape))
    (ast,) = kernel_asts(out)
    result, opts = run_with_heuristics(ast, c_device, [X, W], int(np.prod(out.shape)))
    width = c_device.vector_width
    if width == 16:
        row, channels = 3, 1  # (n, c_out, y, x | c_in, ky, kx)
        assert opts[:3] == [Opt(OptOps.UPCAST, row, 16), Opt(OptOps.UPCAST, row, 2),
                            Opt(OptOps.UPCAST, channels, 8)]
        assert not any(o.op is OptOps.PACK for o in opts)  # the filter is broadcast: nothing to copy
        assert re.search(r"\*\(floatx16\*\)\(data0\+", lowered_source(ast, c_device))  # vector stores
        channel_form = [Opt(OptOps.UPCAST, channels, 16), Opt(OptOps.UPCAST, channels, 2),
                        Opt(OptOps.UPCAST, 2, 4), Opt(OptOps.PACK, 0, 2)]
        program = lower("C", ast, channel_form, threads=1)
        other = Buffer("C", result.size, ast.arg.dtype)
        program.runner([other] + [Buffer("C", a.size, ast.arg.dtype).copyin(a.ravel()) for a in (X, W)])
        np.testing.assert_array_equal(result, other.as_numpy())  # the same sums in the same order
    expected = torch.nn.functional.conv2d(torch.from_numpy(X).double(), torch.from_numpy(W).double())
    np.testing.assert_allclose(result.reshape(out.shape), expected.numpy(), rtol=1e-5, atol=1e-4)


def test_rows_that_no_whole_vector_divides_keep_the_channel_form(c_device) -> None:
    """Rows of 28 (not a multiple of 16) and a stride-2 image (not contiguous along the row) stay
    vectorized along the channels."""
    if c_device.vector_width != 16:
        pytest.skip("the row lengths chosen here are about a 16-lane (AVX-512) vector")
    cases = [((2, 16, 30, 30), (32, 16, 3, 3), 1), ((2, 16, 34, 34), (32, 16, 3, 3), 2)]
    for x_shape, w_shape, stride in cases:
        out = Tensor.empty(*x_shape).conv2d(Tensor.empty(*w_shape), stride=stride)
        (ast,) = kernel_asts(out)
        opts = heuristic_opts(new_kernel(ast, c_device), 16, 1)
        assert opts[0] == Opt(OptOps.UPCAST, 1, 16), opts  # the output channels: axis 1


@pytest.mark.parametrize("device", ["LLVM", "NEON"])
def test_the_row_vector_form_matches_torch_on_llvm_and_neon(device: str) -> None:
    """The same form through the other CPU renderers (LLVM IR; NEON, 4 lanes, under qemu): rows of
    32 are whole vectors there too. The heuristics' first opt is the row's UPCAST; the result is
    PyTorch's in float64."""
    try:
        backend = Device[device]
        backend.check_runnable()
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))
    rng = np.random.default_rng(7)
    X = rng.standard_normal((1, 16, 6, 34)).astype(np.float32)  # already padded: no copy kernel
    W = rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1
    (ast,) = kernel_asts(Tensor.empty(*X.shape).conv2d(Tensor.empty(*W.shape)))
    opts = heuristic_opts(new_kernel(ast, backend), backend.vector_width, 1)
    assert opts[0] == Opt(OptOps.UPCAST, 2, backend.vector_width), opts  # (c_out, y, x | c_in, ky, kx)
    got = Tensor(X, device=device).conv2d(Tensor(W, device=device)).numpy()
    expected = torch.nn.functional.conv2d(torch.from_numpy(X).double(), torch.from_numpy(W).double())
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("width, row_opts, channels", [(16, [16], 16), (64, [16, 2], 8)])
def test_rows_of_one_vector_or_of_four_get_a_block_within_16_accumulators(c_device, width: int,
                                                                         row_opts: list[int],
                                                                         channels: int) -> None:
    """A row of one vector is upcast once (then 16 output channels fill the block); a row of four
    vectors gets two of them, as a row of two does. PyTorch in float64 is the oracle."""
    if c_device.vector_width != 16:
        pytest.skip("the block sizes asserted here are those of a 16-lane (AVX-512) vector")
    rng = np.random.default_rng(8)
    X = rng.standard_normal((1, 8, 4, width + 2)).astype(np.float32)  # already padded
    W = rng.standard_normal((32, 8, 3, 3)).astype(np.float32) * 0.1
    (ast,) = kernel_asts(Tensor.empty(*X.shape).conv2d(Tensor.empty(*W.shape)))
    result, opts = run_with_heuristics(ast, c_device, [X, W], 32 * 2 * width)
    assert opts == [Opt(OptOps.UPCAST, 2, n) for n in row_opts] + [Opt(OptOps.UPCAST, 0, channels)]
    expected = torch.nn.functional.conv2d(torch.from_numpy(X).double(), torch.from_numpy(W).double())
    np.testing.assert_allclose(result.reshape(1, 32, 2, width), expected.numpy(), rtol=1e-5, atol=1e-4)


def constant_gradient_case(x_shape: tuple, w_shape: tuple, stride: int, padding: int, device: str):
    """x.grad of `conv2d(x, w).sum()` on `device` (its upstream gradient is the constant 1.0, masked
    to the image where the input is padded), the kernel that computes it, and PyTorch's x.grad in
    float64."""
    rng = np.random.default_rng(9)
    X = rng.standard_normal(x_shape).astype(np.float32)
    W = (rng.standard_normal(w_shape) * 0.1).astype(np.float32)
    x = Tensor(X, device=device, requires_grad=True)
    x.conv2d(Tensor(W, device=device), stride=stride, padding=padding).sum().backward()
    ast = kernel_asts(x.grad)[-1]
    tx, tw = torch.from_numpy(X).double().requires_grad_(), torch.from_numpy(W).double()
    torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding).sum().backward()
    return x.grad, ast, tx.grad.numpy()


CONSTANT_GRADIENTS = [((2, 64, 10, 10), (64, 64, 3, 3), 1, 1),     # the ResNet block's 3x3
                      ((2, 64, 10, 10), (128, 64, 3, 3), 2, 1),    # 3x3 stride 2, filter of 73,728
                      ((2, 64, 16, 16), (128, 64, 1, 1), 2, 0)]    # 1x1 stride 2 (the shortcut)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding", CONSTANT_GRADIENTS)
def test_the_input_gradient_of_a_summed_convolution_is_vectorized_and_matches_torch(
        c_device, x_shape: tuple, w_shape: tuple, stride: int, padding: int) -> None:
    """The upstream gradient of `.sum()` is a constant (1.0, masked to the image): no buffer is read
    through the windows, so the mask stands in for the image (`_gated_window`), and the kernel gets
    the convolution's channel form, the filter PACKed (as the same gradient through a buffer does),
    not scalar loops (0.9 GFLOPS on the 8x64x32x32 case). A 128x64x3x3 filter is too big for one
    tile: it is packed inside the channel loop, a block of channels at a time. The 1x1 stride-2
    gradient reads no padding: its output rows are vectors already. PyTorch's x.grad in float64."""
    grad, ast, expected = constant_gradient_case(x_shape, w_shape, stride, padding, "C")
    kernel = new_kernel(ast, c_device)
    opts = heuristic_opts(kernel, c_device.vector_width, 1)
    assert any(o.op is OptOps.UPCAST and o.amount == c_device.vector_width for o in opts), opts
    if w_shape[-1] == 3:
        image = heuristics._window_input(kernel)
        assert image is not None and not isinstance(kernel.bufs[image], MemBuffer)  # the masked constant
        # (n, c_in, y, x | c_out, ky, kx): the input channels are the vector
        assert opts[0] == Opt(OptOps.UPCAST, 1, c_device.vector_width), opts
        packs = [o for o in opts if o.op is OptOps.PACK]
        assert len(packs) == 1 and packs[0].amount == 2, opts  # the filter (buffer 2) is packed
        if w_shape[0] == 128:
            assert packs[0].axis == 2, opts  # inside the channel loop (axis 1): one block's filter
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_a_windowed_sum_over_a_padded_constant_has_no_filter_and_stays_correct(c_device) -> None:
    """A 3x3 window summed over a padded image of ones (avg_pool's count of in-image elements): the
    masked constant is an image, but no input moves along the channels, so there is no channel form;
    the kernel keeps the other heuristics' opts. numpy's windowed sum is the oracle."""
    t = Tensor.ones(2, 8, 14, 14, device="C").pad2d((1, 1, 1, 1))
    counts = t.avg_pool2d(kernel_size=(3, 3), stride=1) * 9
    (ast,) = kernel_asts(counts)
    kernel = new_kernel(ast, c_device)
    assert heuristics._channel_axis(kernel, 1, c_device.vector_width) is None
    heuristic_opts(kernel, c_device.vector_width, 1)
    padded = np.pad(np.ones((2, 8, 14, 14), np.float32), ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected = sum(padded[:, :, i:i + 14, j:j + 14] for i in range(3) for j in range(3))
    np.testing.assert_array_equal(counts.numpy(), expected)


@pytest.mark.parametrize("device", ["LLVM", "NEON"])
def test_the_constant_gradient_channel_form_matches_torch_on_llvm_and_neon(device: str) -> None:
    """The same kernel through LLVM IR and NEON (4 lanes, under qemu): the channel axis is the vector
    there too; x.grad is PyTorch's in float64."""
    try:
        backend = Device[device]
        backend.check_runnable()
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))
    grad, ast, expected = constant_gradient_case((2, 16, 6, 6), (16, 16, 3, 3), 1, 1, device)
    opts = heuristic_opts(new_kernel(ast, backend), backend.vector_width, 1)
    assert opts[0] == Opt(OptOps.UPCAST, 1, backend.vector_width), opts
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-4, atol=1e-4)
