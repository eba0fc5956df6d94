"""Kernel: a kernel AST with every buffer's view brought to one loop shape.

The AST says *what* to compute; before it can become loops, every buffer must agree on *which*
loops. The leaves of an AST come in two shapes: below the REDUCE they have the reduce's input
shape, e.g. (4, 16); above it (and the STORE) the output shape, (4, 1). A Kernel:

1. puts the output axes first and the reduced axes last, by permuting every ShapeTracker, so the
   loops nest as `for gidx... { for ridx... }`: one output element per iteration of the outer loops,
   a reduce inside. (Sum a (16, 4) array over axis 0 and the loops become `gidx0 < 4`, `ridx0 < 16`.)
   This step is the core's Kernel (tinyedu/core/linearizer.py), which this one subclasses: it
   checks the AST, names the kernel and lists the buffers (`bufs`) with their views (`sts`).
2. drops axes of size 1 everywhere (a loop that runs once is no loop), by reshaping.

The result is the *full shape*, e.g. (4, 16), with `first_reduce` = 1 telling where the reduce
axes start. Output-shaped buffers have size 1 on the reduce axes: they are read (and written) with
index 0 there, outside the reduce loops.

3. splits a long float SUM into blocks (tinyedu/codegen/sum_blocks.py says why): its reduce axes
   become BLOCK loops (levels, each adding at most 64 partial sums) around REDUCE loops (a block of
   at most 4096 elements). Sum 10^8 ones and the loops become `bidx0<50 bidx1<25 bidx2<25 ridx0<3200`.

Optimizations (stage 5, tinyedu/codegen/opts.py) change the loops without changing the result, and
each one is again only a reshape and a permute of these same ShapeTrackers: split an axis of size
n into (n/k, k), and move the k part elsewhere. Every axis has a *kind* that says what the
linearizer makes of it, and the kinds always come in this order:

    THREAD | LOOP ... | BLOCK ... | REDUCE ... | UPCAST and UNROLL ...
    one loop split    output loops  levels of a  reduce loops  not loops: written out k times in the
    across threads                  long sum                   loop body (UPCAST: k outputs, UNROLL:
                                                               k reduce steps)

A kernel for a GPU (stage 7, `kernel.gpu` holds the device's limits) has three more kinds, which
are not loops either: each is a *thread index*, the GPU runs one copy of the body per value.

    GLOBAL ... | LOCAL ... | LOOP ... | GROUP ... | BLOCK ... | REDUCE ... | UPCAST and UNROLL ...
    workgroups   threads of                a reduce axis
    of the grid  a workgroup               split across a workgroup's threads (partials in
    (gid)        (lid)                     shared memory, then combined by its first thread; lid)

The opts applied so far are in `applied_opts`, printed with the kernel.
"""

from __future__ import annotations

import copy
from enum import Enum

from tinyedu.codegen import sum_blocks
from tinyedu.codegen.opt import Opt
from tinyedu.core import linearizer as core_linearizer
from tinyedu.core.helpers import prod
from tinyedu.core.linearizer import ast_dtype
from tinyedu.core.ops import ConstBuffer, LazyOp, MemBuffer, ReduceOps
from tinyedu.launch import GPULimits, LaunchDims

Leaf = MemBuffer | ConstBuffer


class AxisKind(Enum):
    """What the linearizer makes of one axis of the full shape."""

    GLOBAL = "global"   # GPU: an output axis spread over the workgroups of the grid (gid)
    LOCAL = "local"     # GPU: an output axis spread over the threads of a workgroup (lid)
    GROUP = "group"     # GPU: a reduce axis spread over the threads of a workgroup (lid)
    THREAD = "thread"   # the outermost loop, its iterations shared by several threads
    LOOP = "loop"       # an output loop (gidx)
    BLOCK = "block"     # a level of a long sum (bidx): each iteration sums a block into a fresh total
    REDUCE = "reduce"   # a reduce loop (ridx)
    UNROLL = "unroll"   # a reduce axis written out in the loop body: one accumulator per position
    UPCAST = "upcast"   # an output axis written out in the loop body: a block of outputs (a vector)


EXPANDED = (AxisKind.UPCAST, AxisKind.UNROLL)
GPU_KINDS = (AxisKind.GLOBAL, AxisKind.LOCAL, AxisKind.GROUP)   # thread indices, not loops


