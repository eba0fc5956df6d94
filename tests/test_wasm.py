"""The WASM device's own parts: its libm for wasm32 against numpy, vectors, and what wasm32 refuses.

The op suite (tests/test_ops.py and the files beside it) runs its sampled cases on WASM like on NEON;
here are the things only this device has.
"""

from __future__ import annotations

import subprocess
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Device, Tensor, dtypes
from tinyedu.codegen.opt import Opt, OptOps
from tinyedu.core.errors import DTypeError, UnsupportedError
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.runtime.device import Buffer, DeviceUnavailable


@pytest.fixture(scope="module", autouse=True)
def wasm() -> None:
    try:
        Device["WASM"]
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))


def ulps(ours: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """How many float32 steps apart (NaN to NaN and equal infinities are 0)."""
    a, b = ours.astype(np.float32), expected.astype(np.float32)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    ia, ib = (x.view(np.int32).astype(np.int64) for x in (a, b))
    ia, ib = (np.where(i < 0, np.int64(-2**31) - i, i) for i in (ia, ib))  # ordered as the floats are
    return np.where(same, 0, np.abs(ia - ib))


EDGES = [0.0, -0.0, 1e-45, -1e-40, 1.17549435e-38, 0.5, 1.0, 2.0, 127.9, 128.0, -149.0, -150.5, 88.7, -103.9,
         1e6, 1.6e6, 3.4e38, np.inf, -np.inf, np.nan]


def inputs(low: float, high: float) -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.concatenate([rng.uniform(low, high, 2000), EDGES]).astype(np.float32)


@pytest.mark.parametrize("name, low, high, reference, limit", [
    ("exp2", -160, 130, np.exp2, 1),
    ("log2", 0, 1e4, np.log2, 1),
    ("sin", -100, 100, np.sin, 1),
    ("cos", -1.5e6, 1.5e6, np.cos, 1),
])
def test_math_functions_against_numpy(name: str, low: float, high: float, reference, limit: int) -> None:
    """Each libm function of tinyedu_wasm.h within `limit` float32 steps of numpy's (float64, rounded),
    at random points and at the edges; sin/cos past 2^20 pi/2 are NaN, never another number."""
    x = inputs(low, high)
    ours = getattr(Tensor(x, device="WASM"), name)().numpy()
    with np.errstate(all="ignore"):
        expected = reference(x.astype(np.float64)).astype(np.float32)
    if name in ("sin", "cos"):
        far = np.abs(x) > 2**20 * np.pi / 2
        assert np.isnan(ours[far]).all()
        ours, expected = ours[~far], expected[~far]
    assert ulps(ours, expected).max() <= limit, x[np.argmax(ulps(ours, expected))]


def test_fmod_is_exact() -> None:
    """fmod has one right answer; the remainder of two floats is a float (here against numpy's)."""
    rng = np.random.default_rng(1)
    spread = [rng.standard_normal(500) * 10.0 ** rng.integers(-30, 30, 500) for _ in range(2)]
    a = np.concatenate([spread[0], EDGES]).astype(np.float32)
    b = np.concatenate([spread[1], EDGES[::-1]]).astype(np.float32)
    ours = (Tensor(a, device="WASM") % Tensor(b, device="WASM")).numpy()
    with np.errstate(all="ignore"):
        expected = (Tensor(a, device="NUMPY") % Tensor(b, device="NUMPY")).numpy()
    assert ulps(ours, expected).max() == 0


def test_vectorized_matmul_fuses_and_matches_the_c_device() -> None:
    """An optimized matmul runs 4-lane SIMD128 vectors and MULACC (the header's fmaf) like C's fmaf."""
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    ours = (Tensor(a, device="WASM") @ Tensor(b, device="WASM")).numpy()
    np.testing.assert_allclose(ours, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_fmaf_rounds_once() -> None:
    """fmaf(a, b, c) = a*b + c rounded once, also where the double sum lands halfway between two floats
    (checked against the exact sum, as a Fraction, rounded to float32 by hand)."""
    f, store = _wasm_function("float f(float a, float b, float c) { return fmaf(a, b, c); }")
    rng = np.random.default_rng(3)
    a = np.float32(1) + rng.integers(1, 2**23, 300).astype(np.float32) * np.float32(2**-23)
    tails = rng.standard_normal(300).astype(np.float32) * np.float32(2**-40)
    cases = [(x, x, t) for x, t in zip(a, tails, strict=True)]
    cases += [(np.float32(1 + 2**-12), np.float32(1 + 2**-12), np.float32(s * 2**-60)) for s in (1, -1)]
    for x, y, z in cases:
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        assert np.float32(f(store, float(x), float(y), float(z))) == _round_to_float32(exact), (x, y, z)


def _wasm_function(source: str):
    """One C function compiled with the device's flags and header; (the function, its store)."""
    import wasmtime

    from tinyedu.renderer.wasm_math import WASM_MATH_HEADER
    from tinyedu.runtime.ops_wasm import FLAGS, wasm_compiler

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "f.wasm"
        result = subprocess.run([wasm_compiler(), *FLAGS, "-x", "c", "-", "-o", str(out)],
                                input=WASM_MATH_HEADER + source, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        store = wasmtime.Store()
        module = wasmtime.Module.from_file(store.engine, str(out))
    pages = module.imports[0].type.limits.min
    memory = wasmtime.Memory(store, wasmtime.MemoryType(wasmtime.Limits(pages, None)))
    return wasmtime.Instance(store, module, [memory]).exports(store)["f"], store


def _round_to_float32(value: Fraction) -> np.float32:
    """The float32 nearest to `value` (ties to the even one), exactly."""
    near = np.float32(float(value))
    candidates = [np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf))]
    best = min(abs(Fraction(float(c)) - value) for c in candidates)
    ties = [c for c in candidates if abs(Fraction(float(c)) - value) == best]
    return min(ties, key=lambda c: int(c.view(np.int32)) & 1)


def test_float16_is_refused_with_the_reason() -> None:
    with pytest.raises(DTypeError, match="float16.*wasm32"):
        (Tensor([1.0, 2.0], device="WASM").cast(dtypes.float16) + 1).numpy()


def test_threads_are_refused_with_the_reason() -> None:
    x = Tensor(np.ones((64, 64), np.float32), device="WASM").realize()
    ast = create_schedule([(x + 1).lazydata])[-1].ast
    with pytest.raises(UnsupportedError, match="THREAD.*one thread"):
        lower("WASM", ast, [Opt(OptOps.THREAD, 0, 2)])
    assert Device["WASM"].threads() == 1


def test_more_than_4_gib_of_buffers_is_refused() -> None:
    """The layout check runs before any memory is touched (no 4 GiB is allocated here)."""
    from tinyedu.runtime.ops_wasm import WASMProgram

    class Big:
        nbytes = 3 << 30

    program = WASMProgram.__new__(WASMProgram)
    program.name = "E_big"
    with pytest.raises(UnsupportedError, match="4 GiB"):
        program.layout([Big(), Big()], 1 << 20)
    offsets, end = program.layout([Buffer("WASM", 10, dtypes.float32), Buffer("WASM", 3, dtypes.int32)], 1000)
    assert offsets == [1024, 1088] and end == 1100


def test_missing_tools_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyedu.runtime import ops_wasm
    ops_wasm.wasm_compiler.cache_clear()
    monkeypatch.setenv("WASM_CC", "no-such-clang-here")
    try:
        with pytest.raises(DeviceUnavailable, match="apt-get install clang lld"):
            ops_wasm.wasm_compiler()
    finally:
        ops_wasm.wasm_compiler.cache_clear()


def test_debug_shows_source_and_instructions(capsys: pytest.CaptureFixture,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEBUG", "6")
    (Tensor(np.arange(8, dtype=np.float32) * 1.5, device="WASM").sqrt()).numpy()
    out = capsys.readouterr().out
    assert '#include "tinyedu_wasm.h"' in out and "sqrt" in out
