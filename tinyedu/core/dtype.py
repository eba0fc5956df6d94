"""Data types, PyTorch's type promotion, and the one casting rule every device follows.

A DType knows its numpy storage twin (the NUMPY device and `Tensor.numpy()` use it) and its C
storage name (the C backend prints it). tinyedu has PyTorch's real dtypes: bool; the integers
uint8, int8, int16, int32, int64 and the unsigned uint16, uint32, uint64 that safetensors files
carry; and the floats float16, bfloat16, float32, float64.

The two 16-bit floats are *storage* types: in memory they are 16 bits, but every operation on them
computes in float32 and rounds its result back to 16 bits, exactly as PyTorch's CPU kernels do. So
inside a kernel a half value is a float32 that happens to be exactly representable in the half
type, on every device. bfloat16 has no numpy (or C) type: its storage is the top 16 bits of a
float32 (numpy uint16), and its values are float32 arrays (see `to_storage` / `from_storage`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import numpy as np


@dataclass(frozen=True, order=True)
class DType:
    priority: int   # position in the table below (sorting only; promotion is `promote_types`)
    itemsize: int   # bytes per element
    name: str
    np: type        # the numpy scalar type with the same bits in memory (bfloat16: uint16)
    c_name: str     # the C type the C backend stores it as (bfloat16: the bits, unsigned short)
    kind: str = "f"  # numpy's kind letter: b(ool), u(nsigned), i(nt), f(loat)

    def __repr__(self) -> str:
        return f"dtypes.{self.name}"

    # The lazy graph's caches hash and compare a dtype for every node: by its name (equal dtypes have
    # equal names) and identity first, rather than the dataclass's tuple of all six fields.
    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, DType):
            return NotImplemented
        return (self.priority, self.itemsize, self.name, self.np, self.c_name, self.kind) == \
            (other.priority, other.itemsize, other.name, other.np, other.c_name, other.kind)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "u"

    @property
    def is_half(self) -> bool:
        """float16 and bfloat16: stored in 16 bits, computed in float32 (see the module docstring)."""
        return self.kind == "f" and self.itemsize == 2

    @property
    def value_np(self) -> type:
        """The numpy type that holds this dtype's *values* (bfloat16 values are float32s)."""
        return np.float32 if self.name == "bfloat16" else self.np


class dtypes:  # noqa: N801 - lower case to read like torch.float32
    bool = DType(0, 1, "bool", np.bool_, "bool", "b")
    uint8 = DType(1, 1, "uint8", np.uint8, "unsigned char", "u")
    int8 = DType(2, 1, "int8", np.int8, "signed char", "i")
    int16 = DType(3, 2, "int16", np.int16, "short", "i")
    int32 = DType(4, 4, "int32", np.int32, "int", "i")
    # int64 is also the type of index arithmetic in kernels whose buffers or loops pass 2^31
    # elements, where an int32 index would wrap (in the full library: see tinyedu/codegen/index.py).
    int64 = DType(5, 8, "int64", np.int64, "long long", "i")
    uint16 = DType(6, 2, "uint16", np.uint16, "unsigned short", "u")
    uint32 = DType(7, 4, "uint32", np.uint32, "unsigned int", "u")
    uint64 = DType(8, 8, "uint64", np.uint64, "unsigned long long", "u")
    float16 = DType(9, 2, "float16", np.float16, "_Float16", "f")
    bfloat16 = DType(10, 2, "bfloat16", np.uint16, "unsigned short", "f")
    float32 = DType(11, 4, "float32", np.float32, "float", "f")
    float64 = DType(12, 8, "float64", np.float64, "double", "f")

    default_float = float32
    default_int = int32  # PyTorch's is int64; tinyedu keeps int32 (docs/numerics_and_semantics.md)
    all: tuple[DType, ...] = (bool, uint8, int8, int16, int32, int64, uint16, uint32, uint64,
                              float16, bfloat16, float32, float64)

    @staticmethod
    def from_any(x: object) -> DType:
        """Accept a DType, its name ('float64', or torch's alias 'half', 'double', 'long', ...), a numpy
        dtype, or a Python type (float, int, bool). Anything else is an error naming the valid ones."""
        if isinstance(x, DType):
            return x
        python = {float: dtypes.default_float, int: dtypes.default_int, bool: dtypes.bool}
        if isinstance(x, type) and x in python:
            return python[x]
        if isinstance(x, str):
            if x in _BY_NAME:
                return _BY_NAME[x]
            raise TypeError(f"dtype: unknown dtype {x!r}; {_valid_names()}")
        try:
            np_dtype = np.dtype(x)  # type: ignore[call-overload]
        except TypeError:
            raise TypeError(f"dtype: unknown dtype {x!r}; {_valid_names()}") from None
        return dtypes.from_numpy(np_dtype)

    @staticmethod
    def from_numpy(np_dtype: np.dtype) -> DType:
        """numpy arrays keep their dtype (float64 stays float64); numpy has no bfloat16."""
        for dt in dtypes.all:
            if dt.name != "bfloat16" and np.dtype(dt.np) == np_dtype:
                return dt
        raise TypeError(f"dtype: numpy dtype {np.dtype(np_dtype)} is not supported; {_valid_names()}")


