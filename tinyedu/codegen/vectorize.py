"""Values across the lanes of a vector axis: one UOp, a vector UOp, or one UOp per lane.

When a kernel has a vector axis (the innermost UPCAST/UNROLL axis, of size W, along which some
buffer is contiguous), every AST node computes W values at once, one per lane. The linearizer keeps
them in whichever form is cheapest:

- a scalar UOp: the same value in every lane (a constant, or a buffer that does not move along the
  axis: stride 0). It is broadcast only where a vector op needs it.
- a vector UOp (dtype float32xW ...): a vector LOAD where the buffer is contiguous (stride 1), or
  a vector ALU op.
- a tuple of W scalar UOps: one per lane, where nothing better applies (a strided or masked read,
  an op with no vector form such as exp2).

`as_vector` and `as_lanes` convert between them (VECTORIZE/BROADCAST one way, GEP the other).
"""

from __future__ import annotations

from typing import Any, Union

from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps, LazyOp, TernaryOps
from tinyedu.core.uops import VECTOR_ALU_OPS, UOp, UOpBuilder, UOps, VectorDType, is_vector, scalar_of
from tinyedu.shape import Node, Variable
from tinyedu.shape.rules import base_and_coefficient, terms_and_constant

Value = Union[UOp, tuple[UOp, ...]]
LANE = "lane"  # the name of the index variable of the vector axis, in index expressions


def vectorizable(dtype: DType) -> bool:
    """Only 4-byte lanes (float32, int32) become vectors; bool and uint8 stay lane by lane."""
    return dtype in VECTOR_ALU_OPS


def dtype_of(value: Value) -> DType:
    """The lane dtype of a value in any of its three forms."""
    first = value[0] if isinstance(value, tuple) else value
    return scalar_of(first.dtype)


def is_uniform(value: Value) -> bool:
    """A scalar UOp: the same value in every lane."""
    return not isinstance(value, tuple) and not is_vector(value.dtype)


def as_vector(b: UOpBuilder, value: Value, width: int) -> UOp:
    """The value as one vector UOp (BROADCAST a scalar, VECTORIZE lanes)."""
    if isinstance(value, tuple):
        return b.emit(UOps.VECTORIZE, VectorDType(dtype_of(value), width), value)
    if is_vector(value.dtype):
        return value
    return b.emit(UOps.BROADCAST, VectorDType(value.dtype, width), (value,))


def as_lanes(b: UOpBuilder, value: Value, width: int) -> tuple[UOp, ...]:
    """The value as one scalar UOp per lane (GEP each lane of a vector)."""
    if isinstance(value, tuple):
        return value
    if is_vector(value.dtype):
        return tuple(b.emit(UOps.GEP, scalar_of(value.dtype), (value,), lane) for lane in range(width))
    return (value,) * width


def lane_stride(index: Node, lane: Variable) -> int | None:
    """The stride of `index` along the lane variable (0 when it does not appear), or None when the
    lane appears other than as `lane*stride` (inside a // or %, after a reshape)."""
    terms, _ = terms_and_constant(index)
    stride = 0
    for term in terms:
        base, coefficient = base_and_coefficient(term)
        if base == lane:
            stride += coefficient
        elif any(v.name == lane.name for v in base.vars()):
            return None
    return stride


def vector_alu_ok(op: Any, srcs: list[Value], dtype: DType, mask_ok: bool) -> bool:
    """Whether op can run as one vector op (else it runs lane by lane).

    The op must be in VECTOR_ALU_OPS for its operands' dtype; a comparison only when its result
    feeds nothing but WHERE conditions (`mask_ok`); a WHERE only with a vector (mask) or uniform
    condition.
    """
    operand = dtype_of(srcs[1]) if op is TernaryOps.WHERE else dtype_of(srcs[0])
    if op not in VECTOR_ALU_OPS.get(operand, ()):
        return False
    if op in (BinaryOps.CMPLT, BinaryOps.CMPEQ):
        return mask_ok
    if op is TernaryOps.WHERE:
        return not isinstance(srcs[0], tuple) and vectorizable(dtype)
    return vectorizable(dtype)


