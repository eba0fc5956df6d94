"""Every dtype on every device: storage, constants, casts between all pairs, arithmetic, reductions,
PyTorch's type promotion, bitcasts, safetensors, and the errors for dtypes tinyedu lacks.

Oracles: torch (promotion, casts, arithmetic, float64 gradients) and `tinyedu.core.dtype.cast_array`
(the one casting rule, itself checked against torch where torch's own casts agree with each other).
NEON, LLVM, GPU and CUDA run a representative part (each compiles every new kernel): the `SAMPLED_DTYPES`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tinyedu import Device, Tensor, dtypes
from tinyedu.core.dtype import DType, cast_array, promote_types, result_type, scalar_dtype
from tinyedu.runtime.device import DeviceUnavailable

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")
ALL = dtypes.all
INTS = [d for d in ALL if d.is_int]
FLOATS = [d for d in ALL if d.is_float]
SAMPLED_DTYPES = (dtypes.int8, dtypes.uint16, dtypes.int64, dtypes.uint64, dtypes.float16, dtypes.bfloat16,
                  dtypes.float64)
SAMPLED = [str(d) for d in SAMPLED_DTYPES]  # for the `backends` marker (tests/conftest.py)
WGSL_MISSING = ("float64", "int64", "uint64", "float16", "bfloat16")  # the WEBGPU device refuses them
SAMPLED_DEVICES = ("NEON", "LLVM", "GPU", "CUDA", "WEBGPU", "WASM")  # the devices that run the sampled dtypes


def _devices() -> list:
    out = []
    for name in Device.known:
        marks = [pytest.mark.sampled_device] if name in SAMPLED_DEVICES else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.fixture(params=_devices())
def device(request: pytest.FixtureRequest) -> str:
    try:
        Device[request.param].check_runnable()  # CUDA compiles anywhere, runs only on a GPU
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))
    return request.param


def _skip_wide(device: str) -> None:
    """These tests gather results in float64/int64 kernels; WGSL has no float64 (tests/test_webgpu.py
    checks WEBGPU's casts and narrow ints against numpy instead)."""
    if device == "WEBGPU":
        pytest.skip("WEBGPU: this test widens results to float64, which WGSL lacks")


def _skip_unsampled(device: str, *dts: DType) -> None:
    if device == "WEBGPU" and any(d.name in WGSL_MISSING for d in dts):  # (tests/test_webgpu.py: the error)
        pytest.skip(f"WGSL has no {[d.name for d in dts if d.name in WGSL_MISSING]}")
    if device == "WASM" and dtypes.float16 in dts:
        pytest.skip("WASM refuses float16: clang has no _Float16 for wasm32 (tests/test_wasm.py checks it)")
    if device in SAMPLED_DEVICES and not all(d in SAMPLED_DTYPES or d == dtypes.float32 for d in dts):
        pytest.skip(f"{device} runs the sampled dtypes {[d.name for d in SAMPLED_DTYPES]}")


def _torch_dtype(dt: DType):
    return getattr(torch, dt.name)


# ---- edge values of each dtype ----
def edge_values(dt: DType) -> np.ndarray:
    """Values of `dt` (as its numpy value type) that exercise every cast: extremes, signs, ties."""
    if dt == dtypes.bool:
        return np.array([True, False, True])
    if dt.is_int:
        info = np.iinfo(dt.np)
        picks = [info.min, info.min + 1, -1, 0, 1, 2, 127, 128, 255, 256, 300, 32767, 65535, 65536,
                 2**24 + 1, 2**31 - 1, 2**31, 2**53 + 1, info.max - 1, info.max]
        return np.array([v for v in picks if info.min <= v <= info.max], dtype=dt.np)
    values = [0.0, -0.0, 1.0, -1.5, 2.5, 300.7, -300.7, 65504.0, 65520.0, 70000.0, 3e9, -3e9, 1e10, 1e19,
              -1e19, 1e30, float("inf"), float("-inf"), float("nan"), 1e-45, 1e-40, 6e-8, 1e-310,
              1.00390625, 1.01171875, 256.5, 2**24 + 2, 2**31 - 0.5]
    # bfloat16 ties: 1 + 2^-8 lies halfway between two bfloat16s (to even: 1.0), 1 + 3*2^-8 too (up)
    return cast_array(np.array(values, dtype=np.float64), dt)


def nan_equal(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        same = (a64 == b64) | (np.isnan(a64) & np.isnan(b64))
        zeros = (a64 == 0) & (b64 == 0)
        return bool(np.all(same) and np.all(np.signbit(a64[zeros]) == np.signbit(b64[zeros])))
    return bool(np.array_equal(a, b))


# ---- promotion ----
@needs_torch
def test_promotion_of_every_pair_matches_torch() -> None:
    for a, b in itertools.product(ALL, repeat=2):
        try:
            expected = str(torch.promote_types(_torch_dtype(a), _torch_dtype(b))).removeprefix("torch.")
        except RuntimeError:
            with pytest.raises(TypeError, match="cast one operand"):
                promote_types(a, b)
            continue
        assert promote_types(a, b).name == expected, (a, b)


@needs_torch
@pytest.mark.parametrize("scalar", [True, 3, 2.5])
def test_promotion_with_scalars_and_zero_dim_tensors_matches_torch(scalar) -> None:
    for dt in ALL:
        t = torch.zeros(2, dtype=_torch_dtype(dt))
        expected = torch.result_type(t, scalar)
        got = result_type((dt, "tensor"), (scalar_dtype(scalar), "scalar"))
        if dt == dtypes.bool and type(scalar) is int:  # tinyedu's default int is int32, torch's int64
            assert (got, expected) == (dtypes.int32, torch.int64)
            continue
        assert got.name == str(expected).removeprefix("torch."), (dt, scalar)
        for other in ALL:  # a zero-dim tensor counts only when of a higher category
            zero_dim = torch.zeros((), dtype=_torch_dtype(other))
            try:
                expected = torch.result_type(t, zero_dim)
            except RuntimeError:
                continue
            got = result_type((dt, "tensor"), (other, "zero-dim"))
            assert got.name == str(expected).removeprefix("torch."), (dt, other)


def test_tensor_ops_promote_like_torch() -> None:
    x8, u8 = Tensor([1, 2], dtype="int8"), Tensor([1, 2], dtype="uint8")
    assert (x8 + u8).dtype == dtypes.int16
    assert (Tensor([1.0], dtype="bfloat16") + Tensor([1.0], dtype="float16")).dtype == dtypes.float32
    assert (Tensor([1], dtype="int64") + Tensor([1.0], dtype="float16")).dtype == dtypes.float16
    assert (x8 + Tensor(1000, dtype="int64")).dtype == dtypes.int8        # zero-dim: lower priority
    assert (x8 + Tensor(1.5, dtype="float64")).dtype == dtypes.float64    # ... unless a higher category
    assert (Tensor([1.0], dtype="float16") * 2.5).dtype == dtypes.float16
    with pytest.raises(TypeError, match="uint16 and int8"):
        Tensor([1], dtype="uint16") + x8
    if torch is not None:  # the ops that combine tensors promote the same way
        h = Tensor([0.5, 1.5], dtype="float16")
        tx8, tu8, th = (torch.tensor(v.numpy()) for v in (x8, u8, h))
        pairs = [(Tensor.cat(x8, u8), torch.cat([tx8, tu8])),
                 (Tensor.stack([x8, u8]), torch.stack([tx8, tu8])),
                 ((x8 > 1).where(x8, h), torch.where(tx8 > 1, tx8, th)),
                 (x8.maximum(h), torch.maximum(tx8, th)), (x8 // u8, tx8 // tu8), (h**2, th**2)]
        for ours, theirs in pairs:
            assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
            assert nan_equal(ours.numpy(), theirs.numpy())


# ---- unsupported dtypes ----
@pytest.mark.parametrize("bad", ["float8", "complex64", "str", np.complex64, object, "torch.float32"])
def test_unsupported_dtype_is_an_error_naming_the_valid_ones(bad) -> None:
    with pytest.raises(TypeError, match="bfloat16, float32, float64"):
        Tensor([1.0], dtype=bad)
    with pytest.raises(TypeError, match="bfloat16, float32, float64"):
        Tensor([1.0]).cast(bad)


def test_numpy_data_of_an_unsupported_dtype_is_an_error() -> None:
    with pytest.raises(TypeError, match="numbers"):
        Tensor(np.array([1 + 2j]))
    with pytest.raises(TypeError, match="valid dtypes"):
        Tensor(np.complex64(1))


# ---- numpy interop ----
@pytest.mark.parametrize("dt", [d for d in ALL if d != dtypes.bfloat16], ids=lambda d: d.name)
def test_numpy_arrays_keep_their_dtype(dt: DType) -> None:
    values = edge_values(dt)
    t = Tensor(values, device="NUMPY")
    assert t.dtype == dt
    out = t.numpy()
    assert out.dtype == np.dtype(dt.np) and nan_equal(out, values)


def test_bfloat16_numpy_is_float32() -> None:
    t = Tensor([1.0, 1.00390625, 3.0e38], dtype="bfloat16", device="NUMPY")
    out = t.numpy()
    assert out.dtype == np.float32
    assert out.tolist()[:2] == [1.0, 1.0]  # 1 + 2^-8 is a tie: to the even neighbour
    if torch is not None:
        assert out.tolist() == torch.tensor([1.0, 1.00390625, 3.0e38]).bfloat16().float().tolist()


def test_python_numbers_get_the_default_dtypes() -> None:
    assert Tensor([1.5]).dtype == dtypes.float32 and Tensor([1]).dtype == dtypes.int32
    assert Tensor(1.5).dtype == dtypes.float32 and Tensor(np.float64(1.5)).dtype == dtypes.float64
    assert Tensor([1.0], dtype="float64").dtype == dtypes.float64
    assert Tensor([1.0]).cast("float64").dtype == dtypes.float64
    assert Tensor([1], dtype="int64").dtype == dtypes.int64
    assert Tensor([2**40], dtype="int64").tolist() == [2**40]


# ---- the cast rule against torch ----
def _torch_agrees(src: DType, dst: DType, values: np.ndarray) -> np.ndarray:
    """Where torch's own casts agree with each other: its vectorized float -> uint32/uint64 casts of
    values outside the target's range differ from its scalar ones, so those are left out."""
    if not (src.is_float and dst in (dtypes.uint32, dtypes.uint64)):
        return np.ones(values.shape, bool)
    with np.errstate(invalid="ignore"):
        wide = values.astype(np.float64)
        if dst == dtypes.uint32:
            return (wide > -(2.0**31)) & (wide < 2.0**32)
        return np.isfinite(wide) & (wide > -(2.0**63)) & (wide < 2.0**64)


@needs_torch
@pytest.mark.parametrize("src", ALL, ids=lambda d: d.name)
def test_cast_rule_matches_torch(src: DType) -> None:
    values = edge_values(src)
    source = torch.tensor(values.astype(np.float32) if src == dtypes.bfloat16 else values)
    source = source.to(_torch_dtype(src))
    for dst in ALL:
        expected = source.to(_torch_dtype(dst))
        expected = (expected.float() if dst == dtypes.bfloat16 else expected).numpy()
        got = cast_array(values, dst)
        keep = _torch_agrees(src, dst, values)
        assert nan_equal(got[keep], expected[keep]), (src, dst, values[keep], got[keep], expected[keep])


# ---- every device: casts, arithmetic, reductions ----
def _rows_in_one_kernel(values: list[Tensor]) -> Tensor:
    """Row i is values[i] (1-d, one dtype), all computed in one kernel: WHERE picks the rows without
    arithmetic, so -0.0 and NaN pass through. One kernel per value would make these tests compile
    ~170 kernels per device."""
    n, k = values[0].shape[0], len(values)
    rows = [v.reshape(1, n).expand(k, n) for v in values]
    which = Tensor.arange(k, device=values[0].device).reshape(k, 1).expand(k, n)
    out = rows[-1]
    for i in reversed(range(k - 1)):
        out = (which == i).where(rows[i], out)
    return out


def _casts_in_one_kernel(x: Tensor, targets: list[DType], wide: DType) -> Tensor:
    """Row i: x cast to targets[i], then (losslessly) to `wide`."""
    return _rows_in_one_kernel([x.cast(dt).cast(wide) for dt in targets])


@pytest.mark.backends(src=SAMPLED)
@pytest.mark.parametrize("src", ALL, ids=lambda d: d.name)
def test_casts_to_every_dtype_follow_the_rule(device: str, src: DType) -> None:
    _skip_unsampled(device, src)
    _skip_wide(device)
    values = edge_values(src)
    x = Tensor(values, dtype=src, device=device)
    assert nan_equal(x.numpy(), values)  # storage round trip
    targets = [d for d in ALL if (device not in SAMPLED_DEVICES or d in SAMPLED_DTYPES) and
               not (device == "WASM" and d == dtypes.float16)]  # (WASM refuses float16)
    # floats widen to float64 and ints (and bool) to int64 without changing a value or a bit pattern
    for family, wide in ((FLOATS, dtypes.float64), ([d for d in ALL if not d.is_float], dtypes.int64)):
        chosen = [d for d in targets if d in family]
        out = _casts_in_one_kernel(x, chosen, wide).numpy()
        for row, dst in zip(out, chosen, strict=True):
            expected = cast_array(values, dst).astype(wide.np)
            assert nan_equal(row, expected), (src, dst, values, row, expected)
    single = x.cast(targets[-1])  # and one cast on its own, stored in its dtype
    assert single.dtype == targets[-1] and nan_equal(single.numpy(), cast_array(values, targets[-1]))


def _operands(dt: DType) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(dt.priority)
    if dt == dtypes.bool:
        return rng.random(24) < 0.5, rng.random(24) < 0.5
    if dt.is_int:
        info = np.iinfo(dt.np)
        edges = np.array([info.min, info.max, 0, 1, -1 if info.min else 2, info.max - 1], dtype=dt.np)
        a = np.concatenate([edges, rng.integers(info.min, info.max, 18, dtype=dt.np, endpoint=True)])
        b = np.concatenate([edges[::-1], rng.integers(info.min, info.max, 18, dtype=dt.np, endpoint=True)])
        b[b == 0] = 3  # torch's integer division by 0 raises
        return a, b
    edges = [0.0, -0.0, float("inf"), float("nan"), 1e-40, 65504.0, 3.0, -2.5]
    a = np.concatenate([edges, rng.standard_normal(16) * 100])
    b = np.concatenate([edges[::-1], rng.standard_normal(16) * 100])
    return cast_array(a, dt), cast_array(b, dt)


def _torch_result(fn, dt: DType, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fn on torch tensors of dtype dt (bfloat16 results as float32, as tinyedu's numpy())."""
    def to(x):
        return torch.tensor(x.astype(np.float32) if dt == dtypes.bfloat16 else x).to(_torch_dtype(dt))
    out = fn(to(a), to(b))
    return (out.float() if out.dtype == torch.bfloat16 else out).numpy()


ARITHMETIC = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "lt": lambda a, b: a < b, "eq": lambda a, b: a == b, "maximum": lambda a, b: a.maximum(b),
    "div": lambda a, b: a / b,
}

# numpy's versions, for uint16/32/64 (they wrap like torch would); int / int divides in float32
NUMPY_TWINS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "lt": np.less, "eq": np.equal,
               "maximum": np.maximum, "div": lambda p, q: p.astype(np.float32) / q.astype(np.float32)}


@needs_torch
@pytest.mark.backends(dt=SAMPLED)
@pytest.mark.parametrize("dt", ALL, ids=lambda d: d.name)
def test_arithmetic_matches_torch(device: str, dt: DType) -> None:
    _skip_unsampled(device, dt)
    _skip_wide(device)
    a, b = _operands(dt)
    x, y = Tensor(a, dtype=dt, device=device), Tensor(b, dtype=dt, device=device)
    names = [name for name in ARITHMETIC if not (dt == dtypes.bool and name == "sub")]
    results, expected = [], []
    for name in names:
        got = ARITHMETIC[name](x, y)
        if dt in (dtypes.uint16, dtypes.uint32, dtypes.uint64):  # torch has no add/lt/max for these
            want = NUMPY_TWINS[name](a, b)
        else:
            want = _torch_result(ARITHMETIC[name] if name != "maximum" else torch.maximum, dt, a, b)
        assert got.dtype.name == str(want.dtype) or (dt == dtypes.bfloat16 and got.dtype == dt), name
        results.append(got)
        expected.append(want)
    # all the ops in one kernel: each result widened without loss (int64 for ints and bools, float64
    # for floats), picked into its row with WHERE
    wide = [dtypes.float64 if r.dtype.is_float else dtypes.int64 for r in results]
    for kind in (dtypes.float64, dtypes.int64):
        rows = [i for i, w in enumerate(wide) if w == kind]
        if not rows:
            continue
        out = _rows_in_one_kernel([results[i].cast(kind) for i in rows]).numpy()
        for row, i in zip(out, rows, strict=True):
            assert nan_equal(row, expected[i].astype(kind.np)), (names[i], dt, row, expected[i])


@needs_torch
@pytest.mark.backends(dt=SAMPLED)
@pytest.mark.parametrize("dt", ALL, ids=lambda d: d.name)
def test_reductions_match_torch(device: str, dt: DType) -> None:
    _skip_unsampled(device, dt)
    a, _ = _operands(dt)
    if dt.is_float:
        a = np.where(np.isfinite(a.astype(np.float64)), a, 1).astype(a.dtype)  # keep the sums finite
    x = Tensor(a, dtype=dt, device=device)
    t = torch.tensor(a.astype(np.float32) if dt == dtypes.bfloat16 else a).to(_torch_dtype(dt))
    s = x.sum()
    expected = t.sum()
    assert s.dtype.name == str(expected.dtype).removeprefix("torch.")  # ints (and bool) sum to int64
    np.testing.assert_allclose(s.numpy().astype(np.float64), expected.double().numpy(), rtol=1e-3)
    if not dt.is_float:  # an exact int64 sum (it wraps past 2^63 only, as in torch)
        assert s.item() == int(expected.item())
    assert nan_equal(x.max().numpy(), a.max().astype(x.dtype.value_np))  # exact: numpy is the oracle
    assert nan_equal(x.min().numpy(), a.min().astype(x.dtype.value_np))
    if dt.is_float:
        np.testing.assert_allclose(x.mean().numpy().astype(np.float64), t.mean().double().numpy(), rtol=1e-3)
        assert x.mean().dtype == dt
    if dt not in (dtypes.uint16, dtypes.uint32, dtypes.uint64):  # torch has no cumsum for these
        ours, theirs = x.cumsum(0), t.cumsum(0)
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")  # ints: int64, as sum
        if dt.is_float:  # the running sums add in another order than torch's
            np.testing.assert_allclose(ours.numpy().astype(np.float64), theirs.double().numpy(), rtol=2e-3,
                                       atol=1e-3)
        else:  # exact, wrapping past 2^63 as torch does
            assert np.array_equal(ours.numpy(), theirs.numpy())


# ---- half types: one rounding per op, as torch ----
@needs_torch
@pytest.mark.backends()
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=lambda d: d.name)
def test_half_types_round_after_every_op_like_torch(device: str, dt: DType) -> None:
    _skip_unsampled(device, dt)
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(64).astype(np.float32) * 1000 for _ in range(3))
    tt = [torch.tensor(v).to(_torch_dtype(dt)) for v in (a, b, c)]
    x, y, z = (Tensor(v, device=device).cast(dt) for v in (a, b, c))
    got = ((x * y + z) / y - x.exp2() * 0 + (x * 100)).numpy()
    ta, tb, tc = tt
    expected = ((ta * tb + tc) / tb - torch.exp2(ta) * 0 + (ta * 100)).float().numpy()
    assert nan_equal(got, expected)
    assert Tensor([60000.0], device=device).cast(dt).mul(2).numpy()[0] == (np.inf if dt == dtypes.float16 else
                                                                         120000 - 120000 % 512)
    assert (x.sum().numpy() == ta.sum().float().numpy()).all()  # accumulated in float32, rounded once


# ---- float64: gradients against torch and finite differences ----
@needs_torch
def test_float64_gradients_match_torch_and_finite_differences(device: str) -> None:
    _skip_unsampled(device, dtypes.float64)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))

    def f(x, y, lib):
        h = (x @ y).tanh() if lib == "t" else torch.tanh(x @ y)
        return (h * h).sum() + (x.exp() * 1e-3).sum()

    x = Tensor(a, device=device, requires_grad=True)
    y = Tensor(b, device=device, requires_grad=True)
    assert x.dtype == dtypes.float64
    f(x, y, "t").backward()
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    f(tx, ty, "torch").backward()
    assert x.grad.dtype == dtypes.float64
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-10, atol=1e-12)
    eps, numeric = 1e-6, np.zeros_like(a)  # central differences: float64 makes them accurate to ~1e-9
    for i in np.ndindex(a.shape):
        up, down = a.copy(), a.copy()
        up[i] += eps
        down[i] -= eps
        numeric[i] = (f(torch.tensor(up), torch.tensor(b), "torch").item()
                      - f(torch.tensor(down), torch.tensor(b), "torch").item()) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_float64_keeps_its_precision(device: str) -> None:
    _skip_unsampled(device, dtypes.float64)
    x = Tensor([0.1, 1e-300, 1.0 + 2**-52], device=device)
    assert x.dtype == dtypes.float32
    d = Tensor([0.1, 1e-300, 1.0 + 2**-52], dtype="float64", device=device)
    assert (d * 3).numpy().tolist() == [0.1 * 3, 3e-300, (1.0 + 2**-52) * 3]
    assert (d.sqrt() * d.sqrt()).numpy()[0] == math.sqrt(0.1) ** 2
    assert Tensor([2**60 + 1], dtype="int64", device=device).numpy()[0] == 2**60 + 1


