"""Chapter 07 (notebook 07, stage 6: the NEON and LLVM backends): the exercises and their checkers.

Implement-this: `07.neon_vector_op` (the NEON intrinsic of a vector ALU UOp, plugged in as
`neon.vector_op`) and `07.llvm_int_divide` (integer division in LLVM IR that never traps, plugged
in as `llvmir.int_divide`). Prediction: `07.phi` (the values an LLVM phi node takes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from typing import Any, Callable

import numpy as np

from tinyedu import Device
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import Opt, OptOps, apply_opts
from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, BufferOps, LazyOp, MemBuffer, ReduceOps, TernaryOps, UnaryOps
from tinyedu.core.uops import VectorDType
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.renderer import llvmir, neon
from tinyedu.runtime.device import Buffer, DeviceUnavailable
from tinyedu.runtime.ops_numpy import NumpyProgram
from tinyedu.runtime.toolchain import CompileError
from tinyedu.shape import ShapeTracker

REFERENCE_VECTOR_OP = neon.vector_op
REFERENCE_INT_DIVIDE = llvmir.int_divide


def _require(device: str) -> None:
    try:
        Device[device]
    except DeviceUnavailable as missing:
        raise AssertionError(f"this check runs kernels on {device}, which this machine cannot run: "
                             f"{missing}") from None


# -- kernels as ASTs: one op on buffers, with the opts that make it a vector op ---------------------------
def _load(index: int, dtype, shape) -> LazyOp:
    return LazyOp(BufferOps.LOAD, (), MemBuffer(index, dtype, ShapeTracker.from_shape(shape)))


def _store(value: LazyOp, dtype, shape) -> LazyOp:
    return LazyOp(BufferOps.STORE, (value,), MemBuffer(0, dtype, ShapeTracker.from_shape(shape)))


def _run(device: str, ast: LazyOp, opts: list[Opt], inputs: list[np.ndarray], out_dtype) -> np.ndarray:
    """Lower `ast` with exactly these opts for `device` (its vector width), run it, return the output."""
    out = Buffer(device, ast.arg.st.size, out_dtype)
    buffers = [out, *(Buffer(device, x.size, dtypes.from_numpy(x.dtype)).copyin(x) for x in inputs)]
    if device == "NUMPY":
        NumpyProgram(ast)(buffers)
    else:
        backend = Device[device]
        kernel = apply_opts(Kernel(ast), opts)
        source = backend.renderer(kernel.name, linearize(kernel, backend.vector_width))
        backend.runtime(kernel.name, backend.compiler.build(source))(buffers)
    return out.as_numpy().copy()


EDGES = np.array([1.5, -2.0, 0.0, -0.0, 3.25, np.inf, -np.inf, np.nan], np.float32)


def _vector_cases() -> list[tuple[str, LazyOp, list[Opt], list[np.ndarray], Any]]:
    """(what, ast, opts, inputs, output dtype): each puts one kind of vector op in a NEON kernel."""
    f32, i32 = dtypes.float32, dtypes.int32
    rng = np.random.default_rng(7)
    x = np.concatenate([EDGES, rng.standard_normal(24).astype(np.float32)]).reshape(4, 8)
    y = np.concatenate([EDGES[::-1], rng.standard_normal(24).astype(np.float32)]).reshape(4, 8)
    n = rng.integers(-50, 50, (4, 8)).astype(np.int32)
    m = rng.integers(-50, 50, (4, 8)).astype(np.int32)
    four, two = [Opt(OptOps.UPCAST, 1, 4)], [Opt(OptOps.UPCAST, 1, 2)]
    a, b = _load(1, f32, (4, 8)), _load(2, f32, (4, 8))
    cases = []
    for op in (BinaryOps.ADD, BinaryOps.SUB, BinaryOps.MUL, BinaryOps.DIV):
        cases.append((f"{op.name} of float32x4", _store(LazyOp(op, (a, b)), f32, (4, 8)), four, [x, y], f32))
    cases.append(("NEG of float32x4", _store(LazyOp(UnaryOps.NEG, (a,)), f32, (4, 8)), four, [x], f32))
    cases.append(("ADD of float32x2 (a 64-bit register)", _store(LazyOp(BinaryOps.ADD, (a, b)), f32, (4, 8)),
                  two, [x, y], f32))
    ni, mi = _load(1, i32, (4, 8)), _load(2, i32, (4, 8))
    cases.append(("ADD of int32x4", _store(LazyOp(BinaryOps.ADD, (ni, mi)), i32, (4, 8)), four, [n, m], i32))
    cases.append(("MUL of int32x4", _store(LazyOp(BinaryOps.MUL, (ni, mi)), i32, (4, 8)), four, [n, m], i32))
    for op in (BinaryOps.AND, BinaryOps.OR, BinaryOps.XOR):
        bitwise = _store(LazyOp(op, (ni, mi)), i32, (4, 8))
        cases.append((f"{op.name} of int32x4 (bitwise)", bitwise, four, [n, m], i32))
    by_row = ShapeTracker.from_shape((4, 1)).expand((4, 8))  # one flag per row: the same in every lane
    row_flag = LazyOp(BufferOps.LOAD, (), MemBuffer(1, dtypes.bool, by_row))
    pick = LazyOp(TernaryOps.WHERE, (row_flag, _load(2, f32, (4, 8)), _load(3, f32, (4, 8))))
    flags = np.array([[True], [False], [True], [False]])
    cases.append(("WHERE with one condition per row (a broadcast mask)", _store(pick, f32, (4, 8)), four,
                  [flags, x, y], f32))
    less = LazyOp(TernaryOps.WHERE, (LazyOp(BinaryOps.CMPLT, (a, b)), a, b))
    cases.append(("CMPLT feeding a WHERE (min of float32x4)", _store(less, f32, (4, 8)), four, [x, y], f32))
    equal = LazyOp(TernaryOps.WHERE, (LazyOp(BinaryOps.CMPEQ, (a, b)), a, LazyOp(UnaryOps.NEG, (b,))))
    some_equal = np.where(np.arange(32).reshape(4, 8) % 3 == 0, x, y)
    cases.append(("CMPEQ feeding a WHERE", _store(equal, f32, (4, 8)), four, [x, some_equal], f32))
    # a matmul (4, 8) @ (8, 8): with UPCAST on the output columns its SUM of products is a MULACC
    p = LazyOp(BufferOps.LOAD, (), MemBuffer(1, f32, ShapeTracker.from_shape((4, 1, 8)).expand((4, 8, 8))))
    q = LazyOp(BufferOps.LOAD, (), MemBuffer(2, f32, ShapeTracker.from_shape((8, 8)).permute((1, 0))
                                             .reshape((1, 8, 8)).expand((4, 8, 8))))
    matmul = LazyOp(BufferOps.STORE, (LazyOp(ReduceOps.SUM, (LazyOp(BinaryOps.MUL, (p, q)),), (2,)),),
                    MemBuffer(0, f32, ShapeTracker.from_shape((4, 8, 1))))
    w = rng.standard_normal((8, 8)).astype(np.float32)
    cases.append(("MULACC in a matmul (a*b + acc)", matmul, [Opt(OptOps.UPCAST, 1, 4)],
                  [rng.standard_normal((4, 8)).astype(np.float32), w], f32))
    return cases


NEON_HINTS = {
    "float32x2": "float32x2_t is a 64-bit register (2 lanes): its intrinsics have no q, e.g. vadd_f32; the q "
                 "(vaddq_f32) means a 128-bit register of 4 lanes.",
    "bitwise": "AND, OR and XOR are named after their instructions and, orr, eor: vandq_s32, vorrq_s32, "
               "veorq_s32 (they exist for integer lanes only).",
    "int32": "int32 lanes take the _s32 intrinsics (vaddq_s32, vmulq_s32); _f32 ones take float32x4_t.",
    "MULACC": "MULACC(a, b, c) is a*b + c, and vfmaq_f32(x, y, z) computes x + y*z: the accumulator c goes "
              "first.",
    "CMPLT": "CMPLT(a, b) is a < b: vcltq_f32(a, b), which gives a uint32x4_t mask (all ones where true).",
    "CMPEQ": "CMPEQ(a, b) is vceqq_f32(a, b).",
    "WHERE": "WHERE(mask, a, b) is the bit select vbslq_f32(mask, a, b): the mask comes first.",
}


def _neon_hint(what: str) -> str:
    for key, hint in NEON_HINTS.items():
        if key in what:
            return hint
    return ("the intrinsic is v<op>q_<lanes>: vaddq_f32, vsubq_f32, vmulq_f32, vdivq_f32, vnegq_f32 for "
            "float32x4_t.")


@exercise("07.neon_vector_op", answer="vector_op", title="The NEON intrinsic of a vector ALU UOp",
          hook="neon.vector_op")
def check_neon_vector_op(vector_op: Callable[[Any, Any, list[str]], str]) -> str:
    """Render kernels whose vector ops go through the learner's vector_op, compile them for aarch64,
    run them on NEON and compare with NUMPY bit for bit (sums of products within rounding)."""
    if not callable(vector_op):
        raise AssertionError("vector_op: expected a function vector_op(op, dtype, args) -> str")

    sample = vector_op(BinaryOps.ADD, VectorDType(dtypes.float32, 4), ["a", "b"])  # a stub raises here
    if not isinstance(sample, str) or "(" not in sample:
        raise AssertionError(f"vector_op(ADD, float32x4, ['a', 'b']) returned {sample!r}: it must return "
                             "the C of an intrinsic call, such as 'vsubq_f32(a, b)' for SUB")
    _require("NEON")
    cases = _vector_cases()
    with plug(neon, "vector_op", vector_op) as plugged:
        for what, ast, opts, inputs, out_dtype in cases:
            try:
                got = _run("NEON", ast, opts, inputs, out_dtype)
            except CompileError as error:
                message = str(error).split("--- compiler output ---")[-1]
                first = next((line.split("error:")[-1].strip() for line in message.splitlines()
                              if "error" in line), message.strip()[:200])
                raise AssertionError(f"{what}: the aarch64 compiler rejects the source: {first}. "
                                     f"{_neon_hint(what)}") from None
            want = _run("NUMPY", ast, [], inputs, out_dtype)
            if "MULACC" in what:
                same = np.allclose(got, want, rtol=1e-5, atol=1e-5)
            else:
                same = np.array_equal(got, want, equal_nan=True) and \
                    np.array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)])) \
                    if got.dtype.kind == "f" else np.array_equal(got, want)
            if not same:
                raise AssertionError(f"{what}: the NEON kernel gives {got.reshape(-1)[:8]}, NUMPY "
                                     f"{want.reshape(-1)[:8]} (first 8). {_neon_hint(what)}")
        plugged.require_called("neon.vector_op")
    return (f"{len(cases)} kernels rendered with your vector_op (float32x4, float32x2, int32x4; comparisons, "
            "bitwise ops, selects, a matmul's fused multiply-add) compiled for aarch64 and match NUMPY on "
            "NEON.")


# -- exercise: integer division in LLVM IR that never traps -------------------------------------------------
INT_MIN = -(2**31)
DIVIDENDS = [7, -7, 7, -7, INT_MIN, INT_MIN, INT_MIN, 0, 5, 2**31 - 1, 9, -9]
DIVISORS = [2, 2, -2, 0, -1, 1, 2, 0, -1, -1, 4, 4]
# Every signed integer width the renderer divides: the recipe must work for any type `t` (i8 ... i64),
# with that type's own minimum (INT8_MIN / -1 overflows exactly like INT_MIN / -1).
WIDTHS = (dtypes.int32, dtypes.int64, dtypes.int8, dtypes.int16)


def _operands(lane) -> tuple[list[int], list[int]]:
    """The dividends and divisors above, with INT_MIN and INT_MAX those of `lane`."""
    info = np.iinfo(lane.np)
    swap = {INT_MIN: int(info.min), 2**31 - 1: int(info.max)}
    return [swap.get(a, a) for a in DIVIDENDS], list(DIVISORS)

RUN_IR = textwrap.dedent("""
    import json, sys
    import numpy as np
    from tinyedu import Device
    from tinyedu.core.dtype import dtypes
    from tinyedu.runtime.device import Buffer
    from tinyedu.runtime.ops_llvm import LLVMCompileError
    job = json.load(sys.stdin)
    backend = Device["LLVM"]
    try:
        program = backend.runtime(job["name"], backend.compiler.build(job["ir"]))
    except LLVMCompileError as error:
        print(str(error).split("--- LLVM says ---")[-1].strip().splitlines()[0])
        sys.exit(3)
    lane = dtypes.from_any(job["dtype"])
    a, b = (np.array(job[k], lane.np) for k in ("a", "b"))
    out = Buffer("LLVM", len(a), lane)
    inputs = [Buffer("LLVM", len(v), lane).copyin(v) for v in (a, b)]
    program([out, *inputs])
    print(json.dumps(out.as_numpy().tolist()))
