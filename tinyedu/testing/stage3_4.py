"""Stages 3 and 4 (notebooks 04 and 05): loops, loads, C code and the compile cache."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np


# ================================================================================================
# stages 3-4: the linearizer and the C backend (notebooks 04, 05) -- predict loops, loads, C code
# ================================================================================================
# Each exercise is about the one compute kernel of a Tensor expression: `build` returns the Tensor
# (or, for the compile count, a list of Tensors). Nothing is run unless the checker says so.
def _one_kernel(build: Callable[[], Any], exercise: str) -> Any:
    """The Kernel of the single compute kernel that `build()` schedules."""
    from tinyedu.codegen.kernel import Kernel
    from tinyedu.engine.schedule import create_schedule
    from tinyedu.ops import LoadOps

    items = [item for item in create_schedule([build().lazydata]) if not isinstance(item.ast.op, LoadOps)]
    if len(items) != 1:
        raise ValueError(f"{exercise}: the expression makes {len(items)} compute kernels; this exercise "
                         "needs an expression that is exactly one kernel")
    return Kernel(items[0].ast)


def _int_list(answer: Any) -> list[int] | None:
    if not isinstance(answer, (list, tuple)) or not all(isinstance(a, int) and not isinstance(a, bool)
                                                          for a in answer):
        return None
    return list(answer)


def check_loop_bounds(build: Callable[[], Any], predicted: Sequence[int]) -> str:
    """Exercise: the loop sizes (the RANGE ends) of the kernel for `build()`, outermost first."""
    kernel = _one_kernel(build, "check_loop_bounds")
    expected = list(kernel.full_shape)
    given = _int_list(predicted)
    if given is None:
        raise AssertionError("give one int per loop, outermost loop first, e.g. [4, 6]")
    if given == expected:
        loops = " ".join(f"{name}<{size}" for name, size in zip(kernel.loop_names, expected, strict=True))
        return loops + (f" (the reduce loops start at {kernel.loop_names[kernel.first_reduce]})"
                        if kernel.reduceop is not None else "")
    if sorted(given) == sorted(expected):
        raise AssertionError("the right sizes in the wrong order: the Kernel puts the output axes first and "
                             "the reduced axes last, so the reduce loops are the innermost.")
    if len(given) != len(expected):
        more = "more" if len(expected) > len(given) else "fewer"
        raise AssertionError(f"the kernel has {more} loops than {len(given)}. There is one loop per axis of "
                             "the shape the kernel iterates over (for a reduce: the shape *before* it is "
                             "reduced), except axes of size 1: a loop that runs once is no loop.")
    raise AssertionError("not quite: the loop sizes differ. For a reduce, the loops run over the reduce's "
                         "input shape (a matmul (n, k) @ (k, m) reduces a broadcast (n, m, k) product), "
                         "output axes first, then the reduced axes.")


def check_load_count(build: Callable[[], Any], predicted: int) -> str:
    """Exercise: how many LOAD UOps the linearizer emits for the kernel of `build()`."""
    from tinyedu.codegen.linearizer import linearize
    from tinyedu.codegen.uops import UOps

    if not isinstance(predicted, int) or isinstance(predicted, bool):
        raise AssertionError("predict the number of LOAD UOps as an int")
    kernel = _one_kernel(build, "check_load_count")
    expected = sum(u.op is UOps.LOAD for u in linearize(kernel))
    if predicted == expected:
        return f"{expected} LOAD(s)."
    if predicted > expected:
        raise AssertionError(f"fewer LOADs than {predicted}. A subtree the AST repeats is computed once, so "
                             "a buffer read through the same view is loaded once per iteration however many "
                             "times the expression uses it; and constants are CONST UOps, not loads.")
    raise AssertionError(f"more LOADs than {predicted}. A buffer read through two different views (say x and "
                         "x.flip(0)) is two loads: at one loop position they read different elements. A "
                         "padded read is still a load (a gated one).")


# -- exercise: the C expression of a UOp list ------------------------------------------------------
C_TEST_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 0.1, 3.0, 1e-3, 20.0, -20.0, 100.0, -100.0, 1e30, -1e30,
                 1e-40, float("inf"), float("-inf"), float("nan")]


def _c_expression_inputs(kernel: Any) -> dict[int, np.ndarray]:
    """Test inputs for each buffer: edge values and random ones, in a different order per buffer.

    There are at least as many as C_TEST_VALUES plus 64, rounded up to whole runs of the kernel.
    """
    from tinyedu.ops import MemBuffer

    size = kernel.full_shape[0]
    total = -(-(len(C_TEST_VALUES) + 64) // size) * size
    rng = np.random.default_rng(0)
    inputs = {}
    for buf in kernel.bufs[1:]:
        if isinstance(buf, MemBuffer) and buf.idx not in inputs:
            values = C_TEST_VALUES + list(rng.standard_normal(total - len(C_TEST_VALUES)) * 4)
            inputs[buf.idx] = rng.permutation(np.array(values, dtype=np.float32))
    return inputs


def check_c_expression(build: Callable[[], Any], answer: str) -> str:
    """Exercise: the C expression the kernel of `build()` stores, written by hand from its UOps.

    The kernel must be elementwise over one axis, reading float32 buffers element by element. Name
    the LOADs `val0, val1, ...` in the order of the listing. The answer is compiled (with the same
    compiler and flags as the kernels) into a loop `data0[gidx0] = <answer>;` and run on edge values
    (0, -0, inf, nan, ...) and random ones; every result must have the same bits as the kernel's.
    """
    import ctypes

    from tinyedu.codegen.linearizer import linearize
    from tinyedu.codegen.uops import UOps
    from tinyedu.dtype import dtypes
    from tinyedu.ops import MemBuffer
    from tinyedu.renderer.cstyle import HELPERS
    from tinyedu.runtime.device import Buffer, Device
    from tinyedu.runtime.ops_c import CompileError, Compiler
    from tinyedu.shape import ShapeTracker

    if not isinstance(answer, str) or not answer.strip():
        raise AssertionError("write the C expression as a string, e.g. \"(val0*2.0f)+val1\"")
    kernel = _one_kernel(build, "check_c_expression")
    contiguous = ShapeTracker.from_shape(kernel.full_shape)
    plain = all(b.dtype == dtypes.float32 and st == contiguous
                for b, st in zip(kernel.bufs, kernel.sts, strict=True) if isinstance(b, MemBuffer))
    if len(kernel.full_shape) != 1 or kernel.reduceop is not None or not plain:
        raise ValueError("check_c_expression: this exercise needs an elementwise float32 kernel over one "
                         "axis that reads every buffer element by element (a 1-D expression of 1-D tensors)")
    size = kernel.full_shape[0]
    loads = [u for u in linearize(kernel) if u.op is UOps.LOAD]
    inputs = _c_expression_inputs(kernel)
    total = len(next(iter(inputs.values()))) if inputs else size

    # the kernel's own result: its generated C, compiled and run as the C device runs it (in chunks)
    program, expected = Device["C"].get_runner(kernel.ast), np.zeros(total, np.float32)
    for start in range(0, total, size):
        out = Buffer("C", size, dtypes.float32)
        program([out, *(Buffer("C", size, dtypes.float32).copyin(inputs[i][start:start + size])
                        for i in sorted(inputs))])
        expected[start:start + size] = out.as_numpy()

    # the answer, in a loop that loads val0, val1, ... as the kernel does
    params = ", ".join(["float* restrict data0"] + [f"const float* restrict data{i}" for i in sorted(inputs)])
    reads = " ".join(f"float val{k} = data{u.src[0].arg}[gidx0];" for k, u in enumerate(loads))
    source = "\n".join(["#include <math.h>", "#include <stdbool.h>", *HELPERS.values(),
                        f"void exercise({params}) {{",
                        f"  for (int gidx0 = 0; gidx0 < {total}; gidx0++) {{ {reads}",
                        f"    data0[gidx0] = {answer};", "  }", "}", ""])
    try:
        library = Compiler().load(source)
    except CompileError as error:
        first = next((line for line in str(error).split("--- compiler output ---")[-1].splitlines()
                      if "error" in line), "")
        raise AssertionError(f"the compiler rejects this expression: {first.split('error:')[-1].strip()}\n"
                             f"Names: the loads are {', '.join(f'val{k}' for k in range(len(loads)))} in "
                             "listing order; float literals end in f (2.0f); functions: sqrtf, exp2f, log2f, "
                             "sinf, max_float32.") from None
    got = np.zeros(total, np.float32)
    arrays = [got] + [inputs[i] for i in sorted(inputs)]
    library.exercise.restype = None
    library.exercise(*(ctypes.c_void_p(a.ctypes.data) for a in arrays))
    same = (got.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got) & np.isnan(expected))
    if not same.all():
        i = int(np.argmin(same))
        at = ", ".join(f"val{k}={inputs[u.src[0].arg][i]!s}" for k, u in enumerate(loads))
        raise AssertionError(
            f"at {at} your expression gives {got[i]!s}, the kernel {expected[i]!s}. Read the listing from "
            "the STORE's value back to the loads: each ALU names its sources by number, in order. A literal "
            "without the f suffix is a double, which rounds differently; MAX must keep NaN (max_float32, "
            "not fmaxf); a comparison with its constant first (CMPLT [const, x]) is const < x.")
    return f"bit for bit the kernel's result on {total} inputs (edge values included)."


# -- exercise: how many compiles -------------------------------------------------------------------
def check_compile_count(build: Callable[[], Sequence[Any]], predicted: int) -> str:
    """Exercise: how many different C sources (compiles, on a cold cache) the Tensors of `build()` need.

    Each Tensor is realized on its own, as with `.realize()` one after the other. The compile
    cache is keyed by the source text, so two kernels share a compiled library exactly when their
    generated C is the same.
    """
    from tinyedu.codegen.kernel import Kernel
    from tinyedu.codegen.linearizer import linearize
    from tinyedu.engine.schedule import create_schedule
    from tinyedu.ops import LoadOps
    from tinyedu.renderer.cstyle import render_c

    if not isinstance(predicted, int) or isinstance(predicted, bool):
        raise AssertionError("predict the number of compiles as an int")
    sources = set()
    kernels = 0
    for tensor in build():
        for item in create_schedule([tensor.lazydata]):
            if not isinstance(item.ast.op, LoadOps):
                kernel = Kernel(item.ast)
                sources.add(render_c(kernel.name, linearize(kernel)))
                kernels += 1
    if predicted == len(sources):
        return f"{kernels} kernel(s), {len(sources)} different source(s), so {len(sources)} compile(s)."
    if predicted > len(sources):
        raise AssertionError(f"fewer compiles than {predicted}. The cache key is the C source (with the "
                             "compiler and flags): which buffers a kernel reads is not in the source, they "
                             "are its arguments. The same computation on other data reuses the library.")
    raise AssertionError(f"more compiles than {predicted}. A constant is written into the source (2.0f is "
                         "not 3.0f), and so is the shape (in the loop bounds and the kernel's name): change "
                         "either and the source, and its cache entry, is new.")
