"""Chapter 12 (GPU kernels): write GROUP's combine, place the barriers, choose the local sizes.

Every check runs the kernels twice: on the PYTHON device in lockstep, which reports a race on shared
memory or a barrier only some threads reach (tinyedu/runtime/lockstep.py), and on the GPU device
(OpenCL; PoCL on a machine without a GPU) where one is installed. Both are compared with numpy.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable

import numpy as np

from tinyedu import Tensor
from tinyedu.codegen import gpu, heuristics
from tinyedu.codegen.kernel import AxisKind, Kernel
from tinyedu.codegen.launch import launch_dims
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import Opt, OptError, OptOps, apply_opts
from tinyedu.core.dtype import dtypes
from tinyedu.core.helpers import prod
from tinyedu.core.uops import UOp, UOps
from tinyedu.engine.lower import lower
from tinyedu.exercises.checking import compute_items, need_function
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.launch import GPULimits
from tinyedu.renderer.opencl import render_opencl
from tinyedu.runtime.device import Buffer, Device, DeviceUnavailable
from tinyedu.runtime.lockstep import GPUEmulationError

WARP = 32  # threads that a (CUDA) GPU runs as one instruction stream; workgroups come in multiples
# where no GPU device is installed, 12.local_sizes checks the opts against a typical GPU's limits
TYPICAL_LIMITS = GPULimits(max_workgroup_size=1024, max_local=(1024, 1024, 64),
                           max_groups=(2**31 - 1, 65535, 65535), shared_memory_bytes=49152, warp_size=32)


def _ast(expr: Callable[..., Any], *shapes: tuple[int, ...], seed: int = 0) -> tuple[Any, list[np.ndarray]]:
    """The AST of the one kernel `expr(*tensors)` makes, and the inputs (float32, seeded)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    items = compute_items(expr(*(Tensor(a).realize() for a in arrays)))
    assert len(items) == 1, f"expected one kernel, got {[i.name for i in items]}"
    return items[0].ast, arrays


def _gpu() -> Any:
    """The GPU device, or None where pyopencl or an OpenCL platform is missing."""
    try:
        return Device["GPU"]
    except DeviceUnavailable:
        return None


def run_uops(device: str, uops: list[UOp], size: int, inputs: list[np.ndarray]) -> np.ndarray:
    """Run a GPU-style UOp list on PYTHON (lockstep) or GPU (rendered as OpenCL); the float32 output."""
    return _run(device, uops, size, inputs)[0]


def _run(device: str, uops: list[UOp], size: int, inputs: list[np.ndarray]) -> tuple[np.ndarray, Any]:
    """run_uops, and the runner (on PYTHON its `traffic`: barriers executed, ...)."""
    backend = Device[device]
    program = uops if device == "PYTHON" else backend.compiler.build(render_opencl("k", uops))
    runner = backend.runtime("k", program, launch_dims(uops))
    buffers = [Buffer(device, size, dtypes.float32)]
    buffers += [Buffer(device, a.size, dtypes.float32).copyin(a.reshape(-1)) for a in inputs]
    runner(buffers)
    return buffers[0].as_numpy().copy(), runner


def _compare(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    if not np.allclose(got, expected.reshape(-1), rtol=1e-4, atol=1e-4):
        worst = int(np.argmax(np.abs(got - expected.reshape(-1))))
        raise AssertionError(f"{what}: output {worst} is {got[worst]}, numpy says "
                             f"{expected.reshape(-1)[worst]}")


# ---- 12.group_combine: GROUP's partials through shared memory ---------------------------------------
GROUP_CASES = [  # (what, expression, input shapes, opts, numpy)
    ("a row sum, 16 threads per row", lambda x: x.sum(1), [(8, 64)],
     [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GROUP, 1, 16)], lambda x: x.sum(1)),
    ("a row max of negative numbers, 8 threads per row", lambda x: (x - 10).max(1), [(6, 40)],
     [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GROUP, 1, 8)], lambda x: (x - 10).max(1)),
    ("row sums with 4 rows (LOCAL) x 8 threads (GROUP) per workgroup", lambda x: x.sum(1), [(8, 32)],
     [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.GROUP, 2, 8)], lambda x: x.sum(1)),
    ("row sums, 2 rows per thread (UPCAST: two partials)", lambda x: x.sum(1), [(8, 32)],
     [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GROUP, 1, 8)], lambda x: x.sum(1)),
    ("a row sum in an output loop (one workgroup runs every row)", lambda x: x.sum(1), [(4, 48)],
     [Opt(OptOps.GROUP, 1, 16)], lambda x: x.sum(1)),
]


