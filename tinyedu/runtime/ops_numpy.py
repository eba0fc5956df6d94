"""The NUMPY device: runs a kernel AST by interpreting it with numpy, whole arrays at a time.

This device is the oracle every other device is checked against, so it shares nothing with the
linearizer or the renderers, and not even the symbolic index algebra: it reads a buffer through
a ShapeTracker by building the index grid of each view with plain numpy broadcasting.

The semantics it fixes for every backend (C must match them):
- integer DIV truncates toward zero and integer MOD takes the sign of the dividend, like C;
  an integer division or modulo by zero gives 0 instead of crashing;
- CMPLT and CMPEQ give bool (false whenever a NaN is involved); WHERE picks a where the condition
  is true; AND, OR, XOR are bitwise on integers (two's complement) and logical on bools;
- CAST is `tinyedu.core.dtype.cast_array`: float to int truncates, and a float whose truncation does
  not fit in int32 (NaN, +-inf, 3e9) becomes INT32_MIN, as on x86-64 (numpy, PyTorch); float to
  uint8 goes through int32 and keeps the low 8 bits (300.7 -> 44, -1.5 -> 255); int64 and the wide
  unsigned types have their own versions of the rule (`tinyedu.core.dtype.float_to_int`). C leaves these
  undefined, so the C renderer spells the same rule out with helpers;
- a bfloat16 buffer holds 16-bit patterns (numpy has no bfloat16): a LOAD turns them into float32
  values and a STORE back (`tinyedu.core.dtype.from_storage` / `to_storage`);
- a read outside a view's mask (padding) gives 0;
- a float SUM accumulates in float64 and rounds once at the end, so its error is at most one
  rounding of the result plus float64's (about 2^-53 n of the sum of |x|): a reference the
  blocked sums of the other devices (tinyedu/codegen/sum_blocks.py) are measured against.

A kernel AST is a DAG (a value used twice is one node with two parents), so `evaluate` computes
each node once per run, remembering results by node identity.
"""

from __future__ import annotations

import numpy as np

from tinyedu.core.dtype import cast_array, from_storage, to_storage
from tinyedu.core.ops import BinaryOps, BufferOps, LazyOp, ReduceOps, TernaryOps, UnaryOps
from tinyedu.launch import LaunchDims
from tinyedu.runtime.device import Backend, Buffer, cpu_only
from tinyedu.shape import ShapeTracker, View


# --8<-- [start:gather]
def gather_view(flat: np.ndarray, view: View) -> np.ndarray:
    """The elements one View selects from a flat array: flat[offset + sum(i_k * stride_k)], masked."""
    shape = view.shape
    index = np.full(shape, view.offset, dtype=np.int64)
    valid = np.ones(shape, dtype=bool)
    for axis, (size, stride) in enumerate(zip(shape, view.strides, strict=True)):
        along_axis = [-1 if a == axis else 1 for a in range(len(shape))]
        position = np.arange(size, dtype=np.int64).reshape(along_axis)
        index = index + position * stride
        if view.mask is not None:
            low, high = view.mask[axis]
            valid = valid & (position >= low) & (position < high)
    out = np.zeros(shape, dtype=flat.dtype)
    if valid.any():
        out[valid] = flat[index[valid]]
    return out


def gather(flat: np.ndarray, st: ShapeTracker) -> np.ndarray:
    """Read through every view in turn: each view indexes the flattened result of the one before."""
    values = flat
    for view in st.views:
        values = gather_view(values.reshape(-1), view)
    return values.reshape(st.shape)


