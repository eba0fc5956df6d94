"""Run a schedule: allocate each kernel's output, run it on its device, keep the counters.

Memory: the schedule is consumed as it runs, and a realized buffer forgets its sources, so an
intermediate's memory is released (by reference counting) right after the last kernel reading it,
unless some Tensor still holds it.

Importing this module installs it as the lazy graph's engine (see tinyedu/lazy.py for why).
"""

from __future__ import annotations

import time

from tinyedu import lazy
from tinyedu.engine.schedule import ScheduleItem, count_flops, create_schedule
from tinyedu.helpers import GlobalCounters, debug_level, graph_enabled, prod
from tinyedu.ops import LoadOps
from tinyedu.runtime.device import Buffer, Device


# --8<-- [start:run]
def run_schedule(schedule: list[ScheduleItem]) -> None:
    """Run (and empty) `schedule` in order."""
    schedule.reverse()
    while schedule:
        item = schedule.pop()
        out = item.out
        buffer = Buffer(out.device, prod(out.shape), out.dtype)
        op = item.ast.op
        if op is LoadOps.COPY:
            source = item.ast.arg if item.ast.arg is not None else item.inputs[0].realized.as_numpy()
            buffer.copyin(source)
        elif op is LoadOps.CONST:
            buffer.as_numpy()[:] = item.ast.arg
        elif op is LoadOps.EMPTY:
            buffer.as_numpy()[:] = 0  # deterministic, so notebooks and tests never see garbage
        else:
            _run_kernel(item, buffer)
        GlobalCounters.mem_peak = max(GlobalCounters.mem_peak, GlobalCounters.mem_used)
        out.realized = buffer
        out.srcs = ()  # a realized buffer is a leaf: its sources (and their memory) can go
        if op is LoadOps.COPY:
            out.arg = None  # and so can the host data it was copied from
        del item


# --8<-- [end:run]
def _run_kernel(item: ScheduleItem, buffer: Buffer) -> None:
    inputs = [x.realized for x in item.inputs]
    runner = Device[item.out.device].get_runner(item.ast)
    start = time.perf_counter()
    runner([buffer, *inputs])
    elapsed = time.perf_counter() - start
    flops = count_flops(item.ast)
    moved = buffer.nbytes + sum(x.nbytes for x in inputs)
    GlobalCounters.kernel_count += 1
    GlobalCounters.global_ops += flops
    GlobalCounters.global_mem += moved
    GlobalCounters.time_sum_s += elapsed
    if debug_level() >= 2:
        seconds = max(elapsed, 1e-9)
        print(f"*** {item.out.device:6s} {GlobalCounters.kernel_count:4d} {item.name:28s} "
              f"{elapsed * 1e3:9.3f} ms {flops / seconds * 1e-9:8.3f} GFLOPS "
              f"{moved / seconds * 1e-9:8.3f} GB/s")
    if debug_level() >= 3:
        print(f"stored because {item.reason}\n{item.ast}")


class _Engine:
    """What lazy.py calls: realize some buffers, and name devices."""

    def canonical_device(self, device: str | None) -> str:
        return Device.canonicalize(device)

    def realize(self, outs: list[lazy.LazyBuffer]) -> None:
        schedule = create_schedule(outs)
        if debug_level() >= 1:
            kernels = sum(1 for item in schedule if not isinstance(item.ast.op, LoadOps))
            print(f"scheduled {kernels} kernels ({len(schedule) - kernels} loads)")
        if graph_enabled():
            from tinyedu.viz.lazy_graph import save_schedule_graph

            print(f"GRAPH: wrote {save_schedule_graph(outs, schedule)}")
        run_schedule(schedule)


lazy.install_engine(_Engine())
