"""Data types and PyTorch's type promotion, for the four dtypes tinyedu supports.

A DType knows its numpy twin (the NUMPY device and `Tensor.numpy()` use it) and its C name (the C
backend prints it). The supported set is small on purpose: bool, uint8, int32, float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, order=True)
class DType:
    priority: int   # position in the promotion lattice: bool < uint8 < int32 < float32
    itemsize: int   # bytes per element
    name: str
    np: type        # the numpy scalar type with the same layout
    c_name: str     # the C type the C backend uses

    def __repr__(self) -> str:
        return f"dtypes.{self.name}"

    @property
    def is_float(self) -> bool:
        return self.name.startswith("float")

    @property
    def is_int(self) -> bool:
        return not self.is_float and self.name != "bool"


class dtypes:  # noqa: N801 - lower case to read like torch.float32
    bool = DType(0, 1, "bool", np.bool_, "bool")
    uint8 = DType(1, 1, "uint8", np.uint8, "unsigned char")
    int32 = DType(2, 4, "int32", np.int32, "int")
    float32 = DType(3, 4, "float32", np.float32, "float")

    # Not a tensor dtype (it is not in `all`): the type of index arithmetic in kernels whose buffers
    # or loops pass 2^31 elements, where an int32 index would wrap (see tinyedu/codegen/index.py).
    int64 = DType(2, 8, "int64", np.int64, "long long")

    default_float = float32
    default_int = int32
    all: tuple[DType, ...] = (bool, uint8, int32, float32)

    @staticmethod
    def from_any(x: object) -> DType:
        """Accept a DType, its name ('float32'), a numpy dtype, or a Python type (float, int, bool)."""
        if isinstance(x, DType):
            return x
        if x is float:
            return dtypes.float32
        if x is int:
            return dtypes.int32
        if x is bool:
            return dtypes.bool
        if isinstance(x, str) and x in _BY_NAME:
            return _BY_NAME[x]
        try:
            np_dtype = np.dtype(x)  # type: ignore[call-overload]
        except TypeError:
            np_dtype = None
        if np_dtype is not None:
            if np_dtype == np.float64 or np_dtype == np.float16:
                return dtypes.float32
            if np_dtype.kind in "iu" and np_dtype != np.uint8:
                return dtypes.int32
            for dt in dtypes.all:
                if np.dtype(dt.np) == np_dtype:
                    return dt
        valid = ", ".join(d.name for d in dtypes.all)
        raise TypeError(f"dtype: unknown dtype {x!r}; valid dtypes are {valid} (or float, int, bool)")

    @staticmethod
    def from_numpy(np_dtype: np.dtype) -> DType:
        """numpy arrays keep their dtype when tinyedu has it; float64 -> float32, int64 -> int32."""
        return dtypes.from_any(np_dtype)


_BY_NAME = {d.name: d for d in dtypes.all} | {"float": dtypes.float32, "int": dtypes.int32}


# --8<-- [start:cast]
def cast_array(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Convert to `dtype` the way every tinyedu device does (NUMPY and PYTHON call this; the C, NEON and
    LLVM renderers write the same rule out).

    Most conversions are the usual ones: to bool, non-zero (and NaN) is True; int to float rounds
    to nearest; int to int wraps around (300 in uint8 is 44). Float to int truncates toward zero,
    and what C leaves undefined is defined here as on x86-64, where numpy and PyTorch run it:
    a float whose truncation does not fit in int32 (NaN, +-inf, 3e9, ...) becomes INT32_MIN
    (-2147483648), and float to uint8 goes through int32 and keeps the low 8 bits (300.7 -> 44,
    -1.5 -> 255, 1e10 -> 0).
    """
    if values.dtype.kind == "f" and dtype.is_int:
        with np.errstate(invalid="ignore"):
            truncated = np.trunc(values.astype(np.float64))
            fits = (truncated >= -(2**31)) & (truncated < 2**31)  # False for NaN
        as_int32 = np.where(fits, truncated, -(2**31)).astype(np.int64)
        return as_int32.astype(dtype.np)  # int64 -> uint8 keeps the low 8 bits
    return values.astype(dtype.np)


# --8<-- [end:cast]
def check_fits(value: float | int | bool, dtype: DType, op: str) -> None:
    """Constructors refuse a Python number that the dtype cannot hold, as PyTorch does (operators
    with a scalar wrap it instead, like torch: uint8 - 3 == 253)."""
    if isinstance(value, bool) or not dtype.is_int:
        return
    info = np.iinfo(dtype.np)
    if not info.min <= value <= info.max:  # also False for NaN
        raise OverflowError(f"{op}: value {value} does not fit in {dtype.name} ({info.min}..{info.max}); "
                            "use a wider dtype or a float")


def least_upper_dtype(*ds: DType) -> DType:
    """PyTorch's promotion among tensors: the 'largest' category wins (bool < uint8 < int32 < float32)."""
    return max(ds)


def promote_with_scalar(tensor_dtype: DType, scalar: object) -> DType:
    """PyTorch's rule for a tensor op a Python scalar: the scalar only raises the *category*.

    int tensor + 2 stays int; int tensor + 2.5 becomes the default float; bool tensor + 2 becomes int.
    """
    if isinstance(scalar, bool):
        return tensor_dtype
    if isinstance(scalar, int):
        return tensor_dtype if tensor_dtype != dtypes.bool else dtypes.default_int
    if isinstance(scalar, float):
        return tensor_dtype if tensor_dtype.is_float else dtypes.default_float
    raise TypeError(f"expected a Python bool, int or float scalar, got {type(scalar).__name__}")
