"""Tensor: the user-facing API, with PyTorch's names and semantics.

A Tensor is a LazyBuffer (`.lazydata`) plus autograd bookkeeping: `requires_grad`, `.grad`, and
`_ctx`, the Function that made it. This Tensor is the core's (tinyedu/core/tensor.py: read that
first) with more: this file overrides the core's seams where the full library adds something
(every dtype and several devices when data becomes a tensor, grad mode and count_primitives when a
Function is recorded, backward with a given gradient, dtype promotion for every dtype); the rest
of PyTorch's API (softmax, conv2d, indexing...) arrives as mixins from tinyedu/tensor_api/, each
method composed from the primitive Functions, which is how you can see that a whole framework
rests on about twenty primitives and six movement ops.

The imports go one way: this file imports the mixins; they never import it. What they share with
it (broadcast_shape, the type of `self`, grad mode) sits below, in tensor_api/base.py and
tensor_api/grad_mode.py.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np

import tinyedu.core.function as F
import tinyedu.core.tensor as core
import tinyedu.function_extra as FX
from tinyedu.core.dtype import DType, cast_array, check_fits, dtypes, from_storage, result_type, scalar_dtype
from tinyedu.core.errors import DeviceError, ShapeError
from tinyedu.core.helpers import postorder
from tinyedu.core.ops import LoadOps
from tinyedu.lazy import LazyBuffer, engine
from tinyedu.multi.lazy import MultiLazyBuffer, full
from tinyedu.tensor_api.activations import ActivationMixin
from tinyedu.tensor_api.assign import AssignMixin
from tinyedu.tensor_api.attention import AttentionMixin
from tinyedu.tensor_api.base import Scalar, broadcast_shape
from tinyedu.tensor_api.combine import CombineMixin
from tinyedu.tensor_api.conv import ConvMixin
from tinyedu.tensor_api.creation import CreationMixin
from tinyedu.tensor_api.elementwise import ElementwiseMixin
from tinyedu.tensor_api.grad_mode import GradMode, count_primitives
from tinyedu.tensor_api.indexing import IndexingMixin
from tinyedu.tensor_api.losses import LossMixin
from tinyedu.tensor_api.movement import MovementMixin
from tinyedu.tensor_api.nn_ops import NNMixin
from tinyedu.tensor_api.normalization import NormalizationMixin
from tinyedu.tensor_api.reduce import ReduceMixin
from tinyedu.tensor_api.repr import format_tensor
from tinyedu.tensor_api.rounding import RoundingMixin
from tinyedu.tensor_api.scans import ScanMixin
from tinyedu.tensor_api.sharding import ShardingMixin
from tinyedu.tensor_api.sorting import SortingMixin


class _DefaultDevice:
    """`Tensor.default_device`, read from the full library's registry: Device.DEFAULT ($DEVICE, else
    C). The core's Tensor has a plain class attribute "C" there; set this one with Device.DEFAULT."""

    def __get__(self, tensor: object, owner: type | None = None) -> str:
        return engine().canonical_device(None)


