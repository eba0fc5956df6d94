"""The WEBGPU device: WGSL (tinyedu/renderer/wgsl.py) run through wgpu (lavapipe on a machine without a GPU).

What WGSL does differently from C, each checked against numpy (through tinyedu.core.dtype's rules, as
the NUMPY device applies them): integer division by zero, narrow ints computed in 32 bits and
wrapped, bool buffers widened to u32, float -> int casts outside the range, NaN in MAX, masked
loads that never touch memory; the adapter's limits; the errors for what WGSL lacks and for a
machine without a driver. The op suite runs on WEBGPU through tests/test_ops.py (sampled cases),
the GPU differential test through tests/test_differential.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Device, Tensor, dtypes
from tinyedu.core.dtype import cast_array
from tinyedu.core.ops import LoadOps
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.launch import LaunchDims
from tinyedu.runtime import ops_webgpu
from tinyedu.runtime.device import DeviceUnavailable


@pytest.fixture(scope="module")
def webgpu():
    try:
        return Device["WEBGPU"]
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))


def test_the_kernel_is_wgsl_with_workgroup_memory_and_barriers(webgpu):
    a = np.arange(64 * 48, dtype=np.float32).reshape(64, 48) % 7
    b = np.arange(48 * 32, dtype=np.float32).reshape(48, 32) % 5
    t = Tensor(a, device="WEBGPU") @ Tensor(b, device="WEBGPU")
    ast = [i.ast for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)][-1]
    source = lower("WEBGPU", ast).source
    np.testing.assert_allclose(t.numpy(), a @ b, rtol=1e-6)
    for part in ("var<workgroup> shared", "workgroupBarrier();", "@workgroup_size(", "@builtin(workgroup_id)",
                 "@group(0) @binding(0) var<storage, read_write> data0: array<f32>;",
                 "@binding(1) var<storage, read> data1: array<f32>;"):
        assert part in source, part


def test_integer_division_by_zero_and_overflow_follow_tinyedu(webgpu):
    a = np.array([7, -7, 5, -2147483648, 9, 0], dtype=np.int32)
    b = np.array([2, 2, 0, -1, -4, 0], dtype=np.int32)
    x, y = Tensor(a, device="WEBGPU"), Tensor(b, device="WEBGPU")
    want_x, want_y = Tensor(a, device="NUMPY"), Tensor(b, device="NUMPY")
    for op in (lambda p, q: p // q, lambda p, q: p % q, lambda p, q: p * q + p, lambda p, q: -p):
        np.testing.assert_array_equal(op(x, y).numpy(), op(want_x, want_y).numpy())


def test_widened_negative_ints_compare_like_numpy(webgpu):
    """A computed negative int32 widened to int64 (a sum's accumulator) compares as negative: the sum
    of -x then relu is 0, as on numpy (the differential fuzzer found `relu(sum(-[4]))` giving -4)."""
    if not webgpu.int64:
        pytest.skip("this adapter has no 64-bit integers")
    a = np.array([4, -3, 0, 2147483647, -2147483648, 1], dtype=np.int32)
    for device in ("WEBGPU", "NUMPY"):
        x = Tensor(a, device=device)
        got = [(-x[i:i + 1]).sum(0).relu().numpy() for i in range(len(a))]
        got += [((-x).cast(dtypes.int64) < 0).numpy(), (x - 5).cast(dtypes.uint64).numpy()]
        if device == "WEBGPU":
            ours = got
    for mine, theirs in zip(ours, got, strict=True):
        np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.bool])
def test_narrow_dtypes_are_widened_in_memory_and_wrap_like_numpy(webgpu, dt):
    rng = np.random.default_rng(3)
    if dt == dtypes.bool:
        a, b = rng.random(40) < 0.5, rng.random(40) < 0.5
    else:
        info = np.iinfo(dt.np)
        a, b = (rng.integers(info.min, info.max, 40, endpoint=True).astype(dt.np) for _ in range(2))
    x, y = Tensor(a, device="WEBGPU"), Tensor(b, device="WEBGPU")
    assert x.numpy().dtype == dt.np and (x.numpy() == a).all()  # the round trip through a u32/i32 buffer
    ops = [lambda p, q: p + q, lambda p, q: p * q, lambda p, q: p < q, lambda p, q: p == q,
           lambda p, q: p.maximum(q)]
    if dt != dtypes.bool:
        ops += [lambda p, q: p - q, lambda p, q: (p * q + p) * q]
    for op in ops:
        want = op(Tensor(a, device="NUMPY"), Tensor(b, device="NUMPY")).numpy()
        got = op(x, y).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.uint32, dtypes.int8, dtypes.uint8, dtypes.int64,
                                dtypes.bool])
def test_float_to_int_casts_follow_the_rule_outside_the_range(webgpu, dt):
    if dt == dtypes.int64 and not webgpu.int64:
        pytest.skip("this adapter has no shader-int64")
    values = np.array([0.0, -0.7, 2.9, -3.5, 127.5, 300.0, -129.0, 65536.5, 2.0**31, -(2.0**31), 3e9, -3e9,
                       2.0**40, 1e20, -1e20, np.inf, -np.inf, np.nan], dtype=np.float32)
    got = Tensor(values, device="WEBGPU").cast(dt).numpy()
    np.testing.assert_array_equal(got, cast_array(values, dt))


def test_max_keeps_nan_and_padding_reads_zero(webgpu):
    a = np.array([1.0, np.nan, -2.0, 3.0], dtype=np.float32)
    b = np.array([2.0, 0.0, np.nan, -1.0], dtype=np.float32)
    got = Tensor(a, device="WEBGPU").maximum(Tensor(b, device="WEBGPU")).numpy()
    np.testing.assert_array_equal(got, np.maximum(a, b))
    padded = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="WEBGPU").pad(((1, 1), (2, 0)))
    np.testing.assert_array_equal(padded.numpy(), np.pad(np.arange(6, dtype=np.float32).reshape(2, 3),
                                                         ((1, 1), (2, 0))))


def _bits_and_specials(seed: int, n: int = 4096) -> np.ndarray:
    """Random float32 bit patterns (subnormals, huge values, inf, NaN), ordinary values, and the edges."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    ordinary = (rng.standard_normal(n) * 10).astype(np.float32)
    halves = rng.integers(-600, 600, n).astype(np.float32) / 2  # the ties of round
    specials = np.array([0.0, -0.0, 0.5, -0.5, 2.5, -2.5, 0.3, -0.3, 300.7, -300.7, 2.0**23 - 0.5, 2.0**23,
                         -(2.0**23) + 0.5, 3e9, -3e9, 1e-45, -1e-45, np.inf, -np.inf, np.nan], np.float32)
    return np.concatenate([bits, ordinary, halves, specials])


def _same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    if got.dtype == np.bool_:
        return got == want
    return (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))