def _lower_with(ast: Any, opts: list[Opt], what: str) -> list[UOp]:
    """The GPU UOps of `ast` with these opts, linearized with the learner's combine plugged in."""
    try:
        return lower("GPU", ast, opts, compile=False).uops
    except (AssertionError, IndexError) as error:
        if any(frame.name == "close_if" for frame in traceback.extract_tb(error.__traceback__)):
            raise AssertionError(f"{what}: the linearizer could not close the IF your combine opened "
                                 f"({error}). Leave exactly one IF open when you return (b.open_if, no "
                                 "b.close_if): the STORE of the result goes inside it, then finish_groups "
                                 "closes it.") from None
        raise


def _group_size(opts: list[Opt]) -> int:
    return next(o.amount for o in opts if o.op is OptOps.GROUP)


def _compare_combined(got: np.ndarray, expected: np.ndarray, opts: list[Opt], first: np.ndarray,
                      what: str) -> None:
    """_compare, with a hint for the usual ways a combine gets the numbers wrong (`first`: what GROUP
    thread 0's partials alone give)."""
    expected = expected.reshape(-1)
    if np.allclose(got, expected, rtol=1e-4, atol=1e-4):
        return
    size = _group_size(opts)
    right = np.isclose(got, expected, rtol=1e-4, atol=1e-4)
    if np.allclose(got, first.reshape(-1), rtol=1e-4, atol=1e-4):
        hint = (f"each output is GROUP thread 0's partial alone: the combine read one partial, not all "
                f"{size}; loop over the {size} GROUP threads' slots (b.open_range), adding each to the "
                "accumulator")
    elif right.any():
        good, bad = np.flatnonzero(right)[:4].tolist(), np.flatnonzero(~right)[:4].tolist()
        hint = (f"outputs {good} are right and {bad} are not: the slots of different outputs are mixed up. "
                "Each (LOCAL thread, partial) has its own slots: first_slot = (the LOCAL thread's number) * "
                "size * slots, partial n at first_slot + n, GROUP thread g's copy at + g * slots, and the "
                "combine reads them at the same places")
    else:
        hint = (f"each output must be the {size} partials of its own slots combined (first_slot + n + "
                f"g * slots for g < {size}), from an accumulator that starts at 0 for a sum; check that the "
                "stores and the combine's loads use the same index")
    worst = int(np.argmax(np.abs(got - expected)))
    raise AssertionError(f"{what}: output {worst} is {got[worst]}, numpy says {expected[worst]}. {hint}.")


@exercise("12.group_combine", answer="combine_groups", title="GROUP: partials into shared memory, a barrier, "
          "one thread combines", hook="codegen.gpu.combine_groups")
def check_group_combine(combine_groups: Callable) -> str:
    need_function(combine_groups, "combine_groups", "(k, b, loops, dtype, partials)")
    with plug(gpu, "combine_groups", combine_groups) as plugged:
        for what, expr, shapes, opts, reference in GROUP_CASES:
            ast, arrays = _ast(expr, *shapes)
            uops = _lower_with(ast, opts, what)
            if not any(u.op is UOps.DEFINE_SHARED for u in uops):
                raise AssertionError(f"{what}: the kernel has no shared memory. Each thread's partial must "
                                     "go into an array all threads of the workgroup see: b.define_shared("
                                     "size, dtype), one slot per (LOCAL thread, GROUP thread, partial).")
            expected = reference(arrays[0].astype(np.float64))
            try:
                got = run_uops("PYTHON", uops, expected.size, arrays)
            except GPUEmulationError as error:
                raise AssertionError(f"{what}: the PYTHON device stopped the kernel: {error}") from None
            if not np.allclose(got, expected.reshape(-1), rtol=1e-4, atol=1e-4) and "max" in what:
                raise AssertionError(f"{what}: got {got[:3]}..., numpy says {expected[:3]}... A max starts "
                                     "from the lowest value of the dtype, not 0 (lowest_value(dtype)), and "
                                     "combines with BinaryOps.MAX (k.reduceop.op says which reduce it is).")
            first = reference(arrays[0][:, ::_group_size(opts)].astype(np.float64))
            _compare_combined(got, expected, opts, first, f"{what}, on the PYTHON device")
        plugged.require_called("gpu.combine_groups")
        device = _gpu()
        if device is not None:
            for what, expr, shapes, opts, reference in GROUP_CASES:
                ast, arrays = _ast(expr, *shapes)
                got = run_uops("GPU", _lower_with(ast, opts, what), shapes[0][0], arrays)
                first = reference(arrays[0][:, ::_group_size(opts)].astype(np.float64))
                _compare_combined(got, reference(arrays[0].astype(np.float64)), opts, first,
                                  f"{what}, on the GPU device (PYTHON in lockstep agreed)")
    where = "on PYTHON in lockstep (no race) and on the GPU device" if device else \
        "on PYTHON in lockstep (no race; the GPU device is not installed here)"
    return (f"sums and maxima with GROUP, with LOCAL threads, two partials per thread and in an output "
            f"loop, {where}.")


