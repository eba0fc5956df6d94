"""The ALU ops of tinyedu/runtime/python_alu.py on numpy arrays: one value per GPU thread ("lane").

The lockstep interpreter (lockstep.py) computes each UOp for all threads of a workgroup at once. An
array form here must give exactly the bits the scalar rule gives in every lane; where that would take
more than plain numpy (64-bit integer division, a MULACC whose float64 sum rounds), the array form
returns None, or handles those lanes alone, and the scalar rule runs lane by lane instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.core.uops import FusedOps, UOp, scalar_of
from tinyedu.runtime.ops_numpy import TRANSCENDENTAL, correctly_rounded
from tinyedu.runtime.python_alu import BOOL_ALU, FLOAT_ALU, INT_ALU, fused_multiply_add, to_dtype


def lane_type(dtype: DType) -> type:
    """The numpy type of a `dtype` value in a register: float16 and bfloat16 compute in float32."""
    if dtype == dtypes.float64:
        return np.float64
    return np.float32 if dtype.is_float else dtype.np


def lanes_maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """python_alu.maximum on arrays: NaN wins; when equal, b (so max(-0.0, 0.0) is 0.0)."""
    return np.where((a > b) | (a != a), a, b)


def lanes_trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """C's `/` on ints (x / 0 is 0), computed in int64 and wrapped; None for 64-bit ints (per lane)."""
    a, b = np.asarray(a), np.asarray(b)
    if max(a.dtype.itemsize, b.dtype.itemsize) == 8:
        return None
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    divisor = np.where(b64 == 0, 1, b64)
    quotient = np.abs(a64) // np.abs(divisor)
    quotient = np.where((a64 < 0) != (divisor < 0), -quotient, quotient)
    return np.where(b64 == 0, 0, quotient).astype(a.dtype)


def lanes_trunc_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    quotient = lanes_trunc_div(a, b)
    if quotient is None:
        return None
    a64, b64 = np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64)
    return np.where(b64 == 0, 0, a64 - quotient.astype(np.int64) * b64).astype(np.asarray(a).dtype)


def lanes_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray | None:
    """python_alu.fused_multiply_add on float32 lanes: the float64 sum where it is exact, else the
    exact rational rounding for those lanes only. None for other dtypes (per lane)."""
    a, b, c = np.broadcast_arrays(np.asarray(a), np.asarray(b), np.asarray(c))
    if not a.dtype == b.dtype == c.dtype == np.float32:
        return None
    product, addend = a.astype(np.float64) * b.astype(np.float64), c.astype(np.float64)
    total = product + addend
    back = total - product
    error = (product - (total - back)) + (addend - back)
    result = total.astype(np.float32)
    for i in np.argwhere(np.isfinite(total) & (error != 0)):
        result[tuple(i)] = fused_multiply_add(a[tuple(i)], b[tuple(i)], c[tuple(i)])
    return result


LANES_FLOAT: dict[Any, Callable[..., Any]] = {
    UnaryOps.NEG: lambda a: -a, UnaryOps.SQRT: np.sqrt, UnaryOps.RECIP: lambda a: np.float32(1) / a,
    **{op: lambda a, fn=fn: correctly_rounded(fn, np.asarray(a)) for op, fn in TRANSCENDENTAL.items()},
    BinaryOps.ADD: lambda a, b: a + b, BinaryOps.SUB: lambda a, b: a - b, BinaryOps.MUL: lambda a, b: a * b,
    BinaryOps.DIV: lambda a, b: a / b, BinaryOps.MOD: np.fmod, BinaryOps.MAX: lanes_maximum,
    BinaryOps.CMPLT: lambda a, b: a < b, BinaryOps.CMPEQ: lambda a, b: a == b,
    TernaryOps.WHERE: np.where, FusedOps.MULACC: lanes_fma,
}
LANES_INT: dict[Any, Callable[..., Any]] = {
    UnaryOps.NEG: lambda a: -a, UnaryOps.RECIP: lambda a: lanes_trunc_div(np.ones_like(a), a),
    BinaryOps.ADD: lambda a, b: a + b, BinaryOps.SUB: lambda a, b: a - b, BinaryOps.MUL: lambda a, b: a * b,
    BinaryOps.DIV: lanes_trunc_div, BinaryOps.MOD: lanes_trunc_mod, BinaryOps.MAX: lanes_maximum,
    BinaryOps.CMPLT: lambda a, b: a < b, BinaryOps.CMPEQ: lambda a, b: a == b,
    BinaryOps.AND: lambda a, b: a & b, BinaryOps.OR: lambda a, b: a | b, BinaryOps.XOR: lambda a, b: a ^ b,
    TernaryOps.WHERE: np.where,
}
LANES_BOOL: dict[Any, Callable[..., Any]] = {
    UnaryOps.NEG: np.logical_not, BinaryOps.ADD: lambda a, b: a | b, BinaryOps.MUL: lambda a, b: a & b,
    BinaryOps.MAX: lanes_maximum, BinaryOps.CMPLT: lambda a, b: a < b, BinaryOps.CMPEQ: lambda a, b: a == b,
    BinaryOps.AND: lambda a, b: a & b, BinaryOps.OR: lambda a, b: a | b, BinaryOps.XOR: lambda a, b: a ^ b,
    TernaryOps.WHERE: np.where,
}


@dataclass(frozen=True)
class LanesALU:
    """One ALU UOp's rules: the array form when there is an exact one, and python_alu's scalar rule,
    applied lane by lane where the array form is missing or declines (returns None)."""

    array_form: Callable[..., Any] | None
    scalar_rule: Callable[..., Any]
    out: DType
    out_type: type

    @staticmethod
    def of(u: UOp) -> LanesALU:
        operand, out = scalar_of(u.src[-1].dtype), scalar_of(u.dtype)
        kind = "f" if operand.is_float else "b" if operand == dtypes.bool else "i"
        array_form = {"f": LANES_FLOAT, "i": LANES_INT, "b": LANES_BOOL}[kind].get(u.arg)
        scalar_rule = {"f": FLOAT_ALU, "i": INT_ALU, "b": BOOL_ALU}[kind].get(u.arg)
        if scalar_rule is None:
            raise NotImplementedError(f"PYTHON: no rule for ALU {u.arg} on {operand.name} values")
        return LanesALU(array_form, scalar_rule, out, lane_type(out))

    def __call__(self, args: list[Any]) -> np.ndarray:
        """The op on arrays of any shape (lanes, lanes x vector lanes, or 0-d for a uniform value)."""
        result = self.array_form(*args) if self.array_form is not None else None
        if result is None:
            columns = np.broadcast_arrays(*(np.asarray(a) for a in args))
            shape = columns[0].shape
            values = [to_dtype(self.scalar_rule(*(as_scalar(c[i]) for c in columns)), self.out)
                      for i in np.ndindex(shape)]
            result = np.array(values, dtype=self.out_type).reshape(shape)
        return np.asarray(result).astype(self.out_type, copy=False)


def spread(value: Any, lanes: int) -> np.ndarray:
    """One entry per lane. A value that is the same in every lane (a constant, a workgroup index) is
    kept as a 0-d array and numpy broadcasts it; this makes the copies where an index needs them."""
    return value if getattr(value, "shape", ()) else np.full(lanes, value)


def as_scalar(value: np.generic) -> Any:
    """A lane's value as the scalar interpreter keeps it: Python int or bool, numpy float."""
    kind = np.asarray(value).dtype.kind
    return bool(value) if kind == "b" else int(value) if kind in "iu" else value