FOLDABLE = {  # what a shader compiler folds when it takes float ops as exact (see renderer/wgsl.py)
    "round": lambda x, y: x.round(), "floor": lambda x, y: x.floor(), "ceil": lambda x, y: x.ceil(),
    "trunc": lambda x, y: x.trunc(), "sign": lambda x, y: x.sign(), "round_2": lambda x, y: x.round(2),
    "x*0": lambda x, y: x * 0, "x-x": lambda x, y: x - x, "x+(-x)": lambda x, y: x + (-x),
    "1/(1/x)": lambda x, y: 1 / (1 / x), "x==x": lambda x, y: x == x, "x/x": lambda x, y: x / x,
    "two_sum": lambda x, y: ((x + y) - x) - y, "a*b+c": lambda x, y: x * y + 0.1, "x/y": lambda x, y: x / y,
    "fmod": lambda x, y: x.fmod(y), "x%y": lambda x, y: x % y, "x//y": lambda x, y: x // y,
    "copysign": lambda x, y: x.copysign(-0.0), "sqrt": lambda x, y: x.abs().sqrt(),
}


@pytest.mark.parametrize("name", FOLDABLE)
def test_float_ops_round_as_written_bit_for_bit(webgpu, name):
    """Rounding, signed zeros, inf and NaN need each op to round as written: the same bits as NUMPY."""
    a, b = _bits_and_specials(5), _bits_and_specials(6)[::-1].copy()
    got = FOLDABLE[name](Tensor(a, device="WEBGPU"), Tensor(b, device="WEBGPU")).numpy()
    want = FOLDABLE[name](Tensor(a, device="NUMPY"), Tensor(b, device="NUMPY")).numpy()
    bad = np.nonzero(~_same_bits(got, want))[0]
    assert bad.size == 0, [(a[i], b[i], got[i], want[i]) for i in bad[:5]]