""")


def _division_ir(op: BinaryOps, lane=dtypes.int32) -> tuple[str, str]:
    """The LLVM IR of a kernel computing a op b on 12 pairs of `lane` (the plugged int_divide renders
    the op)."""
    kernel = Kernel(_division_ast(op, lane))
    return kernel.name, llvmir.render_llvm(kernel.name, linearize(kernel))


def _run_ir_elsewhere(name: str, ir: str, lane=dtypes.int32) -> subprocess.CompletedProcess:
    """Run the kernel in another Python process: a division that traps kills that process, not this one."""
    env = dict(os.environ)
    a, b = _operands(lane)
    job = json.dumps({"name": name, "ir": ir, "a": a, "b": b, "dtype": lane.name})
    return subprocess.run([sys.executable, "-c", RUN_IR], input=job, capture_output=True, text=True,
                          timeout=120, env=env)


@exercise("07.llvm_int_divide", answer="int_divide", title="Integer division in LLVM IR that never traps",
          hook="llvmir.int_divide")
def check_llvm_int_divide(int_divide: Callable[..., list[str]]) -> str:
    """Render DIV and MOD kernels of every signed width with the learner's recipe, run each in a separate
    process (a hardware trap kills that process only), and compare with NUMPY on zero, -1 and INT_MIN
    divisors."""
    if not callable(int_divide):
        raise AssertionError("int_divide: expected a function int_divide(name, op, lane, t, a, b, "
                             "by_positive_constant=False) -> list of instruction strings")
    sample = int_divide("%alu0", BinaryOps.DIV, dtypes.int32, "i32", "%val0", "%val1")  # a stub raises here
    if not isinstance(sample, list) or not all(isinstance(line, str) for line in sample) or not sample:
        raise AssertionError(f"int_divide returned {sample!r}: it must return a list of instructions "
                             "(strings) such as '%alu0.zero = icmp eq i32 %val1, 0', the last one "
                             "defining %alu0")
    _require("LLVM")
    for lane in WIDTHS:
        for op in (BinaryOps.DIV, BinaryOps.MOD):
            _check_division(int_divide, op, lane)
    return ("division and remainder with your recipe for int32, int64, int8 and int16 (the type `t` it is "
            "given), on zero, -1 and INT_MIN divisors: no trap, and every result equal to NUMPY's.")


def _check_division(int_divide: Callable[..., list[str]], op: BinaryOps, lane: Any) -> None:
    """Render one division kernel of `lane` with the learner's recipe, run it in another process and
    compare with NUMPY, explaining the first difference."""
    with plug(llvmir, "int_divide", int_divide) as plugged:
        name, ir = _division_ir(op, lane)
        plugged.require_called("llvmir.int_divide")
    result = _run_ir_elsewhere(name, ir, lane)
    what = f"{lane.name} a / b" if op is BinaryOps.DIV else f"{lane.name} a % b"
    if result.returncode == -signal.SIGFPE:
        raise AssertionError(f"{what}: the kernel died with SIGFPE, the CPU's arithmetic trap: "
                             "x86's idiv traps on a division by zero and on INT_MIN / -1 (the quotient "
                             "-INT_MIN does not fit), and srem traps on INT_MIN % -1 too. A "
                             "select after the division is too late: divide by a safe divisor (1 where "
                             "b is 0 or -1), then select the answer.")
    if result.returncode == 3:
        raise AssertionError(f"{what}: LLVM rejects the IR: {result.stdout.strip()}. Each line is "
                             "`%name = instruction type operands`, with the type `t` you are given (i32, "
                             "i64, i8, ...); name your helper values after `name` (like name + '.zero') and "
                             "end with the line that defines `name` itself.")
    if result.returncode != 0:
        raise AssertionError(f"{what}: the kernel's process failed ({result.returncode}): "
                             f"{result.stderr.strip()[-300:]}")
    a, b = (np.array(v, lane.np) for v in _operands(lane))
    got = np.array(json.loads(result.stdout), lane.np)
    want = _run("NUMPY", _division_ast(op, lane), [], [a, b], lane)
    for k in range(len(a)):
        if got[k] == want[k]:
            continue
        if b[k] == 0:
            hint = f"x {'/' if op is BinaryOps.DIV else '%'} 0 is 0 in tinyedu (and on the NUMPY device)."
        elif b[k] == -1 and op is BinaryOps.DIV:
            hint = "x / -1 is -x, computed as 0 - x, which wraps INT_MIN to INT_MIN as numpy does."
        elif b[k] == -1:
            hint = "x % -1 is 0."
        else:
            hint = ("a plain signed division: sdiv truncates toward zero and srem takes the sign of a, "
                    "like C's / and %.")
        raise AssertionError(f"{what} with a = {a[k]}, b = {b[k]} gives {got[k]}, NUMPY gives {want[k]}. "
                             f"{hint}")


def _division_ast(op: BinaryOps, lane=dtypes.int32) -> LazyOp:
    n = len(DIVIDENDS)
    a, b = _load(1, lane, (n,)), _load(2, lane, (n,))
    return _store(LazyOp(op, (a, b)), lane, (n,))


# -- prediction: the values of a phi node --------------------------------------------------------------------
PHI_ROWS = np.array([[0.5, 0.25, 2.0, -1.0], [1.0, 2.0, 3.0, 4.0], [-3.0, 0.0, 0.5, 8.0]], np.float32)


def phi_ir() -> str:
    """The LLVM IR of x.sum(1) for x of shape (3, 4), as the notebook shows it."""
    ast = LazyOp(BufferOps.STORE, (LazyOp(ReduceOps.SUM, (_load(1, dtypes.float32, (3, 4)),), (1,)),),
                 MemBuffer(0, dtypes.float32, ShapeTracker.from_shape((3, 1))))
    kernel = Kernel(ast)
    return llvmir.render_llvm(kernel.name, linearize(kernel))


@exercise("07.phi", answer="phi_answer", title="Read an LLVM phi node: the values of a running sum")
def check_phi(answer: Any) -> str:
    if not isinstance(answer, dict) or set(answer) != {"values", "comes_back_from"}:
        raise AssertionError("expected a dict {'values': [...], 'comes_back_from': 'block name'}")
    ir = phi_ir()
    phi = next(line for line in ir.splitlines() if line.strip().startswith("%acc0.ridx0 = phi"))
    back = phi.split("[")[-1].split(",")[1].strip(" %]")
    if str(answer["comes_back_from"]).strip(" %:") != back:
        raise AssertionError(f"{phi.strip()}: the second pair is [value, block], the block control comes "
                             "back from at the end of each iteration.")
    values = answer["values"]
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, (int, float)) for v in values):
        raise AssertionError("values: a list of numbers, the value of %acc0.ridx0 each time control enters "
                             "ridx0.loop while output 1 is computed")
    want = [0.0, *np.cumsum(PHI_ROWS[1]).tolist()]
    if len(values) == len(want) - 1 and list(values) == want[1:]:
        raise AssertionError("the phi is evaluated each time control enters ridx0.loop, the first time "
                             "coming from gidx0.body: what does it give then?")
    if len(values) == len(want) - 1 and list(values) == want[:-1]:
        raise AssertionError("after the 4th iteration control enters ridx0.loop once more (the test then "
                             "leaves the loop): the phi takes a value that time too, the one that is stored.")
    if [float(v) for v in values] != want:
        raise AssertionError(f"{len(values)} values; count the times control enters ridx0.loop for one "
                             "output (4 iterations), and add x[1] = [1, 2, 3, 4] one element at a time.")
    return "the phi starts at 0.0 from gidx0.body and takes each partial sum coming back from ridx0.body."
