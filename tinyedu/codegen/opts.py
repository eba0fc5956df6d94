"""Optimizations as views: each Opt reshapes and permutes a Kernel's ShapeTrackers.

A Kernel's loops compute the right result in any order and at any granularity, so an optimization
is only a change of *which loops there are*: split an axis of size n into (n/k, k) and move or
re-label one part. The AST, and so the result, never changes (up to the order of a reduction).

| Opt                | on axis         | what it does                                                   |
| ------------------ | --------------- | -------------------------------------------------------------- |
| UPCAST(axis, k)    | an output loop  | split off k outputs per iteration, written out in the loop     |
|                    |                 | body: a register block; the first one applied is innermost and |
|                    |                 | becomes a vector when a buffer is contiguous along it          |
| UNROLL(axis, k)    | a reduce loop   | split off k reduce steps per iteration, written out, each with |
|                    |                 | its own accumulator (combined after the loop); contiguous: a   |
|                    |                 | vector accumulator, summed across its lanes at the end         |
| THREAD(axis, n)    | an output loop  | make it the outermost loop and share its iterations among n    |
|                    | (or a reduce    | threads; a reduce axis (only when there are no output loops)   |
|                    | loop, or the    | is split in n parts whose results are combined after; the      |
|                    | outer BLOCK)    | outermost level of a long sum keeps its blocks: threads share  |
|                    |                 | them, and the block totals are combined after, in order        |
| SWAP(axis, other)  | two loops       | exchange two output loops (or two reduce loops): loop order    |
| TILE(axis, k)      | an output loop  | split (n/k, k) and move the n/k part outermost: walk a k-wide  |
|                    | (or a reduce    | tile of this axis while the loops in between run (a reduce     |
|                    | loop)           | loop is split in place: a loop over tiles, a loop within one)  |
| PACK(axis, buffer) | a loop, a       | before loop `axis`, copy the tile of `buffer` that the loops   |
|                    | buffer          | inside read into a contiguous local array; read it from there  |

On a GPU (stage 7: the kernel has `kernel.gpu`, the device's limits) three more map axes onto threads:

| GLOBAL(axis)       | an output loop  | spread it over the grid's workgroups (at most three axes)      |
| LOCAL(axis, k)     | a GLOBAL axis   | split (n/k, k): k threads of each workgroup take the k part    |
| GROUP(axis, k)     | a reduce loop   | split (n/k, k): k threads of a workgroup each reduce a part,   |
|                    |                 | every k-th element; the partials meet in shared memory, and    |
|                    |                 | after a barrier the workgroup's first thread combines them     |
| PACK(axis, buffer) | a reduce loop   | on a GPU: before the loop, the workgroup copies the tile of    |
|                    |                 | `buffer` its threads read in it into shared memory, each       |
|                    |                 | thread a share; barriers before and after its use              |

Each opt checks that it makes sense on this kernel and raises OptError naming the opt, the kernel
and what would be valid otherwise. The linearizer (tinyedu/codegen/linearizer.py) turns the
kinds of axes into code; the heuristics (tinyedu/codegen/heuristics.py) and the BEAM search
(tinyedu/codegen/search.py) choose opts. An opt itself, `Opt(OptOps.UPCAST, axis, amount)`, is
plain data (tinyedu/codegen/opt.py), which the Kernel records.
"""

from __future__ import annotations

from tinyedu.codegen.kernel import GPU_KINDS, AxisKind, Kernel
from tinyedu.codegen.opt import Opt, OptOps
from tinyedu.core.helpers import prod
from tinyedu.core.ops import BufferOps, MemBuffer
from tinyedu.shape import NumNode, Variable

MAX_EXPANDED = 1024       # at most this many lanes in the loop body (product of UPCAST/UNROLL sizes)
MAX_PACK_ELEMENTS = 1 << 16   # a packed tile: at most 256 KB of float32, on the stack of each thread
MAX_THREADS = 64


class OptError(ValueError):
    """An opt that does not apply to this kernel (the message says why and what would)."""


def apply_opts(kernel: Kernel, opts: list[Opt]) -> Kernel:
    for opt in opts:
        apply_opt(kernel, opt)
    return kernel


# --8<-- [start:apply]
def apply_opt(kernel: Kernel, opt: Opt) -> None:
    """Apply one opt to `kernel` (in place) after checking it; record it in `kernel.applied_opts`."""
    _check_common(kernel, opt)
    MOVES[opt.op](kernel, opt.axis, opt.amount)
    kernel.drop_ones()  # an axis split by its own size leaves a size-1 axis: no loop runs once
    kernel.applied_opts.append(opt)


