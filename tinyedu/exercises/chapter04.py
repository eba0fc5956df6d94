"""Chapter 04 (notebook 04, stage 3: the linearizer and UOps): the exercises and their checkers.

Implement-this: `04.simplify` (the UOp builder's integer simplification, plugged in as
`UOpBuilder._simplify`) and `04.lower_reduce` (a REDUCE's accumulator and loops in a kernel
without opts, plugged in as `Linearizer.lower_plain_reduce`). Predictions: `04.loop_bounds`,
`04.load_count`.

The kernels here are built without opts (`Kernel(ast)`), linearized with the learner's piece, and
run as UOps on the PYTHON device and as C through the C renderer and compiler.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Sequence

import numpy as np

from tinyedu import Tensor
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import Linearizer, linearize
from tinyedu.core.dtype import dtypes
from tinyedu.core.helpers import prod
from tinyedu.core.ops import BinaryOps, LoadOps
from tinyedu.core.uops import UOp, UOpBuilder, UOps, uops_listing
from tinyedu.engine.lower import lower
from tinyedu.engine.realize import run_schedule
from tinyedu.engine.schedule import create_schedule
from tinyedu.exercises.checking import is_count, one_kernel
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.renderer.cstyle import render_c
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.ops_c import Compiler
from tinyedu.runtime.ops_python import PythonProgram


# -- predict a kernel's loops and loads (05.loop_bounds uses check_loop_bounds too) ----------------
def _int_list(answer: Any) -> list[int] | None:
    if not isinstance(answer, (list, tuple)) or not all(isinstance(a, int) and not isinstance(a, bool)
                                                          for a in answer):
        return None
    return list(answer)


def check_loop_bounds(build: Callable[[], Any], predicted: Sequence[int]) -> str:
    """Exercise: the loop sizes (the RANGE ends) of the kernel for `build()`, outermost first."""
    kernel = one_kernel(build, "check_loop_bounds")
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
    if not is_count(predicted):
        raise AssertionError("predict the number of LOAD UOps as an int")
    kernel = one_kernel(build, "check_load_count")
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



REFERENCE_SIMPLIFY = UOpBuilder._simplify


def _tensors() -> tuple[Any, Any, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    A, B = (rng.standard_normal((4, 6)).astype(np.float32) for _ in range(2))
    return Tensor(A), Tensor(B), A, B


def _predictions(answers: Any, questions: dict[str, str], checker: Callable, what: str) -> str:
    if not isinstance(answers, dict) or set(answers) != set(questions):
        raise AssertionError(f"expected a dict with one {what} per expression: {sorted(questions)}")
    a, b, _, _ = _tensors()
    for name, expression in questions.items():
        try:
            checker(lambda expression=expression: eval(expression, {"a": a, "b": b}), answers[name])  # noqa: S307
        except AssertionError as error:
            raise AssertionError(f"{name}, {expression}: {error}") from None
    return f"all {len(questions)} {what}s."


LOOP_QUESTIONS = {"row_sums_of_transpose": "a.T.sum(1)", "matmul": "a.T @ b",
                  "size_one_axis": "a.reshape(4, 1, 6).sum(2)"}
LOAD_QUESTIONS = {"a_three_times": "(a * a + a).relu()", "a_and_its_flip": "a + a.flip(0)",
                  "two_pads_of_a": ("a.pad(((1, 1), (0, 0))) * a.pad(((2, 0), (0, 0))) + b.pad(((1, 1), (0, "
                                    "0)))")}


@exercise("04.loop_bounds", answer="loop_bounds", title="Predict a kernel's loops")
def check_loop_predictions(answers: Any) -> str:
    return _predictions(answers, LOOP_QUESTIONS, check_loop_bounds, "loop list")


@exercise("04.load_count", answer="load_counts", title="Predict the LOADs left after dedup")
def check_load_predictions(answers: Any) -> str:
    return _predictions(answers, LOAD_QUESTIONS, check_load_count, "LOAD count")


# -- running UOps ------------------------------------------------------------------------------------------
def _kernel(t: Any) -> tuple[Any, list, np.ndarray]:
    """The Kernel (no opts) of the one compute kernel of `t`, its input buffers, and numpy's result."""
    items = create_schedule([t.lazydata])
    run_schedule([i for i in items if isinstance(i.ast.op, LoadOps)])  # the inputs, into memory
    (item,) = [i for i in items if not isinstance(i.ast.op, LoadOps)]

    out = _buffer(item.out)  # the oracle, NUMPY, interprets the AST, sharing nothing with the linearizer
    lower("NUMPY", item.ast).runner([out, *(x.realized for x in item.inputs)])
    return Kernel(item.ast), [x.realized for x in item.inputs], out.as_numpy().copy()