class Kernel(core_linearizer.Kernel):
    """An AST plus one ShapeTracker per buffer, all in the kernel's full shape.

    The core's Kernel does step 1 (the name, `bufs` and their views `sts`, reduced axes last). This
    one goes on with steps 2 and 3, and holds what opts and the GPU passes change (`kinds`,
    `applied_opts`, threads, packs, `gpu`).
    """

    # --8<-- [start:full-shape]
    def __init__(self, ast: LazyOp):
        super().__init__(ast)  # reduceop, name, full_shape (reduced axes last), first_reduce, bufs, sts
        self.applied_opts: list[Opt] = []
        self.threads = 1                          # set by a THREAD opt
        self.thread_blocks = False                # set by a THREAD opt on the outermost BLOCK loop
        self.packs: list[tuple[int, int]] = []    # (buffer position, loop axis) of each PACK opt
        self.linearized = False                   # set by the linearizer: no opts after that
        self.gpu: GPULimits | None = None         # a GPU's limits: set for a GPU device, allows GPU opts
        self.kinds: list[AxisKind] = [AxisKind.LOOP] * self.first_reduce + \
            [AxisKind.REDUCE] * (len(self.full_shape) - self.first_reduce)
        # 2. no size-1 axes
        self.drop_ones()
        # 3. a long float sum in blocks
        if self.reduceop is not None and self.reduceop.op is ReduceOps.SUM and \
                ast_dtype(self.reduceop.src[0]).is_float:
            self._split_into_blocks()
    # --8<-- [end:full-shape]

    # --8<-- [start:blocks]
    def _split_into_blocks(self) -> None:
        """Split the reduce axes into the pieces `sum_blocks.plan` gives: BLOCK loops around REDUCE
        loops. An axis the plan pads (a large prime size has no blocks) reads zeros past its end."""
        plans = sum_blocks.plan(self.full_shape[self.first_reduce:])
        if plans is None:
            return
        for axis in reversed(range(self.first_reduce, len(self.full_shape))):  # later axes first
            size, axis_plan = self.full_shape[axis], plans[axis - self.first_reduce]
            if axis_plan.size != size:
                self._pad_axis(axis, axis_plan.size)
            for n in range(len(axis_plan.pieces) - 1):
                self.split_axis(axis + n, prod(axis_plan.pieces[n + 1:]))
            for n in range(axis_plan.levels):
                self.kinds[axis + n] = AxisKind.BLOCK
    # --8<-- [end:blocks]

    def _pad_axis(self, axis: int, size: int) -> None:
        """Pad `axis` with zeros to `size` in every view that spans it (the sum of zeros is 0)."""
        padding = [(0, 0)] * len(self.full_shape)
        padding[axis] = (0, size - self.full_shape[axis])
        self.sts = [st.pad(padding) if st.shape[axis] == self.full_shape[axis] else st for st in self.sts]
        self.full_shape = self.full_shape[:axis] + (size,) + self.full_shape[axis + 1:]

    def copy(self) -> Kernel:
        """An independent copy (to try opts on): the ShapeTrackers are immutable, the lists are copied."""
        other = copy.copy(self)
        other.sts, other.kinds, other.bufs = list(self.sts), list(self.kinds), list(self.bufs)
        other.applied_opts, other.packs = list(self.applied_opts), list(self.packs)  # (gpu: immutable)
        return other

    # ---- what the linearizer asks ----
    @property
    def blocked(self) -> bool:
        """Whether this is a long sum split into blocks (it has BLOCK loops; THREAD may share one)."""
        return AxisKind.BLOCK in self.kinds or self.thread_blocks

    @property
    def output_shape(self) -> tuple[int, ...]:
        """The full shape with the reduce axes at size 1: the shape of bufs[0]."""
        return self.sts[0].shape

    def is_reduce_axis(self, axis: int) -> bool:
        """True for an axis that is reduced: the output does not span it."""
        return self.output_shape[axis] == 1 and self.full_shape[axis] != 1

    @property
    def loop_axes(self) -> list[int]:
        """The axes that are loops (THREAD, LOOP, BLOCK, REDUCE), outermost first."""
        return [a for a, kind in enumerate(self.kinds) if kind not in EXPANDED and kind not in GPU_KINDS]

    def axes_of(self, *kinds: AxisKind) -> list[int]:
        """The axes of these kinds, outermost first."""
        return [a for a, kind in enumerate(self.kinds) if kind in kinds]

    @property
    def launch(self) -> LaunchDims | None:
        """A GPU kernel's launch dimensions: the sizes of its GLOBAL axes (workgroups) and of its LOCAL
        and GROUP axes (threads per workgroup); None for a kernel with none (a CPU kernel)."""
        names, groups, local = self.loop_names, [1, 1, 1], [1, 1, 1]
        for axis in self.axes_of(*GPU_KINDS):
            dim = int(names[axis][3:])
            (groups if names[axis].startswith("gid") else local)[dim] = self.full_shape[axis]
        return LaunchDims(tuple(groups), tuple(local)) if self.axes_of(*GPU_KINDS) else None  # type: ignore[arg-type]

    @property
    def expanded_axes(self) -> list[int]:
        """The UPCAST and UNROLL axes: written out in the loop body, innermost last."""
        return [a for a, kind in enumerate(self.kinds) if kind in EXPANDED]

    @property
    def loop_names(self) -> list[str]:
        """One name per axis: `tidx0` for the thread loop, `gidx0, ...` for output loops, `bidx0, ...`
        for the levels of a long sum, `ridx0, ...` for reduce loops; an expanded axis is named after
        its kind and size (`upcast16`)."""
        names, counts = [], {"t": 0, "g": 0, "b": 0, "r": 0}
        gids, lids = self.axes_of(AxisKind.GLOBAL), self.axes_of(AxisKind.LOCAL, AxisKind.GROUP)
        for axis, kind in enumerate(self.kinds):
            if kind in EXPANDED:
                names.append(f"{kind.value}{self.full_shape[axis]}")
                continue
            if kind in GPU_KINDS:  # numbered from the innermost: dimension 0 (x) has the neighbours
                ids = gids if kind is AxisKind.GLOBAL else lids
                names.append(f"{'gid' if kind is AxisKind.GLOBAL else 'lid'}{len(ids) - 1 - ids.index(axis)}")
                continue
            letter = "t" if kind is AxisKind.THREAD else "b" if kind is AxisKind.BLOCK else \
                "r" if self.is_reduce_axis(axis) else "g"
            names.append(f"{letter}idx{counts[letter]}")
            counts[letter] += 1
        return names

    def __str__(self) -> str:
        names, reduce_at = self.loop_names, self.first_reduce
        loops = {a: f"{names[a]}<{self.full_shape[a]}" + (f" ({self.threads} threads)"
                                                          if self.kinds[a] is AxisKind.THREAD else "")
                 for a in self.loop_axes}
        output = [text for a, text in loops.items() if a < reduce_at]
        reduce = [text for a, text in loops.items() if a >= reduce_at]
        lines = [f"Kernel {self.name}: full shape {self.full_shape}, first_reduce={reduce_at}",
                 f"  loops: {' '.join(output) or '(none)'}"
                 + (f" | reduce {self.reduceop.op.name}: {' '.join(reduce)}" if self.reduceop else "")]
        if self.launch is not None:
            threads = " ".join(f"{names[a]}<{self.full_shape[a]} ({self.kinds[a].value})"
                               for a in self.axes_of(*GPU_KINDS))
            lines.append(f"  launch: {self.launch}: {threads}")
        expanded = [f"{names[a]} (axis {a})" for a in self.expanded_axes]
        if expanded:
            lines.append(f"  expanded in the loop body: {' '.join(expanded)}")
        for number, (buf, st) in enumerate(zip(self.bufs, self.sts, strict=True)):
            kind = "STORE" if number == 0 else ("LOAD" if isinstance(buf, MemBuffer) else "CONST")
            what = f"buf{buf.idx}" if isinstance(buf, MemBuffer) else f"{buf.val}"
            views = ", ".join(f"strides={v.strides} offset={v.offset}" + (f" mask={v.mask}" if v.mask else "")
                              for v in st.views)
            packed = [axis for position, axis in self.packs if position == number]
            lines.append(f"  {kind:5s} {what} {buf.dtype.name} shape={st.shape} {views}"
                         + (f" (packed before {names[packed[0]]})" if packed else ""))
        lines.append(f"  applied opts: {self.applied_opts}")
        return "\n".join(lines)

    # ---- the two moves every opt is made of (see tinyedu/codegen/opts.py) ----
    # --8<-- [start:moves]
    def split_axis(self, axis: int, inner: int) -> None:
        """Axis `axis` of size n becomes two, (n // inner, inner), in every ShapeTracker.

        A buffer that does not span the axis (size 1 there, e.g. the output on a reduce axis) gets
        (1, 1). Both new axes keep the old one's kind.
        """
        size = self.full_shape[axis]
        assert size % inner == 0, f"split_axis: {inner} does not divide {size}"
        self.sts = [st.reshape(st.shape[:axis] + ((size // inner, inner) if st.shape[axis] == size
                                                  else (1, 1)) + st.shape[axis + 1:]) for st in self.sts]
        self.full_shape = self.full_shape[:axis] + (size // inner, inner) + self.full_shape[axis + 1:]
        self.kinds.insert(axis, self.kinds[axis])
        self.first_reduce += axis < self.first_reduce

    def move_axis(self, axis: int, to: int, kind: AxisKind) -> None:
        """Move axis `axis` to position `to` (a permute of every ShapeTracker) and give it `kind`."""
        order = list(range(len(self.full_shape)))
        order.insert(to, order.pop(axis))
        self.sts = [st.permute(order) for st in self.sts]
        self.full_shape = tuple(self.full_shape[a] for a in order)
        self.kinds.pop(axis)
        self.kinds.insert(to, kind)
        self._count_output_loops()
    # --8<-- [end:moves]

    def drop_ones(self) -> None:
        """Remove axes of size 1 (what is left of an axis split by its own size): no loop runs once."""
        keep = [a for a, size in enumerate(self.full_shape) if size != 1]
        self.sts = [st.reshape(tuple(st.shape[a] for a in keep)) for st in self.sts]
        self.full_shape = tuple(self.full_shape[a] for a in keep)
        self.kinds = [self.kinds[a] for a in keep]
        self._count_output_loops()

    def _count_output_loops(self) -> None:
        # the output axes (GLOBAL, LOCAL, THREAD over outputs, LOOP) come first: first_reduce is where
        # they end
        outputs = (AxisKind.LOOP, AxisKind.THREAD, AxisKind.GLOBAL, AxisKind.LOCAL)
        self.first_reduce = sum(1 for a, kind in enumerate(self.kinds)
                                if kind in outputs and not self.is_reduce_axis(a))