def upcast(k: Kernel, axis: int, amount: int) -> None:
    """Split off `amount` positions and move them to the front of the expanded axes.

    The front, so that the first UPCAST applied stays the innermost: a later split of what is
    left of the same axis (its outer part) must lie outside the part split off before.
    """
    k.split_axis(axis, amount)
    first_expanded = min(k.expanded_axes, default=len(k.full_shape))
    k.move_axis(axis + 1, first_expanded - 1, AxisKind.UPCAST)


def unroll(k: Kernel, axis: int, amount: int) -> None:
    """UPCAST's twin for a reduce axis."""
    k.split_axis(axis, amount)
    first_expanded = min(k.expanded_axes, default=len(k.full_shape))
    k.move_axis(axis + 1, first_expanded - 1, AxisKind.UNROLL)


def thread(k: Kernel, axis: int, threads: int) -> None:
    """The loop goes outermost, its iterations shared by `threads` threads; a reduce axis is first
    split into `threads` parts (one partial result each, combined after the loop). The outermost
    BLOCK loop is not split: its blocks are the parts, so the sum does not depend on `threads`."""
    k.thread_blocks = k.kinds[axis] is AxisKind.BLOCK
    if k.is_reduce_axis(axis) and not k.thread_blocks:
        k.split_axis(axis, k.full_shape[axis] // threads)
    k.move_axis(axis, 0, AxisKind.THREAD)
    k.threads = threads


def swap(k: Kernel, axis: int, other: int) -> None:
    first, second = sorted((axis, other))
    k.move_axis(second, first, k.kinds[second])
    k.move_axis(first + 1, second, k.kinds[first + 1])


def tile(k: Kernel, axis: int, amount: int) -> None:
    """Split (n/amount, amount) and move the n/amount part to be the first output loop; a reduce loop
    is split in place (an outer loop over tiles of the reduce, an inner one within a tile)."""
    if k.kinds[axis] is AxisKind.REDUCE:
        k.split_axis(axis, amount)
        return
    k.split_axis(axis, amount)
    k.move_axis(axis, 1 if k.kinds[0] is AxisKind.THREAD else 0, AxisKind.LOOP)


def pack(k: Kernel, axis: int, buffer: int) -> None:
    """Only recorded: the linearizer copies the tile when it opens loop `axis`."""
    k.packs.append((buffer, axis))


def global_(k: Kernel, axis: int, amount: int) -> None:
    """The output loop becomes the innermost GLOBAL axis: one workgroup per index."""
    k.move_axis(axis, len(k.axes_of(AxisKind.GLOBAL)), AxisKind.GLOBAL)


def local(k: Kernel, axis: int, amount: int) -> None:
    """Split a GLOBAL axis (n/amount, amount); the amount part becomes the innermost LOCAL axis, so
    neighbouring threads take neighbouring indices (gid * amount + lid)."""
    k.split_axis(axis, amount)
    end_of_locals = len(k.axes_of(AxisKind.GLOBAL, AxisKind.LOCAL)) - 1  # after taking axis + 1 out
    k.move_axis(axis + 1, end_of_locals, AxisKind.LOCAL)


def group(k: Kernel, axis: int, amount: int) -> None:
    """Split a reduce loop (n/amount, amount); the amount part becomes a GROUP axis, placed where the
    reduce axes start: thread t of the workgroup reduces elements t, t + amount, t + 2 * amount, ..."""
    k.split_axis(axis, amount)
    k.move_axis(axis + 1, k.first_reduce + len(k.axes_of(AxisKind.GROUP)), AxisKind.GROUP)


# What each opt does to the kernel's views (exercises plug their own in here, e.g. MOVES[UPCAST]).
MOVES = {OptOps.UPCAST: upcast, OptOps.UNROLL: unroll, OptOps.THREAD: thread, OptOps.SWAP: swap,
         OptOps.TILE: tile, OptOps.PACK: pack, OptOps.GLOBAL: global_, OptOps.LOCAL: local,
         OptOps.GROUP: group}
# --8<-- [end:apply]


def _fail(kernel: Kernel, opt: Opt, why: str) -> None:
    axes = ", ".join(f"{a}: {name}<{size}" for a, (name, size) in
                     enumerate(zip(kernel.loop_names, kernel.full_shape, strict=True)))
    raise OptError(f"{opt} on kernel {kernel.name}: {why}. The kernel's axes are [{axes}]"
                   + (f" after {kernel.applied_opts}" if kernel.applied_opts else ""))


def _check_common(k: Kernel, opt: Opt) -> None:
    if k.linearized:
        _fail(k, opt, "the kernel was already linearized; apply opts to a new Kernel(ast) before linearizing")
    if not isinstance(opt, Opt) or not isinstance(opt.op, OptOps):
        raise OptError(f"apply_opt: expected an Opt(OptOps..., axis, amount), got {opt!r}")
    if not isinstance(opt.axis, int) or not 0 <= opt.axis < len(k.full_shape):
        _fail(k, opt, f"axis must be an int in 0..{len(k.full_shape) - 1}")
    if k.packs and opt.op is not OptOps.PACK:
        _fail(k, opt, "PACK must come last (it copies the tile that the loops inside it read; changing "
                      "those loops afterwards would change the tile)")
    kind, size = k.kinds[opt.axis], k.full_shape[opt.axis]
    if size == 0:
        _fail(k, opt, "the axis is empty (size 0): the kernel computes nothing, there is nothing to optimize")
    if opt.op in (OptOps.UPCAST, OptOps.UNROLL, OptOps.TILE):
        wanted = AxisKind.REDUCE if opt.op is OptOps.UNROLL else AxisKind.LOOP
        if opt.op is OptOps.TILE and kind is AxisKind.REDUCE:
            wanted = kind  # a reduce loop is tiled in place
        if kind is not wanted:
            other = {OptOps.UPCAST: "UNROLL splits reduce loops", OptOps.UNROLL: "UPCAST splits output loops",
                     OptOps.TILE: "TILE splits output loops"}[opt.op]
            valid = [a for a, kd in enumerate(k.kinds) if kd is wanted]
            _fail(k, opt, f"axis {opt.axis} is {_a(kind.value)} axis, {opt.op.name} needs {_a(wanted.value)} "
                          f"axis (valid: {valid}; {other})")
        if not isinstance(opt.amount, int) or opt.amount < 2 or size % opt.amount:
            divisors = [d for d in range(2, size + 1) if size % d == 0][:8]
            _fail(k, opt, f"amount must be an int >= 2 that divides the axis size {size} "
                          f"(for example {divisors or 'none: the axis is prime-sized 1'})")
        if opt.op is not OptOps.TILE:
            expanded = prod(k.full_shape[a] for a in k.expanded_axes) * opt.amount
            if expanded > MAX_EXPANDED:
                _fail(k, opt, f"the loop body would hold {expanded} copies of each scalar value (the product "
                              f"of the UPCAST and UNROLL sizes; limit {MAX_EXPANDED})")
        elif opt.amount == size:
            _fail(k, opt, "a tile as large as the axis moves nothing; pick a divisor smaller than the axis")
    elif opt.op is OptOps.THREAD:
        _check_thread(k, opt, kind, size)
    elif opt.op is OptOps.SWAP:
        other = opt.amount
        if not isinstance(other, int) or not 0 <= other < len(k.full_shape) or other == opt.axis:
            _fail(k, opt, "SWAP's second number is the other axis: a different axis of the full shape")
        same = kind in (AxisKind.LOOP, AxisKind.REDUCE) and k.kinds[other] is kind
        if not same:
            _fail(k, opt, f"SWAP exchanges two loops of the same kind (two output loops or two reduce "
                          f"loops); axis {opt.axis} is {kind.value}, axis {other} is {k.kinds[other].value}")
    elif opt.op is OptOps.PACK:
        _check_pack(k, opt, kind)
    else:
        _check_gpu(k, opt, kind, size)
    if k.gpu is not None and opt.op is OptOps.THREAD:
        _fail(k, opt, "THREAD is a CPU opt (threads of the processor); a GPU kernel runs its threads with "
                      "GLOBAL, LOCAL and GROUP")


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _check_thread(k: Kernel, opt: Opt, kind: AxisKind, size: int) -> None:
    if k.threads > 1:
        _fail(k, opt, f"the kernel already runs on {k.threads} threads; only one THREAD opt per kernel")
    if not isinstance(opt.amount, int) or not 2 <= opt.amount <= MAX_THREADS:
        _fail(k, opt, f"the number of threads must be an int in 2..{MAX_THREADS}")
    if kind is AxisKind.LOOP:
        if opt.amount > size:
            _fail(k, opt, f"{opt.amount} threads for a loop of {size} iterations leaves some idle")
        return
    if kind is AxisKind.BLOCK or (kind is AxisKind.REDUCE and k.blocked):
        if k.first_reduce or opt.axis != 0:
            _fail(k, opt, "a long sum runs on threads by sharing the blocks of its outermost BLOCK loop, in "
                          "a kernel with no output loops; thread that loop (or an output loop) instead")
        return
    if kind is AxisKind.REDUCE:
        if k.first_reduce:
            _fail(k, opt, "a reduce loop can run on threads only in a kernel with no output loops (each "
                          "thread then sums a part); thread an output loop instead")
        if size % opt.amount:
            _fail(k, opt, f"the reduce axis of size {size} must split into {opt.amount} equal parts")
        return
    _fail(k, opt, f"THREAD needs a loop axis, axis {opt.axis} is {kind.value}")


def used_axes(k: Kernel, position: int) -> set[int]:
    """The axes that buffer `position`'s index (or validity) depends on."""
    st = k.sts[position]
    idxs = [Variable(f"a{a}", 0, size - 1) if size > 1 else NumNode(0) for a, size in enumerate(st.shape)]
    index, valid = st.expr_idxs(idxs)
    used = {v.name for v in index.vars() + valid.vars()}
    return {a for a in range(len(st.shape)) if f"a{a}" in used}


def pack_tile(k: Kernel, position: int, axis: int) -> list[int]:
    """The axes (from `axis` on) that buffer `position` depends on: the tile a PACK copies. On a GPU
    the tile is the whole workgroup's: the LOCAL and GROUP axes it depends on come last (the
    innermost thread axis fastest, so that neighbouring threads read neighbouring shared elements)."""
    used = used_axes(k, position)
    loops = [a for a in range(axis, len(k.full_shape)) if a in used and k.kinds[a] not in GPU_KINDS]
    return loops + ([a for a in k.axes_of(AxisKind.LOCAL, AxisKind.GROUP) if a in used] if k.gpu else [])


def _read_after_reduce(k: Kernel, position: int) -> bool:
    """Whether the kernel loads buffer `position` outside its reduce: after the reduce's loops. A walk
    of the AST that does not go into the reduce, each shared node once (as LazyOp.walk)."""
    if k.reduceop is None:
        return False
    seen, stack = {id(k.reduceop)}, [k.ast]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op is BufferOps.LOAD and node.arg == k.bufs[position]:
            return True
        stack.extend(node.src)
    return False


def _check_pack(k: Kernel, opt: Opt, kind: AxisKind) -> None:
    position = opt.amount
    loads = [i for i, b in enumerate(k.bufs) if i > 0 and isinstance(b, MemBuffer)]
    if position not in loads:
        _fail(k, opt, f"PACK's second number is the buffer's position in kernel.bufs; loads are at {loads}")
    if any(p == position for p, _ in k.packs):
        _fail(k, opt, f"buffer {position} is already packed")
    if kind not in (AxisKind.LOOP, AxisKind.REDUCE):
        _fail(k, opt, f"a tile is copied before a loop; axis {opt.axis} is {kind.value}")
    tile = pack_tile(k, position, opt.axis)
    if k.gpu is not None:
        _check_gpu_pack(k, opt, kind, tile)
        return
    if opt.axis in tile:
        _fail(k, opt, f"buffer {position} changes with loop {k.loop_names[opt.axis]}, so its tile would be "
                      "copied on every iteration; pack it before a loop it does not depend on "
                      "(it is reused there)")
    if kind is AxisKind.REDUCE and opt.axis > k.first_reduce and _read_after_reduce(k, position):
        _fail(k, opt, f"buffer {position} is read after the reduce (e.g. a value added to the sum), where "
                      f"a tile copied inside the reduce's loops is gone; pack it before loop "
                      f"{k.loop_names[k.first_reduce]} or an output loop")
    if not tile:
        _fail(k, opt, f"buffer {position} reads one element in all the loops inside: no tile to copy")
    elements = prod(k.full_shape[a] for a in tile)
    if elements > MAX_PACK_ELEMENTS:
        _fail(k, opt, f"the tile has {elements} elements, more than {MAX_PACK_ELEMENTS} (a local array on "
                      "each thread's stack); pack before an inner loop, or split the axes more")


def _check_gpu(k: Kernel, opt: Opt, kind: AxisKind, size: int) -> None:
    """GLOBAL, LOCAL and GROUP: only on a GPU kernel, on the right kind of axis, within its limits."""
    limits = k.gpu
    if limits is None:
        _fail(k, opt, f"{opt.op.name} maps an axis onto GPU threads; this kernel is for a CPU device "
                      "(lower it for GPU or CUDA, whose limits it then carries in kernel.gpu)")
    wanted = {OptOps.GLOBAL: AxisKind.LOOP, OptOps.LOCAL: AxisKind.GLOBAL,
              OptOps.GROUP: AxisKind.REDUCE}[opt.op]
    if kind is not wanted:
        valid = k.axes_of(wanted)
        _fail(k, opt, f"axis {opt.axis} is {_a(kind.value)} axis, {opt.op.name} needs "
                      f"{_a(wanted.value)} axis (valid: {valid})")
    if opt.op is OptOps.GLOBAL:
        if len(k.axes_of(AxisKind.GLOBAL)) == 3:
            _fail(k, opt, "a grid has three dimensions, and three axes are GLOBAL already")
        # (a LOCAL that follows divides the new axis's workgroups by up to max_local: allowed for now,
        # checked again by LOCAL and by the device when it launches)
        _check_grid(k, opt, [size] + [k.full_shape[a] for a in reversed(k.axes_of(AxisKind.GLOBAL))],
                    slack=limits.max_local[0])
        return
    if not isinstance(opt.amount, int) or opt.amount < 2 or size % opt.amount:
        divisors = [d for d in range(2, size + 1) if size % d == 0][:8]
        _fail(k, opt, f"amount must be an int >= 2 that divides the axis size {size} (for example "
                      f"{divisors or 'none: the axis is prime-sized 1'})")
    thread_axes = k.axes_of(AxisKind.LOCAL, AxisKind.GROUP)
    if len(thread_axes) == 3:
        _fail(k, opt, "a workgroup has three dimensions, and three axes are LOCAL or GROUP already")
    threads = prod(k.full_shape[a] for a in thread_axes) * opt.amount
    if threads > limits.max_workgroup_size:
        _fail(k, opt, f"a workgroup would have {threads} threads, over this GPU's limit of "
                      f"{limits.max_workgroup_size}; pick a smaller amount")
    if opt.op is OptOps.LOCAL:
        _check_grid(k, opt, [size // opt.amount if a == opt.axis else k.full_shape[a]
                             for a in reversed(k.axes_of(AxisKind.GLOBAL))])
    if opt.op is OptOps.GROUP:
        if k.axes_of(AxisKind.UNROLL):
            _fail(k, opt, "GROUP comes before UNROLL (UNROLL splits each thread's part of the reduce)")
        shared = threads * prod(k.full_shape[a] for a in k.axes_of(AxisKind.UPCAST)) * 8
        if shared > limits.shared_memory_bytes:
            _fail(k, opt, f"the partial results would need {shared} bytes of shared memory, over this GPU's "
                          f"{limits.shared_memory_bytes}")


def _check_grid(k: Kernel, opt: Opt, sizes_inner_first: list[int], slack: int = 1) -> None:
    """Each grid dimension (dimension 0 is the innermost GLOBAL axis) within the GPU's limit (the
    first one within `slack` times it: a GLOBAL axis that LOCAL will still divide)."""
    for dim, (size, limit) in enumerate(zip(sizes_inner_first, k.gpu.max_groups[:len(sizes_inner_first)],
                                            strict=True)):
        if size > limit * (slack if dim == 0 else 1):
            _fail(k, opt, f"grid dimension {dim} would have {size} workgroups, over this GPU's limit of "
                          f"{limit}; make the larger axis the innermost GLOBAL one, or LOCAL it first")


def _check_gpu_pack(k: Kernel, opt: Opt, kind: AxisKind, tile: list[int]) -> None:
    """PACK on a GPU stages the workgroup's tile in shared memory before a reduce loop it reads along
    (the tile of the reduce that the loop walks), within the GPU's shared memory."""
    if kind is not AxisKind.REDUCE:
        _fail(k, opt, f"on a GPU a tile is staged before a reduce loop; axis {opt.axis} is {kind.value}")
    if opt.axis not in tile:
        _fail(k, opt, f"buffer {opt.amount} does not change along {k.loop_names[opt.axis]}: each thread "
                      "reads the same elements in the whole loop, so a shared tile would bring nothing; "
                      "stage it before a reduce loop it reads along (TILE the reduce first to make one)")
    itemsize = max(k.bufs[opt.amount].dtype.itemsize, 4)
    shared = sum(prod(k.full_shape[a] for a in pack_tile(k, p, axis)) * max(k.bufs[p].dtype.itemsize, 4)
                 for p, axis in k.packs) + prod(k.full_shape[a] for a in tile) * itemsize
    if shared > k.gpu.shared_memory_bytes:
        _fail(k, opt, f"the staged tiles would take {shared} bytes of shared memory, over this GPU's "
                      f"{k.gpu.shared_memory_bytes}; TILE the reduce into smaller tiles")