def _buffer(lazy: Any) -> Any:
    return Buffer("PYTHON", prod(lazy.shape), lazy.dtype)


def _run_python(uops: list[UOp], kernel: Any, inputs: list, like: np.ndarray) -> np.ndarray:
    out = Buffer("PYTHON", like.size, kernel.bufs[0].dtype)
    PythonProgram(uops)([out, *inputs])
    return out.as_numpy().copy()


def _run_c(uops: list[UOp], kernel: Any, inputs: list, like: np.ndarray) -> np.ndarray:
    library = Compiler().load(render_c(kernel.name, uops))
    function = getattr(library, kernel.name)
    function.restype = None
    out = np.zeros(like.size, like.dtype)
    function(ctypes.c_void_p(out.ctypes.data), *(ctypes.c_void_p(b.as_numpy().ctypes.data) for b in inputs))
    return out


def _same(got: np.ndarray, want: np.ndarray, exact: bool) -> bool:
    if exact:
        same_or_both_nan = (got == want) | (np.isnan(got) & np.isnan(want))
        return got.tobytes() == want.tobytes() or bool(np.all(same_or_both_nan))
    return bool(np.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True))


def _run_everywhere(programs: list[tuple[str, Callable]], what: str) -> int:
    """Linearize each program's kernel with the plugged piece; run on PYTHON and C; compare with NUMPY."""
    a, b, _, _ = _tensors()
    ran = 0
    for name, program in programs:
        kernel, inputs, want = _kernel(program(a, b))
        uops = linearize(kernel)
        python = _run_python(uops, kernel, inputs, want)
        c = _run_c(uops, kernel, inputs, want)
        if not _same(python, want, exact=False):
            raise AssertionError(f"`{name}` linearized with your {what} computes other values than numpy on "
                                 "the PYTHON device (which runs the UOps one by one).")
        if not _same(c, python, exact=True):
            raise AssertionError(f"`{name}` linearized with your {what}: the compiled C and the PYTHON "
                                 "device "
                                 "disagree. A value computed inside a loop may be used after it.")
        ran += 1
    return ran


# -- exercise: integer simplification ---------------------------------------------------------------------
def _simplify_cases() -> list[tuple[str, Callable[[UOpBuilder], tuple], str]]:
    """(what, build(builder) -> (op, src, dtype), hint if wrong). Every case on a fresh builder."""
    i32, f32, b = dtypes.int32, dtypes.float32, dtypes.bool

    def c(builder: UOpBuilder, value: Any, dtype: Any = i32) -> UOp:
        return builder.const(value, dtype)

    def g(builder: UOpBuilder) -> UOp:
        return builder.open_range("gidx0", 4)

    def x(builder: UOpBuilder) -> UOp:  # a float value that is not a constant
        return builder.emit(UOps.DEFINE_ACC, f32, (), 0.0, hoist=False)

    def flag(builder: UOpBuilder) -> UOp:
        return builder.alu(BinaryOps.CMPLT, g(builder), c(builder, 2))

    return [
        ("gidx0*1", lambda bb: (BinaryOps.MUL, (g(bb), c(bb, 1)), i32), "x*1 is x"),
        ("1*gidx0", lambda bb: (BinaryOps.MUL, (c(bb, 1), g(bb)), i32), "1*x is x too: the constant can be "
                                                                        "first"),
        ("gidx0+0", lambda bb: (BinaryOps.ADD, (g(bb), c(bb, 0)), i32), "x+0 is x"),
        ("0+gidx0", lambda bb: (BinaryOps.ADD, (c(bb, 0), g(bb)), i32), "0+x is x too: the constant can be "
                                                                        "first"),
        ("gidx0-0", lambda bb: (BinaryOps.SUB, (g(bb), c(bb, 0)), i32), "x-0 is x"),
        ("gidx0*0", lambda bb: (BinaryOps.MUL, (g(bb), c(bb, 0)), i32), "x*0 is the constant 0 (integers)"),
        ("gidx0/1", lambda bb: (BinaryOps.DIV, (g(bb), c(bb, 1)), i32), "x/1 is x"),
        ("gidx0+gidx0", lambda bb: (BinaryOps.ADD, (g(bb), g(bb)), i32),
         "nothing simplifies x+x here: return None, and the builder emits the ALU UOp"),
        ("2*3", lambda bb: (BinaryOps.MUL, (c(bb, 2), c(bb, 3)), i32),
         "two constants fold into one constant: make it with self.const(value, dtype)"),
        ("-7/2", lambda bb: (BinaryOps.DIV, (c(bb, -7), c(bb, 2)), i32),
         "fold with C's semantics: integer / rounds toward zero in C (-7/2 is -3), Python's // rounds down "
         "(-4). tinyedu.core.uops has INT_FOLD, the C semantics of each op"),
        ("-7%2", lambda bb: (BinaryOps.MOD, (c(bb, -7), c(bb, 2)), i32),
         "fold with C's semantics: C's % takes the sign of the dividend (-7%2 is -1), Python's % the "
         "divisor's (1). tinyedu.core.uops has INT_FOLD"),
        ("5<7", lambda bb: (BinaryOps.CMPLT, (c(bb, 5), c(bb, 7)), b), "a comparison of constants folds to a "
                                                                       "bool"),
        ("true+true (bools)", lambda bb: (BinaryOps.ADD, (c(bb, True, b), c(bb, True, b)), b),
         "for bools ADD is OR (and MUL is AND): true+true is true, a bool, not 2"),
        ("flag*true (bools)", lambda bb: (BinaryOps.MUL, (flag(bb), c(bb, True, b)), b), "x AND true is x"),
        ("flag*false (bools)", lambda bb: (BinaryOps.MUL, (flag(bb), c(bb, False, b)), b),
         "x AND false is false"),
        ("x+0.0 (floats)", lambda bb: (BinaryOps.ADD, (x(bb), c(bb, 0.0, f32)), f32),
         "floats are never simplified: x + 0.0 is not x when x is -0.0 (the sum is +0.0)"),
        ("x*0.0 (floats)", lambda bb: (BinaryOps.MUL, (x(bb), c(bb, 0.0, f32)), f32),
         "floats are never simplified: x * 0.0 is NaN, not 0.0, when x is infinite"),
        ("x*1.0 (floats)", lambda bb: (BinaryOps.MUL, (x(bb), c(bb, 1.0, f32)), f32),
         "floats are left alone altogether, so every device computes exactly what numpy computes"),
        ("0.1*3.0 (floats)", lambda bb: (BinaryOps.MUL, (c(bb, 0.1, f32), c(bb, 3.0, f32)), f32),
         "float constants are not folded: Python computes in double precision, the kernel in float32"),
    ]


