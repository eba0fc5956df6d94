"""GPU vector loads and stores: four scalar accesses to neighbouring elements become one float4.

A GPU thread computes with scalars (its ALU is one lane of the warp's), but it can move 16 bytes
with one instruction: `float4` in OpenCL and CUDA, `vec4<f32>` in WGSL. A register-blocked matmul
gives each thread four neighbouring outputs of a row (UPCAST 4), and a kernel UPCAST along a
contiguous axis reads four neighbouring inputs: the linearizer writes them as four scalar LOADs (or
STOREs) at `base + c, base + c + 1, base + c + 2, base + c + 3`. This pass, run on a GPU kernel's
UOps after the linearizer (`combine_vector_accesses`), replaces each such group by one vector LOAD
(its four lanes read back with GEP) or one vector STORE (of a VECTORIZE of the four values). The
arithmetic stays scalar, as it is on a GPU.

The group must be safe to move as one, and this pass only merges what it can prove is:
- four 4-byte elements (float32 or int32) of the same global or shared array, with the same gate
  (a gated load reads all four or none: the gate cannot depend on the lane);
- aligned: `base` is a multiple of 4 (a product with a multiple of 4, or a sum of such) and `c` too,
  so the 16 bytes are one aligned float4 (CUDA's `float4` loads need 16-byte alignment; buffers start
  on 64 bytes and shared arrays are declared aligned). Anything it cannot prove stays scalar: an odd
  size or an offset view (x[1:]) falls back to four scalar accesses;
- in bounds: the four elements are the ones the scalar accesses touched, no more;
- in one straight run of UOps (no loop, IF or BARRIER between them), with no access to the array
  between them that could see the move: for loads no STORE to it, for stores no LOAD of it and no
  other STORE to it, except at base + a constant outside the group (another element).
"""

from __future__ import annotations

from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps
from tinyedu.core.uops import UOp, UOps, VectorDType, is_vector
from tinyedu.shape import ShapeTracker, Variable, idx_vars
from tinyedu.shape.rules import base_and_coefficient, terms_and_constant
from tinyedu.shape.symbolic import NumNode

WIDTH = 4  # lanes of a GPU vector access: 16 bytes of 4-byte elements
LANE_TYPES = (dtypes.float32, dtypes.int32)
ARRAYS = (UOps.DEFINE_GLOBAL, UOps.DEFINE_SHARED)
BREAKS = (UOps.RANGE, UOps.ENDRANGE, UOps.IF, UOps.ENDIF, UOps.BARRIER)  # end a straight run


def split_offset(index: UOp) -> tuple[UOp | None, int]:
    """index = base + constant: (base, constant); base None for a constant index."""
    if index.op is UOps.CONST:
        return None, int(index.arg)
    if index.op is UOps.ALU and index.arg in (BinaryOps.ADD, BinaryOps.SUB) and index.src[1].op is UOps.CONST:
        base, offset = split_offset(index.src[0])
        return base, offset + (index.src[1].arg if index.arg is BinaryOps.ADD else -index.src[1].arg)
    return index, 0


def multiple_of(u: UOp | None, n: int) -> bool:
    """Whether the integer value `u` is a multiple of n in every thread (None: 0, a multiple)."""
    if u is None:
        return True
    if u.op is UOps.CONST:
        return int(u.arg) % n == 0
    if u.op is UOps.ALU and u.arg is BinaryOps.MUL:
        return any(multiple_of(s, n) for s in u.src)
    if u.op is UOps.ALU and u.arg in (BinaryOps.ADD, BinaryOps.SUB):
        return all(multiple_of(s, n) for s in u.src)
    return False


def float4_view(st: ShapeTracker, axis: int) -> bool:
    """Whether a buffer read or written through `st` moves as whole aligned float4s once `axis` is
    UPCAST by 4: the question this pass answers on the UOps, asked of the view before they exist
    (the GPU heuristics ask it to choose that UPCAST). Yes when the index is `idx_axis + 4 * (terms
    of the other indices) + a multiple of 4`: stride 1 along `axis`, every other stride and the
    offset multiples of 4, no padding (a gate per lane), no `//` or `%` (a view it cannot merge)."""
    variables = idx_vars(st.shape)
    index, valid = st.expr_idxs(variables)
    if not (isinstance(valid, NumNode) and valid.b == 1):
        return False
    terms, constant = terms_and_constant(index)
    strides = {}
    for term in terms:
        base, coefficient = base_and_coefficient(term)
        if not isinstance(base, Variable):
            return False
        strides[base.name] = coefficient
    along = variables[axis].name
    others = [c for name, c in strides.items() if name != along]
    return strides.get(along) == 1 and constant % WIDTH == 0 and all(c % WIDTH == 0 for c in others)


def _candidate(u: UOp) -> bool:
    """A scalar 4-byte LOAD or STORE of a global or shared array."""
    if u.op not in (UOps.LOAD, UOps.STORE) or u.src[0].op not in ARRAYS:
        return False
    dtype = u.dtype if u.op is UOps.LOAD else u.src[2].dtype
    return not is_vector(dtype) and dtype in LANE_TYPES


