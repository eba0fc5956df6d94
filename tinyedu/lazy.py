"""LazyBuffer: the lazy graph that every Tensor operation builds.

Building the graph computes nothing. A LazyBuffer is either

- a *base*: an op (elementwise, reduce, or a load), its sources and an argument, with a
  ShapeTracker that is contiguous over the memory the op will fill; or
- a *view* of a base: the same memory seen through another ShapeTracker. Movement ops (reshape,
  permute, expand, pad, shrink, stride) only ever make views, so they never copy.

`realize()` hands the graph to the engine, which schedules it into kernels and runs them; a
realized base holds a device buffer in `.realized` and forgets its sources.

Why the engine is *installed* rather than imported: the pipeline runs one way (frontend -> lazy ->
schedule -> codegen -> runtime) and a stage never imports the stages below it. The engine sits
below this file, so it plugs in through the core's seam, the class attribute `LazyBuffer.engine`:
`tinyedu/engine/__init__.py` sets it on this file's LazyBuffer when tinyedu is imported.
"""

from __future__ import annotations

import atexit
import weakref
from typing import Any, Protocol

import numpy as np

from tinyedu.core import lazy as core_lazy
from tinyedu.core.dtype import DType, cast_array, dtypes, to_storage
from tinyedu.core.ops import BinaryOps, LoadOps, Op, ReduceOps, TernaryOps, UnaryOps, const_key
from tinyedu.shape import ShapeTracker
from tinyedu.shape.memo import memoized


class Engine(Protocol):
    """What the lazy graph needs from the stages below it."""

    def canonical_device(self, device: str | None) -> str: ...

    def realize(self, outs: list["LazyBuffer"]) -> None: ...

    def assign(self, pairs: list[tuple["LazyBuffer", "LazyBuffer"]]) -> None: ...


# --8<-- [start:engine]
def engine() -> Engine:
    """The full engine, installed in the core's seam `LazyBuffer.engine` (on this file's LazyBuffer)."""
    if LazyBuffer.engine is None:
        raise RuntimeError("no engine installed: import tinyedu (which installs tinyedu.engine), "
                           "not tinyedu.lazy on its own")
    return LazyBuffer.engine