def test_integer_sums_are_int64_and_exact(device: str) -> None:
    _skip_unsampled(device, dtypes.int64)
    x = Tensor(np.full(700, 2**31 - 1, np.int32), device=device)  # its int32 sum would wrap
    s = x.sum()
    assert s.dtype == dtypes.int64 and s.item() == 700 * (2**31 - 1)
    assert Tensor([True, True, False], device=device).sum().item() == 2
    assert Tensor([0, -2**31], device=device).min().item() == -2**31
    assert Tensor([0, -2**31], device=device).argmin().item() == 1
    big = Tensor([2**63 - 1, 1], dtype="int64", device=device)
    assert big.sum().item() == -2**63  # an int64 sum wraps past 2^63, as in torch


# ---- view(dtype): a bitcast ----
@needs_torch
def test_view_dtype_is_a_bitcast_like_torch() -> None:
    values = np.array([[1.0, -2.5, 0.0, -0.0], [1e-40, 3.0e38, 65504.0, 1.5]], np.float32)
    x, t = Tensor(values), torch.tensor(values)
    for dt in ALL:
        if dt == dtypes.bool:
            continue
        ours, theirs = x.view(dt), t.view(_torch_dtype(dt))
        assert ours.dtype == dt and ours.shape == tuple(theirs.shape)
        theirs = theirs.float() if dt == dtypes.bfloat16 else theirs
        assert nan_equal(ours.numpy(), theirs.numpy()), dt
    assert x.view(4, 2).shape == (4, 2)  # still reshape with sizes
    with pytest.raises(ValueError, match="divide evenly"):
        Tensor([1, 2, 3], dtype="int16").view("int32")


