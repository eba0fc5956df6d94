"""Hand-coded heuristics: the opts every kernel gets unless BEAM searches or NOOPT=1.

The choices, in the order they are made (each only when it applies):

1. Small kernels stay as written: fewer than SMALL_KERNEL loop iterations run in microseconds
   whatever their loops look like, and they compile faster and read better without opts.
   A convolution (forward, input or weight gradient: an input read through overlapping windows)
   (the image may be a constant behind a padding mask: the gradient of `conv2d(x, w).sum()`)
   gets its own opts instead, `_conv_optimizations` below: the output row as the vector where whole
   vectors divide it (`_row_vectors`), else the channels (the window axes are short and odd: 26,
   13, 3), two vectors of them where they divide, a register block
   along the output axes the filter does not move along, threads from THREAD_MIN_WORK loop
   iterations on (not rule 5's larger bound for matmuls), and the filter packed so its vectors are
   loads, not gathers. So does a matmul-like reduce that no input is contiguous along (a 1x1
   convolution with a stride).
2. Threads for a full reduction (no output loops): THREAD the reduce axis, so each thread sums a
   part (this has to come first: later opts add expanded axes). A long float sum is in blocks
   (tinyedu/codegen/sum_blocks.py): threads share the blocks of its outermost level.
3. A vector axis: the axis along which the input buffers are contiguous (stride 1), weighted by
   their sizes, a buffer read with stride 0 counting as free and any other stride against (a
   padded buffer: its strides where its mask lets it read). An output axis is UPCAST (a vector of
   outputs), a reduce axis is UNROLL'ed (a vector accumulator). The width is the widest that divides
   the axis, and also the places where a mask starts or stops along it, when one does.
   Not in kernels that compute exp2/log2/sin/cos in their loops (no vector form: the lanes would
   be taken apart around every call); in a reduce's epilogue (matmul then GELU) they run once per
   output and do not count. A copy that reads along one axis and writes along another (a transpose)
   is tiled instead, so that the lines it reads and writes stay in the cache while they are used.
   A copy through a padding mask whose rows no vector divides (a convolution's padded input) has
   its rows unrolled by 2 or 3, so that most lanes' in-image conditions fold away.
   (On the C device a loop of float32 exp2 is vectorized all the same, by the compiler:
   tinyedu/renderer/c_vector_math.py.)
   A matmul in dot-product form, A @ B.T (both inputs contiguous along the reduce, as `linear`
   reads its weight), is vectorized along B's rows instead, with B packed (rule 6): the outer-
   product form, one vector load and one broadcast per vector of products, no sum across lanes.
   Also when the reduce is short and the output outweighs the inputs (a language model's head,
   attention's scores), where the score picked B's rows with each vector a gather from B
   (`_short_reduce_axis`).
   So is a tall A @ a narrow B whose score picked the reduce (A, contiguous along it, is the larger
   input), along B's rows, which need no copy (`_contiguous_outer_axis`).
4. Register blocking, for reduces that reuse what they load (matmul, convolution): UPCAST the
   output axes along which some input does not move (stride 0), until 16 vector accumulators, so
   each load feeds several multiply-adds: 8 rows x 2 vectors of columns, or 4 x 4 where the input
   read as broadcasts (A of A @ B) is larger than the L2 cache (`_block_shape`); an axis that only
   an odd number divides (125 vectors of 8 columns) takes that (`_block_amount`). A matmul whose
   sizes no vector divides (1023) gets a block of scalars instead (`_scalar_block`). Reduces without
   reuse get 4 accumulators instead (so the additions do not wait on each other).
5. Threads for kernels with enough work: THREAD the outermost output loop that has an iteration for
   every thread. Enough is about 100 us on one core (waking a sleeping thread, and on a busy machine
   waiting for a core, costs tens of microseconds): THREAD_MIN_WORK loop iterations, or
   THREAD_REUSE_FACTOR times as many in a reduce that reuses its loads (a matmul), whose
   register-blocked iterations are that much cheaper (measured: a 192^3 matmul, 2^22.8 iterations
   in 75 us, gained nothing from a second core; a 2^20 sum and a 2^18 elementwise op did).
6. Packing, for a matmul-like reduce whose reused input is read with a large stride along the
   reduce axis, or along the vector (rule 3's outer-product form, or an A @ B.T whose A no single
   stride describes, such as attention's heads merged back: each vector of B would be a gather):
   put the loops that input depends on outside, then PACK its tile, so the innermost loop reads it
   contiguously from cache instead of one cache line per element.
"""

from __future__ import annotations

from tinyedu.codegen import gpu_vectors
from tinyedu.codegen.kernel import AxisKind, Kernel
from tinyedu.codegen.opts import MAX_PACK_ELEMENTS, Opt, OptError, OptOps, apply_opt, pack_tile
from tinyedu.core.helpers import prod
from tinyedu.core.ops import BufferOps, ConstBuffer, MemBuffer, UnaryOps
from tinyedu.shape import idx_vars, variable_bounds
from tinyedu.shape.rules import base_and_coefficient, terms_and_constant

SMALL_KERNEL = 4096          # loop iterations below which a kernel gets no opts (on a CPU)
THREAD_MIN_WORK = 1 << 20    # loop iterations worth waking threads for (about 100 us on one core) ...
THREAD_REUSE_FACTOR = 8      # ... times this in a reduce that reuses its loads (rule 5)
ACCUMULATORS = 16            # vector accumulators a register block aims for (AVX-512 has 32 registers)
SCALAR_BLOCK = 16            # outputs along each axis of a register block of scalars (no vector divides)
ODD_ACCUMULATORS = 24        # ... at most, where only an odd divisor (3, 5, 7) splits an axis
CONV_CHANNEL_VECTORS = 2     # vectors of channels in a convolution's register block (when they divide)
CONV_ROW_VECTORS = 2         # ... or vectors of an output row, where whole vectors divide the rows
WORKGROUP = 256              # GPU: threads per workgroup the heuristics aim for (8 warps of 32)
GROUP_MIN = 256              # GPU: reduces at least this long are shared by a workgroup's threads ...
GROUP_OUTPUTS = 1 << 13      # ... when there are fewer outputs than this (too few threads otherwise)
TILE_REDUCE = 16             # GPU: the reduce tile staged in shared memory (with a 16 x 16 workgroup)
GPU_BLOCK = 4                # GPU: outputs per thread along each reused output axis (a 4 x 4 register block)
GPU_BLOCK_MIN = 256          # GPU: ... on output axes at least this long (so enough workgroups remain)
OUTER_MIN_REUSE = 16         # rows of A that reuse a packed tile of B in A @ B.T (its outer-product form)
COLUMN_GROUP = 4             # GPU: threads sharing one column of a column reduce (8 columns per warp row)
L2_ELEMENTS = 1 << 18        # float32 elements a core's L2 cache surely holds (1 MiB; rule 4's wide block)