def test_exp2_and_log2_of_subnormals(webgpu):
    """Subnormal results of exp2 and subnormal inputs of log2, which lavapipe's builtins flush to 0."""
    powers = np.array([-126.0, -126.5, -130.0, -140.0, -149.0, -150.0, -200.0, -np.inf], np.float32)
    np.testing.assert_allclose(Tensor(powers, device="WEBGPU").exp2().numpy(),
                               np.exp2(powers.astype(np.float64)).astype(np.float32), rtol=1e-6, atol=0)
    tiny = np.array([1e-45, 1e-40, 3e-39, 1.1754942e-38, 2.0**-126, 0.0, -1e-40], np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log2(tiny.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(Tensor(tiny, device="WEBGPU").log2().numpy(), want, rtol=1e-6, atol=0)


def test_what_wgsl_lacks_is_an_error_naming_the_dtype(webgpu):
    with pytest.raises(NotImplementedError, match="float64 is not supported in WGSL.*float32"):
        Tensor(np.ones(4), device="WEBGPU").exp().numpy()
    with pytest.raises(NotImplementedError, match="float16 is not supported in WGSL"):
        (Tensor(np.ones(4, np.float16), device="WEBGPU") + 1).numpy()


def test_the_limits_are_the_adapter_s(webgpu):
    limits = webgpu.adapter.limits
    assert webgpu.limits.shared_memory_bytes == limits["max-compute-workgroup-storage-size"]
    assert webgpu.limits.max_workgroup_size == limits["max-compute-invocations-per-workgroup"]
    assert webgpu.limits.max_groups[0] == limits["max-compute-workgroups-per-dimension"]
    too_many = LaunchDims((1, 1, 1), (webgpu.max_workgroup_size * 2, 1, 1))
    with pytest.raises(ValueError, match="threads per workgroup.*runs at most"):
        webgpu.check_launch("k", too_many)
    with pytest.raises(ValueError, match="workgroups.*dispatches at most"):
        webgpu.check_launch("k", LaunchDims((webgpu.limits.max_groups[0] + 1, 1, 1), (1, 1, 1)))


def test_lavapipe_s_loop_limit_is_an_error_not_a_wrong_answer(webgpu, monkeypatch):
    if webgpu.loop_limit is None:
        pytest.skip(f"{webgpu.adapter_name} has no loop limit")
    monkeypatch.setenv("NOOPT", "1")  # one thread runs the whole loop
    with pytest.raises(ValueError, match="loop of 70000 iterations.*stops every loop after 65535"):
        (Tensor(np.ones(70000, np.float32), device="WEBGPU") + 1).numpy()


def test_a_large_elementwise_kernel_is_spread_over_the_grid(webgpu):
    """2^20 elements: more than 65535 workgroups of one thread; GLOBAL is allowed because LOCAL then
    divides it (and lavapipe's loop limit never applies: no thread loops)."""
    x = np.arange(1 << 20, dtype=np.float32)
    np.testing.assert_array_equal((Tensor(x, device="WEBGPU") * 2 + 1).numpy(), x * 2 + 1)


def test_without_an_adapter_the_device_says_what_to_install(monkeypatch):
    wgpu = pytest.importorskip("wgpu")
    monkeypatch.setattr(wgpu.gpu, "request_adapter_sync", lambda **kwargs: None)
    ops_webgpu.webgpu.cache_clear()
    try:
        with pytest.raises(DeviceUnavailable, match="mesa-vulkan-drivers"):
            ops_webgpu.webgpu()
    finally:
        ops_webgpu.webgpu.cache_clear()