def test_constants_at_the_ends_of_64_bit_types(device: str) -> None:
    _skip_unsampled(device, dtypes.uint64, dtypes.int64)
    top = 2**64 - 1
    assert Tensor.full((2,), top, dtype="uint64", device=device).numpy().tolist() == [top, top]
    assert (Tensor([1, 2], dtype="uint64", device=device) + top).numpy().tolist() == [0, 1]
    low = Tensor([1, -1], dtype="int64", device=device) + (-2**63)
    assert low.numpy().tolist() == [1 - 2**63, 2**63 - 1]
    assert (Tensor([3, 200], dtype="uint8", device=device) * 255).numpy().tolist() == [253, 56]
    assert (Tensor([2**31, 7], dtype="uint32", device=device) // 2).numpy().tolist() == [2**30, 3]


# ---- safetensors: every dtype, checked with the reference package ----
@needs_torch
def test_safetensors_round_trips_every_dtype_with_the_reference_package(tmp_path) -> None:
    safetensors_torch = pytest.importorskip("safetensors.torch")
    from tinyedu.nn.state import safe_load, safe_save

    ours = {dt.name: Tensor(edge_values(dt), dtype=dt, device="NUMPY") for dt in ALL}
    safe_save(ours, tmp_path / "ours.safetensors")
    theirs = safetensors_torch.load_file(str(tmp_path / "ours.safetensors"))
    for dt in ALL:  # the reference package reads what tinyedu writes ...
        got = theirs[dt.name]
        assert got.dtype == _torch_dtype(dt)
        got = got.float() if dt == dtypes.bfloat16 else got
        assert nan_equal(got.numpy(), ours[dt.name].numpy()), dt
    safetensors_torch.save_file(theirs, str(tmp_path / "theirs.safetensors"))
    loaded = safe_load(tmp_path / "theirs.safetensors")  # ... and tinyedu what it writes
    for dt in ALL:
        assert loaded[dt.name].dtype == dt
        assert nan_equal(loaded[dt.name].numpy(), ours[dt.name].numpy()), dt


@needs_torch
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=lambda d: d.name)
def test_half_type_gradients_and_constants_match_torch(device: str, dt: DType) -> None:
    _skip_unsampled(device, dt)  # (WEBGPU and WASM refuse these with a clear error: their own tests)
    values = np.array([1.5, -2.25, 3.0, 1e-3, 300.0], np.float32)
    x = Tensor(values, device=device).cast(dt).detach().requires_grad_(True)
    t = torch.tensor(values).to(_torch_dtype(dt)).requires_grad_(True)
    # (each x reaches the loss along two identical paths: the order of adding gradients cannot matter)
    ((x * x * 3 - 7).relu().sum()).backward()
    ((t * t * 3 - 7).relu().sum()).backward()
    assert x.grad.dtype == dt
    assert nan_equal(x.grad.numpy(), t.grad.float().numpy())
    full = Tensor.full((3,), 0.1, dtype=dt, device=device)
    assert nan_equal(full.numpy(), torch.full((3,), 0.1, dtype=_torch_dtype(dt)).float().numpy())