# --8<-- [start:heuristics]
def hand_coded_optimizations(kernel: Kernel, vector_width: int, threads: int) -> list[Opt]:
    """The opts for this kernel (applied to a copy: `kernel` itself is not changed)."""
    k = kernel.copy()
    work = prod(k.full_shape)
    if work < SMALL_KERNEL or work == 0 or not k.full_shape:  # small, empty, or a single element
        return []
    start = len(k.applied_opts)
    try_opt = _trier(k)
    if _conv_optimizations(k, try_opt, vector_width, threads):
        return k.applied_opts[start:]
    reuses = _reuses_loads(k)
    if k.reduceop is not None and k.first_reduce == 0 and threads > 1 and work >= THREAD_MIN_WORK:
        reduce_axis = k.loop_axes[0]
        try_opt(Opt(OptOps.THREAD, reduce_axis, threads))
    vector = None if _has_scalar_only_ops(k) else _pick_vector_axis(k, vector_width)
    if vector is None and _conv_optimizations(k, try_opt, vector_width, threads, _pointwise_image(k)):
        return k.applied_opts[start:]
    if reuses and vector is not None and k.kinds[vector[0]] is AxisKind.REDUCE:
        vector = _contiguous_outer_axis(k, vector_width) or vector  # a tall A @ a narrow B
    transposed = _outer_product_form(k, vector, vector_width) if reuses else None
    if transposed is None and reuses and vector is not None and k.kinds[vector[0]] is AxisKind.LOOP:
        transposed = _outer_product_form(k, _short_reduce_axis(k, vector), vector_width)
    if transposed is not None:  # A @ B.T: vectors along B's rows, B packed (transposed) below
        vector = transposed[:2]
    if vector is not None:
        axis, width = vector
        try_opt(Opt(OptOps.UPCAST if k.kinds[axis] is AxisKind.LOOP else OptOps.UNROLL, axis, width))
    elif k.reduceop is None and not _has_scalar_only_ops(k):
        _tile_transpose(k, try_opt, vector_width)
        if len(k.applied_opts) == start:
            _unroll_padded_rows(k, try_opt)
    packed = None
    if k.reduceop is not None:
        _register_block(k, try_opt, vector_width, None if transposed is None else transposed[2])
        packed = _order_for_pack(k, try_opt, None if transposed is None else transposed[2])
    if threads > 1 and work >= THREAD_MIN_WORK * (THREAD_REUSE_FACTOR if reuses else 1) and k.threads == 1:
        for axis in [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]:
            if k.full_shape[axis] >= threads and try_opt(Opt(OptOps.THREAD, axis, threads)):
                break
    if packed is not None:
        strides = k.sts[packed].real_strides(ignore_valid=True)
        reuse = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP and strides[a] == 0]
        if reuse and prod(k.full_shape[a] for a in pack_tile(k, packed, reuse[0])) <= MAX_PACK_ELEMENTS:
            try_opt(Opt(OptOps.PACK, reuse[0], packed))
    return k.applied_opts[start:]
# --8<-- [end:heuristics]


# --8<-- [start:gpu-heuristics]
def gpu_optimizations(kernel: Kernel) -> list[Opt]:
    """The opts for a GPU kernel (`kernel.gpu` holds the device's limits), chosen in this order:

    0. Register blocking, for a long reduce that reuses its loads (matmul): UPCAST each output axis of
       at least GPU_BLOCK_MIN along which an input does not move by GPU_BLOCK, so each thread
       computes a 4 x 4 block of outputs: every value it loads feeds 4 multiply-adds, not 1.
       A kernel without such reuse, and not GROUPed (step 1), gets float4s instead: UPCAST the
       innermost output axis by 4 when the output and every input that moves along it would then
       move as aligned float4s (an elementwise kernel, a column reduce of many columns; not where
       work-items are a CPU's SIMD lanes), so each thread makes a quarter of the memory requests.
       (Before a GROUP, each thread's four partials would go to shared memory as scalars 4 words
       apart: a 4-way bank conflict.)
    1. GROUP a long reduce (at least GROUP_MIN elements) when there are too few outputs to keep the
       GPU busy one thread each: a workgroup's threads share each output's reduce. Not a column
       reduce (the input is contiguous along an output axis, not along the reduce): its GROUP
       threads would read addresses a row apart, one 32-byte sector each. There the threads take
       neighbouring columns (LOCAL, coalesced), and COLUMN_GROUP of them share each column, after.
    2. GLOBAL the (up to three) innermost output loops: a workgroup per index, the innermost axis on
       the grid's dimension 0, where neighbouring workgroups read neighbouring memory.
    3. LOCAL: threads per workgroup along the GLOBAL axes (a 16 x 16 square for two axes), up to
       WORKGROUP threads in all; the innermost axis last, so its threads are lid0: neighbouring
       threads take neighbouring elements (coalesced loads and stores).
    4. Shared tiles, for a reduce whose inputs the threads of a workgroup share (matmul: a row of A
       serves a whole row of threads): TILE the reduce by TILE_REDUCE and PACK those inputs before
       the inner loop, so each element comes from global memory once per workgroup, not per thread.
    Every kernel gets them, small ones too: a GPU kernel without them is one thread.
    """
    k = kernel.copy()
    limits, try_opt, start = k.gpu, _trier(k), len(k.applied_opts)
    assert limits is not None, "gpu_optimizations: the kernel has no GPU limits (kernel.gpu)"
    budget = min(WORKGROUP, limits.max_workgroup_size)
    reduces = k.axes_of(AxisKind.REDUCE)
    outputs = prod(k.full_shape[a] for a in k.axes_of(AxisKind.LOOP))
    long_reduce = bool(reduces) and k.full_shape[reduces[-1]] >= GROUP_MIN
    if long_reduce and _reuses_loads(k):
        _register_block_gpu(k, try_opt)
    column = long_reduce and _column_reduce(k, reduces[-1])
    if not _reuses_loads(k) and not (long_reduce and outputs < GROUP_OUTPUTS):
        _float4_outputs(k, try_opt)  # (not before a GROUP: its partials' shared stores stay scalar)
    if long_reduce and outputs < GROUP_OUTPUTS and not column:
        amount = _largest_divisor(k.full_shape[reduces[-1]], budget)
        if amount > 1 and try_opt(Opt(OptOps.GROUP, reduces[-1], amount)):
            budget //= amount
    if column and outputs < GROUP_OUTPUTS:
        budget //= COLUMN_GROUP  # kept for the GROUP that follows the LOCAL columns
    for _ in range(3):
        loops = [a for a in k.axes_of(AxisKind.LOOP) if not k.is_reduce_axis(a)]
        candidates = loops[-3 + len(k.axes_of(AxisKind.GLOBAL)):]  # outermost of the innermost three first
        if not candidates or not try_opt(Opt(OptOps.GLOBAL, candidates[0], 0)):
            break
    globals_ = k.axes_of(AxisKind.GLOBAL)  # (LOCAL leaves the GLOBAL axes where they are)
    for axis in globals_:
        cap = budget if len(globals_) == 1 else min(budget, 16)
        amount = _largest_divisor(k.full_shape[axis], cap)
        if amount > 1 and try_opt(Opt(OptOps.LOCAL, axis, amount)):
            budget //= amount
    if column and outputs < GROUP_OUTPUTS:
        reduce = k.axes_of(AxisKind.REDUCE)[-1]
        amount = _largest_divisor(k.full_shape[reduce], COLUMN_GROUP)
        if amount > 1:
            try_opt(Opt(OptOps.GROUP, reduce, amount))
    _stage_shared_tiles(k, try_opt)
    return k.applied_opts[start:]


