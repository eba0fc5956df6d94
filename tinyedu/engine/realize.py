"""Run a schedule: allocate each kernel's output, run it on its device, keep the counters.

Each kernel is lowered to a program by tinyedu/engine/lower.py (Kernel -> opts -> UOps -> source ->
binary, cached), then run on its buffers here.

Memory: the schedule is consumed as it runs, and a realized buffer forgets its sources, so an
intermediate's memory is released (by reference counting) right after the last kernel reading it,
unless some Tensor still holds it.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np

from tinyedu.core.dtype import dtypes, to_storage
from tinyedu.core.helpers import GlobalCounters, debug_level
from tinyedu.core.ops import LazyOp, LoadOps
from tinyedu.engine.lower import Program as LoweredProgram
from tinyedu.engine.lower import lower, lower_ahead, show
from tinyedu.engine.schedule import ScheduleItem, count_flops
from tinyedu.engine.two_stage import split_full_reduces
from tinyedu.runtime import launch_queue
from tinyedu.runtime.device import Buffer, Device

# --8<-- [start:capture]
Program = Callable[[list[Buffer]], None]
# The capture hook: while TinyJit records a step, it appends a function here, and every program
# that runs on buffers (a kernel, a copy or a fill) is reported to it with its name and AST.
observers: list[Callable[[str, "LazyOp | None", Program, list[Buffer]], None]] = []


def run_program(name: str, ast: LazyOp | None, program: Program, buffers: list[Buffer],
                queue: bool = False) -> None:
    """Run one program on buffers (buffers[0] is the one it writes), and report it to the observers.
    `queue` (ASYNC=1, never while observers watch): queue it instead, if the program can be."""
    if queue and hasattr(program, "submit") and program.submit(buffers):
        return
    program(buffers)
    for observe in observers:
        observe(name, ast, program, buffers)


def queueing(level: int) -> bool:
    """Whether programs are queued (tinyedu/runtime/launch_queue.py): ASYNC=1, unless each one is
    timed (DEBUG=2, `level`) or watched (TinyJit recording)."""
    return level < 2 and not observers and launch_queue.enabled()


# --8<-- [end:capture]
class HostCopy:
    """Copy host data (a numpy array) into buffers[0]."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def __call__(self, buffers: list[Buffer]) -> None:
        buffers[0].copyin(self.array)


class BufferCopy:
    """Copy buffers[1] into buffers[0] (another device's buffer, or a value assign writes)."""

    def __call__(self, buffers: list[Buffer]) -> None:
        buffers[0].copyin(buffers[1].as_numpy(write=False))  # (read only: queued readers need no wait)

    def submit(self, buffers: list[Buffer]) -> bool:
        """ASYNC=1: queue the copy behind the kernels that compute its source (a memcpy on the launcher
        thread), when both buffers are the C device's memory of one dtype; False: run it now."""
        to, source = buffers
        if to.dtype != source.dtype or to.size != source.size or \
                Device.kind(to.device) != "C" or Device.kind(source.device) != "C":
            return False
        return launch_queue.QUEUE.submit_copy(to, source)


class Fill:
    """Write one value into every element of buffers[0]."""

    def __init__(self, value: Any):
        self.value = value

    def __call__(self, buffers: list[Buffer]) -> None:
        memory, dtype = buffers[0].as_numpy(), buffers[0].dtype
        # (bfloat16 is kept as the top 16 bits of a float32: the value's bits, not the value)
        bfloat16 = dtype == dtypes.bfloat16
        memory[:] = to_storage(np.array([self.value], np.float32), dtype) if bfloat16 else self.value