# --8<-- [end:engine]
class LazyBuffer(core_lazy.LazyBuffer):
    """The core's LazyBuffer (tinyedu/core/lazy.py), with what the full library adds: every node
    remembers which version of each source's memory it was planned on (for `assign`), equal nodes
    are made once (`create`), constants fold, half floats compute in float32, views are kept, and
    the engine it hands the graph to is the full one. `base`, `is_view`, `size`, `cast`, `realize`
    and the movement ops (reshape, permute, expand, pad, shrink) are the core's."""

    #: The core's seam, filled with the full engine by tinyedu/engine/__init__.py. Set to None here
    #: so that, until then, this class never falls back on the core's engine.
    engine: Engine | None = None

    # --8<-- [start:init]
    def __init__(self, device: str, st: ShapeTracker, dtype: DType, op: Op | None = None,
                 arg: Any = None, srcs: tuple["LazyBuffer", ...] = (), base: "LazyBuffer | None" = None):
        # (the core's __init__, written out: a call less for every node of every step)
        self.device, self.st, self.dtype, self.shape, self._base = device, st, dtype, st.shape, base
        if base is None:
            self.op, self.arg, self.srcs, self.realized = op, arg, srcs, None
            # Which version of each source's memory this computation was planned on (see assign), and
            # this node as a reader of each source in memory: one pass over the sources for both.
            versions = []
            for src in srcs:
                realized = (src._base or src).realized  # (src.base, without a property call: a hot path)
                if realized is None:
                    versions.append(None)
                else:
                    versions.append(realized.version)
                    if realized.readers is None:  # (the buffer keeps its readers: see _Readers)
                        realized.readers = _Readers()
                    realized.readers.add(self)
            self.src_versions = tuple(versions)
        else:
            assert base._base is None, "a view must point at a base, not at another view"

    # --8<-- [end:init]
    # ---- what kind of node this is ----
    def is_const(self) -> bool:
        """A CONST, in memory or not: its value is known, so kernels read it as a literal."""
        return self.base.op is LoadOps.CONST

    def __repr__(self) -> str:
        kind = "realized" if self.base.realized is not None else getattr(self.base.op, "name", "?")
        view = f" view of {self.base.shape}" if self.is_view else ""
        return f"<LB {self.device} {self.shape} {self.dtype.name} {kind}{view}>"

    # ---- creating nodes ----
    # --8<-- [start:create]
    @staticmethod
    def create(device: str, st: ShapeTracker, dtype: DType, op: Op, arg: Any = None,
               srcs: tuple["LazyBuffer", ...] = ()) -> "LazyBuffer":
        """A new base, or the existing one if the same op was already applied to the same sources.

        Deduplication makes `f(x) + f(x)` compute f(x) once. Host data (COPY) and EMPTY buffers are
        never shared, and a cached node whose sources were released by realize() is not reused.
        A constant argument is keyed by its bits (const_key): a -0.0 is not a 0.0.

        The tracker, dtype and op are keyed by identity (and a hit is checked to hold the very same
        objects): hashing them by value calls Python code for each, twice per node (look up, then
        store), which cost an eager step more than its few hits saved. Equal trackers are almost always
        the same object anyway, as the shape code remembers the ones it made (tinyedu/shape/memo.py).
        """
        if op in (LoadOps.COPY, LoadOps.EMPTY):
            return LazyBuffer(device, st, dtype, op, arg, srcs)
        arg_key = arg if arg is None or type(arg) is tuple else const_key(arg)  # (most: none, or axes)
        key = (device, id(st), id(dtype), id(op), arg_key, tuple(map(id, srcs)))
        ref = _NODES.refs.get(key)  # (_NODES.get(key), without its method call: a hot path)
        cached = None if ref is None else ref()
        # (== on tuples of nodes compares them with `is`: LazyBuffer has no __eq__). Not if a source was
        # assigned since, nor a CONST given memory: assign may have stored it into a target's buffer,
        # whose contents change with the target's next assign.
        if cached is not None and cached.st is st and cached.dtype is dtype and cached.op is op and \
                cached.srcs == srcs and cached.src_versions == _versions(srcs) and not (
                op is LoadOps.CONST and cached.realized is not None):
            return cached
        node = LazyBuffer(device, st, dtype, op, arg, srcs)
        _NODES.refs[key] = weakref.ref(node)  # (_NODES[key] = node, without its method call)
        if len(_NODES.refs) >= _NODES.sweep_at:
            _NODES.sweep()
        return node

    # --8<-- [end:create]
    @staticmethod
    def loadop(op: LoadOps, shape: tuple[int, ...], dtype: DType, device: str, arg: Any = None,
               src: tuple["LazyBuffer", ...] = ()) -> "LazyBuffer":
        return LazyBuffer.create(device, ShapeTracker.from_shape(shape), dtype, op, arg, src)

    @staticmethod
    def from_buffer(buffer: Any, shape: tuple[int, ...], dtype: DType, device: str) -> "LazyBuffer":
        """A realized base over an existing device buffer (how TinyJit hands back a replay's outputs)."""
        node = LazyBuffer(device, ShapeTracker.from_shape(shape), dtype, LoadOps.EMPTY)
        node.realized = buffer
        return node

    @staticmethod
    def from_numpy(array: np.ndarray, device: str) -> "LazyBuffer":
        """Data from the host. The copy into device memory happens at realize time."""
        dtype = dtypes.from_numpy(array.dtype)
        # reshape: np.ascontiguousarray turns a 0-d array into shape (1,)
        host = np.ascontiguousarray(array, dtype=dtype.np).reshape(array.shape)
        return LazyBuffer.loadop(LoadOps.COPY, host.shape, dtype, device, arg=host)

    def const(self, value: float | int | bool, shape: tuple[int, ...] | None = None) -> "LazyBuffer":
        """A constant with this buffer's dtype and device: one value, expanded (a free view)."""
        shape = self.shape if shape is None else shape
        return LazyBuffer.full(value, shape, self.dtype, self.device)

    @staticmethod
    def full(value: float | int | bool, shape: tuple[int, ...], dtype: DType, device: str) -> "LazyBuffer":
        """`value` in every element of `shape`: one CONST, reshaped and expanded (free views).

        Remembered by the value's bits, the shape, dtype and device (see _Nodes.keep): every step
        asks for the same constants again (exp's range reduction alone for about ten), and making one
        costs a cast, a node and two views. A remembered one whose CONST was given memory (assign
        may store a value into a target's buffer through it) is not handed out again."""
        key = ("full", const_key(value), tuple(shape), dtype, device)
        node = _NODES.kept.get(key)
        if node is None or node.base.realized is not None:
            scalar = LazyBuffer.loadop(LoadOps.CONST, (), dtype, device, arg=_scalar_as(key[1], value, dtype))
            node = scalar.reshape((1,) * len(shape)).expand(shape)
            _NODES.keep(key, node)
        return node

    # ---- the small interface the frontend uses ----
    # --8<-- [start:elementwise]
    def e(self, op: UnaryOps | BinaryOps | TernaryOps, *srcs: "LazyBuffer", arg: Any = None) -> "LazyBuffer":
        """An elementwise op of this buffer and `srcs`; every source has the same shape."""
        operands = (self, *srcs)
        for s in srcs:
            if s.shape != self.shape:
                raise ValueError(f"{op.name}: elementwise operands must have the same shape, got "
                                 f"{[x.shape for x in operands]}; broadcast them first (Tensor does)")
        if op is UnaryOps.CAST:
            dtype = arg
        elif op in (BinaryOps.CMPLT, BinaryOps.CMPEQ):
            dtype = dtypes.bool
        elif op is TernaryOps.WHERE:
            dtype = srcs[0].dtype
        else:
            dtype = self.dtype
        if op is not UnaryOps.CAST:
            for x in operands:  # (a loop, not any() over a generator: this runs for every node)
                if x.dtype.itemsize == 2 and x.dtype.is_half:  # (most dtypes answer at the first test)
                    return _in_float32(op, operands, arg, dtype)
        # Only a cast, a negation of a constant, or an op with an identity and a constant operand, can
        # fold: asked here first, so that most nodes skip the call.
        if op is UnaryOps.CAST or (op is UnaryOps.NEG and (self._base or self).op is LoadOps.CONST) or (
                op in _IDENTITIES and len(operands) == 2 and ((self._base or self).op is LoadOps.CONST or
                                                            (srcs[0]._base or srcs[0]).op is LoadOps.CONST)):
            folded = _fold_constants(op, operands, dtype)
            if folded is not None:
                return folded
        # a base's tracker already is the contiguous one of its shape
        st = self.st if self._base is None else ShapeTracker.from_shape(self.shape)
        return LazyBuffer.create(self.device, st, dtype, op, arg, operands)

    def r(self, op: ReduceOps, axes: tuple[int, ...]) -> "LazyBuffer":
        """Reduce over `axes`; they keep size 1 so the result still lines up with the input."""
        axes, st = _reduced(self.shape, axes)
        if not axes:
            return self
        if self.dtype.is_half:  # accumulate in float32, round the result once (as PyTorch does)
            return self.cast(dtypes.float32).r(op, axes).cast(self.dtype)
        return LazyBuffer.create(self.device, st, self.dtype, op, axes, (self,))

    # --8<-- [end:elementwise]
    def contiguous(self) -> "LazyBuffer":
        """Ask for this value in its own dense memory: a kernel boundary (the scheduler stores it).

        Only a buffer that is already in memory, in order, is returned as it is.
        """
        if not self.is_view and self.realized is not None:
            return self
        return LazyBuffer.loadop(LoadOps.CONTIGUOUS, self.shape, self.dtype, self.device, src=(self,))

    def writable(self) -> "LazyBuffer":
        """This value in memory of its own, in element order: what `assign` can write in place.

        A buffer already in memory is returned as it is (or a view that only regroups its axes).
        A value without memory yet (a lazy result, or a constant, which kernels read as a literal
        and which must therefore never change) is first copied into memory of its own.
        """
        base = self.base
        in_order = not self.is_view or (self.st.contiguous and self.size == base.size)
        if base.realized is not None and base.op is not LoadOps.CONST:
            if not in_order:
                raise ValueError(f"assign: the target is a view of shape {self.shape} that reorders or "
                                 f"selects part of a buffer of shape {base.shape}; assign into the whole "
                                 "tensor instead (build the new value with where, pad or cat)")
            return self
        return self.copy().realize()  # (never shared through the dedup cache: it is about to be written)

    def read_old_values(self, buffer: Any, snapshot: Any) -> None:
        """Read `snapshot` (a copy of `buffer` as it was) wherever this computation reads `buffer`.

        assign calls this before overwriting `buffer`, for every computation that was planned on it
        and has not run yet: it will see the values it was built with, as in an eager framework.
        """
        srcs = []
        for src in self.srcs:
            if src.base.realized is buffer:
                old = LazyBuffer.from_buffer(snapshot, src.base.shape, src.base.dtype, src.device)
                src = old if not src.is_view else LazyBuffer(src.device, src.st, src.dtype, base=old)
            srcs.append(src)
        self.srcs, self.src_versions = tuple(srcs), _versions(tuple(srcs))

    def copy(self) -> "LazyBuffer":
        """These values in new memory of their own (contiguous() may return the buffer itself)."""
        return LazyBuffer(self.device, ShapeTracker.from_shape(self.shape), self.dtype, LoadOps.CONTIGUOUS,
                          srcs=(self,))  # not deduplicated: two copies are two memories

    def copy_to_device(self, device: str) -> "LazyBuffer":
        if device == self.device:
            return self
        return LazyBuffer.loadop(LoadOps.COPY, self.shape, self.dtype, device, src=(self.contiguous(),))

    def known_values(self) -> np.ndarray | None:
        """The values if they can be read without running a kernel, else None (do not modify them).

        Known: a constant, data in memory (read in element order), or host data not copied yet. This
        lets a check on data (are these class indices in range?) run without a hidden realize.
        """
        base = self.base
        if self.is_const() and all(v.mask is None for v in self.st.views):
            return to_storage(np.full(self.shape, base.arg, dtype=self.dtype.value_np), self.dtype)
        if self.is_view and not (self.st.contiguous and self.size == base.size):
            return None
        if base.realized is not None:  # (read only: kernels still queued that only read it run on)
            return base.realized.as_numpy(write=False).reshape(self.shape)
        if base.op is LoadOps.COPY and isinstance(base.arg, np.ndarray):
            return base.arg.reshape(self.shape)
        return None

    def numpy(self) -> np.ndarray:
        """The values as a numpy array (realizes; a view is copied out of its base's memory)."""
        # A view that is just the base's memory in order (e.g. a reshape) needs no copy kernel, nor
        # does one view of it without padding (a transpose, a slice): numpy copies it with its strides.
        in_order = self.st.contiguous and self.size == self.base.size
        view = self.st.views[0] if len(self.st.views) == 1 else None
        if not in_order and view is not None and view.mask is None and self.size > 0 and \
                min(view.strides, default=0) >= 0:
            memory = self.realize().base.realized.as_numpy()
            return np.lib.stride_tricks.as_strided(memory[view.offset:], self.shape,
                                                   [s * memory.itemsize for s in view.strides]).copy()
        dense = (self if in_order else self.contiguous()).realize()
        return dense.base.realized.as_numpy().reshape(self.shape).copy()

    # ---- movement: views, never copies ----
    # --8<-- [start:view]
    def _view(self, st: ShapeTracker) -> "LazyBuffer":
        if st is self.st or st == self.st:  # (`is` first: equal trackers are most often one object)
            return self
        base = self._base
        if base is None:  # (self is the base: its tracker was just compared)
            base = self
        elif st is base.st or st == base.st:  # e.g. a reshape that undoes another: the base, not a view
            return base
        key = ("view", id(base), id(st))  # (by identity, checked on a hit: see `create`)
        ref = _NODES.refs.get(key)
        cached = None if ref is None else ref()
        if cached is not None and cached._base is base and cached.st is st:
            return cached
        view = LazyBuffer(self.device, st, self.dtype, base=base)
        _NODES.refs[key] = weakref.ref(view)  # (_NODES[key] = view, without its method call: a hot path)
        if len(_NODES.refs) >= _NODES.sweep_at:
            _NODES.sweep()
        return view

    # --8<-- [end:view]
    # reshape, permute, expand, pad and shrink are the core's: each asks the ShapeTracker, then _view
    def stride(self, steps: tuple[int, ...]) -> "LazyBuffer":
        return self._view(self.st.stride(steps))