# ---- 12.barriers: where a workgroup must wait ---------------------------------------------------------
def _barrier_cases() -> list[tuple[str, Any, list[np.ndarray], list[Opt] | None, np.ndarray]]:
    cases = []
    ast, arrays = _ast(lambda x: x.sum(1), (8, 64))
    cases.append(("a row sum with GROUP", ast, arrays, [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GROUP, 1, 16)],
                  arrays[0].astype(np.float64).sum(1)))
    ast, arrays = _ast(lambda x: x.sum(1), (4, 48), seed=1)
    cases.append(("a row sum with GROUP in an output loop", ast, arrays, [Opt(OptOps.GROUP, 1, 16)],
                  arrays[0].astype(np.float64).sum(1)))
    ast, arrays = _ast(lambda a, b: a @ b, (32, 32), (32, 32), seed=2)
    cases.append(("the tiled 32x32 matmul (the GPU heuristics' opts)", ast, arrays, None,
                  arrays[0].astype(np.float64) @ arrays[1].astype(np.float64)))
    return cases


def _check_placed(placed: Any, uops: list[UOp], what: str) -> None:
    """The learner's list is the kernel's own UOps, in order, with only BARRIERs added."""
    if not isinstance(placed, list) or not all(isinstance(u, UOp) for u in placed):
        raise AssertionError(f"{what}: place_barriers must return a list of UOps, got "
                             f"{type(placed).__name__}")
    others = [u for u in placed if u.op is not UOps.BARRIER]
    if len(others) != len(uops) or any(a is not b for a, b in zip(others, uops, strict=True)):
        raise AssertionError(f"{what}: besides the BARRIERs, your list must hold the same UOps in the same "
                             "order (insert UOp(UOps.BARRIER, None, ()) between them; change nothing else).")


@exercise("12.barriers", answer="place_barriers", title="Place the BARRIERs of a GPU kernel: no race, none "
          "to spare", hook="lower('GPU', ...).uops without BARRIERs, run on PYTHON (lockstep) and GPU")
def check_barriers(place_barriers: Callable) -> str:
    need_function(place_barriers, "place_barriers", "(uops) -> uops with BARRIERs")
    device = _gpu()
    for what, ast, arrays, opts, expected in _barrier_cases():
        library = lower("GPU", ast, opts, compile=False).uops
        stripped = [u for u in library if u.op is not UOps.BARRIER]
        placed = place_barriers(list(stripped))
        _check_placed(placed, stripped, what)
        try:
            got, runner = _run("PYTHON", placed, expected.size, arrays)
        except GPUEmulationError as error:
            raise AssertionError(f"{what}: the PYTHON device stopped the kernel: {error}") from None
        _compare(got, expected, f"{what}, on the PYTHON device")
        # what costs is a barrier *executed*: one inside a loop runs on every iteration
        mine = runner.traffic.barriers
        theirs = _run("PYTHON", library, expected.size, arrays)[1].traffic.barriers
        if mine > theirs:
            count = sum(u.op is UOps.BARRIER for u in placed)
            raise AssertionError(
                f"{what}: your {count} BARRIER UOps are executed {mine} times in all (summed over the "
                f"workgroups, in the emulator), where {theirs} suffice. Every thread of the workgroup waits "
                "at each one, and one inside a loop waits on every iteration: put one only between a write "
                "to shared memory and a read of it by another thread (or a write after such a read), outside "
                "the loops that do not need it.")
        if device is not None:
            _compare(run_uops("GPU", placed, expected.size, arrays), expected, f"{what}, on the GPU device")
    return ("GROUP's combine, GROUP in an output loop and the tiled matmul run without a race on PYTHON in "
            "lockstep" + (" and right on the GPU device" if device else "") + ", with no barrier to spare.")


