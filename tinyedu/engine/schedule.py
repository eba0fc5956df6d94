"""From the lazy graph to a list of kernels: where fusion happens (the core's scheduler, with more rules).

A ScheduleItem is one kernel: an AST rooted at STORE, over LOAD/CONST leaves, ALU nodes and at
most one REDUCE, plus the buffers it writes and reads. EMPTY and COPY are items too (no compute).

This is tinyedu/core/schedule.py's `Scheduler` with its three steps, at the seams the core names:
`bases` also checks that no planned source was overwritten by `assign`; `stored` is
`pick_realized`, the nine rules below (rules 1 and 2 are the core's functions); the
`KernelBuilder.inline` here pushes a view through a fused op (and fuses a reduce into the ops that
read its result in order), where the core stores whatever is seen through a view; and EMPTY and a
CONST output are loads too. `ScheduleItem`, `kernel_name` and `leaf_shape` are the core's.

The whole of fusion is one decision: which LazyBuffers get their own memory (are *realized*).
Everything not realized is inlined into the kernel that reads it. The rules, one sentence each:

1. Outputs (what `realize()` was called on) are stored.
2. Loads are stored: COPY (data from the host or another device), EMPTY, and an explicit
   `contiguous()` (which asked for memory).
3. Elementwise ops fuse into whoever reads them; a view of one is fused by composing the view into
   the LOADs below it (movement is free even inside a kernel).
4. A reduce fuses the elementwise ops before it, and the elementwise ops after it that read its
   result in the same element order (through reshapes only, which may merge or split axes: those ops
   then run in the reduce's output shape); a reduce whose result is expanded, permuted, shrunk or
   padded (or read by another reduce) is stored: a kernel has one reduce, and its loops run over
   one shape.
5. A buffer read by several kernels is stored when recomputing it in each reader would move more
   memory than storing it once (or when it contains a reduce, which is never recomputed).
6. A padded view of an elementwise result is stored when an op below it has f(0) != 0 (exp, div,
   ==, ...): fused, the padding would read 0 *before* the op, giving f(0) where 0 belongs.
7. A kernel's AST is at most MAX_KERNEL_DEPTH ops deep: a longer chain stores an intermediate.
   (Compilers bound kernel size too; here it also keeps every tree walk far from Python's
   recursion limit.) Like rule 9, it looks at the kernels the other rules made (see rule 9).
8. No expensive recompute: an elementwise result with an expensive op (exp2, log2, sin, cos, sqrt,
   a reciprocal or a division) that a reduce reads through an expand is stored, because fused it
   would be recomputed once per use (n times per element in `x.exp() @ w`) instead of once.
9. A kernel holds fewer than MAX_KERNEL_OPS distinct ops, and an op recomputed in several kernels
   does not copy that many ops into them: once the other rules have decided, their kernels are
   walked again, and where an op would take one to the bound its largest fused source is stored,
   and an op whose extra copies would reach it is stored (so the kernels' size, and their compile
   time, stay bounded).

The lazy graph is a DAG (relu reads x twice; tanh, gelu or x ** 1.5 read their input three or four
times), and so is every AST built from it: a value used twice is one node with two parents. Every
step below visits each node once, so the cost grows with the number of ops, never with the number
of paths through them (which doubles with each op that reads its input twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tinyedu.core import schedule as core
from tinyedu.core.helpers import getenv, postorder, prod
from tinyedu.core.ops import ALU_OPS, BinaryOps, BufferOps, LazyOp, LoadOps, ReduceOps, TernaryOps, UnaryOps
from tinyedu.core.schedule import Readers, ScheduleItem, Stores
from tinyedu.lazy import LazyBuffer
from tinyedu.shape import ShapeTracker
from tinyedu.shape.memo import memoized

MAX_KERNEL_DEPTH = 100
MAX_KERNEL_OPS = 256


def fusion_enabled() -> bool:
    return getenv("FUSION", 1) != 0

# Ops that cost far more than a memory access: never worth repeating for every use (rule 8).
EXPENSIVE = {UnaryOps.EXP2, UnaryOps.LOG2, UnaryOps.SIN, UnaryOps.COS, UnaryOps.SQRT, UnaryOps.RECIP,
             BinaryOps.DIV}

# Ops with f(0, ..., 0) == 0: padding (which reads 0) may be applied before them (rule 6).
ZERO_PRESERVING = {UnaryOps.NEG, UnaryOps.SIN, UnaryOps.SQRT, UnaryOps.CAST, BinaryOps.ADD, BinaryOps.SUB,
                   BinaryOps.MUL, BinaryOps.MAX, BinaryOps.CMPLT, BinaryOps.AND, BinaryOps.OR, BinaryOps.XOR,
                   TernaryOps.WHERE}


# --8<-- [start:rule-questions]
# The two questions the rules ask about costs and values, as functions: the scheduler calls them by
# name, so chapter 03's exercises can plug a learner's answer in (tinyedu/exercises/hooks.py).
def keeps_zero(op: object) -> bool:
    """Rule 6: is f(0, ..., 0) == 0 for this op? Then padding may be read before the op runs."""
    return op in ZERO_PRESERVING


def store_is_cheaper(kernels: int, leaf_elements: int, size: int, has_reduce: bool) -> bool:
    """Rule 5: store a buffer that `kernels` kernels read, rather than recompute it in each of them?

    Storing moves `size` elements out once and `size` in per reading kernel; recomputing reads the
    buffer's inputs (`leaf_elements`) in every reading kernel. A reduce is never recomputed.
    """
    return kernels > 1 and (has_reduce or kernels * leaf_elements > size * (1 + kernels))
# --8<-- [end:rule-questions]


# ---- step 1: the lazy graph, sources first ----
def bases_to_run(outs: list[LazyBuffer]) -> list[LazyBuffer]:
    """Unrealized bases the outputs depend on, sources before users: `postorder` of
    tinyedu/core/helpers.py over the unrealized bases, sources left to right.

    It is postorder's own loop written out for LazyBuffers: passed as `children`, a function per node
    that builds the list of its unrealized sources cost half the walk. Here a node's sources are
    filtered as the loop meets them. The order is postorder's exactly (tests/test_schedule_cache.py
    compares the two). The schedule cache's key, made on every realize, walks the graph the same
    way in a loop of its own that also writes the key (engine/schedule_cache.py)."""
    order: list[LazyBuffer] = []
    seen: set[int] = set()
    for out in outs:
        root = out._base or out  # (out.base, without the property call)
        if root.realized is not None or id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root.srcs))]  # each node on the path, with its sources still to go
        while stack:
            node, todo = stack[-1]
            for src in todo:
                base = src._base or src
                if base.realized is None and id(base) not in seen:  # go down into it
                    seen.add(id(base))
                    stack.append((base, iter(base.srcs)))
                    break
            else:  # every unrealized source is in `order` already: the node comes next
                stack.pop()
                order.append(node)
                if node.src_versions.count(None) != len(node.src_versions):  # (a source in memory)
                    check_versions(node)
    return order


def check_versions(node: LazyBuffer) -> None:
    """Refuse to run a computation on memory that `assign` overwrote after it was planned.

    Lazy graphs read memory when they run, not when they are built; an eager framework would have
    used the old values. Rather than silently mixing old and new, say so (like PyTorch's "modified by
    an inplace operation").
    """
    for src, planned in zip(node.srcs, node.src_versions, strict=True):
        if planned is None:  # (most sources: not in memory when the node was built)
            continue
        buffer = src.base.realized
        if buffer is not None and buffer.version != planned:
            raise RuntimeError(f"assign: a computation ({getattr(node.op, 'name', node.op)} of shape "
                               f"{node.shape}) was planned on a tensor of shape {src.base.shape} that assign "
                               "has overwritten since; realize what you need before assigning "
                               "(Tensor.realize_all(...)), or build it again afterwards")


# ---- step 2: which buffers get memory (the rules above) ----
@dataclass
class _Fused:
    """What an unrealized buffer would bring into the kernel that inlines it."""

    reduces: set[int] = field(default_factory=set)  # ids of the reduces inside
    leaves: dict[tuple, int] = field(default_factory=dict)  # (buffer, view) it reads -> elements read
    zero_preserving: bool = True                     # every op inside has f(0) == 0
    expensive: bool = False                          # an op inside is EXPENSIVE (rule 8)
    expanded_expensive: set = field(default_factory=set)  # expensive bases it reads through an expand

    @property
    def leaf_elements(self) -> int:
        """Elements its distinct leaves read from memory (a leaf read by two ops is read once)."""
        return sum(self.leaves.values())


RULES = {
    1: core.RULES[1],
    2: core.RULES[2],
    4: "rule 4: a reduce result read in another order, or by another reduce",
    5: "rule 5: read by several kernels, cheaper to store than to recompute",
    6: "rule 6: padded after an op with f(0) != 0",
    7: "rule 7: the kernel would be too deep",
    8: "rule 8 (no expensive recompute): an expensive op read through an expand by a reduce",
    9: "rule 9: the kernel would hold too many ops",
    0: "no fusion: FUSION=0 stores every op",
}


# --8<-- [start:pick]
def pick_realized(outs: list[LazyBuffer], bases: list[LazyBuffer]) -> dict[LazyBuffer, str]:
    """The bases that get their own buffer, with the rule that says so; all others are fused.

    Rules 1 and 2 look at one op at a time. Then a walk from sources to users decides each op in
    turn: first its sources (rules 4, 8), then what the op brings into a kernel (rule 3), then its
    own result (rules 4, 6). Rule 5 walks back from users to sources, as it needs every user
    decided; then rules 7 and 9 walk the kernels that are left, to bound their depth and size.
    A buffer keeps the first rule that stored it.
    """
    plan = _Plan(core.readers_of(bases))
    plan.store(core.rule1_outputs(outs))  # rules 1 and 2 are the core's
    plan.store(core.rule2_loads(bases))
    for b in bases:
        if isinstance(b.op, LoadOps):
            continue
        parts = plan.parts(b)
        for source_rule in (rule4_one_reduce_per_kernel, rule8_no_expensive_recompute):
            if plan.store(source_rule(b, parts)):
                parts = plan.parts(b)  # a stored source brings only its load now
        info = plan.fused[b] = rule3_fuse(b, parts)
        for result_rule in (rule4_reduce_read_in_order, rule6_padding_reads_zero):
            plan.store(result_rule(b, info, plan.readers[b]))
    plan.store(rule5_shared_buffers(bases, plan))
    plan.store(rule7_bounded_depth(bases, plan.stored))
    plan.store(rule9_bounded_ops(bases, plan.stored, plan.readers))
    return plan.stored
# --8<-- [end:pick]


# --8<-- [start:plan]
class _Stored(dict):
    """Stored buffers, each with the first rule that stored it."""

    def add(self, buf: LazyBuffer, rule: int) -> None:
        self.setdefault(buf, RULES[rule])


@dataclass
class _Plan:
    """The scheduler's notes while it decides: who reads what, what is stored, what fused ops bring."""

    readers: dict[LazyBuffer, Readers]
    stored: _Stored = field(default_factory=_Stored)
    fused: dict[LazyBuffer, _Fused] = field(default_factory=dict)

    def store(self, stores: Stores) -> bool:
        """Store what a rule answered; True when it named any buffer."""
        for buf, rule in stores:
            self.stored.add(buf, rule)
        return bool(stores)

    def brought_in(self, src: LazyBuffer) -> _Fused:
        """What reading `src` brings into a kernel: itself if it is stored, else its fused graph."""
        base = src.base
        if base.realized is not None or base in self.stored or base not in self.fused:
            return _Fused(set(), {} if src.is_const() else {(id(base), src.st): src.st.max_index() + 1})
        return self.fused[base]

    def parts(self, b: LazyBuffer) -> list[_Fused]:
        """What each of b's sources brings into b's kernel."""
        return [self.brought_in(src) for src in b.srcs]
# --8<-- [end:plan]


# --8<-- [start:rules-simple]
def rule3_fuse(b: LazyBuffer, parts: list[_Fused]) -> _Fused:
    """Rule 3: an op not stored is inlined into its reader, bringing its sources' parts and itself."""
    reduces = set().union(*(p.reduces for p in parts)) | ({id(b)} if isinstance(b.op, ReduceOps) else set())
    return _Fused(reduces, {key: n for p in parts for key, n in p.leaves.items()},
                  all(p.zero_preserving for p in parts) and keeps_zero(b.op),
                  b.op in EXPENSIVE or any(p.expensive for p in parts),
                  _expanded_expensive(b.srcs, parts))
# --8<-- [end:rules-simple]


# --8<-- [start:rules-sources]
def rule4_one_reduce_per_kernel(b: LazyBuffer, parts: list[_Fused]) -> Stores:
    """Rule 4, for b's sources: a kernel holds one reduce.

    A reduce stores every source that carries a reduce; an elementwise op that would join two
    different reduces stores every source that carries one but the first.
    """
    is_reduce = isinstance(b.op, ReduceOps)
    if not is_reduce and len(set().union(*(p.reduces for p in parts))) <= 1:
        return []
    carriers = [src for src, p in zip(b.srcs, parts, strict=True) if p.reduces]
    return [(src.base, 4) for src in carriers[0 if is_reduce else 1:]]


def rule8_no_expensive_recompute(b: LazyBuffer, parts: list[_Fused]) -> Stores:
    """Rule 8: a reduce stores the expensive results it reads through an expand (else recomputed per use)."""
    if not isinstance(b.op, ReduceOps):
        return []
    return [(base, 8) for base in _expanded_expensive(b.srcs, parts)]
# --8<-- [end:rules-sources]


# --8<-- [start:rules-result]
def rule4_reduce_read_in_order(b: LazyBuffer, info: _Fused, readers: Readers) -> Stores:
    """Rule 4, for b's result: a result holding a reduce is stored unless every reader is elementwise
    and reads it in its own element order (through reshapes only)."""
    out_of_order = any(not _same_order(v) or isinstance(r.op, ReduceOps) for r, v in readers)
    return [(b, 4)] if info.reduces and out_of_order else []


def rule6_padding_reads_zero(b: LazyBuffer, info: _Fused, readers: Readers) -> Stores:
    """Rule 6: a padded view reads 0; fused below an op with f(0) != 0 it would read f(0) instead."""
    padded = any(_has_mask(v.st) for _, v in readers)
    return [(b, 6)] if not info.zero_preserving and padded else []

# --8<-- [end:rules-result]


# --8<-- [start:rule5]
def rule5_shared_buffers(bases: list[LazyBuffer], plan: _Plan) -> Stores:
    """Rule 5: a buffer read by several kernels is stored when that is cheaper than recomputing it.

    It counts *kernels* (two ops of one kernel reading a buffer is fine), so it walks from users to
    sources: kernels[b] are the stored buffers whose kernels inline b.
    """
    stored = set(plan.stored)
    stores: Stores = []
    kernels: dict[LazyBuffer, set[LazyBuffer]] = {}
    for b in reversed(bases):
        if b in stored or isinstance(b.op, LoadOps):
            continue
        kernels[b] = set().union(*({r} if r in stored else kernels.get(r, set()) for r, _ in plan.readers[b]))
        info = plan.fused[b]
        if store_is_cheaper(len(kernels[b]), info.leaf_elements, b.size, bool(info.reduces)):
            stored.add(b)
            stores.append((b, 5))
    return stores
# --8<-- [end:rule5]


# --8<-- [start:rule9]
def _fused_sources(b: LazyBuffer, walked: dict, stored: set[LazyBuffer]) -> list[LazyBuffer]:
    """b's sources that its kernel computes itself: ops already walked and not stored (once each)."""
    return list(dict.fromkeys(s.base for s in b.srcs if s.base in walked and s.base not in stored))


def rule7_bounded_depth(bases: list[LazyBuffer], stored: dict[LazyBuffer, str]) -> Stores:
    """Rule 7: no kernel's AST is MAX_KERNEL_DEPTH ops deep or more: walking the kernels the other
    rules left, sources first, an op that reaches that depth is stored (see rule 9 for why last)."""
    stored, depth, stores = set(stored), {}, []
    for b in bases:
        if isinstance(b.op, LoadOps):
            continue
        depth[b] = 1 + max((depth[s] for s in _fused_sources(b, depth, stored)), default=0)
        if depth[b] >= MAX_KERNEL_DEPTH and b not in stored:
            stores.append((b, 7))
            stored.add(b)
    return stores


def rule9_bounded_ops(bases: list[LazyBuffer], stored: dict[LazyBuffer, str],
                      readers: dict[LazyBuffer, Readers]) -> Stores:
    """Rule 9: no kernel holds MAX_KERNEL_OPS distinct ops or more, and no op's recomputed copies do.

    It runs last, on the kernels the other rules left. A walk from users to sources finds the kernels
    that inline each op (as rule 5 counts them); a walk from sources to users gathers the ops each
    fused op brings (itself and its fused sources', stopping at stored buffers). While an op's
    sources would bring the bound or more, the largest of them (the first, on a tie) is stored; and
    an op inlined into k kernels is stored when its k - 1 extra copies would hold the bound or more
    (rule 5 weighs memory only: recomputing from an 8-element input looks free however many ops).

    Why last: run while the other rules are still deciding, it would count ops that rule 5 then
    stores anyway. Chapter 10's LSTM step (20 steps) has no kernel over 81 ops, yet counted that way
    the ops reach 256 there 47 times, and a cheaper tanh would move those cuts and make more kernels
    (rule 7 likewise with depth). Run last, where every kernel stays under the bounds (the LSTM, MLP
    and Transformer steps), rules 7 and 9 store nothing, and how many ops a formula takes does not
    enter the schedule. Where they do cut, the cuts are greedy: fewer ops can still move them.
    """
    stored = set(stored)
    kernels: dict[LazyBuffer, set[LazyBuffer]] = {}
    for b in reversed(bases):
        if b not in stored and not isinstance(b.op, LoadOps):
            kernels[b] = set().union(*({r} if r in stored else kernels.get(r, set()) for r, _ in readers[b]))
    fused_ops: dict[LazyBuffer, frozenset[int]] = {}
    stores: Stores = []
    for b in bases:
        if isinstance(b.op, LoadOps):
            continue
        ops = {src: fused_ops[src] for src in _fused_sources(b, fused_ops, stored)}
        while len(frozenset().union(*ops.values())) >= MAX_KERNEL_OPS:
            largest = max(ops, key=lambda base: len(ops[base]))
            stores.append((largest, 9))
            stored.add(largest)
            del ops[largest]  # stored, it brings its load and no op
        fused_ops[b] = frozenset().union(*ops.values()) | {id(b)}
        if b not in stored and (len(kernels.get(b, ())) - 1) * len(fused_ops[b]) >= MAX_KERNEL_OPS:
            stores.append((b, 9))  # its extra copies would be a kernel's worth of ops
            stored.add(b)
    return stores
# --8<-- [end:rule9]


# --8<-- [start:rule8]
def _expanded_expensive(srcs: tuple[LazyBuffer, ...], parts: list[_Fused]) -> set[LazyBuffer]:
    """The fused expensive bases that these sources read through an expand (rule 8)."""
    found = set().union(*(p.expanded_expensive for p in parts))
    for src, part in zip(srcs, parts, strict=True):
        if part.expensive and _expands(src.st):
            found.add(src.base)
    return found


def _expands(st: ShapeTracker) -> bool:
    """A view that reads some element more than once: an axis of stride 0 (a broadcast)."""
    return any(stride == 0 and size > 1 for view in st.views
               for size, stride in zip(view.shape, view.strides, strict=True))
# --8<-- [end:rule8]


def _same_order(view: LazyBuffer) -> bool:
    """A view that only regroups axes: element k is still element k of its base (a plain reshape)."""
    return view.st.contiguous and view.size == view.base.size


def _has_mask(st: ShapeTracker) -> bool:
    return any(v.mask is not None for v in st.views)


# ---- step 3: one AST per stored buffer ----
# --8<-- [start:builder]
class KernelBuilder(core.KernelBuilder):
    """The core's KernelBuilder, whose `inline` also takes a fused op seen through a view (rule 3) and
    a reduce read in its own order (rule 4); `build` then gives the kernel the reduce's shape."""

    reduce_shape: tuple[int, ...] | None = None  # the shape of a fused reduce's result, once one is inlined

    def build(self) -> LazyOp:
        store = super().build()
        if self.reduce_shape is not None and self.reduce_shape != self.root.shape:
            # elementwise ops after a reduce run in the reduce's output shape (a plain reshape of ours)
            store = _reshape_leaves(store, self.reduce_shape)
        return store

    def inline(self, base: LazyBuffer, st: ShapeTracker) -> LazyOp:
        """Inline `base`'s op, its sources seen through their own views and then through `st`."""
        if isinstance(base.op, ReduceOps):
            # rule 4 guarantees a fused reduce is only seen in its own element order
            assert st.contiguous and st.size == base.size, f"reduce fused through a reordering view {st}"
            self.reduce_shape = base.shape
            return LazyOp(base.op, tuple(self.read(s, s.st) for s in base.srcs), base.arg)
        same = st == ShapeTracker.from_shape(base.shape)
        return LazyOp(base.op, tuple(self.read(s, s.st if same else compose(s.st, st)) for s in base.srcs),
                      base.arg)
# --8<-- [end:builder]


# --8<-- [start:compose]
def compose(inner: ShapeTracker, outer: ShapeTracker) -> ShapeTracker:
    """`outer` seen through `inner`: inner's views read the memory, outer's views read inner's result."""
    return ShapeTracker(inner.views + outer.views).simplify()
# --8<-- [end:compose]


def _reshape_leaves(ast: LazyOp, shape: tuple[int, ...]) -> LazyOp:
    """Reshape the leaves of the part of an AST above its REDUCE, so the kernel runs in one shape.

    Each node is rebuilt once, after its sources, so a shared node stays one shared node."""
    above_reduce = postorder([ast], lambda node: () if isinstance(node.op, ReduceOps) else node.src)
    new: dict[int, LazyOp] = {}
    for node in above_reduce:
        if isinstance(node.op, ReduceOps):
            new[id(node)] = node
        elif node.op in (BufferOps.LOAD, BufferOps.CONST):
            new[id(node)] = LazyOp(node.op, (), replace(node.arg, st=node.arg.st.reshape(shape)))
        else:
            new[id(node)] = LazyOp(node.op, tuple(new[id(s)] for s in node.src), node.arg)
    return new[id(ast)]


# --8<-- [start:scheduler]
class Scheduler(core.Scheduler):
    """The core's Scheduler with the full library's steps: `bases` checks for overwritten sources,
    `stored` applies the nine rules (or, without fusion, stores every op), and kernels are built
    with the KernelBuilder above. EMPTY and a CONST output are loads: no compute, the realizer
    allocates or fills them."""

    LOADS = (LoadOps.EMPTY, LoadOps.COPY, LoadOps.CONST)
    Builder = KernelBuilder

    def __init__(self, fuse: bool = True):
        self.fuse = fuse

    def bases(self, outs: list[LazyBuffer]) -> list[LazyBuffer]:
        return bases_to_run(outs)

    def stored(self, outs: list[LazyBuffer], bases: list[LazyBuffer]) -> dict[LazyBuffer, str]:
        if not self.fuse:
            return {b: RULES[0] for b in bases if not b.is_const()}
        return pick_realized(outs, bases)


def create_schedule(outs: list[LazyBuffer], fuse: bool | None = None) -> list[ScheduleItem]:
    """The kernels that compute `outs`, in an order where every input is ready before it is read.

    `fuse=False` (or the environment variable FUSION=0) stores every op's result: one kernel per op,
    which is how an eager framework runs, and what fusion is measured against.
    """
    return (FUSING if (fusion_enabled() if fuse is None else fuse) else UNFUSED).schedule(outs)


FUSING, UNFUSED = Scheduler(fuse=True), Scheduler(fuse=False)  # (made once: a step schedules often)
# --8<-- [end:scheduler]


@memoized
def count_flops(ast: LazyOp) -> int:
    """ALU and reduce operations one run of the kernel performs (each op once per element it makes).

    One pass, children before parents, carrying each node's shape up (this runs for every kernel).
    A shared node is computed once, so it counts once.
    """
    shapes: dict[int, tuple[int, ...]] = {}
    flops = 0
    for node in ast.toposort():
        if node.op in (BufferOps.LOAD, BufferOps.CONST):
            shapes[id(node)] = node.arg.st.shape
            continue
        shape = shapes[id(node.src[0])]
        if isinstance(node.op, ReduceOps):
            flops += prod(shape)
            shape = tuple(1 if i in node.arg else s for i, s in enumerate(shape))
        elif isinstance(node.op, ALU_OPS):
            flops += prod(shape)
        shapes[id(node)] = shape
    return flops
