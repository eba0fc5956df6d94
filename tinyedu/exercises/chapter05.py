"""Chapter 05 (notebook 05, stage 4: the C backend): the exercises and their checkers.

Implement-this: `05.c_literal` (a constant as C, plugged in as `cstyle.c_literal`) and
`05.max_float32` (the C of a NaN-aware max, plugged in as `cstyle.HELPERS["max_float32"]`).
Predictions: `05.c_expression` (compiled and compared bit for bit), `05.loop_bounds`,
`05.compile_count`.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any, Callable, Sequence

import numpy as np

from tinyedu import Tensor
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import MemBuffer
from tinyedu.core.uops import UOps
from tinyedu.engine.lower import lower
from tinyedu.exercises.chapter04 import check_loop_bounds
from tinyedu.exercises.checking import compute_items, is_count, one_kernel
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.renderer import cstyle
from tinyedu.renderer.cstyle import HELPERS, render_c
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.ops_c import Compiler
from tinyedu.runtime.toolchain import CompileError
from tinyedu.shape import ShapeTracker

# -- exercise: the C expression of a UOp list ------------------------------------------------------
C_TEST_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 0.1, 3.0, 1e-3, 20.0, -20.0, 100.0, -100.0, 1e30, -1e30,
                 1e-40, float("inf"), float("-inf"), float("nan")]


def _c_expression_inputs(kernel: Any) -> dict[int, np.ndarray]:
    """Test inputs for each buffer: edge values and random ones, in a different order per buffer.

    There are at least as many as C_TEST_VALUES plus 64, rounded up to whole runs of the kernel.
    """
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

    if not isinstance(answer, str) or not answer.strip():
        raise AssertionError("write the C expression as a string, e.g. \"(val0*2.0f)+val1\"")
    kernel = one_kernel(build, "check_c_expression")
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
    program, expected = lower("C", kernel.ast).runner, np.zeros(total, np.float32)
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
    if not is_count(predicted):
        raise AssertionError("predict the number of compiles as an int")
    sources = set()
    kernels = 0
    for tensor in build():
        for item in compute_items(tensor):
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



REFERENCE_LITERAL = cstyle.c_literal


def _vectors() -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    return tuple(Tensor(rng.standard_normal(16).astype(np.float32)) for _ in range(2))


# The sigmoid as 1 / (1 + 2^(-x / ln 2)): five primitives (x.sigmoid() itself is written for accuracy
# over the whole float32 range, about 40 ops: docs/numerics_and_semantics.md)
C_EXPRESSION_QUESTIONS = {"sigmoid": "(1 + (-x * (1 / math.log(2))).exp2()).reciprocal()",
                          "relu_of_affine": "(x * 0.1 + y).relu()"}


@exercise("05.c_expression", answer="c_expressions", title="Write the C a kernel stores, from its UOps")
def check_c_expressions(answers: Any) -> str:
    if not isinstance(answers, dict) or set(answers) != set(C_EXPRESSION_QUESTIONS):
        raise AssertionError("expected a dict with one C expression per kernel: "
                             f"{sorted(C_EXPRESSION_QUESTIONS)}")
    x, y = _vectors()
    for name, expression in C_EXPRESSION_QUESTIONS.items():
        try:
            build = lambda expression=expression: eval(expression, {"x": x, "y": y, "math": math})  # noqa: S307
            check_c_expression(build, answers[name])
        except AssertionError as error:
            raise AssertionError(f"{name}, {expression}: {error}") from None
    return ("both expressions, bit for bit the kernels' results on edge values (0, -0, ±inf, NaN) and random "
            "ones.")


LOOP_QUESTIONS = {"matmul": ((3, 5), (5, 2)), "padded_conv": ((1, 1, 4, 4), (2, 1, 3, 3))}


@exercise("05.loop_bounds", answer="conv_loops", title="Predict the loops of a matmul and a padded conv2d")
def check_conv_loops(answers: Any) -> str:
    if not isinstance(answers, dict) or set(answers) != set(LOOP_QUESTIONS):
        raise AssertionError("expected a dict with one list of loop sizes per kernel: "
                             f"{sorted(LOOP_QUESTIONS)}")
    rng = np.random.default_rng(0)
    for name, (left, right) in LOOP_QUESTIONS.items():
        p, q = (Tensor(rng.standard_normal(s).astype(np.float32)) for s in (left, right))
        build = (lambda p=p, q=q: p @ q) if name == "matmul" else (lambda p=p, q=q: p.conv2d(q, padding=1))
        try:
            check_loop_bounds(build, answers[name])
        except AssertionError as error:
            raise AssertionError(f"{name} {left} with {right}: {error}") from None
    return "the loops of the matmul and of the padded convolution."


@exercise("05.compile_count", answer="compiles", title="Predict how many times the C compiler runs")
def check_compiles(answer: Any) -> str:
    rng = np.random.default_rng(0)
    a, b = (Tensor(rng.standard_normal((4, 6)).astype(np.float32)) for _ in range(2))
    return check_compile_count(lambda: [a * 2, b * 2, a.T * 2, a * 3], answer)


# -- compiling small C programs ------------------------------------------------------------------------
def _compile(source: str, what: str) -> Any:
    try:
        return Compiler().load(source)
    except CompileError as error:
        lines = str(error).split("--- compiler output ---")[-1].splitlines()
        first = next((line.split("error:")[-1].strip() for line in lines if "error" in line), "")
        raise AssertionError(f"the C compiler rejects {what}: {first}") from None


# -- exercise: C literals ------------------------------------------------------------------------------------
_F32, _I32 = dtypes.float32, dtypes.int32
# Float values are float32 already, as the renderer gets them (CONST UOps hold float32-rounded values).
LITERAL_CASES: list[tuple[float | int | bool, DType]] = [
    *((float(np.float32(v)), _F32) for v in (2.5, 0.1, 3.0, -2.5, -0.0, 1e30, 1e-40, math.inf, -math.inf,
                                              math.nan)),
    (7, _I32), (-3, _I32), (-2**31, _I32), (2**31 - 1, _I32), (True, dtypes.bool), (False, dtypes.bool),
    (200, dtypes.uint8),
]


def _literal_harness(literals: list[str]) -> str:
    """C that records each literal's value and C type, and uses it after a minus sign."""
    lines = ["#include <math.h>", "#include <stdbool.h>", "#include <stdint.h>",
             "void literals(float* f, long long* i, int* kind, long long* after_minus) {"]
    for k, ((_, dtype), text) in enumerate(zip(LITERAL_CASES, literals, strict=True)):
        lines.append(f"  kind[{k}] = _Generic(({text}), float: 1, double: 2, int: 3, _Bool: 4, long: 5, "
                     "long long: 5, unsigned int: 6, default: 0);")
        if dtype.is_float:
            lines.append(f"  f[{k}] = {text}; after_minus[{k}] = (long long)(0.0f-{text} != 0.0f);")
        else:
            lines.append(f"  i[{k}] = (long long)({text}); after_minus[{k}] = 7LL-{text};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _literal_hint(value: Any, dtype: DType, kind: int, f: float, i: int, after_minus: int) -> str | None:
    """A hint when `text` is not a right C literal for (value, dtype), else None."""
    if dtype.is_float:
        if kind == 2:
            return ("is a double: without the f suffix, x * 0.1 is computed in double precision and rounds "
                    "differently from numpy's float32. Write 0.1f.")
        want = np.float32(value)
        if np.isnan(want):
            return None if np.isnan(f) else "is not NaN: math.h has NAN."
        if np.float32(f).tobytes() != want.tobytes():
            if want == 0 and np.float32(f) == 0:
                return "loses the sign of -0.0 (1/-0.0 is -inf, 1/0.0 is +inf): keep the minus sign."
            return (f"is {np.float32(f)!r} in C, not {want!r}: print enough digits for float32 to read it "
                    "back exactly.")
        return None
    if dtype == dtypes.bool:
        return None if i == int(value) else ("is not the right truth value: C (stdbool.h) spells them true "
                                             "and false.")
    if kind == 5:
        return ("does not fit in an int: C reads -2147483648 as minus (2147483648), which is a long. Write "
                "(-2147483647-1).")
    if i != int(value):
        return f"is {i} in C, not {value}."
    if after_minus != 7 - int(value):
        return ("after a minus sign it changes meaning: x-(-3) is fine, x--3 is not C. Put negative numbers "
                "in ().")
    return None


@exercise("05.c_literal", answer="c_literal", title="Constants as C literals: suffixes, signs, infinities",
          hook="cstyle.c_literal")
def check_c_literal(c_literal: Callable[[Any, DType], str]) -> str:
    """Compile every literal (value, C type, use after a minus sign), then run kernels rendered with it."""
    if not callable(c_literal):
        raise AssertionError("c_literal: expected a function c_literal(value, dtype) -> str, got "
                             f"{type(c_literal)}")
    texts = []
    for value, dtype in LITERAL_CASES:
        text = c_literal(value, dtype)
        if not isinstance(text, str) or not text.strip():
            raise AssertionError(f"c_literal({value!r}, {dtype.name}) returned {text!r}; it must return C "
                                 "source "
                                 "text such as '2.5f'.")
        texts.append(text)
    for k, text in enumerate(texts):  # one literal at a time, so a compile error names its value
        value, dtype = LITERAL_CASES[k]
        alone = [t if j == k else REFERENCE_LITERAL(*LITERAL_CASES[j]) for j, t in enumerate(texts)]
        try:
            _compile(_literal_harness(alone), f"c_literal({value!r}, {dtype.name}) = {text!r}")
        except AssertionError as error:
            extra = (" C has no literal for infinity or NaN: math.h defines INFINITY and NAN."
                     if isinstance(value, float) and not math.isfinite(value) else
                     " C (stdbool.h) spells them true and false." if dtype == dtypes.bool else
                     " A negative literal right after a minus sign makes --: put it in parentheses."
                     if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0 else "")
            raise AssertionError(f"{error}.{extra}") from None
    library = _compile(_literal_harness(texts), "the literals")
    n = len(LITERAL_CASES)
    f, kind = np.zeros(n, np.float32), np.zeros(n, np.int32)
    i, minus = np.zeros(n, np.int64), np.zeros(n, np.int64)
    library.literals.restype = None
    library.literals(*(ctypes.c_void_p(a.ctypes.data) for a in (f, i, kind, minus)))
    for k, ((value, dtype), text) in enumerate(zip(LITERAL_CASES, texts, strict=True)):
        hint = _literal_hint(value, dtype, int(kind[k]), float(f[k]), int(i[k]), int(minus[k]))
        if hint:
            raise AssertionError(f"c_literal({value!r}, {dtype.name}) = {text!r} {hint}")
    with plug(cstyle, "c_literal", c_literal) as plugged:
        ran = _kernels_against_numpy(_literal_programs(), "c_literal")
        plugged.require_called("cstyle.c_literal")
    return (f"all {n} literals compile to the right value and type; {ran} kernels rendered with your "
            "c_literal (constants, -INFINITY in a max, INT_MIN, bools) match the NUMPY device bit for bit.")


def _literal_programs() -> list[tuple[str, Callable]]:
    def ints(t: Any) -> Any:
        return Tensor([1, -2, 3, 0, 2**31 - 1], dtype=dtypes.int32, device=t.device)

    return [("x * 0.1 + 2.5", lambda t: t * 0.1 + 2.5),
            ("(x * -3.0).max(0)", lambda t: (t * -3.0).max(0)),
            ("(x.pad(((1, 1),)) + 1) * -0.0", lambda t: (t.pad(((1, 1),)) + 1) * -0.0),
            ("n * -2147483648 + 2147483647 (int32)", lambda t: ints(t) * -(2**31) + (2**31 - 1)),
            ("n - -3 (int32)", lambda t: ints(t) - -3),
            ("(x > 0.5).where(x < 2.0, False)", lambda t: (t > 0.5).where(t < 2.0, False)),
            ("x.pad(((2, 0),), value=-inf)", lambda t: t.pad(((2, 0),), value=-math.inf))]


def _kernels_against_numpy(programs: list[tuple[str, Callable]], what: str) -> int:
    """Each program on the C device (compiled afresh with the plugged piece) and on NUMPY, bit for bit."""
    values = np.array([0.0, -0.0, 1.5, -2.5, 3.0, 1e-3, -7.0, float("inf"), -float("inf"), float("nan"),
                       0.7, 100.0], np.float32)
    for name, program in programs:
        got = program(Tensor(values, device="C")).numpy()
        want = program(Tensor(values, device="NUMPY")).numpy()
        same = got.tobytes() == want.tobytes() or (got.dtype.kind == "f" and np.all(
            (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))))
        if got.shape != want.shape or not same:
            raise AssertionError(f"every check above passed, yet `{name}` compiled with your {what} differs "
                                 "from "
                                 "the NUMPY device. Look at the generated C with DEBUG=4.")
    return len(programs)