# every unary formula (tinyedu/function_composite.py's UnaryFunction and those built on it), with
# torch's float64 twin; values across float16's range, its largest numbers, infinities and kinks
HALF_MATH = {
    "exp": torch.exp, "expm1": torch.expm1, "log1p": torch.log1p, "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu, "mish": torch.nn.functional.mish,
    "softplus": torch.nn.functional.softplus, "logsigmoid": torch.nn.functional.logsigmoid,
    "elu": torch.nn.functional.elu, "selu": torch.nn.functional.selu, "celu": torch.nn.functional.celu,
    "hardswish": torch.nn.functional.hardswish, "erf": torch.erf, "sinh": torch.sinh, "cosh": torch.cosh,
    "asinh": torch.asinh, "acosh": torch.acosh, "atan": torch.atan, "tan": torch.tan,
} if torch is not None else {}
HALF_INPUTS = [-60000.0, -20.0, -3.0, -1.0, -0.0, 0.0, 6e-8, 0.5, 1.0, 1.5, 2.0, 5.0, 10.0, 11.0, 60000.0,
               math.inf, -math.inf]


@needs_torch
@pytest.mark.parametrize("op", list(HALF_MATH))
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=lambda d: d.name)
def test_half_type_math_is_float32_math_rounded_once(op: str, dt: DType) -> None:
    """float16 and bfloat16 compute formulas in float32 and round once (their constants and
    intermediates would overflow or lose precision in 16 bits): forward and gradient within a
    rounding of float64's value, at values up to float16's largest, at infinities and at 0."""
    tdt = _torch_dtype(dt)
    start = torch.tensor(HALF_INPUTS).to(tdt).double()  # the inputs as the 16-bit type holds them
    if op in ("tan",):
        start = start[start.abs() < 1.5]  # (tan's poles: a rounding of x moves the value anywhere)
    x = Tensor(start.float().numpy()).cast(dt).detach().requires_grad_(True)
    t = start.clone().requires_grad_(True)
    got, expected = getattr(x, op)(), HALF_MATH[op](t)
    expected.sum().backward()
    got.sum().backward()
    assert got.dtype == dt and x.grad.dtype == dt
    ulp = 2.0**-10 if dt == dtypes.float16 else 2.0**-7
    for name, mine, oracle in (("value", got, expected.detach()), ("gradient", x.grad, t.grad)):
        want = oracle.to(tdt).double().numpy()  # float64's value rounded to the 16-bit type
        have = mine.float().numpy().astype(np.float64)
        close = np.isclose(have, want, rtol=2 * ulp, atol=1e-6, equal_nan=True)
        where = start.numpy()[~close]
        assert close.all(), f"{op} {name} in {dt.name} at {where}: {have[~close]}, not {want[~close]}"


