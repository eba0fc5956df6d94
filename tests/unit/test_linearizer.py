"""Stage 3: Kernel (the loop shape), the linearizer's UOps, their listing and their drawing.

ASTs are built by hand here (not by the scheduler), so each test says exactly which kernel it
linearizes.
"""

import re

import numpy as np
import pytest

from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, BufferOps, ConstBuffer, LazyOp, MemBuffer, ReduceOps, UnaryOps
from tinyedu.core.uops import UOps, uops_listing
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.ops_numpy import NumpyProgram
from tinyedu.runtime.ops_python import PythonProgram
from tinyedu.shape import ShapeTracker

F32 = dtypes.float32


def load(idx: int, st: ShapeTracker, dtype=F32) -> LazyOp:
    return LazyOp(BufferOps.LOAD, (), MemBuffer(idx, dtype, st))


def const(val: float, st: ShapeTracker, dtype=F32) -> LazyOp:
    return LazyOp(BufferOps.CONST, (), ConstBuffer(val, dtype, st))


def store(value: LazyOp, shape: tuple[int, ...], dtype=F32) -> LazyOp:
    return LazyOp(BufferOps.STORE, (value,), MemBuffer(0, dtype, ShapeTracker.from_shape(shape)))


def alu(op, *src: LazyOp, arg=None) -> LazyOp:
    return LazyOp(op, tuple(src), arg)


def elementwise_ast() -> LazyOp:
    """(x + 1) * (x + 1) on (4, 16): the AST repeats the (x + 1) subtree (equal, not the same object)."""
    st = ShapeTracker.from_shape((4, 16))
    def x_plus_1():
        return alu(BinaryOps.ADD, load(1, st), const(1.0, st))
    return store(alu(BinaryOps.MUL, x_plus_1(), x_plus_1()), (4, 16))


def reduce_ast() -> LazyOp:
    """Sum a (4, 16) buffer over axis 1."""
    return store(alu(ReduceOps.SUM, load(1, ShapeTracker.from_shape((4, 16))), arg=(1,)), (4, 1))


def pad_ast() -> LazyOp:
    """A (4,) buffer padded by one element on each side: masked reads give 0."""
    return store(load(1, ShapeTracker.from_shape((4,)).pad(((1, 1),))), (6,))


def run(ast: LazyOp, *inputs: np.ndarray, program=PythonProgram) -> np.ndarray:
    """Run a kernel AST on the PYTHON device (UOps interpreted) or NUMPY, return the output."""
    out = Buffer("PYTHON", ast.arg.st.size, ast.arg.dtype)
    buffers = [Buffer("PYTHON", x.size, dtypes.from_numpy(x.dtype)).copyin(x) for x in inputs]
    runner = program(linearize(Kernel(ast))) if program is PythonProgram else program(ast)
    runner([out, *buffers])
    return out.as_numpy().reshape(ast.arg.st.shape)


# ---- Kernel ----
def test_kernel_puts_output_axes_first_and_reduce_axes_last():
    st = ShapeTracker.from_shape((16, 4))
    k = Kernel(store(alu(ReduceOps.SUM, load(1, st), arg=(0,)), (1, 4)))
    assert k.full_shape == (4, 16) and k.first_reduce == 1
    assert k.sts[1].shape == (4, 16) and k.sts[1].views[-1].strides == (1, 4)  # read down a column
    assert k.output_shape == (4, 1)
    assert k.name == "r_16_4"  # named like its ScheduleItem: the reduce's input shape
    assert "full shape (4, 16), first_reduce=1" in str(k) and "applied opts: []" in str(k)


def test_kernel_drops_axes_of_size_one():
    st = ShapeTracker.from_shape((1, 3, 1))
    k = Kernel(store(alu(UnaryOps.NEG, load(1, st)), (1, 3, 1)))
    assert k.full_shape == (3,) and k.first_reduce == 1 and k.loop_names == ["gidx0"]


def test_kernel_rejects_an_ast_not_rooted_at_store():
    with pytest.raises(ValueError, match="rooted at STORE"):
        Kernel(load(1, ShapeTracker.from_shape((2,))))


# ---- the listings ----
def test_elementwise_listing():
    assert uops_listing(linearize(Kernel(elementwise_ast()))) == """\
   0 DEFINE_GLOBAL float32* []             data0 (output)
   1 DEFINE_GLOBAL float32* []             data1
   2 CONST         int32    []             0
   3 CONST         int32    []             4
   4 CONST         int32    []             16
   5 CONST         float32  []             1.0
   6 RANGE         int32    [2, 3]         gidx0
   7 ALU           int32    [6, 4]         MUL
   8 RANGE         int32    [2, 4]         gidx1
   9 ALU           int32    [7, 8]         ADD
  10 LOAD          float32  [1, 9]
  11 ALU           float32  [10, 5]        ADD
  12 ALU           float32  [11, 11]       MUL
  13 STORE                  [0, 9, 12]
  14 ENDRANGE               [8]
  15 ENDRANGE               [6]"""