def _register_block_gpu(k: Kernel, try_opt) -> None:
    """Step 0 of gpu_optimizations: a GPU_BLOCK x GPU_BLOCK block of outputs per thread, along the
    output axes some input does not move along (its loads are reused across the block)."""
    strides = [s for _, s in _strides(k)]
    for axis in [a for a in k.axes_of(AxisKind.LOOP) if not k.is_reduce_axis(a)][-2:]:
        reused = any(s[axis] == 0 for s in strides)
        if reused and k.full_shape[axis] >= GPU_BLOCK_MIN and k.full_shape[axis] % (GPU_BLOCK * 16) == 0:
            try_opt(Opt(OptOps.UPCAST, axis, GPU_BLOCK))


def _float4_outputs(k: Kernel, try_opt) -> None:
    """Step 0 of gpu_optimizations, without a register block: four neighbouring outputs per thread
    (UPCAST by gpu_vectors.WIDTH), when every buffer that moves along that axis moves as aligned
    float4s (`float4_view`: what the vector pass will prove on the UOps), 4-byte elements each, and
    the others read one value for all four. Only with a warp of threads left, and not on a device
    whose work-items are SIMD lanes (it vectorizes across them itself; a float4 would be a gather)."""
    outputs = [a for a in k.axes_of(AxisKind.LOOP) if not k.is_reduce_axis(a)]
    if k.gpu.threads_are_simd_lanes or k.axes_of(AxisKind.UPCAST) or not outputs:
        return
    axis, width = outputs[-1], gpu_vectors.WIDTH
    if k.full_shape[axis] % width or prod(k.full_shape[a] for a in outputs) < width * k.gpu.warp_size:
        return
    for p, buf in enumerate(k.bufs):
        if not isinstance(buf, MemBuffer) or (p > 0 and k.sts[p].real_strides()[axis] == 0):
            continue  # (an input that does not move along the axis: one load serves the four)
        if buf.dtype not in gpu_vectors.LANE_TYPES or not gpu_vectors.float4_view(k.sts[p], axis):
            return
    try_opt(Opt(OptOps.UPCAST, axis, width))


def _column_reduce(k: Kernel, reduce: int) -> bool:
    """Whether some input is contiguous along an output axis and strided along the reduce: a column
    sum, whose GROUP threads would each read a different row (uncoalesced)."""
    outputs = [a for a in k.axes_of(AxisKind.LOOP) if not k.is_reduce_axis(a)]
    return any(s[reduce] not in (0, 1) and any(s[a] == 1 for a in outputs) for _, s in _strides(k))


def _stage_shared_tiles(k: Kernel, try_opt) -> None:
    """Step 4 of gpu_optimizations: the inputs that some LOCAL axis does not move (shared by those
    threads) and that move along the reduce are staged in shared memory, one reduce tile at a time."""
    reduces, locals_ = k.axes_of(AxisKind.REDUCE), k.axes_of(AxisKind.LOCAL)
    if not reduces or not locals_ or k.axes_of(AxisKind.GROUP):
        return
    axis = reduces[-1]
    inputs = [(p, k.sts[p].real_strides(ignore_valid=True)) for p, buf in enumerate(k.bufs)
              if p > 0 and isinstance(buf, MemBuffer)]
    shared = [p for p, strides in inputs if strides[axis] != 0 and any(strides[a] == 0 for a in locals_)]
    amount = _largest_divisor(k.full_shape[axis], TILE_REDUCE)
    threads = prod(k.full_shape[a] for a in locals_)
    if not shared or amount < 2 or k.full_shape[axis] < 2 * amount or threads < 64:
        return  # a short reduce or a small workgroup: the copies and barriers would cost more
    if amount < k.full_shape[axis] and try_opt(Opt(OptOps.TILE, axis, amount)):
        axis += 1  # the inner loop, within one tile
    for p in shared:
        try_opt(Opt(OptOps.PACK, axis, p))
# --8<-- [end:gpu-heuristics]


def _largest_divisor(size: int, cap: int) -> int:
    """The largest divisor of `size` that is at most `cap` (1 when there is none above 1)."""
    return max((d for d in range(1, min(size, cap) + 1) if size % d == 0), default=1)