# --8<-- [start:run]
def run_schedule(schedule: list[ScheduleItem], before_write: Callable[[Buffer], None] | None = None) -> None:
    """Run (and empty) `schedule` in order (its new kernels are compiled first, side by side).

    `before_write(buffer)` is called just before a kernel stores straight into memory that already
    exists (an assign target): assign keeps the old values there for computations that still need
    them, at the last moment, when the graphs the schedule has run are already freed."""
    schedule[:] = split_full_reduces(schedule)  # a GPU's full reductions: many workgroups, then one
    found = iter(lower_ahead([(item.out.device, item.ast) for item in schedule
                              if not isinstance(item.ast.op, LoadOps)]))
    programs = [None if isinstance(item.ast.op, LoadOps) else next(found) for item in schedule]
    level = debug_level()  # read once per schedule, not per kernel
    queue = queueing(level)  # ASYNC=1: C kernels and copies are queued, not called
    launch_queue.QUEUE.release()  # (the last step's buffers go back to the pool before this one's)
    schedule.reverse()
    programs.reverse()  # (each item's program: popped with it)
    while schedule:
        item, program = schedule.pop(), programs.pop()
        out = item.out
        # An output that already has memory is an assign target: the kernel writes straight into it.
        if out.realized is None:
            buffer = Buffer(out.device, math.prod(out.shape), out.dtype)
        else:
            buffer = out.realized
            if before_write is not None:
                before_write(buffer)
        op = item.ast.op
        if op is LoadOps.COPY:
            if item.ast.arg is not None:
                run_program(item.name, None, HostCopy(item.ast.arg), [buffer])
            else:
                run_program(item.name, None, BufferCopy(), [buffer, item.inputs[0].realized], queue)
                if level >= 2:  # a copy between devices is communication: DEBUG=2 shows it with the kernels
                    print(f"*** {out.device:6s} {'':4s} {item.name:28s} {buffer.nbytes:9d} bytes")
        elif op is LoadOps.CONST:
            run_program(item.name, None, Fill(item.ast.arg), [buffer])
        elif op is LoadOps.EMPTY:
            run_program(item.name, None, Fill(0), [buffer])  # deterministic: never garbage
        else:
            _run_kernel(item, buffer, program, level, queue)
        if GlobalCounters.mem_used > GlobalCounters.mem_peak:
            GlobalCounters.mem_peak = GlobalCounters.mem_used
        out.realized = buffer
        out.srcs = ()  # a realized buffer is a leaf: its sources (and their memory) can go
        if op is LoadOps.COPY:
            out.arg = None  # and so can the host data it was copied from
        del item


# --8<-- [end:run]
def _run_kernel(item: ScheduleItem, buffer: Buffer, program: LoweredProgram | None, level: int,
                queue: bool = False) -> None:
    """Run one kernel: its `program` (None: not lowered ahead, so lowered now), timed and counted;
    `level` is DEBUG's; `queue`: queue it if its runner can (ASYNC=1)."""
    buffers, moved = [buffer], buffer.nbytes  # (bytes moved: what the kernel writes and reads)
    for x in item.inputs:
        buffers.append(x.realized)
        moved += x.realized.nbytes
    start = time.perf_counter()
    if program is None:
        if queue:  # (a BEAM search times kernels: not beside queued ones)
            launch_queue.QUEUE.drain()
        program = lower(item.out.device, item.ast)
    lowered = time.perf_counter()
    try:
        if program.runs == 0 and hasattr(program.runner, "prepare"):  # first run: load the compiled
            program.runner.prepare()                                     # library now, timed apart
        if program.flops is None:  # the same for every AST equal to this one: once per program
            program.flops, program.label = count_flops(item.ast), item.name
        loaded = time.perf_counter()
        run_program(program.label, item.ast, program.runner, buffers, queue)
    except Exception:
        show(program)  # DEBUG=4/6: the source (and machine code) of the kernel that could not run
        raise
    elapsed = time.perf_counter() - loaded
    program.runs += 1
    flops = program.flops
    GlobalCounters.kernel_count += 1
    GlobalCounters.global_ops += flops
    GlobalCounters.global_mem += moved
    GlobalCounters.time_sum_s += elapsed
    if level >= 2:
        seconds = max(elapsed, 1e-9)
        print(f"*** {item.out.device:6s} {GlobalCounters.kernel_count:4d} {item.name:28s} "
              f"{elapsed * 1e3:9.3f} ms {flops / seconds * 1e-9:8.3f} GFLOPS "
              f"{moved / seconds * 1e-9:8.3f} GB/s  opts {program.opts}"
              f"{_setup_text(program, lowered - start, loaded - lowered)}")
        if getattr(program.runner, "traffic", None) is not None:  # the lockstep emulator's (PYTHON)
            print(f"    counts: {program.runner.traffic}")
    if level >= 3:
        print(f"stored because {item.reason}\n{item.ast}")
        show(program)


def _setup_text(program, lower_s: float, load_s: float) -> str:
    """What DEBUG=2 adds to a program's first run, which pays for more than running: lowering (with
    its compile step) and loading the compiled code. Later runs find both done and show neither.

    The lowering is the program's own record of its steps (`lower_s` is only the lookup when the
    kernel was lowered ahead, on another thread, with the schedule's other new kernels)."""
    if program.runs > 1:
        return ""
    lower_s = max(lower_s, sum(program.seconds.values()))
    compile_s = program.seconds.get("compile", 0.0)
    return (f"  [lowered {lower_s * 1e3:.2f} ms (compile {compile_s * 1e3:.2f} ms), "
            f"loaded {load_s * 1e3:.2f} ms]")