# --8<-- [start:alu]
def alu(b: UOpBuilder, op: Any, srcs: list[Value], dtype: DType, width: int, mask_ok: bool = False) -> Value:
    """op on values of `width` lanes: scalar if every source is uniform, else one vector op when it
    can be, else one scalar op per lane. `dtype` is the result's lane dtype."""
    if width == 1 or all(is_uniform(s) for s in srcs):
        return b.alu(op, *srcs, dtype=dtype)
    if op is TernaryOps.WHERE and isinstance(srcs[0], tuple) and dtype_of(srcs[0]) == dtypes.bool and \
            vectorizable(dtype) and op in VECTOR_ALU_OPS.get(dtype_of(srcs[1]), ()):
        srcs = [lanes_to_mask(b, srcs[0], width), *srcs[1:]]
    if vector_alu_ok(op, srcs, dtype, mask_ok):
        vectors = [as_vector(b, s, width) for s in srcs]
        return b.alu(op, *vectors, dtype=VectorDType(dtype, width))
    lanes = [as_lanes(b, s, width) for s in srcs]
    return tuple(b.alu(op, *(src[lane] for src in lanes), dtype=dtype) for lane in range(width))
# --8<-- [end:alu]


def lanes_to_mask(b: UOpBuilder, condition: tuple[UOp, ...], width: int) -> UOp:
    """A WHERE's condition given lane by lane (bools loaded from memory, or computed from them) as
    one vector mask: each lane CAST to int32 (0 or 1), VECTORIZEd, and compared with 0. The WHERE
    is then one vector select, where lane by lane it would be a branch per element (a bool mask
    that is half true mispredicts half the time: 140 us for the MLP's 32K-element relu)."""
    ints = tuple(b.emit(UOps.CAST, dtypes.int32, (lane,)) for lane in condition)
    return alu(b, BinaryOps.CMPLT, [b.const(0, dtypes.int32), ints], dtypes.bool, width, mask_ok=True)


def tree(b: UOpBuilder, op: Any, values: list[Value], dtype: DType, width: int) -> Value:
    """Combine values pairwise, ((v0 op v1) op (v2 op v3)), in a fixed order (reproducible sums)."""
    if len(values) == 1:
        return values[0]
    half = (len(values) + 1) // 2
    return alu(b, op, [tree(b, op, values[:half], dtype, width), tree(b, op, values[half:], dtype, width)],
               dtype, width)


def horizontal(b: UOpBuilder, op: Any, value: Value, width: int) -> UOp:
    """Reduce the lanes of one value to a scalar (the horizontal sum or max), pairwise."""
    if is_uniform(value):
        value = (value,) * width
    lanes = list(as_lanes(b, value, width))
    return tree(b, op, lanes, dtype_of(value), 1)  # type: ignore[return-value]


def mask_conditions(ast: LazyOp, dtype_of_node) -> set[int]:
    """The comparisons whose results only ever feed the condition of a WHERE on float32/int32
    values: only those may be vector masks (a bool vector has no other use)."""
    users: dict[int, list[LazyOp]] = {}
    nodes: dict[int, LazyOp] = {}
    for node in ast.walk():
        nodes[id(node)] = node
        for s in node.src:
            users.setdefault(id(s), [])
            if all(u is not node for u in users[id(s)]):
                users[id(s)].append(node)
    ok = set()
    for key, node in nodes.items():
        if node.op not in (BinaryOps.CMPLT, BinaryOps.CMPEQ) or not users.get(key):
            continue
        if all(u.op is TernaryOps.WHERE and u.src[0] is node and node not in u.src[1:]
               and vectorizable(dtype_of_node(u)) for u in users[key]):
            ok.add(key)
    return ok
