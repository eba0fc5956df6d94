"""Kernel: a kernel AST with every buffer's view brought to one loop shape.

The AST says *what* to compute; before it can become loops, every buffer must agree on *which*
loops. The leaves of an AST come in two shapes: below the REDUCE they have the reduce's input
shape, e.g. (4, 16); above it (and the STORE) the output shape, (4, 1). A Kernel:

1. puts the output axes first and the reduced axes last, by permuting every ShapeTracker, so the
   loops nest as `for gidx... { for ridx... }`: one output element per iteration of the outer loops,
   a reduce inside. (Sum a (16, 4) array over axis 0 and the loops become `gidx0 < 4`, `ridx0 < 16`.)
2. drops axes of size 1 everywhere (a loop that runs once is no loop), by reshaping.

The result is the *full shape*, e.g. (4, 16), with `first_reduce` = 1 telling where the reduce
axes start. Output-shaped buffers have size 1 on the reduce axes: they are read (and written) with
index 0 there, outside the reduce loops.

`applied_opts` is where optimizations (splitting loops, unrolling, vectorizing) will be recorded;
each one is a small reshape/permute of these same ShapeTrackers. None are applied yet.
"""

from __future__ import annotations

from tinyedu.helpers import dedup, prod
from tinyedu.ops import BufferOps, ConstBuffer, LazyOp, MemBuffer, ReduceOps
from tinyedu.shape import ShapeTracker

Leaf = MemBuffer | ConstBuffer


class Kernel:
    """An AST plus one ShapeTracker per buffer, all in the kernel's full shape."""

    def __init__(self, ast: LazyOp):
        if ast.op is not BufferOps.STORE:
            raise ValueError(f"Kernel: an AST must be rooted at STORE, got {ast.op}; "
                             "pass ScheduleItem.ast of a compute kernel (not a COPY/EMPTY item)")
        self.ast = ast
        reduces = [n for n in ast.walk() if isinstance(n.op, ReduceOps)]
        if any(r != reduces[0] for r in reduces):
            raise ValueError("Kernel: an AST may hold one REDUCE (possibly repeated), found different ones: "
                             + ", ".join(f"{r.op.name} over {r.arg}" for r in dedup(reduces)))
        self.reduceop: LazyOp | None = reduces[0] if reduces else None
        self.applied_opts: list[str] = []

        below = dedup(leaf.arg for leaf in self.reduceop.leaves) if self.reduceop else []
        above = dedup(leaf.arg for leaf in _leaves_above_reduce(ast))
        self.name, input_shape, output_shape = self._shapes(below, above)

        # --8<-- [start:full-shape]
        # 1. output axes first, reduced axes last
        axes = tuple(self.reduceop.arg) if self.reduceop else ()
        order = [a for a in range(len(input_shape)) if a not in axes] + sorted(axes)
        permuted = tuple(input_shape[a] for a in order)
        # 2. no size-1 axes
        keep = [a for a, size in enumerate(permuted) if size != 1]
        self.full_shape: tuple[int, ...] = tuple(permuted[a] for a in keep)
        self.first_reduce: int = sum(1 for a in keep if a < len(order) - len(axes))

        def to_full(st: ShapeTracker) -> ShapeTracker:
            st = st.permute(order)
            return st.reshape(tuple(st.shape[a] for a in keep))

        store = ast.arg
        store_st = store.st.reshape(output_shape)  # same elements; it may have dropped the 1s
        # bufs[0] is the output; then every distinct leaf (a buffer read through one view, or a const)
        self.bufs: list[Leaf] = [store] + dedup(below + above)
        self.sts: list[ShapeTracker] = [to_full(store_st)] + [to_full(b.st) for b in self.bufs[1:]]
        self._st_of = {b: st for b, st in zip(self.bufs[1:], self.sts[1:], strict=True)}
        # --8<-- [end:full-shape]

    def _shapes(self, below: list[Leaf], above: list[Leaf]) -> tuple[str, tuple, tuple]:
        """The kernel's name, input shape and output shape; errors when the leaves disagree."""
        store_shape = self.ast.arg.st.shape
        if self.reduceop is None:
            input_shape = output_shape = above[0].st.shape if above else store_shape
            name = "E_" + ("_".join(map(str, input_shape)) or "1")
        else:
            input_shape = below[0].st.shape
            output_shape = tuple(1 if a in self.reduceop.arg else s for a, s in enumerate(input_shape))
            name = "r_" + ("_".join(map(str, input_shape)) or "1")
        expected = ((below, input_shape, "below the REDUCE"), (above, output_shape, "output"))
        for leaves, shape, where in expected:
            for leaf in leaves:
                if leaf.st.shape != shape:
                    raise ValueError(f"Kernel {name}: a leaf {where} has shape {leaf.st.shape}, expected "
                                     f"{shape}; the scheduler must reshape every leaf to the kernel's shape")
        if prod(store_shape) != prod(output_shape):
            raise ValueError(f"Kernel {name}: STORE shape {store_shape} has a different size than the "
                             f"output shape {output_shape}")
        return name, input_shape, output_shape

    # ---- what the linearizer asks ----
    def st_of(self, leaf: Leaf) -> ShapeTracker:
        """The ShapeTracker of a LOAD/CONST leaf, in the full shape."""
        return self._st_of[leaf]

    @property
    def output_shape(self) -> tuple[int, ...]:
        """The full shape with the reduce axes at size 1: the shape of bufs[0]."""
        return self.sts[0].shape

    @property
    def loop_names(self) -> list[str]:
        """`gidx0, gidx1, ...` for the output axes, `ridx0, ...` for the reduce axes."""
        return [f"gidx{a}" for a in range(self.first_reduce)] + \
               [f"ridx{a}" for a in range(len(self.full_shape) - self.first_reduce)]

    def __str__(self) -> str:
        loops = [f"{name}<{size}" for name, size in zip(self.loop_names, self.full_shape, strict=True)]
        lines = [f"Kernel {self.name}: full shape {self.full_shape}, first_reduce={self.first_reduce}",
                 f"  loops: {' '.join(loops[:self.first_reduce]) or '(none)'}"
                 + (f" | reduce {self.reduceop.op.name}: {' '.join(loops[self.first_reduce:])}"
                    if self.reduceop else "")]
        for number, (buf, st) in enumerate(zip(self.bufs, self.sts, strict=True)):
            kind = "STORE" if number == 0 else ("LOAD" if isinstance(buf, MemBuffer) else "CONST")
            what = f"buf{buf.idx}" if isinstance(buf, MemBuffer) else f"{buf.val}"
            views = ", ".join(f"strides={v.strides} offset={v.offset}" + (f" mask={v.mask}" if v.mask else "")
                              for v in st.views)
            lines.append(f"  {kind:5s} {what} {buf.dtype.name} shape={st.shape} {views}")
        lines.append(f"  applied opts: {self.applied_opts}")
        return "\n".join(lines)


def _leaves_above_reduce(ast: LazyOp) -> list[LazyOp]:
    """The LOAD/CONST leaves that are not under the REDUCE (read once per output element).

    The AST is a DAG: each node is visited once, however many parents share it."""
    found, stack, seen = [], [ast], set()
    while stack:
        node = stack.pop()
        if isinstance(node.op, ReduceOps) or id(node) in seen:
            continue
        seen.add(id(node))
        if node.op in (BufferOps.LOAD, BufferOps.CONST):
            found.append(node)
        stack.extend(reversed(node.src))
    return found