_ALIASES = {"float": dtypes.float32, "int": dtypes.int32, "half": dtypes.float16, "double": dtypes.float64,
            "long": dtypes.int64, "short": dtypes.int16, "char": dtypes.int8, "byte": dtypes.uint8}
_BY_NAME = {d.name: d for d in dtypes.all} | _ALIASES


def _valid_names() -> str:
    return f"valid dtypes are {', '.join(d.name for d in dtypes.all)} (or float, int, bool)"


# ---- type promotion, PyTorch's rules ----
_UNSIGNED_WIDE = {dtypes.uint16, dtypes.uint32, dtypes.uint64}  # PyTorch's "limited support" unsigned


# --8<-- [start:promotion]
def promote_types(a: DType, b: DType) -> DType:
    """torch.promote_types: the smallest dtype both values fit in, by PyTorch's table.

    bool goes into anything; a float beats any int (int64 + float16 is float16); float16 with
    bfloat16 is float32 (neither holds the other); uint8 with a signed int needs the next signed
    width (uint8 + int8 is int16). PyTorch refuses uint16/32/64 with a different int type, and so
    does tinyedu: cast one operand first.
    """
    if a == b:
        return a
    if not a.is_float and not b.is_float and _UNSIGNED_WIDE & {a, b}:
        raise TypeError(f"promotion of {a.name} and {b.name} is not defined (PyTorch refuses it too: "
                        "uint16, uint32 and uint64 promote only with floats and themselves); cast one "
                        "operand first, e.g. .cast('int64')")
    if b == dtypes.bool:
        return a
    if a == dtypes.bool:
        return b
    if a.is_float and b.is_float:
        if a.is_half and b.is_half:
            return dtypes.float32
        return a if a.itemsize > b.itemsize else b
    if a.is_float or b.is_float:
        return a if a.is_float else b
    if dtypes.uint8 in (a, b):  # uint8 with a signed int
        signed = b if a == dtypes.uint8 else a
        if signed.kind == "i":
            return dtypes.int16 if signed.itemsize == 1 else signed
    return a if a.itemsize > b.itemsize else b  # two signed ints


Operand = tuple[DType, Literal["tensor", "zero-dim", "scalar"]]


def _category(dtype: DType) -> int:
    return 0 if dtype == dtypes.bool else 1 if dtype.is_int else 2


@functools.lru_cache(maxsize=4096)  # a pure function asked the same few questions by every binary op
def result_type(*operands: Operand) -> DType:
    """torch.result_type: tensors with dimensions decide; a zero-dim tensor or a Python scalar only
    counts when it is of a higher category (bool < int < float) than every tensor above it.

    int8 tensor + int64 zero-dim tensor is int8; int8 tensor + 2.5 is the default float (float32);
    int8 tensor + float64 zero-dim tensor is float64; float16 tensor + 2.5 stays float16.
    """
    results = []
    for kind in ("tensor", "zero-dim", "scalar"):
        found = [d for d, k in operands if k == kind]
        results.append(None if not found else _promote_all(found))
    result = None
    for dtype in reversed(results):  # scalars, then zero-dim tensors, then tensors: each outranks the last
        if dtype is not None:
            result = dtype if result is None else _combine(dtype, result)
    assert result is not None, "result_type needs at least one operand"
    return result


def _promote_all(found: list[DType]) -> DType:
    out = found[0]
    for d in found[1:]:
        out = promote_types(out, d)
    return out


def _combine(higher: DType, lower: DType) -> DType:
    """PyTorch's combine_categories: a lower-priority operand matters only if its category is higher."""
    if _category(lower) > _category(higher):
        return promote_types(higher, lower)
    return higher


def scalar_dtype(x: object) -> DType:
    """The dtype a Python scalar stands for in promotion (int: tinyedu's default int, int32)."""
    if isinstance(x, bool):
        return dtypes.bool
    if isinstance(x, int):
        return dtypes.default_int
    if isinstance(x, float):
        return dtypes.default_float
    raise TypeError(f"expected a Python bool, int or float scalar, got {type(x).__name__}")


def least_upper_dtype(*ds: DType) -> DType:
    """PyTorch's promotion among tensors (torch.promote_types over all of them)."""
    return _promote_all(list(ds))


def promote_with_scalar(tensor_dtype: DType, scalar: object) -> DType:
    """PyTorch's rule for a tensor op a Python scalar: the scalar only raises the *category*.

    int tensor + 2 stays int; int tensor + 2.5 becomes the default float; bool tensor + 2 becomes int.
    """
    return result_type((tensor_dtype, "tensor"), (scalar_dtype(scalar), "scalar"))