# --8<-- [end:gather]
def _int_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's remainder (np.fmod: the sign of the dividend), with x % 0 = 0, in a's own integer type."""
    safe = np.where(b == 0, 1, b).astype(a.dtype)
    return np.where(b == 0, 0, np.fmod(a, safe)).astype(a.dtype)


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's truncating division, with x / 0 = 0, exact for every integer width: a - (a % b) is a
    multiple of b, so floor division of it is the truncated quotient (INT_MIN / -1 wraps to INT_MIN)."""
    safe = np.where(b == 0, 1, b).astype(a.dtype)
    return np.where(b == 0, 0, (a - _int_mod(a, b)) // safe).astype(a.dtype)


TRANSCENDENTAL = {UnaryOps.EXP2: np.exp2, UnaryOps.LOG2: np.log2, UnaryOps.SIN: np.sin, UnaryOps.COS: np.cos}


def correctly_rounded(fn, a: np.ndarray) -> np.ndarray:
    """fn of a float32 array computed in float64 and rounded once to float32: numpy's own float32
    loops (SIMD approximations) err by up to 1 ulp for exp2 and 2 for log2, where C's libm is within
    half an ulp; float64 then a rounding is within half an ulp (but for rare double roundings)."""
    if a.dtype == np.float32:
        return fn(a.astype(np.float64)).astype(np.float32)
    return fn(a)


def alu(op, *srcs: np.ndarray, arg=None) -> np.ndarray:
    """One elementwise op on numpy arrays, with the semantics every backend shares."""
    a = srcs[0]
    with np.errstate(all="ignore"):  # inf and nan are values here, as in C; Tensor decides on errors
        if op is UnaryOps.NEG:
            return np.logical_not(a) if a.dtype == np.bool_ else -a
        if op in TRANSCENDENTAL:
            return correctly_rounded(TRANSCENDENTAL[op], a)
        if op is UnaryOps.SQRT:
            return np.sqrt(a)
        if op is UnaryOps.RECIP:
            return (1 / a).astype(a.dtype)
        if op is UnaryOps.CAST:
            return cast_array(a, arg)
        if op is TernaryOps.WHERE:
            return np.where(a, srcs[1], srcs[2])
        b = srcs[1]
        is_int = a.dtype.kind in "iu"
        if op is BinaryOps.ADD:
            return np.logical_or(a, b) if a.dtype == np.bool_ else a + b
        if op is BinaryOps.SUB:
            return a - b
        if op is BinaryOps.MUL:
            return np.logical_and(a, b) if a.dtype == np.bool_ else a * b
        if op is BinaryOps.DIV:
            return _int_div(a, b) if is_int else a / b
        if op is BinaryOps.MOD:
            return _int_mod(a, b) if is_int else np.fmod(a, b)
        if op is BinaryOps.MAX:
            return np.maximum(a, b)
        if op is BinaryOps.CMPLT:
            return a < b
        if op is BinaryOps.CMPEQ:
            return a == b
        if op is BinaryOps.AND:
            return np.bitwise_and(a, b)
        if op is BinaryOps.OR:
            return np.bitwise_or(a, b)
        if op is BinaryOps.XOR:
            return np.bitwise_xor(a, b)
    raise NotImplementedError(f"NUMPY device: no rule for {op}")


class NumpyProgram:
    """A kernel AST, interpreted. `program([out, *inputs])` fills `out`."""

    def __init__(self, ast: LazyOp):
        assert ast.op is BufferOps.STORE, f"a kernel AST is rooted at STORE, got {ast.op}"
        self.ast = ast

    def __call__(self, buffers: list[Buffer]) -> None:
        memory = [b.as_numpy() for b in buffers]
        result = self.evaluate(self.ast.src[0], memory, {})
        store = self.ast.arg
        assert store.st.contiguous, "NUMPY device: STORE through a non-contiguous view is not supported"
        memory[store.idx][:] = to_storage(cast_array(result, store.dtype), store.dtype).reshape(-1)

    def evaluate(self, node: LazyOp, memory: list[np.ndarray], done: dict[int, np.ndarray]) -> np.ndarray:
        """The value of `node`; `done` holds the values already computed in this run, by node id."""
        if id(node) not in done:
            done[id(node)] = self._evaluate_once(node, memory, done)
        return done[id(node)]

    def _evaluate_once(self, node: LazyOp, memory: list[np.ndarray],
                       done: dict[int, np.ndarray]) -> np.ndarray:
        if node.op is BufferOps.LOAD:
            return from_storage(gather(memory[node.arg.idx], node.arg.st), node.arg.dtype)
        if node.op is BufferOps.CONST:
            const = np.full((1,), node.arg.val, dtype=node.arg.dtype.value_np)
            if all(view.mask is None for view in node.arg.st.views):  # the value everywhere: no index
                return np.broadcast_to(const.reshape(()), node.arg.st.shape)  # arrays (10^8 ones are free)
            return gather(const, node.arg.st)  # gather applies the masks, so padding reads 0
        sources = [self.evaluate(s, memory, done) for s in node.src]
        if isinstance(node.op, ReduceOps):
            reduce = np.sum if node.op is ReduceOps.SUM else np.max
            x = sources[0]
            if x.size == 0:  # an empty reduce gives the identity: 0 for sum, -inf (or min) for max
                shape = tuple(1 if i in node.arg else s for i, s in enumerate(x.shape))
                return np.full(shape, 0 if node.op is ReduceOps.SUM else _lowest(x.dtype), dtype=x.dtype)
            if node.op is ReduceOps.SUM and x.dtype.kind == "f":  # float64 accumulation (see above)
                return np.sum(x, axis=node.arg, keepdims=True, dtype=np.float64).astype(x.dtype)
            return reduce(x, axis=node.arg, keepdims=True).astype(x.dtype)
        return alu(node.op, *sources, arg=node.arg)


def _lowest(np_dtype: np.dtype):
    if np_dtype == np.bool_:
        return False
    return -np.inf if np_dtype.kind == "f" else np.iinfo(np_dtype).min


class NumpyDevice(Backend):
    """Interprets the AST as it is: no Kernel, no opts, no UOps (it shares nothing with them)."""

    name = "NUMPY"
    renderer = None
    compiler = None
    vector_width = 1

    @staticmethod
    def runtime(name: str, ast: LazyOp, launch: LaunchDims | None = None) -> NumpyProgram:
        """NUMPY's "binary" is the AST itself: it has no renderer and no compiler."""
        cpu_only("NUMPY", name, launch)
        return NumpyProgram(ast)

    def threads(self) -> int:
        return 1


def create_device() -> NumpyDevice:
    return NumpyDevice()
