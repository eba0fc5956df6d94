"""The LLVM IR renderer: UOps -> LLVM IR text, one level below C.

LLVM IR is what clang turns C into before it picks machine instructions: a typed assembly language
in SSA form (every value `%name` is assigned exactly once), for an infinite number of registers.
UOps are already SSA, so most UOps become one instruction:

    %val0 = load float, ptr %gep0, align 4       LOAD
    %alu1 = fadd float %val0, 1.0                 ALU ADD on float32 (`add i32` on int32)
    store float %alu1, ptr %gep1, align 4         STORE

What C writes as a `for` loop is, in LLVM IR, basic blocks (straight-line code ending in a branch)
and phi nodes. A phi picks a value by the block control came from; that is how a value changes
from one iteration to the next in SSA, where nothing is assigned twice:

    gidx0.loop:                                                 ; the loop header
      %gidx0 = phi i32 [ 0, %entry ], [ %gidx0.next, %gidx0.body ]
      %gidx0.more = icmp slt i32 %gidx0, 64
      br i1 %gidx0.more, label %gidx0.body, label %gidx0.exit
    gidx0.body:
      ...                                                       ; the loop body
      %gidx0.next = add i32 %gidx0, 1
      br label %gidx0.loop

An accumulator (DEFINE_ACC, ASSIGN) is the same idea: a phi in the header of each loop that
updates it, `%acc0.ridx0 = phi float [ 0.0, %entry ], [ %alu3, %ridx0.body ]`; after the loop,
the phi holds the final value. A gated LOAD (padding) is a branch around the load, so an index
outside the buffer is never read, and a phi that gives 0 when the load did not happen.

Vectors are LLVM vector types (`<4 x float>`): `fadd <4 x float>` adds lane by lane, a vector load
is `load <4 x float>`, BROADCAST is insertelement + shufflevector, GEP extractelement. Math
functions are LLVM intrinsics (`@llvm.exp2.f32`, `@llvm.fma.v4f32`), which become libm calls or
single instructions. The semantics are the C renderer's, op by op: integer division by zero gives
0, INT_MIN / -1 does not trap, MAX lets NaN win, float -> int outside int32 gives INT_MIN, and no
fast-math flags are set, so LLVM may not reassociate or fuse float math (MULACC is the only fma).
"""

from __future__ import annotations

from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.core.renderer import Renderer
from tinyedu.core.uops import UOp, UOps, VectorDType, is_vector, scalar_of
from tinyedu.renderer.llvm_ops import (
    BITWISE,
    BOOL_OPS,
    FLOAT_OPS,
    INT_OPS,
    UINT_OPS,
    cast_instructions,
    float_max,
    int_divide,
    intrinsic_name,
    intrinsic_suffix,
    llvm_literal,
    llvm_type,
    memory_type,
    signed,
)
from tinyedu.renderer.llvm_threads import OPENMP_DECLARES, start_threads, worker_function, worker_head