# --8<-- [end:promotion]
# ---- casts ----
# --8<-- [start:cast]
def cast_array(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Convert to `dtype` the way every tinyedu device does (NUMPY and PYTHON call this; the C, NEON and
    LLVM renderers write the same rule out). The result holds values (bfloat16: as float32).

    Most conversions are the usual ones: to bool, non-zero (and NaN) is True; to a float rounds to
    nearest even; int to int wraps around (300 in uint8 is 44). To float16 or bfloat16 goes through
    float32 first, as PyTorch does (so a float64 can round twice). Float to int truncates toward zero,
    and what C leaves undefined is defined as on x86-64, where numpy and PyTorch run it (see
    `float_to_int`).
    """
    if dtype.is_half:
        as_float32 = values if values.dtype == np.float32 else cast_array(values, dtypes.float32)
        with np.errstate(over="ignore"):  # past 65504 a float16 is inf, as it should be
            return as_float32.astype(np.float16) if dtype == dtypes.float16 else round_to_bfloat16(as_float32)
    if values.dtype.kind == "f" and dtype.is_int:
        return float_to_int(values, dtype)
    with np.errstate(over="ignore"):  # float64 -> float32 past 3.4e38 is inf
        return values.astype(dtype.np)


def _truncate_or_min(truncated: np.ndarray, bits: int) -> np.ndarray:
    """x86-64's cvttsd2si: the truncated value if it fits in a signed `bits` int, else INT_MIN."""
    with np.errstate(invalid="ignore"):
        fits = (truncated >= -(2.0 ** (bits - 1))) & (truncated < 2.0 ** (bits - 1))  # False for NaN
    return np.where(fits, truncated, -(2.0 ** (bits - 1))).astype(np.int64)


def float_to_int(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Float to int: truncate toward zero, then what x86-64 does with a value that does not fit.

    - int8, int16, int32, uint8, uint16 go through int32: a truncation outside int32 (NaN, +-inf,
      3e9) gives INT32_MIN, then the low bits are kept (-1.5 -> 255 in uint8, 300.7 -> 44, inf -> 0);
    - int64 and uint32 go through int64 the same way (NaN -> INT64_MIN; -1.5 -> 4294967295 in uint32);
    - uint64: below 2^63 as int64 (then wrapped: -1.5 -> 2^64 - 1, NaN -> 2^63); from 2^63 on, as
      int64 of x - 2^63, plus 2^63 (inf -> 0), which is the code gcc emits on x86-64.
    PyTorch agrees for every in-range value and for all of these out-of-range ones up to int64; its
    vectorized uint32/uint64 casts of out-of-range values differ from its own scalar ones.
    """
    with np.errstate(invalid="ignore"):
        truncated = np.trunc(values.astype(np.float64))
    if dtype == dtypes.uint64:
        low = _truncate_or_min(truncated, 64).view(np.uint64)
        high = _truncate_or_min(truncated - 2.0**63, 64).view(np.uint64) ^ np.uint64(2**63)
        with np.errstate(invalid="ignore"):
            return np.where(truncated >= 2.0**63, high, low)
    bits = 64 if dtype in (dtypes.int64, dtypes.uint32) else 32
    return _truncate_or_min(truncated, bits).astype(dtype.np)  # int64 -> uint8 keeps the low 8 bits


def round_to_bfloat16(values: np.ndarray) -> np.ndarray:
    """float32 -> the nearest bfloat16 (ties to even), kept as a float32. NaN becomes PyTorch's NaN."""
    bits = values.astype(np.float32).view(np.uint32)
    with np.errstate(over="ignore"):
        odd = (bits >> np.uint32(16)) & np.uint32(1)  # ties go to the even top half
        rounded = (bits + np.uint32(0x7FFF) + odd) & np.uint32(0xFFFF0000)
    rounded = np.where(np.isnan(values), np.uint32(0x7FC00000), rounded)
    return rounded.astype(np.uint32).view(np.float32).reshape(np.shape(values))


# --8<-- [end:cast]
def to_storage(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Values of `dtype` as the bits a buffer keeps (bfloat16: the top half of each float32)."""
    if dtype == dtypes.bfloat16:
        return (round_to_bfloat16(values).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return np.asarray(values).astype(dtype.np)


def from_storage(stored: np.ndarray, dtype: DType) -> np.ndarray:
    """A buffer's bits as values (bfloat16: float32 values)."""
    if dtype == dtypes.bfloat16:
        return (stored.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return stored


def check_fits(value: float | int | bool, dtype: DType, op: str) -> None:
    """Constructors refuse a Python number that the dtype cannot hold, as PyTorch does (operators
    with a scalar wrap it instead, like torch: uint8 - 3 == 253)."""
    if isinstance(value, bool) or not dtype.is_int:
        return
    info = np.iinfo(dtype.np)
    if not info.min <= value <= info.max:  # also False for NaN
        raise OverflowError(f"{op}: value {value} does not fit in {dtype.name} ({info.min}..{info.max}); "
                            "use a wider dtype or a float")