def _has_scalar_only_ops(k: Kernel) -> bool:
    """Whether the kernel computes exp2/log2/sin/cos in its loops: they have no vector form, so each
    lane would be taken out of its vector and put back around every call, which costs more than
    vectors save. In a reduce's epilogue (matmul then GELU) they run once per output, after the
    loop, and the reduce keeps its vectors: only the nodes under the reduce count there."""
    root = k.ast if k.reduceop is None else k.reduceop
    return any(node.op in (UnaryOps.EXP2, UnaryOps.LOG2, UnaryOps.SIN, UnaryOps.COS) for node in root.walk())


def _trier(k: Kernel):
    def try_opt(opt: Opt) -> bool:
        """Apply `opt` if it is valid here; report whether it was."""
        try:
            apply_opt(k, opt)
            return True
        except OptError:
            return False
    return try_opt


def _strides(k: Kernel, where_valid: bool = False) -> list[tuple[int, tuple]]:
    """(elements, per-axis strides) of every input buffer (None: no single stride); `where_valid`:
    where its mask lets it read (ShapeTracker.real_strides)."""
    return [(st.size and st.max_index() + 1, st.real_strides(ignore_valid=True, where_valid=where_valid))
            for buf, st in zip(k.bufs[1:], k.sts[1:], strict=True) if isinstance(buf, MemBuffer)]


def _mask_edges(k: Kernel) -> list[set[int]]:
    """Per axis, the positions where the padding mask of some input (or padded constant) starts or
    stops along it."""
    edges: list[set[int]] = [set() for _ in k.full_shape]
    for st in k.sts[1:]:
        variables = idx_vars(st.shape)
        lowest, beyond, _ = variable_bounds(st.expr_idxs(variables)[1])
        for axis, v in enumerate(variables):
            edges[axis].update(bound[v.name] for bound in (lowest, beyond) if v.name in bound)
    return edges


def _reuses_loads(k: Kernel) -> bool:
    """Whether a reduce reads some input again along an output loop (stride 0: a matmul's A along
    B's columns), so that register blocking makes its iterations cheap."""
    outputs = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]
    return k.reduceop is not None and any(strides[a] == 0 for _, strides in _strides(k) for a in outputs)


def _pick_vector_axis(k: Kernel, vector_width: int) -> tuple[int, int] | None:
    """The loop axis (and width) with the best contiguity score, if any is positive.

    A padded input is scored by its strides where its mask lets it read (a concatenation's part is
    contiguous there, though its index wraps around over the whole axis), and the width is one that
    divides the places along the axis where a mask starts or stops, if one does: then no vector
    straddles an edge, and each is one gated vector load (chapter 13's rotary embedding, an axis of
    24 cut at 12: vectors of 8 straddle it and load lane by lane; measured on one core, kernel
    alone, no vectors / 4 / 8: the forward 0.26 / 0.07 / 0.19 ms, its gradient 0.92 / 0.28 / 1.88 ms)."""
    inputs, best = _strides(k, where_valid=True), None
    out_strides = k.sts[0].real_strides(ignore_valid=True)
    edges = _mask_edges(k)
    for axis in k.loop_axes:
        if k.kinds[axis] not in (AxisKind.LOOP, AxisKind.REDUCE):
            continue
        widths = [w for w in (vector_width, vector_width // 2, vector_width // 4)
                  if w >= 4 and k.full_shape[axis] % w == 0]
        width = next((w for w in widths if all(edge % w == 0 for edge in edges[axis])), None) or \
            next(iter(widths), None)
        if width is None:
            continue
        score = sum(size if strides[axis] == 1 else 0 if strides[axis] == 0 else -size
                    for size, strides in inputs)
        if k.kinds[axis] is AxisKind.LOOP:
            score += k.sts[0].size if out_strides[axis] == 1 else -k.sts[0].size
        if score > 0 and (best is None or score > best[0]):
            best = (score, axis, width)
    return None if best is None else (best[1], best[2])


def _contiguous_outer_axis(k: Kernel, vector_width: int) -> tuple[int, int] | None:
    """(axis, width): an output axis for the vectors of a matmul-like reduce whose contiguity score
    chose the reduce (A @ B with a tall A and a narrow B: A, contiguous along the reduce, outweighs
    B), where the output and one input are contiguous along the axis and another input does not
    move along it (B's rows, and A's elements broadcast), and no input the reduce reads moves along
    it by more than 1 (a vector of it would be a gather). That is the outer-product form without a
    copy: one vector load and one broadcast per vector of products, and no sum across lanes at the
    end. Measured on one AVX-512 core, kernel alone: (1024 x 1024) @ (1024 x 128) took 3.6 ms as a
    dot product (reduce UNROLLed), 1.6 ms so."""
    out_strides = k.sts[0].real_strides(ignore_valid=True)
    strides = _summed_strides(k)
    for axis in reversed([a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]):
        width = next((w for w in (vector_width, vector_width // 2, vector_width // 4)
                      if w >= 4 and k.full_shape[axis] % w == 0), None)
        if width is not None and out_strides[axis] == 1 and all(s[axis] in (0, 1) for s in strides) and \
                any(s[axis] == 1 for s in strides) and any(s[axis] == 0 for s in strides):
            return axis, width
    return None


def _short_reduce_axis(k: Kernel, vector: tuple[int, int]) -> tuple[int, int] | None:
    """(axis, width): the reduce axis of an A @ B.T whose output outweighs its inputs (a short reduce:
    a language model's head, 96 -> 512, or attention's q @ k.T over a head of 24), when the
    contiguity score chose vectors along an output axis that a summed input moves along by more than
    one element (B's rows: each vector a gather of scalars, and B's tile not packed) and every
    summed input is contiguous along this reduce axis. _outer_product_form takes it from there, as
    for a long reduce. Measured on one AVX-512 core, kernel alone: (1024 x 96) @ (512 x 96).T took
    15 ms with the gathers."""
    strides = _summed_strides(k)
    if all(s[vector[0]] in (0, 1) for s in strides):
        return None
    for axis in (a for a in k.loop_axes if k.kinds[a] is AxisKind.REDUCE):
        if all(s[axis] == 1 for s in strides):
            return axis, vector[1]
    return None


def _outer_product_form(k: Kernel, vector: tuple[int, int] | None,
                        vector_width: int) -> tuple[int, int, int] | None:
    """(axis, width, packed) for a matmul in dot-product form, A @ B.T, whose inputs are both
    contiguous along the reduce (the vector axis `_pick_vector_axis` chose): there each vector of
    products needs two loads and ends in a sum across lanes. The outer-product form is faster:
    vectors along an output axis that the output is contiguous along and A does not move along
    (B's rows), B's tile PACKed so that a vector of it is one load, and A's elements broadcast.
    Only when B's tile is reused by at least OUTER_MIN_REUSE rows of A, which pays for the copy
    (a matrix-vector product keeps the dot-product form: it reads B once, contiguously), and when
    the tile fits the PACK limit (otherwise the vectors would be gathers)."""
    if vector is None or k.kinds[vector[0]] is not AxisKind.REDUCE:
        return None
    reduce = prod(k.full_shape[a] for a in k.loop_axes if k.kinds[a] is AxisKind.REDUCE)
    if reduce * vector_width * 2 > MAX_PACK_ELEMENTS:  # B's tile (two vectors of rows) would not fit
        return None
    out_strides = k.sts[0].real_strides(ignore_valid=True)
    loops = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]
    for axis in reversed(loops):
        if out_strides[axis] != 1 or k.full_shape[axis] % vector_width:
            continue
        strides = {p: k.sts[p].real_strides(ignore_valid=True) for p in _loads(k)}
        broadcast = [p for p, s in strides.items() if s[axis] == 0 and s[vector[0]] == 1]
        rows = [p for p, s in strides.items() if s[axis] not in (0, 1, None) and s[vector[0]] == 1 and
                any(s[a] == 0 and k.full_shape[a] >= OUTER_MIN_REUSE for a in loops)]
        if broadcast and len(rows) == 1:
            return axis, vector_width, rows[0]
    return None


def _summed_buffers(k: Kernel) -> set[MemBuffer]:
    """The buffers the reduce itself reads (a matmul's A and B; not a bias added after it)."""
    return {node.arg for node in k.reduceop.walk() if node.op is BufferOps.LOAD}


def _summed_strides(k: Kernel) -> list[tuple[int | None, ...]]:
    """The per-axis strides of each buffer the reduce itself reads (see _summed_buffers)."""
    summed = _summed_buffers(k)
    return [k.sts[p].real_strides(ignore_valid=True) for p in _loads(k) if k.bufs[p] in summed]


def _loads(k: Kernel) -> list[int]:
    """The positions in k.bufs of the buffers the kernel loads from memory."""
    return [p for p, buf in enumerate(k.bufs) if p > 0 and isinstance(buf, MemBuffer)]


def _tile_transpose(k: Kernel, try_opt, vector_width: int) -> None:
    """A copy that reads along one axis and writes along another (a transpose): walk a tile of
    `width` columns (TILE), written as vectors (UPCAST), over pairs of rows, so every cache line
    read or written is used whole while it is in the cache."""
    loads = [p for p in range(1, len(k.bufs)) if isinstance(k.bufs[p], MemBuffer)]
    if not loads:
        return
    main = max(loads, key=lambda p: k.sts[p].max_index())  # the biggest input
    out_strides, in_strides = (k.sts[p].real_strides(ignore_valid=True) for p in (0, main))
    loops = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]
    out_axis = next((a for a in loops if out_strides[a] == 1), None)
    in_axis = next((a for a in loops if in_strides[a] == 1), None)
    width = vector_width if vector_width >= 4 else 4
    if out_axis is None or in_axis is None or out_axis == in_axis or k.full_shape[out_axis] % width:
        return
    if not try_opt(Opt(OptOps.TILE, out_axis, width)):
        return
    out_strides = k.sts[0].real_strides(ignore_valid=True)
    tile = next(a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP and out_strides[a] == 1)
    try_opt(Opt(OptOps.UPCAST, tile, width))
    in_strides = k.sts[main].real_strides(ignore_valid=True)
    rows = next((a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP and in_strides[a] == 1), None)
    if rows is not None and k.full_shape[rows] % 2 == 0:
        try_opt(Opt(OptOps.UPCAST, rows, 2))