def find_groups(uops: list[UOp]) -> list[list[int]]:
    """The positions of each group of four accesses to merge, lane 0 first."""
    runs: dict[tuple, dict[int, int]] = {}  # (run, op, array, base, gate) -> {offset: position}
    run = 0
    for i, u in enumerate(uops):
        run += u.op in BREAKS
        if _candidate(u):
            base, offset = split_offset(u.src[1])
            gate = u.src[2] if u.op is UOps.LOAD and len(u.src) == 3 else None
            runs.setdefault((run, u.op, u.src[0], base, gate), {}).setdefault(offset, i)
    groups = []
    for (_, op, array, base, _), at in runs.items():
        if not multiple_of(base, WIDTH):
            continue
        for first in sorted(o for o in at if o % WIDTH == 0):
            members = [at.get(first + lane) for lane in range(WIDTH)]
            if None not in members and _safe(uops, members, op, array, base):
                groups.append(members)
    return groups


def _safe(uops: list[UOp], members: list[int], op: UOps, array: UOp, base: UOp | None) -> bool:
    """No access between the first and last member that moving them together could change."""
    for i in range(min(members), max(members) + 1):
        u = uops[i]
        if u.op not in (UOps.LOAD, UOps.STORE) or u.src[0] is not array or i in members:
            continue
        if op is UOps.LOAD and u.op is UOps.STORE:
            return False
        if op is UOps.STORE and u.op is UOps.LOAD:
            return False
        if op is UOps.STORE:  # a store at base + a constant outside the group is another element
            other_base, offset = split_offset(u.src[1])
            first = split_offset(uops[members[0]].src[1])[1]
            if other_base is not base or first <= offset < first + WIDTH:
                return False
    return True


# --8<-- [start:combine]
def combine_vector_accesses(uops: list[UOp]) -> list[UOp]:
    """The kernel with each provably safe group of four scalar accesses as one vector access."""
    groups = find_groups(uops)
    if not groups:
        return uops
    replaced: dict[UOp, UOp] = {}        # an old UOp -> the UOp that now gives its value
    before: dict[int, list[UOp]] = {}    # new UOps to put before position i (instead of uops[i])
    dropped: set[int] = set()
    for members in groups:
        first = uops[members[0]]
        array, dtype = first.src[0], first.dtype if first.op is UOps.LOAD else first.src[2].dtype
        base, offset = split_offset(first.src[1])
        made, index = _index(base, offset, first.src[1].dtype)
        vector = VectorDType(dtype, WIDTH)
        if first.op is UOps.LOAD:
            at = min(members)  # the earliest: the other members' values are read from it
            load = UOp(UOps.LOAD, vector, (array, index, *first.src[2:]))
            lanes = [UOp(UOps.GEP, dtype, (load,), lane) for lane in range(WIDTH)]
            before.setdefault(at, []).extend([*made, load, *lanes])
            replaced.update({uops[m]: lane for m, lane in zip(members, lanes, strict=True)})
        else:
            at = max(members)  # the latest: every member's value exists there
            values = UOp(UOps.VECTORIZE, vector, tuple(uops[m].src[2] for m in members))
            store = UOp(UOps.STORE, None, (array, index, values))
            before.setdefault(at, []).extend([*made, values, store])
        dropped.update(members)
    out: list[UOp] = []
    for i, u in enumerate(uops):
        for new in [*before.get(i, []), *([] if i in dropped else [u])]:
            out.append(_remap(new, replaced))
    # (a VECTORIZE of one vector's lanes in order is that vector, already in the list: once is enough)
    return _without_unused(list(dict.fromkeys(out)))
# --8<-- [end:combine]


def _without_unused(uops: list[UOp]) -> list[UOp]:
    """Drop the index arithmetic that only the merged accesses used (values nothing reads now)."""
    needed: set[UOp] = set()
    kept = []
    for u in reversed(uops):  # users come after what they use: walk back, keeping what is needed
        if u in needed or u.op not in (UOps.ALU, UOps.CONST, UOps.GEP, UOps.VECTORIZE):
            kept.append(u)
            needed.update(u.src)
    return kept[::-1]


def _index(base: UOp | None, offset: int, dtype) -> tuple[list[UOp], UOp]:
    """base + offset: the new UOps that compute it, and its value."""
    if base is not None and offset == 0:
        return [], base
    constant = UOp(UOps.CONST, dtype, (), offset)
    if base is None:
        return [constant], constant
    add = UOp(UOps.ALU, dtype, (base, constant), BinaryOps.ADD)
    return [constant, add], add


def _remap(u: UOp, replaced: dict[UOp, UOp]) -> UOp:
    """`u` with its sources replaced (a new UOp, remembered, when one changed)."""
    if u in replaced:
        return replaced[u]
    src = tuple(replaced.get(s, s) for s in u.src)
    if u.op is UOps.VECTORIZE and src[0].op is UOps.GEP and \
            all(s.op is UOps.GEP and s.arg == n and s.src[0] is src[0].src[0] for n, s in enumerate(src)):
        new = src[0].src[0]  # the lanes of one vector, in order (a float4 copied as it was loaded)
    elif src == u.src:
        return u
    else:
        new = UOp(u.op, u.dtype, src, u.arg)
    replaced[u] = new
    return new