def _describe_uop(u: Any) -> str:
    if not isinstance(u, UOp):
        return repr(u)
    return f"{u.op.name} {u.arg!r}" if u.op in (UOps.CONST, UOps.RANGE) else f"{u.op.name} {u.arg}"


def _simplify_programs() -> list[tuple[str, Callable]]:
    return [("(a * b + 1).sum(1)", lambda a, b: (a * b + 1).sum(1)),
            ("a.flip(0).pad(((1, 1), (0, 2))) * 2", lambda a, b: a.flip(0).pad(((1, 1), (0, 2))) * 2),
            ("a @ b.T", lambda a, b: a @ b.T),
            ("a.T.reshape(24)[::-3] + 1", lambda a, b: a.T.reshape(24)[::-3] + 1),
            ("(a > 0).where(a, b).max(0)", lambda a, b: (a > 0).where(a, b).max(0))]


@exercise("04.simplify", answer="simplify", title="The UOp builder's exact integer simplifications",
          hook="UOpBuilder._simplify")
def check_simplify(simplify: Callable[..., UOp | None]) -> str:
    """Case by case against the library's rule, then whole kernels linearized with it and run."""
    if not callable(simplify):
        raise AssertionError("simplify: expected a function simplify(self, op, src, dtype), got "
                             f"{type(simplify)}")
    for what, build, hint in _simplify_cases():
        mine, theirs = UOpBuilder(), UOpBuilder()
        got = simplify(mine, *build(mine))
        want = REFERENCE_SIMPLIFY(theirs, *build(theirs))
        same = (got is None and want is None) or (
            isinstance(got, UOp) and want is not None and got.op is want.op and got.dtype == want.dtype
            and (got.arg == want.arg or got.op is UOps.RANGE) and type(got.arg) is type(want.arg))
        if not same:
            shown = "None (nothing to simplify)" if got is None else _describe_uop(got)
            raise AssertionError(f"simplify({what}) returned {shown}. Hint: {hint}.")
    with plug(UOpBuilder, "_simplify", simplify) as plugged:
        ran = _run_everywhere(_simplify_programs(), "simplify")
        plugged.require_called("UOpBuilder._simplify")
        a, b, _, _ = _tensors()
        kernel = _kernel(_simplify_programs()[1][1](a, b))[0]
        mine = uops_listing(linearize(Kernel(kernel.ast)))
    if mine != uops_listing(_reference_uops(kernel.ast)):
        raise AssertionError("the kernels compute the right values, but the padded, flipped kernel's UOps "
                             "differ "
                             "from the library's: some index arithmetic is left unsimplified.")
    return (f"every case; {ran} kernels (a reduce, a flipped padded view, a matmul, a strided reshape, a "
            "max) "
            "linearized with your simplify run right on PYTHON and as C, with the same UOps as the "
            "library's.")