def _unroll_padded_rows(k: Kernel, try_opt) -> None:
    """A copy that reads through a padding mask along its innermost loop (the padded input of a
    convolution, `dense_padding`), with rows no vector width divides (30 = 28 + 2): UPCAST that
    loop by 2 (3 for odd rows) and the one outside it by 2. Unrolled, the in-image condition of
    most lanes no longer depends on the column (the simplifier folds it), so the loop body is
    straight-line loads and stores instead of a branch per element that mispredicts at each row's
    edges. Measured on bench/bench_cpu.py's convolutions (one core): the 32x16x30x30 copy took
    0.41 ms as written and 0.22-0.26 ms so."""
    loops = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]
    if not loops or not any(isinstance(buf, MemBuffer) and _masked_along(k.sts[p], loops[-1], k)
                            for p, buf in enumerate(k.bufs) if p > 0):
        return
    inner = loops[-1]
    amount = next((n for n in (2, 3) if k.full_shape[inner] % n == 0 and k.full_shape[inner] > n), None)
    if amount is None or not try_opt(Opt(OptOps.UPCAST, inner, amount)):
        return
    outer = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP][-2:-1]
    if outer and k.full_shape[outer[0]] % 2 == 0:
        try_opt(Opt(OptOps.UPCAST, outer[0], 2))


def _masked_along(st, axis: int, k: Kernel) -> bool:
    """Whether the view's mask (a padding) limits `axis`, in a single view of the kernel's shape."""
    view = st.views[-1]
    return len(st.views) == 1 and view.mask is not None and len(view.mask) == len(k.full_shape) and \
        view.mask[axis] != (0, k.full_shape[axis])


