"""Creating tensors: constants, ranges, identity, and seeded random numbers."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyedu.core.dtype import DType, check_fits, dtypes
from tinyedu.core.errors import ArgumentError, DTypeError, ShapeError
from tinyedu.core.helpers import flatten_args
from tinyedu.core.ops import LoadOps
from tinyedu.lazy import LazyBuffer, engine
from tinyedu.multi.lazy import full
from tinyedu.tensor_api.base import TensorLike


def _check_shape(shape: tuple, op: str) -> tuple[int, ...]:
    for s in shape:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 0:
            raise ShapeError(f"{op}: shape must be non-negative ints, got {shape}")
    return tuple(int(s) for s in shape)


class CreationMixin:
    # Random numbers come from one numpy Generator, seeded by Tensor.manual_seed, so runs repeat.
    _rng: np.random.Generator = np.random.default_rng(0)

    @classmethod
    def manual_seed(cls, seed: int = 0) -> None:
        CreationMixin._rng = np.random.default_rng(seed)

    @classmethod
    def full(cls, shape: Any, fill_value: float | int | bool, dtype: Any = None, device: str | None = None,
             requires_grad: bool | None = None) -> TensorLike:
        shape = _check_shape(flatten_args((shape,)) if isinstance(shape, (tuple, list)) else (shape,), "full")
        if dtype is None:
            dtype = dtypes.bool if isinstance(fill_value, bool) else \
                dtypes.int32 if isinstance(fill_value, int) else dtypes.float32
        dtype = dtypes.from_any(dtype)
        if not isinstance(fill_value, (bool, int, float)):
            raise TypeError(f"full: fill_value must be a Python number, got {type(fill_value).__name__}")
        check_fits(fill_value, dtype, "full")
        device = engine().canonical_device(device)
        buffer = full(fill_value, shape, dtype, device)  # (several devices: a constant on each)
        return cls(buffer, device=device, requires_grad=requires_grad)

    @classmethod
    def zeros(cls, *shape: Any, dtype: Any = dtypes.float32, device: str | None = None,
              requires_grad: bool | None = None) -> TensorLike:
        return cls.full(flatten_args(shape), 0, dtype=dtype, device=device, requires_grad=requires_grad)

    @classmethod
    def ones(cls, *shape: Any, dtype: Any = dtypes.float32, device: str | None = None,
             requires_grad: bool | None = None) -> TensorLike:
        return cls.full(flatten_args(shape), 1, dtype=dtype, device=device, requires_grad=requires_grad)

    @classmethod
    def empty(cls, *shape: Any, dtype: Any = dtypes.float32, device: str | None = None) -> TensorLike:
        """Memory with no values written: a LoadOps.EMPTY buffer (tinyedu fills it with zeros)."""
        shape = _check_shape(flatten_args(shape), "empty")
        device = engine().canonical_device(device)
        return cls(LazyBuffer.loadop(LoadOps.EMPTY, shape, dtypes.from_any(dtype), device), device=device)

    @classmethod
    def arange(cls, start: float, stop: float | None = None, step: float = 1, dtype: Any = None,
               device: str | None = None) -> TensorLike:
        """[start, start+step, ...) before stop, made on the host like any other data.

        (tinygrad builds it as a cumulative sum of ones, which is pretty but needs n*n work.)
        """
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ArgumentError("arange: step must not be zero")
        is_int = all(isinstance(v, int) for v in (start, stop, step))
        dtype = dtypes.from_any(dtype) if dtype is not None else (dtypes.int32 if is_int else dtypes.float32)
        return cls._from_host(np.arange(start, stop, step), dtype, device, None)

    @classmethod
    def eye(cls, n: int, m: int | None = None, dtype: Any = dtypes.float32,
            device: str | None = None) -> TensorLike:
        m = n if m is None else m
        _check_shape((n, m), "eye")
        rows = cls.arange(n, device=device).reshape(n, 1)
        cols = cls.arange(m, device=device).reshape(1, m)
        return (rows == cols).cast(dtypes.from_any(dtype))

    @classmethod
    def _from_host(cls, array: np.ndarray, dtype: DType, device: str | None,
                   requires_grad: bool | None) -> TensorLike:
        return cls(array, device=device, dtype=dtype, requires_grad=requires_grad)

    @classmethod
    def rand(cls, *shape: Any, dtype: Any = dtypes.float32, device: str | None = None,
             requires_grad: bool | None = None) -> TensorLike:
        shape = _check_shape(flatten_args(shape), "rand")
        # in [0, 1) like PyTorch: a float64 just below 1 would round up to 1.0 in float32
        values = np.minimum(cls._rng.random(shape), np.nextafter(np.float32(1), np.float32(0)))
        return cls._from_host(values, dtypes.from_any(dtype), device, requires_grad)

    @classmethod
    def randn(cls, *shape: Any, dtype: Any = dtypes.float32, device: str | None = None,
              requires_grad: bool | None = None) -> TensorLike:
        shape = _check_shape(flatten_args(shape), "randn")
        return cls._from_host(cls._rng.standard_normal(shape), dtypes.from_any(dtype), device, requires_grad)

    @classmethod
    def randint(cls, low: int, high: int | None = None, size: tuple[int, ...] = (), dtype: Any = dtypes.int32,
                device: str | None = None) -> TensorLike:
        if high is None:
            low, high = 0, low
        if high <= low:
            raise ArgumentError(f"randint: need low < high, got low={low}, high={high}")
        size = _check_shape(tuple(size), "randint")
        return cls._from_host(cls._rng.integers(low, high, size), dtypes.from_any(dtype), device, None)

    @classmethod
    def uniform(cls, *shape: Any, low: float = 0.0, high: float = 1.0, dtype: Any = dtypes.float32,
                device: str | None = None, requires_grad: bool | None = None) -> TensorLike:
        shape = _check_shape(flatten_args(shape), "uniform")
        values = cls._rng.uniform(low, high, shape)
        return cls._from_host(values, dtypes.from_any(dtype), device, requires_grad)

    @classmethod
    def normal(cls, *shape: Any, mean: float = 0.0, std: float = 1.0, dtype: Any = dtypes.float32,
               device: str | None = None, requires_grad: bool | None = None) -> TensorLike:
        shape = _check_shape(flatten_args(shape), "normal")
        values = cls._rng.normal(mean, std, shape)
        return cls._from_host(values, dtypes.from_any(dtype), device, requires_grad)

    @classmethod
    def linspace(cls, start: float, end: float, steps: int, dtype: Any = dtypes.float32,
                 device: str | None = None) -> TensorLike:
        """`steps` values from start to end, both included, evenly spaced (torch.linspace)."""
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise ArgumentError(f"linspace: steps must be an int >= 0, got {steps!r}")
        dtype = dtypes.from_any(dtype)
        if dtype == dtypes.bool:
            raise DTypeError("linspace: dtype bool is not supported (as in PyTorch): evenly spaced values "
                             "are numbers; use a numeric dtype and compare, e.g. linspace(...) != 0")
        return cls._from_host(np.linspace(start, end, steps), dtype, device, None)

    def multinomial(self: TensorLike, num_samples: int = 1, replacement: bool = False) -> TensorLike:
        """Draw category indices with probabilities proportional to the weights in the last axis of
        self ((n,) or (m, n)): an int32 tensor of shape (num_samples,) or (m, num_samples).

        One draw: u uniform in [0, 1), the index is how many running totals are <= u * total (a
        category of weight 0 is never picked). Without replacement, each draw zeroes the weight of
        what it picked before the next (PyTorch's semantics; tinygrad only allows one sample).
        Random numbers come from Tensor.manual_seed's generator, not PyTorch's, so the draws
        differ from PyTorch's; their distribution does not.
        """
        if self.ndim not in (1, 2) or not self.dtype.is_float:
            raise ShapeError(f"multinomial: expects a 1-d or 2-d float tensor of weights, got shape "
                             f"{self.shape} {self.dtype.name}")
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples < 1:
            raise ArgumentError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
        n = self.shape[-1]
        if n == 0:
            raise ShapeError("multinomial: there are no categories (the last axis has size 0)")
        if not replacement and num_samples > n:
            raise ArgumentError(f"multinomial: cannot take {num_samples} samples from {n} categories without "
                                "replacement")
        weights = self.reshape(-1, n).detach()
        bad = ((weights < 0) | (weights != weights) | (weights == float("inf"))).any()
        if (bad | (weights.sum(-1) <= 0).any()).item():  # the weights are data: checking reads them
            raise ArgumentError("multinomial: the weights must be finite, >= 0, and have a positive sum in "
                                "every row")
        rows, samples = weights.shape[0], []
        tensor = type(self)
        categories = tensor.arange(n, device=self.device)
        for _ in range(num_samples if not replacement else 1):
            draws = num_samples if replacement else 1
            running = weights.cumsum(-1)                                   # (rows, n)
            u = tensor(tensor._rng.random((rows, draws, 1), dtype=np.float32), device=self.device)
            below = running.unsqueeze(1) <= u * running[:, -1:].unsqueeze(1)
            picked = below.sum(-1, dtype=dtypes.int32)  # (rows, draws); indices are int32 in tinyedu
            last = ((weights > 0).int() * categories).max(-1, keepdim=True)  # rounding must not pick past it
            picked = picked.minimum(last)
            samples.append(picked)
            if not replacement:
                weights = (categories == picked).where(0.0, weights)
        out = tensor.cat(*samples, dim=1) if len(samples) > 1 else samples[0]
        return out.reshape(num_samples) if self.ndim == 1 else out

    # ---- standard initialisations (as torch.nn.init, for weights of shape (out, in, ...)) ----
    @classmethod
    def kaiming_uniform(cls, *shape: Any, a: float = 0.01, **kwargs: Any) -> TensorLike:
        shape = flatten_args(shape)
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a**2)) / math.sqrt(max(fan_in, 1))
        return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

    @classmethod
    def kaiming_normal(cls, *shape: Any, a: float = 0.01, **kwargs: Any) -> TensorLike:
        shape = flatten_args(shape)
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
        std = math.sqrt(2.0 / (1 + a**2)) / math.sqrt(max(fan_in, 1))
        return cls.normal(*shape, mean=0.0, std=std, **kwargs)

    @classmethod
    def scaled_uniform(cls, *shape: Any, **kwargs: Any) -> TensorLike:
        """Uniform in [-1, 1) scaled by 1/sqrt(number of elements) (tinygrad)."""
        shape = flatten_args(shape)
        bound = math.prod(shape) ** -0.5 if math.prod(shape) else 1.0
        return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

    @classmethod
    def glorot_uniform(cls, *shape: Any, **kwargs: Any) -> TensorLike:
        shape = flatten_args(shape)
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
        fan_out = shape[0] * (math.prod(shape[2:]) if len(shape) > 2 else 1)
        bound = math.sqrt(6.0 / max(fan_in + fan_out, 1))
        return cls.uniform(*shape, low=-bound, high=bound, **kwargs)

    # ---- *_like ----
    def zeros_like(self: TensorLike, **kwargs: Any) -> TensorLike:
        return type(self).full(self.shape, 0, **{"dtype": self.dtype, "device": self.device, **kwargs})

    def ones_like(self: TensorLike, **kwargs: Any) -> TensorLike:
        return type(self).full(self.shape, 1, **{"dtype": self.dtype, "device": self.device, **kwargs})

    def full_like(self: TensorLike, fill_value: float | int | bool, **kwargs: Any) -> TensorLike:
        options = {"dtype": self.dtype, "device": self.device, **kwargs}
        return type(self).full(self.shape, fill_value, **options)

    def rand_like(self: TensorLike, **kwargs: Any) -> TensorLike:
        return type(self).rand(*self.shape, **{"dtype": self.dtype, "device": self.device, **kwargs})

    def randn_like(self: TensorLike, **kwargs: Any) -> TensorLike:
        return type(self).randn(*self.shape, **{"dtype": self.dtype, "device": self.device, **kwargs})