class LLVMRenderer(Renderer):
    """Renders one UOp list as an LLVM IR function. `LLVMRenderer(name, uops).render()` gives the text.

    Every value is named as it is computed (`%alu3`), so `bind` keeps names as they are; only
    accumulators change their name as loops go round (see `value`).
    """

    backend = "LLVM renderer"

    def __init__(self, name: str, uops: list[UOp]):
        super().__init__(name, uops)
        self.params: list[str] = []
        self.allocas: list[str] = []        # local arrays: allocated once, in the entry block
        self.declares: dict[str, str] = {}  # intrinsics used
        self.block = "entry"                # the basic block instructions go into now
        self.current: dict[UOp, str] = {}   # accumulator -> the name of its current value
        self.loops: list[tuple[UOp, list[tuple[int, UOp, str]]]] = []  # open: (range, its phis)
        self.updated = _updated_accumulators(uops)
        self.workers: list[str] = []        # the functions THREAD loops became (see llvm_threads.py)
        self.kernel_body: tuple[list[str], list[str], str] | None = None  # set aside inside a THREAD loop

    def emit(self, line: str) -> None:
        self.lines.append(f"  {line}")

    def start_block(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.block = label

    def value(self, u: UOp) -> str:
        """An operand's name; for an accumulator, its current value (a phi inside a loop)."""
        if u.op in (UOps.DEFINE_ACC, UOps.ASSIGN):
            return self.current[u.src[0] if u.op is UOps.ASSIGN else u]
        return self.values[u]

    def typed(self, u: UOp) -> str:
        """`float %val0`: most instructions want each operand's type written before it."""
        return f"{self.type_name(u.dtype)} {self.value(u)}"

    def type_name(self, dtype: DType | VectorDType) -> str:
        return llvm_type(dtype)

    # --8<-- [start:render]
    def define_global(self, u: UOp) -> str:
        self.params.append(f"ptr noalias{'' if u.arg == 0 else ' readonly'} %data{u.arg}")
        return f"%data{u.arg}"

    def define_local(self, u: UOp) -> str:
        name = f"%{self.new_name('local')}"
        self.allocas.append(f"  {name} = alloca [{u.arg} x {memory_type(u.dtype)}], align 64")
        return name

    def const(self, u: UOp) -> str:
        return llvm_literal(u.arg, u.dtype)

    def finish(self) -> str:
        head = [f"; kernel {self.function_name}, rendered from UOps by tinyedu",
                f"define void @{self.function_name}({', '.join(self.params)}) nounwind {{", "entry:"]
        lines = [*head, *self.allocas, *self.lines, "  ret void", "}", *self.workers, *self.declares.values()]
        return "\n".join(lines) + "\n"
    # --8<-- [end:render]

    def constant(self, value: float | int | bool, dtype: DType | VectorDType) -> str:
        literal = llvm_literal(value, scalar_of(dtype))
        if not is_vector(dtype):
            return literal
        lane = llvm_type(dtype.scalar)
        return "<" + ", ".join([f"{lane} {literal}"] * dtype.count) + ">"

    # ---- loops and accumulators ----
    # --8<-- [start:loops]
    def open_loop(self, u: UOp, start: str, end: str) -> str:
        """The header block: a phi for the counter (and for every accumulator the loop updates),
        then the test that leaves the loop."""
        name, t = u.arg.name, llvm_type(u.dtype)
        if u.arg.threads > 1:
            return self.open_thread_loop(u, start, end)
        before = self.block
        self.emit(f"br label %{name}.loop")
        self.start_block(f"{name}.loop")
        phis = [(len(self.lines), u, f"%{name}")]
        self.emit(f"%{name} = phi {t} [ {start}, %{before} ]")  # the back edge is added at ENDRANGE
        for acc in self.updated[u]:
            phi = f"%{self.values[acc]}.{name}"
            phis.append((len(self.lines), acc, phi))
            self.emit(f"{phi} = phi {llvm_type(acc.dtype)} [ {self.current[acc]}, %{before} ]")
            self.current[acc] = phi
        self.emit(f"%{name}.more = icmp slt {t} %{name}, {end}")
        self.emit(f"br i1 %{name}.more, label %{name}.body, label %{name}.exit")
        self.start_block(f"{name}.body")
        self.loops.append((u, phis))
        return f"%{name}"

    def close_loop(self, u: UOp, loop: str) -> None:
        """The step and the jump back; the phis get their second input: the values at the end of the body."""
        range_, phis = self.loops.pop()
        assert range_ is u.src[0], "ENDRANGE closes the innermost loop"
        if range_.arg.threads > 1:
            return self.close_thread_loop(range_)
        name, t = range_.arg.name, llvm_type(range_.dtype)
        self.emit(f"%{name}.next = add {t} %{name}, 1")
        for line, what, _ in phis:
            back = f"%{name}.next" if what is range_ else self.current[what]
            self.lines[line] += f", [ {back}, %{self.block} ]"
        for _, acc, phi in phis[1:]:  # after the loop, an accumulator's value is its header phi
            self.current[acc] = phi
        self.emit(f"br label %{name}.loop")
        self.start_block(f"{name}.exit")

    def define_acc(self, u: UOp) -> str:
        """No instruction: the initial value is a constant, until a loop's phi takes over."""
        self.current[u] = self.constant(u.arg, u.dtype)
        return self.new_name("acc")  # the stem of its phis' names: %acc0.ridx0

    def assign(self, u: UOp, acc: str, value: str) -> str:
        self.current[u.src[0]] = value  # SSA: nothing is overwritten, the accumulator has a new value
        return value
    # --8<-- [end:loops]

    # --8<-- [start:thread-loops]
    def open_thread_loop(self, u: UOp, start: str, end: str) -> str:
        """A THREAD loop: the kernel runs a worker function on several threads (llvm_threads.py says
        how); the loop body goes into the worker, which claims iterations from a shared counter."""
        name, t = u.arg.name, llvm_type(u.dtype)
        if self.loops or self.updated[u]:
            raise NotImplementedError(f"LLVM renderer: THREAD loop {name} must be the outermost loop and "
                                      "update no accumulator defined outside it (partial results go to a "
                                      "local array)")
        worker, captured = f"@{self.function_name}.{name}", self.captured_values()
        alloca, lines = start_threads(name, worker, captured, t, start, u.arg.threads)
        self.allocas.append(alloca)
        for line in lines:
            self.emit(line)
        self.declares.update(OPENMP_DECLARES)
        self.kernel_body = (self.lines, self.allocas, self.block)  # the kernel goes on after the loop
        self.lines, self.allocas = [], []
        for line in worker_head(name, captured, t):
            self.emit(line)
        self.emit(f"br label %{name}.loop")
        self.start_block(f"{name}.loop")
        self.emit(f"%{name} = atomicrmw add ptr %{name}.counter, {t} 1 monotonic")  # claim the next one
        self.emit(f"%{name}.more = icmp slt {t} %{name}, {end}")
        self.emit(f"br i1 %{name}.more, label %{name}.body, label %{name}.exit")
        self.start_block(f"{name}.body")
        self.loops.append((u, []))
        return f"%{name}"

    def close_thread_loop(self, u: UOp) -> None:
        """The end of the worker (claim the next iteration, or return); the kernel goes on."""
        name = u.arg.name
        self.emit(f"br label %{name}.loop")
        self.start_block(f"{name}.exit")
        self.workers.append(worker_function(f"@{self.function_name}.{name}", self.allocas, self.lines))
        self.lines, self.allocas, self.block = self.kernel_body
        self.kernel_body = None

    def captured_values(self) -> list[tuple[str, str]]:
        """The named values computed before the THREAD loop (buffers, local arrays, values hoisted out
        of the loop), with their types: the worker reads them from the context."""
        captured: dict[str, str] = {}
        for u, value in self.values.items():
            if isinstance(value, str) and value.startswith("%") and value not in captured:
                pointer = u.op in (UOps.DEFINE_GLOBAL, UOps.DEFINE_LOCAL)
                captured[value] = "ptr" if pointer else llvm_type(u.dtype)
        return list(captured.items())
    # --8<-- [end:thread-loops]

    # ---- memory ----
    # --8<-- [start:memory]
    def address(self, buffer: str, index: UOp, dtype: DType) -> str:
        """A pointer to element `index` of the buffer (or local array)."""
        pointer = f"%{self.new_name('gep')}"
        element = memory_type(dtype)
        self.emit(f"{pointer} = getelementptr inbounds {element}, ptr {buffer}, {self.typed(index)}")
        return pointer

    def load(self, u: UOp, buffer: str, index: str, gate: str | None = None) -> str:
        """buffer[index]; a gated load branches around the read, so padding never touches memory."""
        name = f"%{self.new_name('val')}"
        if gate is None:
            return self.read(u, buffer, name)
        before, label = self.block, name[1:]
        self.emit(f"br i1 {gate}, label %{label}.read, label %{label}.done")
        self.start_block(f"{label}.read")
        loaded = self.read(u, buffer, f"{name}.loaded")
        read_block = self.block
        self.emit(f"br label %{label}.done")
        self.start_block(f"{label}.done")
        zero = self.constant(0, u.dtype)
        self.emit(f"{name} = phi {llvm_type(u.dtype)} [ {loaded}, %{read_block} ], [ {zero}, %{before} ]")
        return name

    def read(self, u: UOp, buffer: str, name: str) -> str:
        dtype, lane = u.dtype, scalar_of(u.dtype)
        pointer = self.address(buffer, u.src[1], lane)
        if dtype == dtypes.bool:  # a byte in memory, an i1 in registers
            self.emit(f"{name}.byte = load i8, ptr {pointer}, align 1")
            self.emit(f"{name} = icmp ne i8 {name}.byte, 0")
        elif dtype == dtypes.float16:  # a half in memory, a float in registers
            self.emit(f"{name}.half = load half, ptr {pointer}, align 2")
            self.emit(f"{name} = fpext half {name}.half to float")
        elif dtype == dtypes.bfloat16:  # the top half of a float32's bits
            self.emit(f"{name}.bits = load i16, ptr {pointer}, align 2")
            self.emit(f"{name}.wide = zext i16 {name}.bits to i32")
            self.emit(f"{name}.top = shl i32 {name}.wide, 16")
            self.emit(f"{name} = bitcast i32 {name}.top to float")
        else:
            self.emit(f"{name} = load {llvm_type(dtype)}, ptr {pointer}, align {lane.itemsize}")
        return name

    def store(self, u: UOp, buffer: str, index: str, value: str) -> None:
        dtype, lane = u.src[2].dtype, scalar_of(u.src[2].dtype)
        pointer = self.address(buffer, u.src[1], lane)
        if dtype == dtypes.bool:
            byte = f"%{self.new_name('byte')}"
            self.emit(f"{byte} = zext i1 {value} to i8")
            self.emit(f"store i8 {byte}, ptr {pointer}, align 1")
        elif dtype == dtypes.float16:  # exact: the value is a float16 already
            half = f"%{self.new_name('half')}"
            self.emit(f"{half} = fptrunc float {value} to half")
            self.emit(f"store half {half}, ptr {pointer}, align 2")
        elif dtype == dtypes.bfloat16:  # exact: keep the top half of the bits
            bits = f"%{self.new_name('bits')}"
            self.emit(f"{bits} = bitcast float {value} to i32")
            self.emit(f"{bits}.top = lshr i32 {bits}, 16")
            self.emit(f"{bits}.short = trunc i32 {bits}.top to i16")
            self.emit(f"store i16 {bits}.short, ptr {pointer}, align 2")
        else:
            self.emit(f"store {llvm_type(dtype)} {value}, ptr {pointer}, align {lane.itemsize}")
    # --8<-- [end:memory]

    # ---- arithmetic ----
    def intrinsic(self, base: str, dtype: DType | VectorDType, arity: int) -> str:
        name = f"@llvm.{base}.{intrinsic_suffix(dtype)}"
        t = llvm_type(dtype)
        self.declares.setdefault(name, f"declare {t} {name}({', '.join([t] * arity)})")
        return name

    def alu(self, u: UOp, *operands: str) -> str:
        """One ALU op; a few ops take several instructions (named alu3.zero, alu3.safe, ...)."""
        op = u.arg
        name = f"%{self.new_name('alu')}"
        operand = u.src[1].dtype if op is TernaryOps.WHERE else u.src[0].dtype
        lane, t = scalar_of(operand), llvm_type(operand)
        a, b = operands[0], operands[1] if len(operands) > 1 else None
        if op is TernaryOps.WHERE:
            self.emit(f"{name} = select {', '.join(self.typed(s) for s in u.src)}")
        elif intrinsic_name(op) is not None:
            args = ", ".join(self.typed(s) for s in u.src)
            self.emit(f"{name} = call {t} {self.intrinsic(intrinsic_name(op), operand, len(u.src))}({args})")
        elif op.name in BITWISE:
            self.emit(f"{name} = {op.name.lower()} {t} {a}, {b}")
        elif op is UnaryOps.NEG:
            if lane.is_float:
                self.emit(f"{name} = fneg {t} {a}")
            elif lane == dtypes.bool:
                self.emit(f"{name} = xor {t} {a}, {self.constant(True, operand)}")
            else:
                self.emit(f"{name} = sub {t} {self.constant(0, operand)}, {a}")
        elif op is UnaryOps.RECIP:
            if lane.is_float:
                self.emit(f"{name} = fdiv {t} {self.constant(1.0, operand)}, {a}")
            else:
                for line in int_divide(name, BinaryOps.DIV, lane, t, self.constant(1, operand), a):
                    self.emit(line)
        elif op is BinaryOps.MAX and lane.is_float:
            for line in float_max(name, t, a, b):
                self.emit(line)
        elif op is BinaryOps.MAX and lane != dtypes.bool:
            mask = llvm_type(VectorDType(dtypes.bool, operand.count)) if is_vector(operand) else "i1"
            self.emit(f"{name}.pick = icmp {'sgt' if signed(lane) else 'ugt'} {t} {a}, {b}")
            self.emit(f"{name} = select {mask} {name}.pick, {t} {a}, {t} {b}")
        elif op in (BinaryOps.DIV, BinaryOps.MOD) and not lane.is_float:
            divisor = u.src[1]
            by_positive_constant = divisor.op is UOps.CONST and divisor.arg > 0  # index math: no guard
            for line in int_divide(name, op, lane, t, a, b, by_positive_constant):
                self.emit(line)
        else:
            table = FLOAT_OPS if lane.is_float else BOOL_OPS if lane == dtypes.bool else \
                INT_OPS if signed(lane) else UINT_OPS
            if op not in table:
                raise NotImplementedError(f"LLVM renderer: no rule for {op.name} on {operand.name}")
            self.emit(f"{name} = {table[op]} {t} {a}, {b}")
        return name

    def cast(self, u: UOp, value: str) -> str:
        src, dst = u.src[0].dtype, u.dtype
        same_bits = src.itemsize == dst.itemsize and not src.is_float and not dst.is_float and \
            dtypes.bool not in (src, dst)
        a_float_already = src.is_half and dst == dtypes.float32  # half values are floats in registers
        if src == dst or same_bits or a_float_already:
            return value
        name = f"%{self.new_name('cast')}"
        for line in cast_instructions(name, src, dst, value):
            self.emit(line)
        return name

    # ---- vectors ----
    def gep(self, u: UOp, vector: str) -> str:
        name = f"%{self.new_name('lane')}"
        self.emit(f"{name} = extractelement {self.typed(u.src[0])}, i32 {u.arg}")
        return name

    def broadcast(self, u: UOp, value: str) -> str:
        """A constant vector for a constant; else insertelement into lane 0, then shufflevector
        copies lane 0 into every lane."""
        if u.src[0].op is UOps.CONST:
            return self.constant(u.src[0].arg, u.dtype)
        name, t = f"%{self.new_name('vec')}", llvm_type(u.dtype)
        self.emit(f"{name}.one = insertelement {t} poison, {self.typed(u.src[0])}, i32 0")
        zeros = f"<{u.dtype.count} x i32> zeroinitializer"  # lane 0 into every lane
        self.emit(f"{name} = shufflevector {t} {name}.one, {t} poison, {zeros}")
        return name

    def vectorize(self, u: UOp, *lanes: str) -> str:
        """One insertelement per lane."""
        name, t, lane = f"%{self.new_name('vec')}", llvm_type(u.dtype), llvm_type(u.dtype.scalar)
        previous = "poison"
        for n, value in enumerate(lanes):
            step = name if n == len(lanes) - 1 else f"{name}.{n}"
            self.emit(f"{step} = insertelement {t} {previous}, {lane} {value}, i32 {n}")
            previous = step
        return name


def _updated_accumulators(uops: list[UOp]) -> dict[UOp, list[UOp]]:
    """For each loop (RANGE), the accumulators it updates: an ASSIGN inside it to an accumulator
    defined before it. Each gets a phi in the loop's header."""
    updated: dict[UOp, list[UOp]] = {}
    open_loops: list[UOp] = []
    defined_at: dict[UOp, int] = {}
    for u in uops:
        if u.op is UOps.RANGE:
            open_loops.append(u)
            updated[u] = []
        elif u.op is UOps.ENDRANGE:
            open_loops.pop()
        elif u.op is UOps.DEFINE_ACC:
            defined_at[u] = len(open_loops)
        elif u.op is UOps.ASSIGN:
            for loop in open_loops[defined_at[u.src[0]]:]:
                if u.src[0] not in updated[loop]:
                    updated[loop].append(u.src[0])
    return updated


def render_llvm(name: str, uops: list[UOp]) -> str:
    """The LLVM IR of one kernel: `define void @name(ptr %data0, ptr %data1, ...)`."""
    return LLVMRenderer(name, uops).render()