def _vector_accumulators(k: Kernel, vector_width: int) -> int:
    lanes = prod(k.full_shape[a] for a in k.expanded_axes)
    return max(lanes // vector_width, 1)


def _register_block(k: Kernel, try_opt, vector_width: int, packed: int | None = None) -> None:
    """UPCAST output axes that some input does not move along, so that each load feeds several
    multiply-adds: first up to 8 along an axis where a vector-loaded input is reused (the rows of a
    matmul reuse a vector of B), then 2 along one where a broadcast input is (two vectors of
    columns reuse one element of A). Input `packed` counts as vector-loaded: it will be copied so
    that it is contiguous along the vector (`_outer_product_form`). Without such reuse, 4
    accumulators along the vector axis (more independent additions, and longer contiguous runs per
    row for a column sum)."""
    vector = k.expanded_axes[-1] if k.expanded_axes else None
    inputs = [(position, k.sts[position].real_strides(ignore_valid=True)) for position in _loads(k)]

    def reuse(axis: int, vector_loaded: bool) -> bool:
        return any(strides[axis] == 0 and vector is not None and
                   (strides[vector] == 1 or position == packed) == vector_loaded
                   for position, strides in inputs)

    if vector is None and not _has_scalar_only_ops(k):
        _scalar_block(k, try_opt, inputs)
        return
    reused = False
    for vector_loaded, most in _block_shape(k, inputs, vector):
        accumulators = _vector_accumulators(k, vector_width)
        candidates = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP and reuse(a, vector_loaded)]
        for axis in reversed(candidates):  # the innermost first
            amount = _block_amount(k.full_shape[axis], most, accumulators)
            if amount is not None and try_opt(Opt(OptOps.UPCAST, axis, amount)):
                reused = True
                break
    if reused or vector is None:
        return
    # no reuse: 4 accumulators (independent additions), along the axis that was vectorized
    op = OptOps.UNROLL if k.kinds[vector] is AxisKind.UNROLL else OptOps.UPCAST
    kind = AxisKind.REDUCE if op is OptOps.UNROLL else AxisKind.LOOP
    loops = [a for a in k.loop_axes if k.kinds[a] is kind]
    if loops:
        for amount in (4, 2):
            if k.full_shape[loops[-1]] % amount == 0 and try_opt(Opt(op, loops[-1], amount)):
                break


def _scalar_block(k: Kernel, try_opt, inputs: list[tuple[int, tuple]]) -> None:
    """A register block of scalars, for a matmul-like reduce whose sizes no vector width divides
    (1023 = 3 x 11 x 31): UPCAST the two innermost output axes along which some input does not move
    by their largest divisor up to SCALAR_BLOCK, so each loaded element still feeds several
    multiply-adds (the compiler may then pack neighbouring scalars into vectors itself). Measured on
    one AVX-512 core, kernel alone: a 1023^3 matmul took 1360 ms unblocked, 75 ms in 11 x 11 blocks
    (numpy: 14 ms; only padding the axes to whole vectors would close that gap)."""
    loops = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]
    summed = [strides for p, strides in inputs if k.bufs[p] in _summed_buffers(k)]  # not a bias after it
    reused = [a for a in loops if any(strides[a] == 0 for strides in summed)][-2:]
    for axis in reversed(reused):  # the innermost first; an UPCAST leaves the axes outside it in place
        amount = _largest_divisor(k.full_shape[axis], SCALAR_BLOCK)
        if amount > 1:
            try_opt(Opt(OptOps.UPCAST, axis, amount))


def _block_amount(size: int, most: int, accumulators: int) -> int | None:
    """How many rows (or vectors of columns) a register block takes along an axis of `size`, when
    it holds `accumulators` vectors already: 8, 4 or 2 (at most `most`) within ACCUMULATORS; for an
    axis none of them divides (1000 columns are 125 vectors of 8: 5^3), its smallest divisor up to
    `most` + 1, within ODD_ACCUMULATORS. Measured on one AVX-512 core, kernel alone: a 1000^3 matmul
    took 46 ms with 4 rows x 1 vector of 8 columns and 24.5 ms with 4 rows x 5 vectors."""
    amount = next((n for n in (8, 4, 2) if n <= most and n * accumulators <= ACCUMULATORS and size % n == 0),
                  None)
    if amount is None:
        amount = next((n for n in range(3, most + 2)
                       if size % n == 0 and n * accumulators <= ODD_ACCUMULATORS), None)
    return amount


def _block_shape(k: Kernel, inputs: list[tuple[int, tuple]], vector: int | None) -> tuple:
    """(vector-loaded, most), (broadcast, most): how many rows, then how many vectors of columns,
    the register block takes. 8 rows x 2 vectors, unless the broadcast input (A of A @ B) is larger
    than L2_ELEMENTS: each block of columns then streams all of A from beyond the L2 cache again, so
    4 rows x 4 vectors, twice the columns per block, read A half as often. Measured on one AVX-512
    core, kernel alone: a 1024^2 matmul (A 4 MiB) 13.7 against 14.5 ms; at 256^2 and 512^2 (A fits)
    8 x 2 was as fast or faster."""
    broadcast = [p for p, strides in inputs if vector is not None and strides[vector] == 0]
    if any(k.sts[p].max_index() + 1 > L2_ELEMENTS for p in broadcast):
        return (True, 4), (False, 4)
    return (True, 8), (False, 2)


def _order_for_pack(k: Kernel, try_opt, chosen: int | None = None) -> int | None:
    """An input worth packing: reused across an output loop (stride 0) but read with a large stride
    along the reduce, or along the vector (each vector a gather of scalars from its rows: measured on
    attention's output projection, 1024 x 96 @ 96 x 96 with the heads merged back, one AVX-512 core,
    0.33 ms gathered and 0.14 ms packed), or `chosen` (the one `_outer_product_form` reads across its
    rows). The output loops it depends on are SWAPped outside the ones it does not, so that its tile
    stays the same across them; returns its position (PACK comes after THREAD).

    When two inputs qualify (dW = x.T @ g: both read across their rows), the one read as scalars
    and broadcast is packed, not the one read as vectors: a vector is a whole cache line wherever
    it lies, but the broadcast one's rows, 256 floats apart, fall into a few L1 sets and evict each
    other (measured: 164 against 110 GFLOPS for the MLP's weight gradient)."""
    loops = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]
    reduce_axis = next((a for a in k.loop_axes if k.kinds[a] is AxisKind.REDUCE), None)
    if not loops or reduce_axis is None:
        return None
    vector = k.expanded_axes[-1] if k.expanded_axes else None

    def vector_loaded(position: int) -> bool:
        return vector is not None and k.sts[position].real_strides(ignore_valid=True)[vector] == 1

    for position in sorted(_loads(k), key=lambda p: (p != chosen, vector_loaded(p))):
        strides = k.sts[position].real_strides(ignore_valid=True)
        reuse = [a for a in loops if strides[a] == 0]
        far = strides[reduce_axis] is not None and abs(strides[reduce_axis]) >= 64
        gathered = vector is not None and strides[vector] not in (0, 1)  # each vector: scalars from rows
        if not reuse or not (far or gathered or position == chosen):
            continue
        for axis in [a for a in loops if strides[a] != 0]:
            target = next((r for r in reuse if r < axis), None)
            if target is not None and try_opt(Opt(OptOps.SWAP, target, axis)):
                strides = k.sts[position].real_strides(ignore_valid=True)
                reuse = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP and strides[a] == 0]
        return position
    return None