def test_reduce_listing_hoists_the_row_offset_out_of_the_reduce_loop():
    assert uops_listing(linearize(Kernel(reduce_ast()))) == """\
   0 DEFINE_GLOBAL float32* []             data0 (output)
   1 DEFINE_GLOBAL float32* []             data1
   2 CONST         int32    []             0
   3 CONST         int32    []             4
   4 CONST         int32    []             16
   5 RANGE         int32    [2, 3]         gidx0
   6 DEFINE_ACC    float32  []             0.0
   7 ALU           int32    [5, 4]         MUL
   8 RANGE         int32    [2, 4]         ridx0
   9 ALU           int32    [7, 8]         ADD
  10 LOAD          float32  [1, 9]
  11 ALU           float32  [6, 10]        ADD
  12 ASSIGN        float32  [6, 11]
  13 ENDRANGE               [8]
  14 STORE                  [0, 5, 12]
  15 ENDRANGE               [5]"""


def test_masked_pad_listing_gates_the_load():
    uops = linearize(Kernel(pad_ast()))
    assert uops_listing(uops) == """\
   0 DEFINE_GLOBAL float32* []             data0 (output)
   1 DEFINE_GLOBAL float32* []             data1
   2 CONST         int32    []             0
   3 CONST         int32    []             6
   4 CONST         int32    []             5
   5 CONST         int32    []             1
   6 RANGE         int32    [2, 3]         gidx0
   7 ALU           bool     [2, 6]         CMPLT
   8 ALU           bool     [6, 4]         CMPLT
   9 ALU           bool     [7, 8]         MUL
  10 ALU           int32    [6, 5]         SUB
  11 LOAD          float32  [1, 10, 9]
  12 STORE                  [0, 6, 11]
  13 ENDRANGE               [6]"""
    assert run(pad_ast(), np.array([1, 2, 3, 4], np.float32)).tolist() == [0, 1, 2, 3, 4, 0]


def test_listing_format():
    for line in uops_listing(linearize(Kernel(reduce_ast()))).splitlines():
        assert re.fullmatch(r" *\d+ [A-Z_]+ +([a-z0-9]+\*? +)?\[[\d, ]*\]( +\S.*)?", line), line


# ---- what the UOps must (not) contain ----
MOVES = [
    lambda st: st.permute((1, 0)),
    lambda st: st.pad(((1, 2), (0, 1))),
    lambda st: st.shrink(((1, 3), (2, 5))),
    lambda st: st.flip((0, 1)),
    lambda st: st.stride((2, -3)),
    lambda st: st.permute((1, 0)).reshape((2, 3, 4)).pad(((0, 0), (1, 0), (0, 1))).reshape((2, 20)),
    lambda st: st.reshape((4, 6, 1)).expand((4, 6, 5)).permute((2, 0, 1)).shrink(((0, 2), (1, 3), (0, 3))),
    lambda st: st.permute((1, 0)).reshape((2, 12)).pad(((0, 0), (12, 0))),  # a cat's second part
]


@pytest.mark.parametrize("move", MOVES)
def test_index_math_is_simplified(move):
    st = move(ShapeTracker.from_shape((4, 6)))
    for ast in (store(load(1, st), st.shape),
                store(alu(ReduceOps.SUM, load(1, st), arg=(0,)), (1, *st.shape[1:]))):
        for u in linearize(Kernel(ast)):
            if u.op is UOps.ALU and u.dtype in (dtypes.int32, dtypes.bool):
                consts = [s.arg for s in u.src if s.op is UOps.CONST]
                assert len(consts) < len(u.src), f"{u.arg.name} of constants {consts} was not folded"
                assert not (u.arg is BinaryOps.MUL and 1 in consts), "x*1 left in the index math"
                assert not (u.arg in (BinaryOps.ADD, BinaryOps.SUB) and 0 in consts), "x+0 in the index math"


def test_a_padded_read_computes_its_index_for_the_valid_positions_only():
    """The second part of a concatenation, read through two views: its index wraps around with
    `% 6` in general, but not where the mask lets it read (tinyedu/shape/symbolic.py: given_valid)."""
    st = MOVES[-1](ShapeTracker.from_shape((4, 6)))
    index, valid = st.expr_idxs()
    assert "%6)" in index.render() and valid.render() == "(idx1>11)"
    moduli = [s.arg for u in linearize(Kernel(store(load(1, st), st.shape))) if u.op is UOps.ALU and
              u.arg is BinaryOps.MOD for s in u.src if s.op is UOps.CONST]
    assert moduli == [4], moduli  # (idx1 % 4 is the transpose's own)