@needs_torch
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=lambda d: d.name)
def test_half_type_atan2_keeps_its_dtype_and_rounds_once(dt: DType) -> None:
    values = np.array([-20.0, -0.0, 0.0, 1.5, 300.0, np.inf], np.float32)
    y = Tensor(values).cast(dt).detach().requires_grad_(True)
    x = (Tensor(values[::-1].copy()).cast(dt) * 0.5 + 1).detach().requires_grad_(True)
    ty, tx = (torch.tensor(v.float().numpy(), dtype=torch.float64, requires_grad=True) for v in (y, x))
    got, expected = y.atan2(x), torch.atan2(ty, tx)
    got.sum().backward()
    expected.sum().backward()
    assert got.dtype == dt and y.grad.dtype == dt and x.grad.dtype == dt
    for mine, oracle in ((got, expected.detach()), (y.grad, ty.grad), (x.grad, tx.grad)):
        assert nan_equal(mine.float().numpy(), oracle.to(_torch_dtype(dt)).float().numpy())


def test_llvm_half_conversions_work_without_f16c() -> None:
    """An x86 CPU without F16C converts float16 through libgcc calls, which the JIT must resolve."""
    import ctypes
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("F16C is an x86 feature")
    try:
        from tinyedu.runtime.ops_llvm import llvm
        binding = llvm()
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))
    module = binding.parse_assembly("define float @f(float %x) {\n  %h = fptrunc float %x to half\n"
                                    "  %y = fpext half %h to float\n  ret float %y\n}")
    machine = binding.Target.from_default_triple().create_target_machine(cpu="x86-64", features="-f16c",
                                                                         opt=2)
    engine = binding.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    assert binding.address_of_symbol("__truncsfhf2") is not None
    f = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)(engine.get_function_address("f"))
    for x in (1.0009765625 + 2**-12, 65519.0, 70000.0, 1e-8, -2.5):
        assert f(x) == float(cast_array(np.array([x], np.float32), dtypes.float16)[0])


def test_a_cast_to_half_rounds_inside_an_optimized_matmul():
    """x.half().float() fused into a vectorized matmul: GCC 12 folded (float)(_Float16)x to x when it
    built vector lanes from it, so the matmul saw float32 values. The C renderer's round_float16 keeps
    the rounding; a half matmul sums exact float32 products and rounds once, as PyTorch's does."""
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-2, 2, (64, 64)).astype(np.float32) for _ in range(2))
    halves = [v.astype(np.float16).astype(np.float64) for v in (a, b)]
    exact = halves[0] @ halves[1]
    fused = (Tensor(a).half().float() @ Tensor(b).half().float()).numpy()
    np.testing.assert_allclose(fused, exact, rtol=0, atol=1e-4)
    half = Tensor(a).half().matmul(Tensor(b).half())
    assert half.dtype == dtypes.float16
    np.testing.assert_allclose(half.numpy().astype(np.float64), exact.astype(np.float16), rtol=0, atol=2**-9)