class Tensor(CreationMixin, ElementwiseMixin, RoundingMixin, ActivationMixin, ReduceMixin, MovementMixin,
             IndexingMixin, CombineMixin, NNMixin, ConvMixin, NormalizationMixin, LossMixin, AssignMixin,
             ScanMixin, SortingMixin, AttentionMixin, ShardingMixin, core.Tensor):
    """The core's Tensor (tinyedu/core/tensor.py) with the rest of PyTorch's API.

    The core is the last base class, so Python looks a name up in this class body first, then in
    the mixins (in the order listed), then in the core: this body or a mixin overrides a core
    method only where it adds something (every dtype, several devices, no_grad, count_primitives,
    PyTorch's relu at 0, errors with PyTorch's wording ...). What behaves the same in both is
    defined once, in the core, and inherited: __init__, shape, dtype, device, ndim, numel, realize,
    tolist, detach, _wrap, requires_grad_, _broadcast_to, _float, float, add, sub, mul, maximum,
    lt, gt, eq, neg, reciprocal, sqrt, square, and Python's operators for them. This body fills the
    core's seam `_lazydata_from` (what __init__ makes of its data) and overrides `_apply` (how a
    Function is recorded), `backward` and `_broadcasted`, which do more here.
    """

    default_device = _DefaultDevice()
    _backward_done: bool = False  # (set by backward when it frees the graph behind a tensor)

    def _lazydata_from(self, data: Any, device: str | None, dtype: DType | str | type | None,
                       ) -> "LazyBuffer | MultiLazyBuffer":
        """The core's seam in __init__, for every dtype (numpy scalars keep theirs, values must fit),
        the registry's device names, several devices (a tuple: sharded), and other Tensors."""
        device = engine().canonical_device(device)
        want = None if dtype is None else dtypes.from_any(dtype)
        if isinstance(device, tuple) and not isinstance(data, (LazyBuffer, MultiLazyBuffer)):
            data = MultiLazyBuffer.shard(Tensor(data, device[0], dtype).lazydata, device, None)  # (on each)
        if isinstance(data, (LazyBuffer, MultiLazyBuffer)):
            lazydata = data
        elif isinstance(data, Tensor):
            lazydata = data.lazydata
        elif isinstance(data, (bool, int, float, np.generic)):
            # a numpy scalar keeps its dtype, like a numpy array; a Python number gets the default
            is_numpy = isinstance(data, np.generic)
            dtype_of_data = dtypes.from_numpy(data.dtype) if is_numpy else _python_dtype(data)
            data = data.item() if is_numpy else data
            check_fits(data, want or dtype_of_data, "Tensor")
            lazydata = LazyBuffer.full(data, (), want or dtype_of_data, device)
        elif isinstance(data, (list, tuple, np.ndarray)):
            lazydata = LazyBuffer.from_numpy(_to_numpy(data, want), device)
        else:
            raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__}; pass a number, a "
                            "(nested) list or tuple of numbers, a numpy array or another Tensor")
        if lazydata.device != device and not isinstance(data, (LazyBuffer, MultiLazyBuffer)):
            lazydata = lazydata.copy_to_device(device)
        if want is not None and lazydata.dtype != want:
            lazydata = lazydata.cast(want)
        return lazydata

    # ---- what it is ----
    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        return self.shape if dim is None else self.shape[self._axis(dim, "size")]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor; it has no first dimension")
        return self.shape[0]

    def __repr__(self) -> str:
        return format_tensor(self)

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"bool(): a tensor of shape {self.shape} has {self.numel()} values, so its "
                               "truth is ambiguous; use .any() or .all()")
        return bool(self.item())

    # ---- getting values out ----
    @staticmethod
    def realize_all(*tensors: "Tensor") -> None:
        """Realize several tensors with one schedule, so work they share is scheduled once."""
        lazy = [lb for t in tensors for lb in getattr(t.lazydata, "lbs", (t.lazydata,))]  # (a shard each)
        engine().realize([lb for lb in lazy if lb.base.realized is None])

    corealize = realize_all  # tinygrad's name

    def numpy(self) -> np.ndarray:
        """The values in a numpy array of the same dtype, writable and the caller's own; bfloat16,
        which numpy lacks, comes back as float32 (exactly: every bfloat16 is a float32).

        The array is a copy, except for a temporary: in `(a @ b).numpy()` nothing but this call
        holds the tensor, so the memory its kernel just wrote is handed over instead (see
        _memory_of_temporary)."""
        if sys.getrefcount(self) == _TEMPORARY:
            memory = _memory_of_temporary(self)
            if memory is not None:
                return from_storage(memory, self.dtype)
        return from_storage(super().numpy(), self.dtype)

    def item(self) -> Scalar:
        if self.numel() != 1:
            raise ShapeError(f"item(): only a tensor with exactly one element can be converted to a Python "
                             f"number, this one has shape {self.shape}")
        return super().item()

    def to(self, device: str) -> "Tensor":
        """The same values on another device; a copy that stays in the graph (the gradient comes back)."""
        device = engine().canonical_device(device)
        if device == self.device:
            return self
        if isinstance(device, tuple) or isinstance(self.device, tuple):  # several devices (tinyedu/multi)
            return self.shard(device, None) if isinstance(device, tuple) else self.unshard(device)
        return self._apply(FX.Copy, device=device)

    # ---- autograd ----
    # --8<-- [start:apply]
    def _apply(self, function: type[F.Function], *others: "Tensor", **kwargs: Any) -> "Tensor":
        """Run a Function's forward on the LazyBuffers and, if any input needs it, record it for backward.

        The core's _apply (tinyedu/core/tensor.py) with three additions inside its steps: grad mode
        (under no_grad nothing is recorded), count_primitives, and the write versions of the inputs,
        which backward checks (assign). It overrides the core's rather than filling hooks the core
        would call: every op runs this method, and each hook would be one more Python call per op.
        """
        inputs = (self, *others)
        if GradMode.enabled:
            needs = tuple([bool(t.requires_grad) for t in inputs])
            record = True in needs
        else:  # (under no_grad, as an optimizer's update runs: no input needs a gradient)
            needs, record = (False,) * len(inputs), False
        ctx = function(needs)
        if count_primitives.active:
            for counts in count_primitives.active:
                counts[function.__name__] += 1
        out = Tensor.__new__(Tensor)  # (Tensor._wrap, without its call: every op runs this)
        if others:
            out.lazydata = ctx.forward(*[t.lazydata for t in inputs], **kwargs)
        else:  # (one input, most often a movement op: no list to build)
            out.lazydata = ctx.forward(self.lazydata, **kwargs)
        # Only floats carry gradients (as in PyTorch): a comparison or an int cast ends the graph.
        if record and out.lazydata.dtype.is_float:
            out.requires_grad, out._ctx, out._parents = True, ctx, inputs
            ctx.memory_versions = _memory_versions(inputs)  # backward checks no input was assign()ed since
        return out

    # --8<-- [end:apply]
    # --8<-- [start:backward]
    def _graph_order(self) -> list["Tensor"]:
        """Tensors from self back to the leaves, each after all its users: the forward order reversed."""
        def inputs_with_grad(t: Tensor) -> list[Tensor]:
            return [p for p in reversed(t._parents) if p._ctx is not None or p.requires_grad]
        return postorder([self], inputs_with_grad)[::-1]

    def backward(self, gradient: "Tensor | None" = None, retain_graph: bool = False) -> "Tensor":
        """Fill `.grad` of every leaf that requires a gradient, adding to what is there (like PyTorch).

        Gradients accumulate across calls until you zero them (`t.grad = None`). The graph is freed
        afterwards unless `retain_graph=True`. The core's backward's walk, with PyTorch's options: a
        `gradient` for a tensor of many elements, `retain_graph`, clear errors for a graph already
        freed, and the check that no input was overwritten by assign() since the forward pass.
        """
        if not self.requires_grad:
            raise RuntimeError("backward: this tensor does not require grad and has no graph behind it; "
                               "create the inputs with requires_grad=True")
        if self._backward_done:
            raise RuntimeError("backward: the graph behind this tensor was already freed by an earlier "
                               "backward(); pass retain_graph=True to the first call to go through it twice")
        if gradient is None:
            if self.numel() != 1:
                raise RuntimeError(f"backward: a gradient can only be implied for a tensor with one element, "
                                   f"this one has shape {self.shape}; call .sum().backward() or pass "
                                   f"gradient= with shape {self.shape}")
            gradient = Tensor.ones(self.shape, device=self.device, dtype=self.dtype)
        if gradient.shape != self.shape:
            raise ShapeError(f"backward: gradient has shape {gradient.shape} but the tensor has shape "
                             f"{self.shape}; they must match")
        grads: dict[int, LazyBuffer] = {id(self): gradient.lazydata.cast(self.dtype)}
        for node in self._graph_order():
            grad = grads.pop(id(node), None)
            if node._backward_done and grad is not None:  # an inner node whose graph an earlier call freed
                raise RuntimeError("backward: part of this graph was already freed by an earlier backward(); "
                                   "pass retain_graph=True to the first call to go through it twice")
            if node._ctx is None:  # a leaf: accumulate into .grad
                if grad is not None and node.requires_grad:
                    g = Tensor._wrap(grad)
                    node.grad = g if node.grad is None else (node.grad + g)
                continue
            if grad is None:
                continue
            _check_not_assigned(node._ctx)
            local = node._ctx.backward(grad)
            local = local if isinstance(local, tuple) else (local,)
            for parent, g in zip(node._parents, local, strict=True):
                if g is None or not parent.requires_grad:
                    continue
                assert g.shape == parent.shape, \
                    f"{type(node._ctx).__name__} gave a gradient of shape {g.shape} for {parent.shape}"
                grads[id(parent)] = g if id(parent) not in grads else grads[id(parent)].e(F.BinaryOps.ADD, g)
            if not retain_graph:
                node._ctx, node._parents, node._backward_done = None, (), True
        return self

    # --8<-- [end:backward]
    # ---- broadcasting ----
    def _to_tensor(self, x: "Tensor | Scalar", dtype: DType) -> "Tensor":
        if isinstance(x, Tensor):
            return x if x.dtype == dtype else x.cast(dtype)
        return Tensor._wrap(full(x, (), dtype, self.device))  # (multi: full makes one on each device)

    # --8<-- [start:broadcast]
    def _broadcasted(self, other: "Tensor | Scalar", op: str, reverse: bool = False,
                     match_dtype: bool = True) -> tuple["Tensor", "Tensor"]:
        """Make two operands the same shape (numpy rules) and, if asked, the same dtype (PyTorch rules).

        Overrides the core's: every dtype (a zero-dim tensor ranks below one with dimensions), several
        devices, `match_dtype`, and short cuts for the usual cases of a training step."""
        if isinstance(other, Tensor):
            if other.device != self.device:
                raise DeviceError(f"{op}: tensors are on different devices ({self.device} and "
                                  f"{other.device}); "
                                  f"move one with .to({self.device!r})")
            # (one dtype promotes to itself, whatever the ranks: the usual case, answered first)
            mine, theirs = self.lazydata, other.lazydata
            if mine.dtype is theirs.dtype and type(mine.shape) is tuple and mine.shape == theirs.shape:
                # the same dtype and shape (x + y in a step, most often): nothing to cast or broadcast,
                # so the steps below, which would each give back their input, are skipped
                return (other, self) if reverse else (self, other)
            if mine.dtype is theirs.dtype and type(mine.shape) is tuple and type(theirs.shape) is tuple:
                # one dtype, two shapes (a bias, a max, a one-hot mask): broadcasting only
                x, y = (other, self) if reverse else (self, other)
                shape = broadcast_shape(x.lazydata.shape, y.lazydata.shape, op=op)
                return x._expanded_to(shape), y._expanded_to(shape)
            same = other.dtype == self.dtype
            dtype = self.dtype if same else result_type(self._operand(), other._operand())
        elif isinstance(other, (bool, int, float)):
            # (a float tensor keeps its dtype with any Python number: the usual case, answered first)
            # (an int tensor keeps its dtype with a Python int too: a comparison with an ignore_index)
            mine = self.lazydata.dtype
            keeps = mine.is_float or (type(other) is int and mine.is_int)
            dtype = mine if keeps else result_type(self._operand(), (scalar_dtype(other), "scalar"))
        else:
            raise TypeError(f"{op}: unsupported operand type {type(other).__name__}; expected a Tensor or a "
                            "Python number")
        x = self._to_tensor(self, dtype) if match_dtype else self
        if not isinstance(other, Tensor):  # a number: a constant of x's shape at once (free views)
            y = Tensor._wrap(full(other, x.shape, dtype, self.device))
            return (y, x) if reverse else (x, y)
        y = self._to_tensor(other, dtype)
        if reverse:
            x, y = y, x
        shape = broadcast_shape(x.shape, y.shape, op=op)
        return x._expanded_to(shape), y._expanded_to(shape)

    def _operand(self) -> tuple[DType, str]:
        """How this tensor takes part in type promotion: a zero-dim tensor ranks below one with
        dimensions (PyTorch: int8 tensor + int64 zero-dim tensor is int8)."""
        return self.dtype, "zero-dim" if self.ndim == 0 else "tensor"

    def _expanded_to(self, shape: tuple[int, ...]) -> "Tensor":
        """_broadcast_to for a shape that broadcast_shape gave, so both steps are known to be valid:
        the primitives directly, without reshape's and expand's checks (a step broadcasts often)."""
        x, mine = self, self.lazydata.shape
        if len(shape) != len(mine):
            mine = (1,) * (len(shape) - len(mine)) + mine
            x = x._apply(F.Reshape, shape=mine)
        return x if mine == shape else x._apply(F.Expand, shape=shape)

    # --8<-- [end:broadcast]
    def _axis(self, axis: int, op: str, ndim: int | None = None) -> int:
        """A dimension index in range (negatives count from the end), with PyTorch's error wording."""
        ndim = self.ndim if ndim is None else ndim
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__}")
        low, high = -max(ndim, 1), max(ndim, 1) - 1
        if not low <= axis <= high:
            raise IndexError(f"{op}: Dimension out of range (expected to be in range of [{low}, {high}], "
                             f"but got {axis}) for a tensor of shape {self.shape}")
        return axis % max(ndim, 1)

    # ---- sizes (PyTorch's and tinygrad's names) ----
    def dim(self) -> int:
        return self.ndim

    def element_size(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the whole tensor (a property, as in PyTorch; tinygrad's is a method)."""
        return self.numel() * self.dtype.itemsize

    def sequential(self, layers: Sequence[Any]) -> "Tensor":
        """Apply callables one after another: x.sequential([f, g]) is g(f(x)) (tinygrad)."""
        out = self
        for layer in layers:
            out = layer(out)
        return out


def _memory_versions(inputs: tuple[Tensor, ...]) -> tuple:
    """(buffer, write count) of each input that is in memory, as the forward pass saw it."""
    versions = []
    for t in inputs:  # (a loop, not a generator, and no `base` property call: every recorded op runs this)
        lazy = t.lazydata
        buffer = (lazy._base or lazy).realized if type(lazy) is LazyBuffer else lazy.base.realized  # (multi/)
        if buffer is not None:
            versions.append((buffer, buffer.version))
    return tuple(versions)


# ---- numpy() of a temporary: its memory, without a copy ----
# CPython counts the references to every object, so a function can tell that an object has no
# holder but the one it knows of. numpy uses this to compute `a + b + c` in the memory of `a + b`,
# a temporary nobody else can see; numpy() uses it to hand a temporary's memory to the caller. The
# counts are measured here, on this interpreter, rather than written down: they differ between
# Python versions (a method's `self`, the argument sys.getrefcount gets), and where they would not
# tell a temporary from a held object, nothing is ever handed over.
# A smaller array is copied, and the pool keeps its memory for the next buffer (see MemoryPool): new
# memory costs more than copying a small array. `(a @ b).numpy()`, 2 threads, each way alternating in
# one process: 16 KB to 36 KB 2-6% slower handed over, 64 KB to 144 KB the same, 256 KB 6% faster.
HAND_OVER_FROM_BYTES = 1 << 18


class _Probe:
    def references(self) -> int:
        return sys.getrefcount(self)


def _references(x: object) -> int:
    return sys.getrefcount(x)


def _probe_counts() -> tuple[int, int]:
    """(the count of `self` in a method called on a temporary, of an object that one other holds)"""
    held, holder = _Probe(), [object()]
    temporary = _Probe().references()
    return (temporary, _references(holder[0])) if held.references() > temporary else (-1, -1)


_TEMPORARY, _HELD_ONCE = _probe_counts()


def _memory_of_temporary(t: Tensor) -> np.ndarray | None:
    """The memory of `t`, a tensor nothing else holds, realized and shaped, if nothing else can
    reach it either: its node, the node's base and the base's buffer each have one holder, the
    one before it (so no other tensor, graph, autograd record, TinyJit or queued kernel uses it),
    and the node is its base's memory in order. Else None, and numpy() copies.

    The buffer dies with `t` right after, and while the caller's array lives the pool does not hand
    its memory out again (MemoryPool's rule), so the caller may keep it and write into it."""
    if type(t.lazydata) is not LazyBuffer or _references(t.lazydata) != _HELD_ONCE or \
            (t.lazydata._base is not None and _references(t.lazydata._base) != _HELD_ONCE):
        return None
    lazy = t.lazydata.realize()
    base = lazy._base or lazy
    if base.op is LoadOps.CONST or not lazy.st.contiguous or lazy.size != base.size or \
            base.realized.nbytes < HAND_OVER_FROM_BYTES or _references(base.realized) != _HELD_ONCE:
        return None
    return base.realized.as_numpy().reshape(lazy.shape)


def _check_not_assigned(ctx: F.Function) -> None:
    for buffer, version in ctx.memory_versions:
        if buffer.version != version:
            raise RuntimeError(f"backward: an input of {type(ctx).__name__} (a tensor of {buffer.size} "
                               "elements) was overwritten by assign() after the forward pass, so its "
                               "gradient would use the new values; call backward() before updating (e.g. "
                               "before optimizer.step())")


def _python_dtype(x: Scalar) -> DType:
    return dtypes.bool if isinstance(x, bool) else dtypes.int32 if isinstance(x, int) else dtypes.float32


def _to_numpy(data: Sequence | np.ndarray, want: DType | None) -> np.ndarray:
    """Lists and arrays to a numpy array of a tinyedu dtype, with errors for ragged or odd data."""
    try:
        array = np.asarray(data)
    except ValueError as e:
        raise ValueError(f"Tensor: the nested lists are ragged (rows of different lengths): {e}") from None
    if array.dtype == object or array.dtype.kind not in "biuf":
        raise TypeError(f"Tensor: data must be numbers (bool, int or float), got numpy dtype {array.dtype}")
    if isinstance(data, np.ndarray):  # numpy arrays keep their dtype, as in torch.from_numpy
        dtype = want or dtypes.from_numpy(array.dtype)
    else:  # Python numbers get the default dtypes, as in torch.tensor
        dtype = want or _python_dtype(array.dtype.type(0).item())
    if array.dtype.kind in "iu" and dtype.is_int and array.size:
        info = np.iinfo(dtype.np)
        if array.min() < info.min or array.max() > info.max:
            raise OverflowError(f"Tensor: values from {array.min()} to {array.max()} do not fit in "
                                f"{dtype.name} "
                                f"({info.min}..{info.max}); pass dtype= a wider type")
    # bfloat16 has no numpy type: its values go to the device as float32 and are cast there
    return cast_array(array, dtypes.float32 if dtype == dtypes.bfloat16 else dtype)