class _Nodes:
    """Nodes by what they compute, held by weak references so the cache never keeps a graph alive.

    A plain dict of weak references, swept of the dead ones whenever it has doubled since the last
    sweep: weakref.WeakValueDictionary removes each entry as its node dies, through a callback per
    node, which costs an eager step more Python time than all its lookups.

    Constants are the exception (`keep`): they have no sources and no memory, so a few thousand of
    them kept alive cost little, and a step's graph dies after every step while the next asks for
    the same constants again.
    """

    def __init__(self) -> None:
        self.refs: dict[tuple, weakref.ref] = {}  # (read directly by `create`, the hot path)
        self.sweep_at = 1024
        self.kept: dict[tuple, LazyBuffer] = {}

    def keep(self, key: tuple, node: "LazyBuffer") -> None:
        """Hold `node` strongly under `key` (all are dropped once MAX_KEPT are held)."""
        if len(self.kept) >= MAX_KEPT:
            self.kept.clear()
        self.kept[key] = node

    def get(self, key: tuple) -> "LazyBuffer | None":
        ref = self.refs.get(key)
        return None if ref is None else ref()

    def __setitem__(self, key: tuple, node: "LazyBuffer") -> None:
        self.refs[key] = weakref.ref(node)
        if len(self.refs) >= self.sweep_at:
            self.sweep()

    def sweep(self) -> None:
        """Drop the entries of dead nodes (run whenever the entries have doubled since the last sweep)."""
        self.refs = {key: ref for key, ref in self.refs.items() if ref() is not None}
        self.sweep_at = max(1024, 2 * len(self.refs))

    def clear(self) -> None:
        self.refs.clear()
        self.kept.clear()

    def __len__(self) -> int:
        """The nodes alive."""
        self.sweep()
        return len(self.refs)