# --8<-- [start:conv-heuristics]
def _window_input(k: Kernel) -> int | None:
    """The input that a convolution slides its windows over, if this kernel is one: an input whose
    addresses along an output loop and along a reduce loop overlap (x[ox*stride + kx*dilation]
    with a window wider than the stride: neighbouring outputs share input elements), or whose index
    joins the two in one term (`(ox + kx) // 2`: a gradient spread out by a stride). The weight
    gradient has the same pair the other way round (its kx is an output, the image's x a reduce).
    A matmul's rows and columns never overlap, nor do the windows of a 2x2 conv with stride 2.

    Failing that, a constant read through a padding mask that joins an output loop and a reduce
    loop (`_gated_window`): the input gradient of `conv2d(x, w).sum()`, whose upstream gradient is
    1.0 inside the image and 0 in its padding. It is an image that never moves (stride 0 along
    every axis), so the channel form vectorizes along the channels the filter moves along."""
    if k.reduceop is None:
        return None
    loops = {a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP}
    reduces = {a for a in k.loop_axes if k.kinds[a] is AxisKind.REDUCE}
    for position, buf in enumerate(k.bufs):
        if position > 0 and isinstance(buf, MemBuffer) and _windowed(k, position, loops, reduces):
            return position
    for position, buf in enumerate(k.bufs):
        if position > 0 and isinstance(buf, ConstBuffer) and _gated_window(k, position, loops, reduces):
            return position
    return None


def _gated_window(k: Kernel, position: int, loops: set[int], reduces: set[int]) -> bool:
    """Whether input `position`'s validity (its padding mask, as one condition per clause) has a
    clause over an output loop and a reduce loop together (`y + ky < 34`): whether it is in the
    image depends on where the window lies, as a padded image's reads do."""
    variables = idx_vars(k.full_shape)
    axis_of = {v.name: axis for axis, v in enumerate(variables)}
    _, valid = k.sts[position].expr_idxs(variables)
    for clause in getattr(valid, "nodes", (valid,)):
        axes = {axis_of[v.name] for v in clause.vars() if v.name in axis_of}
        if axes & loops and axes & reduces:
            return True
    return False


def _windowed(k: Kernel, position: int, loops: set[int], reduces: set[int]) -> bool:
    """Whether buffer `position` is read through windows (see `_window_input`)."""
    strides = k.sts[position].real_strides(ignore_valid=True)
    for a, r in ((a, r) for a in loops for r in reduces if strides[a] and strides[r]):
        (small, size), big = min((abs(strides[a]), k.full_shape[a]), (abs(strides[r]), k.full_shape[r])), \
            max(abs(strides[a]), abs(strides[r]))
        if small * (size - 1) >= big:
            return True
    variables = idx_vars(k.full_shape)
    axis_of = {v.name: axis for axis, v in enumerate(variables)}
    index, _ = k.sts[position].expr_idxs(variables)
    for term in terms_and_constant(index)[0]:
        axes = {axis_of[v.name] for v in base_and_coefficient(term)[0].vars() if v.name in axis_of}
        if axes & loops and axes & reduces:
            return True
    return False


def _channel_axis(k: Kernel, image: int, vector_width: int) -> tuple[int, int, int] | None:
    """(axis, width, filter): the output loop to vectorize in a convolution, the channels along
    which the image does not move (stride 0) but the other input, the filter, does. One image
    element is broadcast to every lane and multiplied by a vector of filter values, so the window
    axes (short, and odd sizes such as 26 or 13) never need to be vectors."""
    image_strides = k.sts[image].real_strides(ignore_valid=True)
    filters = [p for p in range(1, len(k.bufs)) if p != image and isinstance(k.bufs[p], MemBuffer)]
    for axis in reversed([a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]):
        width = next((w for w in (vector_width, vector_width // 2, vector_width // 4)
                      if w >= 4 and k.full_shape[axis] % w == 0), None)
        if width is None or image_strides[axis] != 0:
            continue
        moving = [p for p in filters if k.sts[p].real_strides(ignore_valid=True)[axis] != 0]
        if moving:
            return axis, width, moving[0]
    return None


def _pointwise_image(k: Kernel) -> int | None:
    """A matmul-like reduce that no input is contiguous along (a 1x1 convolution with a stride, or
    the input gradient of one: x[n, c, 2*y, 2*x] times w[o, c]): the larger of its two inputs, if
    each is broadcast along an output loop that the other moves along. Such a kernel gets the
    convolution's opts, with this input as the image and the other as the filter."""
    loads = [p for p in range(1, len(k.bufs)) if isinstance(k.bufs[p], MemBuffer)]
    if k.reduceop is None or len(loads) != 2:
        return None
    (a, sa), (b, sb) = ((p, k.sts[p].real_strides(ignore_valid=True)) for p in loads)
    loops = [axis for axis in k.loop_axes if k.kinds[axis] is AxisKind.LOOP]
    if not any(sa[x] == 0 and sb[x] != 0 for x in loops) or not any(sb[x] == 0 and sa[x] != 0 for x in loops):
        return None
    return max((a, b), key=lambda p: k.sts[p].max_index())


def _conv_optimizations(k: Kernel, try_opt, vector_width: int, threads: int,
                        image: int | None = None) -> bool:
    """The opts of a convolution (forward or a gradient; `image` given: see `_pointwise_image`),
    if `k` is one; False otherwise.

    Where whole vectors divide the output rows, the row-vector form (`_row_vectors`). Otherwise:
    vector along the channels (`_channel_axis`), two vectors of them where they divide
    (`_more_channel_vectors`); then a register block along the output axes the filter does not move
    along (`_conv_register_block`): each filter vector feeds several
    multiply-adds with broadcast image elements; threads on the outermost output loop; and the
    filter PACKed once per thread when it is not contiguous along the channels (a weight (C_out,
    C_in, kH, kW) is read C_in*kH*kW apart along C_out), so its vectors are loads, not gathers:
    before the outermost loop it does not move along whose tile fits MAX_PACK_ELEMENTS (a
    128x64x3x3 filter, 73,728 floats, is packed inside the channel loop, a block at a time: the
    input gradient of a 3x3 convolution 8x128x16x16 -> 128 took 103 ms unpacked on one core, 12.5
    ms so).
    """
    image = _window_input(k) if image is None else image
    if image is None or _has_scalar_only_ops(k):
        return False
    if _row_vectors(k, try_opt, image, vector_width, threads):
        return True
    channel = _channel_axis(k, image, vector_width)
    if channel is None:
        return False
    axis, width, filt = channel
    if not try_opt(Opt(OptOps.UPCAST, axis, width)):
        return False
    _more_channel_vectors(k, try_opt, axis, CONV_CHANNEL_VECTORS)
    threaded = threads > 1 and prod(k.full_shape) >= THREAD_MIN_WORK
    _conv_register_block(k, try_opt, filt, width, threaded)
    if threaded:
        for loop in [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]:
            if k.full_shape[loop] >= threads and try_opt(Opt(OptOps.THREAD, loop, threads)):
                break
    strides = k.sts[filt].real_strides(ignore_valid=True)
    if strides[k.expanded_axes[-1]] != 1:
        free = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP and strides[a] == 0]
        fits = [a for a in free if prod(k.full_shape[t] for t in pack_tile(k, filt, a)) <= MAX_PACK_ELEMENTS]
        if fits:  # the outermost loop whose tile fits: inside the channel loop, one block's filter
            try_opt(Opt(OptOps.PACK, fits[0], filt))
    return True


