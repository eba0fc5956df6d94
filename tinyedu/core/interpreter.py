"""The PYTHON device: a kernel's UOps run one at a time, in plain Python, with nothing compiled.

It is slow on purpose. It runs exactly the list the linearizer made, so it shows what each UOp
means, and it checks the C renderer with no compiler in the way: C and PYTHON run the same UOps,
so when they disagree the C renderer (or the compiler) is wrong; when they agree on a wrong
answer, the UOps are.

Each UOp's value goes into `values[position]`. A loop is a jump: ENDRANGE adds 1 to its RANGE's
counter and jumps back while the counter is below the end. Reading an ASSIGN reads its
accumulator's register (in C both are `acc0`). Floats are numpy float32 scalars, so every op
rounds as float32 does in C. What each UOp does is a table, `RULES`: the full library's PYTHON
device (tinyedu/runtime/ops_python.py) adds its rules to it (vectors, local arrays, bfloat16).
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from .device import DEVICES, Device
from .dtype import DType, dtypes
from .ops import BinaryOps, TernaryOps, UnaryOps
from .uops import INT_FOLD, UOp, UOps

ALU: dict[Any, Callable[..., Any]] = {
    UnaryOps.NEG: operator.neg, UnaryOps.RECIP: lambda x: 1 / x, UnaryOps.SQRT: np.sqrt,
    UnaryOps.EXP2: np.exp2, UnaryOps.LOG2: np.log2, UnaryOps.SIN: np.sin, UnaryOps.COS: np.cos,
    BinaryOps.ADD: operator.add, BinaryOps.SUB: operator.sub, BinaryOps.MUL: operator.mul,
    BinaryOps.CMPLT: operator.lt, BinaryOps.CMPEQ: operator.eq, BinaryOps.AND: operator.and_,
    BinaryOps.OR: operator.or_, BinaryOps.XOR: operator.xor,
    BinaryOps.MAX: lambda a, b: a if (a > b or a != a) else b,  # NaN wins, as in C's rendering
    TernaryOps.WHERE: lambda c, a, b: a if c else b,
}


def scalar(value: Any, dtype: DType) -> Any:
    """A value kept the way C keeps it: a float32 scalar, a wrapped int32, a bool."""
    if dtype.is_float:
        return dtype.np(value)
    if dtype == dtypes.bool:
        return bool(value)
    if not np.isfinite(value):  # C leaves this undefined; x86 gives the smallest int, and so does this
        return -(2 ** (8 * dtype.itemsize - 1))
    return int(np.array(int(value) & (2 ** (8 * dtype.itemsize) - 1)).astype(dtype.np))  # wraps, like C


def alu(u: UOp, args: list[Any]) -> Any:
    if u.arg in (BinaryOps.DIV, BinaryOps.MOD) and not u.dtype.is_float:  # C's, rounding toward zero
        return scalar(INT_FOLD[u.arg](*args), u.dtype)
    if u.arg is BinaryOps.DIV:
        return scalar(args[0] / args[1], u.dtype)
    if u.arg is BinaryOps.MOD:
        return scalar(np.fmod(*args), u.dtype)
    return scalar(ALU[u.arg](*args), u.dtype)


def load(u: UOp, args: list[Any]) -> Any:
    """buffer[index]; 0 where the gate (the third source, if any) is false: padding."""
    if len(args) == 3 and not args[2]:
        return scalar(0, u.dtype)
    return scalar(args[0][args[1]], u.dtype)


def store(u: UOp, args: list[Any]) -> None:
    args[0][args[1]] = args[2]


# What each UOp computes from its sources' values (RANGE, ENDRANGE and ASSIGN move the program counter
# or a register, so the loop below does them itself).
RULES: dict[UOps, Callable[[UOp, list[Any]], Any]] = {
    UOps.CONST: lambda u, args: scalar(u.arg, u.dtype),
    UOps.DEFINE_ACC: lambda u, args: scalar(u.arg, u.dtype),
    UOps.LOAD: load, UOps.STORE: store, UOps.ALU: alu,
    UOps.CAST: lambda u, args: scalar(args[0], u.dtype),
}


class Interpreter:
    """A UOp list with its jumps worked out; `Interpreter(uops)(*buffers)` runs it."""

    rules = RULES

    def __init__(self, uops: list[UOp]):
        self.uops = uops
        position = {u: i for i, u in enumerate(uops)}
        register = {u: position[u.src[0]] if u.op is UOps.ASSIGN else position[u] for u in uops}
        self.srcs = [[register[s] for s in u.src] for u in uops]
        # each ENDRANGE jumps back after its RANGE; a RANGE of no iterations jumps past its ENDRANGE
        self.loop_end = {position[u.src[0]]: i for i, u in enumerate(uops) if u.op is UOps.ENDRANGE}

    # --8<-- [start:run]
    def __call__(self, *buffers: Any) -> None:
        memory = self.memory(buffers)
        uops, srcs, values, pc = self.uops, self.srcs, [None] * len(self.uops), 0
        with np.errstate(all="ignore"):  # inf and NaN are values here, as in C
            while pc < len(uops):
                u, args = uops[pc], [values[i] for i in srcs[pc]]
                if u.op is UOps.RANGE:
                    values[pc] = args[0]
                    if args[0] >= args[1]:
                        pc = self.loop_end[pc]
                elif u.op is UOps.ENDRANGE:
                    start = srcs[pc][0]
                    values[start] += 1
                    if values[start] < values[srcs[start][1]]:
                        pc = start
                elif u.op is UOps.ASSIGN:
                    values[srcs[pc][0]] = args[1]
                elif u.op is UOps.DEFINE_GLOBAL:
                    values[pc] = memory[u.arg]
                elif u.op in self.rules:
                    values[pc] = self.rules[u.op](u, args)
                else:
                    raise NotImplementedError(f"PYTHON device: no rule for UOp {u.op.name}")
                pc += 1
    # --8<-- [end:run]

    def memory(self, buffers: tuple[Any, ...]) -> list[np.ndarray]:
        """Each buffer's elements as a flat numpy array that LOAD reads and STORE writes."""
        return [b.numpy() for b in buffers]


class UOpList:
    """The PYTHON device's 'renderer': the UOps themselves are the program."""

    def __init__(self, name: str, uops: list[UOp]):
        self.uops = uops

    def render(self) -> list[UOp]:
        return self.uops


DEVICES.register(Device("PYTHON", UOpList, compile=lambda uops: uops,
                        load=lambda uops, name: Interpreter(uops)))