# Every node built, by what it computes (a node whose sources died is never handed out: `create` and
# `_view` check that the sources are the very objects asked for).
MAX_KEPT = 4096
_NODES = _Nodes()
# A kept constant may have been given memory: drop them at exit, while the runtime that frees a device
# buffer (and keeps its counters) is still there, not in the teardown of the modules.
atexit.register(_NODES.clear)


# The computations planned on each device buffer (weakly: a dropped graph leaves no trace). assign
# asks for the ones that have not run yet, so that they can keep reading the old values.
class _Readers:
    """The nodes planned on one device buffer: weak references without callbacks, by the node's id.
    The buffer holds them (`buffer.readers`, set by LazyBuffer.__init__), so a node finds them without
    a lookup, and they go when the buffer goes.

    Not a weakref.WeakSet: that gives each reader a weak reference with a callback, a Python call
    when the node is made and another when it dies, for every node that reads a weight, every step.
    Here a dead reader's entry stays until a new node takes its id, until `alive()` (which drops
    them), or until the sweep that runs whenever the entries have doubled since the last one (as
    _Nodes does)."""

    __slots__ = ("refs", "sweep_at")

    def __init__(self) -> None:
        self.refs: dict[int, weakref.ref] = {}
        self.sweep_at = 64

    def add(self, node: "LazyBuffer") -> None:
        self.refs[id(node)] = weakref.ref(node)
        if len(self.refs) >= self.sweep_at:
            self.sweep()

    def sweep(self) -> None:
        """Drop the entries of dead readers."""
        self.refs = {key: ref for key, ref in self.refs.items() if ref() is not None}
        self.sweep_at = max(64, 2 * len(self.refs))

    def alive(self) -> list["LazyBuffer"]:
        """The readers still alive. The dead ones' entries are dropped on the way: assign asks once
        per weight and step, and would otherwise look at every reader of the last steps again."""
        self.sweep()
        nodes = [ref() for ref in self.refs.values()]
        return [node for node in nodes if node is not None]  # (one may have died since: a collection)