def _row_vectors(k: Kernel, try_opt, image: int, vector_width: int, threads: int) -> bool:
    """A convolution whose output rows are whole vectors (32 wide at 16 lanes) is vectorized along
    the row instead of the channels: the image row, contiguous and unmasked, is read as vectors
    (one load for 16 neighbouring outputs), each filter element is broadcast, and the outputs are
    stored as vectors, where the channel form stores each lane to its own channel plane. The block:
    CONV_ROW_VECTORS vectors of a row, times the output channels (the axis the filter moves along
    and the image does not) up to ACCUMULATORS vectors. Each output's sum keeps its order (one
    multiply-add chain over the reduce loops, as in the channel form): the results are the same.
    Measured on the 3x3 convolution 8x64x32x32 -> 64 (one AVX-512 core, kernel alone): 3.7 ms
    against 5.2 ms in the channel form. Rows no full vector divides (28) keep the channel form."""
    image_strides, out_strides = (k.sts[p].real_strides(ignore_valid=True) for p in (image, 0))
    loops = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]
    if vector_width < 4 or not loops or any(view.mask is not None for view in k.sts[image].views):
        return False
    row = loops[-1]
    filters = [p for p in _loads(k) if p != image and k.sts[p].real_strides(ignore_valid=True)[row] == 0]
    if image_strides[row] != 1 or out_strides[row] != 1 or k.full_shape[row] % vector_width or not filters:
        return False
    filter_strides = k.sts[filters[0]].real_strides(ignore_valid=True)
    channels = [a for a in loops if image_strides[a] == 0 and filter_strides[a] != 0]
    vectors = k.full_shape[row] // vector_width  # (a row of one vector leaves no axis to upcast again)
    if not channels or not try_opt(Opt(OptOps.UPCAST, row, vector_width)):
        return False
    if vectors > 1 and vectors % CONV_ROW_VECTORS == 0:
        try_opt(Opt(OptOps.UPCAST, row, CONV_ROW_VECTORS))
    amount = _largest_divisor(k.full_shape[channels[-1]],
                              ACCUMULATORS // _vector_accumulators(k, vector_width))
    if amount > 1:
        try_opt(Opt(OptOps.UPCAST, channels[-1], amount))
    if threads > 1 and prod(k.full_shape) >= THREAD_MIN_WORK:
        for loop in [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]:
            if k.full_shape[loop] >= threads and try_opt(Opt(OptOps.THREAD, loop, threads)):
                break
    return True


def _more_channel_vectors(k: Kernel, try_opt, axis: int, vectors: int) -> None:
    """UPCAST the channel axis (already a vector) again, so the register block holds `vectors`
    vectors of channels: each broadcast image element then feeds that many multiply-adds, and the
    block needs fewer image loads (and fewer image addresses, each a register the compiler would
    otherwise spill) per multiply-add. Measured on the 3x3 convolutions of bench/bench_cpu.py (one
    AVX-512 core): 16 channels x 14 positions took 1.6x as long as 32 channels x 7 positions."""
    if vectors > 1 and k.full_shape[axis] % vectors == 0:
        try_opt(Opt(OptOps.UPCAST, axis, vectors))


def _conv_register_block(k: Kernel, try_opt, filt: int, width: int, threaded: bool) -> None:
    """UPCAST the output loops along which the filter does not move, innermost first, each by its
    largest divisor that keeps the block within ACCUMULATORS vectors: one filter vector then
    serves a row of outputs (13 of a 26-wide row, or a 3x3 window of the weight gradient). The
    outermost output loop stays for threads (if `threaded`), and, where the filter is to be
    packed, one loop around the block stays too (a tile is packed before a loop), so 4x4 outputs
    get 4 x 2."""
    strides = k.sts[filt].real_strides(ignore_valid=True)
    loops = [a for a in k.loop_axes if k.kinds[a] is AxisKind.LOOP]
    candidates = [a for a in loops[1 if threaded else 0:] if strides[a] == 0]
    packing = strides[k.expanded_axes[-1]] != 1
    for axis in reversed(candidates):  # upcasting an axis removes or keeps it; those outside stay put
        budget = ACCUMULATORS // _vector_accumulators(k, width)  # vectors of `width` lanes
        if packing and axis == candidates[0]:
            budget = min(budget, k.full_shape[axis] // 2)
        amount = _largest_divisor(k.full_shape[axis], budget)
        if amount > 1:
            try_opt(Opt(OptOps.UPCAST, axis, amount))


# --8<-- [end:conv-heuristics]
