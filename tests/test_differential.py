"""Differential testing: random Tensor programs must give the same answer on every device.

Hypothesis draws a program: an input of a random shape (size-0 axes included) and dtype, then a
chain of steps: movement ops (reshape, permute, expand, pad, shrink, flip, stride), elementwise
ops with a second input that broadcasts, reduces, and `contiguous` (a kernel boundary). The same
program runs with `device=` each device: C, PYTHON and NUMPY, and NEON and LLVM (when this machine
has their tools) on a third as many programs. NUMPY shares no code with the linearizer or the
renderers, so any disagreement is a bug in one of them (and PYTHON, which runs the UOps directly,
says which). When a test fails, Hypothesis prints the smallest program it found that fails. A test
runs programs again with the heuristics' opts on every kernel, however small, on every device. The
last one runs them GPU-style: on the OpenCL device (PoCL on a machine without a GPU), on CUDA where
a GPU is present, with the GPU opts and without (one thread), and on PYTHON in lockstep
(PYTHON_GPU=1), which also reports any race on shared memory.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyedu import Device, Tensor
from tinyedu.core.dtype import DType, dtypes
from tinyedu.runtime.device import DeviceUnavailable

EXAMPLES = int(os.environ.get("TINYEDU_DIFFERENTIAL_EXAMPLES", "150"))  # the sanitizer run uses fewer
PYTHON_MAX_WORK = 3000  # elements x steps the PYTHON device gets through quickly (it interprets UOps)
Step = tuple[Any, ...]

UNARY = {"neg": lambda x: -x, "relu": lambda x: x.relu(), "abs": lambda x: x.abs(), "square": lambda x: x * x,
         "exp": lambda x: x.exp(), "sqrt_abs": lambda x: x.abs().sqrt(), "sin": lambda x: x.sin(),
         "cos": lambda x: x.cos()}
BINARY = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "maximum": lambda x, y: x.maximum(y), "where": lambda x, y: (y > 0).where(x, -x),
          "lt": lambda x, y: (x < y).where(x, y), "eq": lambda x, y: (x == y).where(x, 0)}


def apply(x: Tensor, step: Step) -> Tensor:
    """One step of a program."""
    kind, arg = step[0], step[1]
    if kind == "unary":
        return UNARY[arg](x)
    if kind == "binary":
        other_shape, seed = step[2], step[3]
        other = np.random.default_rng(seed).integers(-3, 4, other_shape).astype(x.dtype.np)
        return BINARY[arg](x, Tensor(other, device=x.device))
    if kind in ("sum", "max"):
        return getattr(x, kind)(arg, keepdim=step[2])
    if kind == "permute":
        return x.permute(*arg)
    if kind == "expand":
        return x.expand(*arg)
    if kind == "flip":
        return x.flip(tuple(arg)) if arg else x
    if kind == "stride":
        return x._stride(arg)
    if kind == "contiguous":
        return x.contiguous()
    return getattr(x, kind)(arg)  # reshape, pad, shrink


def shape_after(shape: tuple[int, ...], dtype: DType, step: Step) -> tuple[tuple[int, ...], DType]:
    """Shape and dtype after a step: build it lazily (nothing runs until .numpy())."""
    out = apply(Tensor(np.zeros(shape, dtype.np), device="NUMPY"), step)
    return out.shape, out.dtype


# ---- drawing a program ----
@st.composite
def programs(draw: st.DrawFn) -> tuple[np.ndarray, list[Step]]:
    # mostly sizes 1..5; size 0 (nothing to compute) one time in six
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.sampled_from([1, 2, 3, 4, 5, 0])) for _ in range(ndim))
    dtype = draw(st.sampled_from([dtypes.float32, dtypes.float32, dtypes.int32]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    data = (rng.uniform(-3, 3, shape) if dtype.is_float else rng.integers(-5, 6, shape)).astype(dtype.np)
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 6))):
        step = draw(step_for(shape, dtype))
        steps.append(step)
        shape, dtype = shape_after(shape, dtype, step)
    return data, steps


def step_for(shape: tuple[int, ...], dtype: DType) -> st.SearchStrategy:
    """One step that is valid for a tensor of this shape and dtype."""
    nd = len(shape)
    unary = ["neg", "relu", "abs", "square"] + (["exp", "sqrt_abs", "sin"] if dtype.is_float else [])
    size = int(np.prod(shape))
    choices = [
        st.tuples(st.just("unary"), st.sampled_from(unary)),
        st.tuples(st.just("binary"), st.sampled_from(sorted(BINARY)), broadcastable(shape),
                  st.integers(0, 2**16)),
        st.tuples(st.just("pad"), st.tuples(*[st.tuples(st.integers(0, 2), st.integers(0, 2))] * nd)),
        st.tuples(st.just("flip"), st.lists(st.integers(0, max(nd - 1, 0)), unique=True, max_size=nd)),
        st.tuples(st.just("permute"), st.permutations(range(nd)).map(tuple)),
        st.tuples(st.just("stride"), st.tuples(*[st.sampled_from([1, 2, -1, -2, 3])] * nd)),
        st.tuples(st.just("shrink"), st.tuples(*[st.tuples(st.integers(0, s), st.integers(0, s)).map(sorted)
                                                 .map(tuple) for s in shape])),
        st.tuples(st.just("reshape"), st.sampled_from(reshapes(size))),
        st.tuples(st.just("contiguous"), st.none()),
    ]
    if nd:
        choices.append(st.tuples(st.just("sum"), st.integers(0, nd - 1), st.booleans()))
        if all(shape):  # the max of nothing is an error
            choices.append(st.tuples(st.just("max"), st.integers(0, nd - 1), st.booleans()))
    if 1 in shape:
        sizes = [st.integers(1, 3) if s == 1 else st.just(s) for s in shape]
        choices.append(st.tuples(st.just("expand"), st.tuples(*sizes)))
    return st.one_of(choices)


def reshapes(size: int) -> list[tuple[int, ...]]:
    return [(size,), (1, size), (size, 1)] + [(a, size // a) for a in range(2, size) if size % a == 0]


def broadcastable(shape: tuple[int, ...]) -> st.SearchStrategy:
    """Shapes that broadcast to `shape`: some axes set to 1, maybe some leading axes dropped."""
    return st.tuples(*[st.sampled_from([s, 1]) for s in shape]).flatmap(
        lambda full: st.integers(0, len(full)).map(lambda drop: full[drop:]))


# ---- running and comparing ----
def run(device: str, data: np.ndarray, steps: list[Step]) -> np.ndarray:
    x = Tensor(data, device=device)
    for step in steps:
        x = apply(x, step)
    return x.numpy()


def work(data: np.ndarray, steps: list[Step]) -> int:
    """Roughly how many elements the program touches: its largest shape, times its length."""
    shape, dtype, largest = data.shape, dtypes.from_numpy(data.dtype), data.size
    for step in steps:
        shape, dtype = shape_after(shape, dtype, step)
        largest = max(largest, int(np.prod(shape)))
    return largest * (len(steps) + 1)


def assert_same(device: str, got: np.ndarray, expected: np.ndarray, steps: list[Step]) -> None:
    message = f"{device} differs from NUMPY for {steps}"
    assert got.shape == expected.shape and got.dtype == expected.dtype, message
    if got.dtype.kind == "f":  # sums add in another order (numpy sums pairwise); exp/sin may differ by an ulp
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=message)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=message)


def available(device: str) -> bool:
    try:
        backend = Device[device]
        getattr(backend, "check_runnable", lambda: None)()  # CUDA compiles anywhere, runs only on a GPU
        return True
    except DeviceUnavailable:
        return False


# NEON and LLVM join when this machine can run them (test_backends.py says why when it cannot), on
# a third of the programs without opts: each compiles every new kernel (NEON under qemu on x86-64).
# The sanitizer run (test_c_backend.py) checks the C device's generated code only.
SANITIZED = os.environ.get("TINYEDU_SANITIZE", "0") != "0"
BACKENDS = [] if SANITIZED else [d for d in ("NEON", "LLVM") if available(d)]
COMPILED = ["C", *BACKENDS]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_every_device_agrees_with_numpy(program: tuple[np.ndarray, list[Step]]):
    data, steps = program
    expected = run("NUMPY", data, steps)
    assert_same("C", run("C", data, steps), expected, steps)
    if work(data, steps) <= PYTHON_MAX_WORK:
        assert_same("PYTHON", run("PYTHON", data, steps), expected, steps)


@settings(max_examples=max(EXAMPLES // 3, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_neon_and_llvm_agree_with_numpy(program: tuple[np.ndarray, list[Step]]):
    if not BACKENDS:
        pytest.skip("neither NEON nor LLVM runs here (test_backends.py says why)")
    data, steps = program
    expected = run("NUMPY", data, steps)
    for device in BACKENDS:
        assert_same(device, run(device, data, steps), expected, steps)


@settings(max_examples=max(EXAMPLES // 4, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_every_device_agrees_with_opts_on_every_kernel(program: tuple[np.ndarray, list[Step]]):
    """The same programs with the heuristics' opts on every kernel, however small (vectors, register
    blocks, threads...): C, NEON, LLVM and PYTHON run the optimized UOps, NUMPY the AST."""
    from tinyedu.codegen import heuristics

    devices = [*COMPILED, "PYTHON"]
    saved = heuristics.SMALL_KERNEL, heuristics.THREAD_MIN_WORK
    heuristics.SMALL_KERNEL = heuristics.THREAD_MIN_WORK = 0
    try:
        for device in devices:
            Device[device].programs.clear()  # programs lowered without these opts must not be reused
        data, steps = program
        expected = run("NUMPY", data, steps)
        for device in COMPILED:
            assert_same(device, run(device, data, steps), expected, steps)
        if work(data, steps) <= PYTHON_MAX_WORK:
            assert_same("PYTHON", run("PYTHON", data, steps), expected, steps)
    finally:
        heuristics.SMALL_KERNEL, heuristics.THREAD_MIN_WORK = saved
        for device in devices:
            Device[device].programs.clear()


GPUS = [] if SANITIZED else [d for d in ("GPU", "CUDA", "WEBGPU") if available(d)]


@settings(max_examples=max(EXAMPLES // 4, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_gpu_kernels_agree_with_numpy(program: tuple[np.ndarray, list[Step]]):
    """GPU-style kernels (GLOBAL, LOCAL, GROUP with shared memory and barriers) on every GPU device
    here, with the GPU heuristics' opts and without them (NOOPT=1: one thread runs every loop); and
    the same lowering on PYTHON in lockstep, which fails on a race or a divergent barrier. GROUP
    splits every reduce of 2 or more elements here, so the small programs exercise it too."""
    from tinyedu.codegen import heuristics

    data, steps = program
    expected = run("NUMPY", data, steps)
    saved = heuristics.GROUP_MIN
    heuristics.GROUP_MIN = 2 if data.size % 2 else 256  # half the programs: GROUP whenever it applies
    try:
        for device in [*GPUS, "PYTHON"]:
            Device[device].programs.clear()  # programs lowered with the other GROUP_MIN must not be reused
        for device in GPUS:
            assert_same(device, run(device, data, steps), expected, steps)
        with setting("NOOPT", "1"):
            for device in GPUS:
                assert_same(f"{device} NOOPT", run(device, data, steps), expected, steps)
        if work(data, steps) <= PYTHON_MAX_WORK:
            with setting("PYTHON_GPU", "1"):
                assert_same("PYTHON_GPU", run("PYTHON", data, steps), expected, steps)
    finally:
        heuristics.GROUP_MIN = saved
        for device in [*GPUS, "PYTHON"]:
            Device[device].programs.clear()


@contextlib.contextmanager
def setting(name: str, value: str) -> Iterator[None]:
    """An environment variable set for the block (the programs' caches key on it)."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            del os.environ[name]
        else:
            os.environ[name] = saved