def pending_readers(buffer: Any) -> list[LazyBuffer]:
    """The computations planned on `buffer` that have not run yet (and are still alive)."""
    readers = buffer.readers
    return [] if readers is None else [node for node in readers.alive() if node.realized is None]


@memoized
def _reduced(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[tuple[int, ...], ShapeTracker]:
    """The axes of a reduce of `shape`, sorted once each, and the tracker of its result (the same
    reduces come back every step, so both are remembered)."""
    axes = tuple(sorted(set(axes)))
    return axes, ShapeTracker.from_shape(tuple(1 if i in axes else s for i, s in enumerate(shape)))


def _versions(srcs: tuple[LazyBuffer, ...]) -> tuple[int | None, ...]:
    """The write count of each source's memory (None for a source not in memory yet)."""
    buffers = [(s._base or s).realized for s in srcs]  # (s.base, without a property call: a hot path)
    return tuple([None if b is None else b.version for b in buffers])


@memoized
def _scalar_as(key: Any, value: float | int | bool, dtype: DType) -> float | int | bool:
    """`value` cast like every device casts (dtype.cast_array) and like PyTorch's scalars: 2.7 in an
    int32 buffer is 2, -2 in a uint8 one wraps to 254, anything non-zero in a bool one is True.

    Remembered by the value's bits (`key`) and dtype: a step asks for the same few constants every
    time, and a round trip through numpy costs more than the rest of making the constant."""
    as_float = isinstance(value, float) or not -(2**63) <= value < 2**64  # (beyond 64 bits: a float)
    wide = np.array(value, dtype=np.float64 if as_float else np.uint64 if value >= 2**63 else np.int64)
    return cast_array(wide, dtype).item()


# --8<-- [start:fold]
def _constant(x: LazyBuffer) -> float | int | bool | None:
    """The value of an unpadded constant (padding would make some elements 0)."""
    base = x._base or x  # (x.base, without a property call: a hot path)
    if base.op is LoadOps.CONST and all(v.mask is None for v in x.st.views):
        return base.arg
    return None


def _in_float32(op: Any, operands: tuple[LazyBuffer, ...], arg: Any, dtype: DType) -> LazyBuffer:
    """float16 and bfloat16 are storage types: an op on them computes in float32 and rounds its
    result back, as PyTorch's CPU kernels do. So renderers only ever load, store and cast them."""
    wide = [x.cast(dtypes.float32) if x.dtype.is_half else x for x in operands]
    out = wide[0].e(op, *wide[1:], arg=arg)
    return out.cast(dtype) if out.dtype != dtype else out


def _fold_constants(op: Any, operands: tuple[LazyBuffer, ...], dtype: DType) -> LazyBuffer | None:
    """x+0, 0+x, x-0, x*1, 1*x, x/1 are x; a cast of a constant is a constant, and so is -c, and
    c1 + c2, c1 - c2, c1 * c2 and c1 / c2 of float constants. None: nothing to fold.

    The zero must be the right one for floats, compared by bits: x + (-0.0) is x for every x, but
    x + 0.0 is not (-0.0 + 0.0 is +0.0), and x - 0.0 is x but x - (-0.0) is not.

    Why fold constants: a mean's gradient is 1 / n, broadcast, and negated by the loss; left as ops,
    each would be a kernel of every training step (a division read through an expand is worth
    storing, see the scheduler's rules). These five are the ops IEEE rounds correctly, so numpy's
    answer in the dtype is the one the CPU devices compute (x / 0 is inf, 0 / 0 NaN, as there); a GPU
    may round a division less exactly (OpenCL and WGSL allow 2.5 ulp), and gets the exact value here.
    """
    values = [_constant(x) for x in operands]  # (each operand's value, or None: read once for all cases)
    if op is UnaryOps.CAST:
        value = values[0]
        return None if value is None else LazyBuffer.full(value, operands[0].shape, dtype, operands[0].device)
    exact = _EXACT.get(op)
    if exact is not None and None not in values and dtype.is_float and \
            all(x.dtype == dtype for x in operands):
        with np.errstate(all="ignore"):  # (inf and NaN are answers here, not mistakes)
            value = exact(*[np.array(v, dtype.np) for v in values])
        return LazyBuffer.full(value.item(), operands[0].shape, dtype, operands[0].device)
    if op not in _IDENTITIES or len(operands) != 2:  # (no identity to fold away)
        return None
    identity = _IDENTITIES[op][0 if dtype.is_float else 1]
    (x, y), (cx, cy) = operands, values
    if cy is not None and _is(cy, identity) and x.dtype == dtype:
        return x
    if cx is not None and _is(cx, identity) and op in (BinaryOps.ADD, BinaryOps.MUL) and y.dtype == dtype:
        return y
    return None


# the float ops of constants that _fold_constants computes: each rounded correctly, once, as IEEE asks
_EXACT = {UnaryOps.NEG: np.negative, BinaryOps.ADD: np.add, BinaryOps.SUB: np.subtract,
          BinaryOps.MUL: np.multiply, BinaryOps.DIV: np.divide}

# the identity of each op that _fold_constants folds: (for floats, for ints and bools)
_IDENTITIES = {BinaryOps.ADD: (-0.0, 0), BinaryOps.SUB: (0.0, 0),
               BinaryOps.MUL: (1, 1), BinaryOps.DIV: (1, 1)}


def _is(value: float | int | bool, identity: float | int) -> bool:
    """value is the identity: bit for bit for a float zero, by value otherwise (1 == 1.0 == True)."""
    if isinstance(identity, float) and identity == 0:
        return isinstance(value, float) and const_key(value) == const_key(identity)
    return value == identity


# --8<-- [end:fold]