@pytest.mark.parametrize("move", MOVES)
def test_uops_compute_what_numpy_computes(move):
    data = np.arange(24, dtype=np.float32)
    st = move(ShapeTracker.from_shape((4, 6)))
    for ast in (store(load(1, st), st.shape),
                store(alu(ReduceOps.SUM, load(1, st), arg=(0,)), (1, *st.shape[1:]))):
        np.testing.assert_array_equal(run(ast, data), run(ast, data, program=NumpyProgram))


def test_repeated_subtrees_are_computed_once():
    uops = linearize(Kernel(elementwise_ast()))
    assert sum(u.op is UOps.LOAD for u in uops) == 1
    float_alus = [u for u in uops if u.op is UOps.ALU and u.dtype == F32]
    assert [u.arg for u in float_alus] == [BinaryOps.ADD, BinaryOps.MUL]
    assert float_alus[1].src == (float_alus[0], float_alus[0])
    values = [(u.op, u.dtype, u.src, u.arg) for u in uops if u.op not in (UOps.RANGE, UOps.ENDRANGE)]
    assert len(values) == len(set(values)), "two UOps compute the same value"


def test_a_repeated_reduce_is_one_loop():
    """sum(x) * sum(x): the AST holds the REDUCE twice; the UOps run one reduce loop."""
    def total():
        return alu(ReduceOps.SUM, load(1, ShapeTracker.from_shape((8,))), arg=(0,))
    ast = store(alu(BinaryOps.MUL, total(), total()), (1,))
    uops = linearize(Kernel(ast))
    assert sum(u.op is UOps.RANGE for u in uops) == 1 and sum(u.op is UOps.DEFINE_ACC for u in uops) == 1
    assert run(ast, np.arange(8, dtype=np.float32)).tolist() == [28.0 * 28.0]


def test_reducing_nothing_emits_no_loop_and_gives_the_identity():
    ast = store(alu(ReduceOps.MAX, load(1, ShapeTracker.from_shape((3, 0))), arg=(1,)), (3, 1))
    uops = linearize(Kernel(ast))
    assert [u.arg.name for u in uops if u.op is UOps.RANGE] == ["gidx0"]
    assert not any(u.op is UOps.LOAD for u in uops), "a hoisted load would read an empty buffer"
    assert run(ast, np.zeros(0, np.float32)).tolist() == [[-np.inf]] * 3


def plain_reduce_asts() -> list[LazyOp]:
    """A row sum, a max over nothing, and a sum over two axes of a permuted view."""
    empty = load(1, ShapeTracker.from_shape((3, 0)))
    permuted = load(1, ShapeTracker.from_shape((2, 3, 4)).permute((1, 0, 2)))
    return [reduce_ast(), store(alu(ReduceOps.MAX, empty, arg=(1,)), (3, 1)),
            store(alu(ReduceOps.SUM, permuted, arg=(1, 2)), (3, 1, 1))]


@pytest.mark.parametrize("ast", plain_reduce_asts(), ids=["sum", "empty max", "two reduce axes"])
def test_the_plain_reduce_is_the_expanded_one_without_opts(ast):
    """Without opts the linearizer takes `lower_plain_reduce` (chapter 04's exercise hook); the
    general `lower_expanded_reduce` must write exactly the same UOps for such a kernel."""
    from tinyedu.codegen.linearizer import Linearizer

    class Expanded(Linearizer):
        def lower_reduce(self, reduce):
            return self.lower_expanded_reduce(reduce)

    called = []

    class Plain(Linearizer):
        def lower_plain_reduce(self, reduce):
            called.append(reduce)
            return super().lower_plain_reduce(reduce)

    plain = uops_listing(Plain(Kernel(ast)).linearize())
    assert called and plain == uops_listing(Expanded(Kernel(ast)).linearize())


def test_an_empty_output_runs_nothing():
    uops = linearize(Kernel(store(load(1, ShapeTracker.from_shape((0, 3))), (0, 3))))
    assert [u.op for u in uops] == [UOps.DEFINE_GLOBAL, UOps.DEFINE_GLOBAL]


def test_store_casts_to_the_output_dtype():
    ast = store(load(1, ShapeTracker.from_shape((3,)), dtypes.int32), (3,), dtype=F32)
    assert any(u.op is UOps.CAST for u in linearize(Kernel(ast)))
    assert run(ast, np.array([1, -2, 3], np.int32)).tolist() == [1.0, -2.0, 3.0]


def test_uop_graph_is_deterministic_and_draws_loops_as_boxes():
    from tinyedu.viz.uop_graph import draw_uops

    first, second = (draw_uops(linearize(Kernel(reduce_ast()))).source for _ in range(2))
    assert first == second
    assert "subgraph cluster_u5" in first and 'label="loop ridx0"' in first
    assert "u10 -> u11" in first  # the LOAD feeds the accumulating ADD