# ---- 12.local_sizes: the shape of a workgroup -------------------------------------------------------
LOCAL_CASES = [("x * y + 1 on (64, 256)", (64, 256)), ("x * y + 1 on (96, 40)", (96, 40)),
               ("x * y + 1 on (24, 8)", (24, 8))]


def _workgroup_hint(kernel: Kernel, what: str) -> None:
    """Why the learner's workgroup is not a good one: idle lanes, too big, or uncoalesced."""
    launch = kernel.launch
    if launch is None or any(kind is AxisKind.LOOP for kind in kernel.kinds):
        raise AssertionError(f"{what}: an output axis is still a loop ({kernel.loop_names}): each thread "
                             "would run it alone. Make every output axis GLOBAL "
                             "(Opt(OptOps.GLOBAL, axis, 0)).")
    threads = prod(launch.local)
    if threads % WARP:
        raise AssertionError(f"{what}: a workgroup of {launch.local} has {threads} threads, not a "
                             f"multiple of {WARP}: a GPU runs threads {WARP} at a time (a warp), so "
                             f"{WARP - threads % WARP} lanes of the last warp idle. LOCAL more threads.")
    if threads > 1024:
        raise AssertionError(f"{what}: {threads} threads per workgroup: CUDA GPUs allow at most 1024.")
    strides = kernel.sts[0].real_strides(ignore_valid=True)
    lid0 = kernel.loop_names.index("lid0")
    if strides[lid0] != 1 or kernel.full_shape[lid0] < 8:
        raise AssertionError(f"{what}: lid0 (the threads next to each other in a warp) runs along an axis of "
                             f"stride {strides[lid0]} and size {kernel.full_shape[lid0]} in the output. For "
                             "coalesced memory access, give lid0 at least 8 threads along the axis where the "
                             "output is contiguous (LOCAL it last: the axis LOCAL'd last is lid0).")


@exercise("12.local_sizes", answer="gpu_opts", title="Choose the GLOBAL and LOCAL opts of an elementwise "
          "kernel: full warps, coalesced", hook="codegen.heuristics.gpu_optimizations")
def check_local_sizes(gpu_opts: Callable) -> str:
    need_function(gpu_opts, "gpu_opts", "(kernel) -> list[Opt]")
    device = _gpu()
    with plug(heuristics, "gpu_optimizations", gpu_opts) as plugged:
        for what, shape in LOCAL_CASES:
            ast, arrays = _ast(lambda x, y: x * y + 1, shape, shape)
            kernel = Kernel(ast)
            kernel.gpu = device.limits if device is not None else TYPICAL_LIMITS
            opts = gpu_opts(kernel.copy())
            if not isinstance(opts, list) or not all(isinstance(o, Opt) for o in opts):
                raise AssertionError(f"{what}: gpu_opts must return a list of Opt(OptOps..., axis, amount), "
                                     f"got {opts!r}")
            try:
                _workgroup_hint(apply_opts(kernel.copy(), opts), what)
            except OptError as error:
                raise AssertionError(f"{what}: these opts do not apply: {error}") from None
            expected = arrays[0].astype(np.float64) * arrays[1] + 1
            if device is not None:  # the whole lowering, with your function as the GPU heuristics
                uops = lower("GPU", ast, compile=False).uops
                _compare(run_uops("GPU", uops, expected.size, arrays), expected, f"{what}, on the GPU device")
            else:  # no GPU device: the Kernel with your opts, linearized for a GPU
                uops = linearize(apply_opts(kernel.copy(), opts), 1)
            _compare(run_uops("PYTHON", uops, expected.size, arrays), expected, f"{what}, on PYTHON")
        if device is not None:
            plugged.require_called("heuristics.gpu_optimizations")
    ran = "run through lower('GPU', ...) on the GPU device and on PYTHON in lockstep" if device else \
        "linearized and run on PYTHON in lockstep (the GPU device is not installed here)"
    return f"full warps, lid0 coalesced along the contiguous axis, every output axis on the grid; {ran}."