def _reference_uops(ast: Any) -> list[UOp]:
    """The library's UOps for an AST (called outside any plug)."""
    return Linearizer(Kernel(ast)).linearize()


# -- exercise: lowering a REDUCE ---------------------------------------------------------------------------
def _reduce_programs() -> list[tuple[str, Callable, str]]:
    return [
        ("(a * b).sum(1)", lambda a, b: (a * b).sum(1), "a SUM starts at 0 and adds each element "
                                                        "(BinaryOps.ADD)"),
        ("(-a.abs() - 1).max(1)", lambda a, b: (-a.abs() - 1).max(1),
         "a MAX combines the accumulator and each element with BinaryOps.MAX, starting from the lowest "
         "value of the dtype"),
        ("a.reshape(2, 3, 4).sum((1, 2))", lambda a, b: a.reshape(2, 3, 4).sum((1, 2)),
         "two reduce axes: open one RANGE per reduce axis (loop_names and full_shape from first_reduce on), "
         "in order, and close all of them"),
        ("(a * 3).int().sum(0)", lambda a, b: (a * 3).int().sum(0),
         "the accumulator has the dtype of the values it adds up (here int32): self._dtype(reduce.src[0])"),
        ("(a @ b.T).relu()", lambda a, b: (a @ b.T).relu(), "a matmul: the reduce, then ops above it"),
        ("a.shrink(((0, 4), (0, 0))).sum(1)", lambda a, b: a.shrink(((0, 4), (0, 0))).sum(1),
         "an empty reduce gives its identity"),
    ]


@exercise("04.lower_reduce", answer="lower_plain_reduce", title="Lower a REDUCE: accumulator, loops, ASSIGN",
          hook="Linearizer.lower_plain_reduce")
def check_lower_reduce(lower_plain_reduce: Callable[..., UOp]) -> str:
    """Plug the learner's method in: sums, a max of negatives, two reduce axes, ints, a matmul, an
    empty reduce, each linearized without opts (so the linearizer calls it) and run."""
    if not callable(lower_plain_reduce):
        raise AssertionError("lower_plain_reduce: expected a function lower_plain_reduce(self, reduce), got "
                             f"{type(lower_plain_reduce)}")
    a, b, _, _ = _tensors()
    ran = 0
    with plug(Linearizer, "lower_plain_reduce", lower_plain_reduce) as plugged:
        for name, program, hint in _reduce_programs():
            kernel, inputs, want = _kernel(program(a, b))
            try:
                uops = linearize(kernel)
            except AssertionError as error:
                if "loops still open" not in str(error):
                    raise
                raise AssertionError(f"`{name}`: {error}. Hint: close every loop you open "
                                     "(self.b.close_range(), once per reduce loop) before you "
                                     "return.") from None
            except KeyError as error:
                raise AssertionError(f"`{name}`: no loop named {error} is open when the reduce's input is "
                                     f"lowered. Hint: {hint}.") from None
            result = [u for u in uops if u.op is UOps.STORE][0].src[2]
            if result.op is UOps.ALU and any(s.op is UOps.DEFINE_ACC for s in result.src):
                raise AssertionError(f"`{name}`: the value stored after the loops is the ALU that combines "
                                     "the accumulator, not an ASSIGN. Hint: return self.b.assign(acc, new "
                                     "value): after the loops, the ASSIGN is the accumulator's final value.")
            python = _run_python(uops, kernel, inputs, want)
            if "max" in name and not _same(python, want, exact=False) and np.all(python == 0):
                hint = ("every element here is negative, and your maxima are all 0: a MAX accumulator must "
                        "start at the lowest value (core.uops.lowest_value(dtype)), not at 0")
            if not _same(python, want, exact=False):
                raise AssertionError(f"`{name}` lowered with your lower_plain_reduce gives other values than "
                                     f"numpy. Hint: {hint}.")
            if not _same(_run_c(uops, kernel, inputs, want), python, exact=True):
                raise AssertionError(f"`{name}`: the compiled C and the PYTHON device disagree on your UOps. "
                                     "Is the accumulator defined (define_acc) before the reduce loops open?")
            ran += 1
        plugged.require_called("Linearizer.lower_plain_reduce")
    return (f"{ran} kernels (sums, a max of negative numbers, two reduce axes, an int sum, a matmul with a "
            "relu, an empty reduce) lowered with your lower_plain_reduce run right on PYTHON and as "
            "compiled C.")