# -- exercise: a NaN-aware max, in C -----------------------------------------------------------------------
_MAX_PAIRS = [(1.0, 2.0), (2.0, 1.0), (math.nan, 1.0), (1.0, math.nan), (math.nan, -math.inf),
              (-math.inf, math.nan), (-1.0, -1.0), (0.0, -0.0), (-0.0, 0.0), (math.inf, 3.0),
              (-math.inf, -3.0), (5.5, 5.5)]


@exercise("05.max_float32", answer="max_float32", title="max_float32: C that gives np.maximum's NaN and -0.0",
          hook='cstyle.HELPERS["max_float32"]')
def check_max_float32(max_float32: str) -> str:
    """Compile the helper on edge pairs against np.maximum, then kernels that use it, on the C device."""
    if not isinstance(max_float32, str) or "max_float32" not in max_float32:
        raise AssertionError("write the C source of a function, as a string: "
                             "static inline float max_float32(float a, float b) { ... }")
    source = "\n".join(["#include <math.h>", "#include <stdbool.h>", max_float32,
                        "void run(float* out, const float* a, const float* b, int n) {",
                        "  for (int i = 0; i < n; i++) out[i] = max_float32(a[i], b[i]);", "}", ""])
    library = _compile(source, "your max_float32")
    a = np.array([p[0] for p in _MAX_PAIRS], np.float32)
    b = np.array([p[1] for p in _MAX_PAIRS], np.float32)
    out = np.zeros_like(a)
    library.run.restype = None
    library.run(*(ctypes.c_void_p(v.ctypes.data) for v in (out, a, b)), ctypes.c_int(len(a)))
    want = np.maximum(a, b)
    for k in range(len(a)):
        if out[k].tobytes() == want[k].tobytes() or (np.isnan(out[k]) and np.isnan(want[k])):
            continue
        if np.isnan(want[k]):
            hint = ("np.maximum returns NaN when either input is NaN, and a comparison with NaN is always "
                    "false "
                    "(fmaxf ignores NaN). a != a is true only when a is NaN.")
        elif a[k] == b[k]:
            hint = "when a and b are equal (0.0 == -0.0), np.maximum returns b."
        else:
            hint = "the larger of the two."
        raise AssertionError(f"max_float32({a[k]!r}, {b[k]!r}) gives {out[k]!r}, np.maximum gives "
                             f"{want[k]!r}. "
                             f"Hint: {hint}")
    with plug(cstyle.HELPERS, "max_float32", max_float32):
        ran = _kernels_against_numpy([
            ("x.maximum(x.flip(0))", lambda t: t.maximum(t.flip(0))),
            ("x.reshape(3, 4).max(1)", lambda t: t.reshape(3, 4).max(1)),
            ("x.maximum(-0.0)", lambda t: t.maximum(-0.0))], "max_float32")
    return (f"np.maximum's result on {len(_MAX_PAIRS)} edge pairs (NaN on either side, 0.0 and -0.0, "
            f"infinities); {ran} kernels compiled with your helper (maximum, a max reduce) match NUMPY bit "
            "for bit.")
