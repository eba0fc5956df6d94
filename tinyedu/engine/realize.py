"""Run a schedule: allocate each kernel's output, run it on its device, keep the counters.

Importing this module installs it as the lazy graph's engine (see tinyedu/lazy.py for why).
"""

from __future__ import annotations

import time

from tinyedu import lazy
from tinyedu.engine.schedule import ScheduleItem, create_schedule
from tinyedu.helpers import GlobalCounters, debug_level, prod
from tinyedu.ops import LoadOps
from tinyedu.runtime.device import Buffer, Device


def run_schedule(schedule: list[ScheduleItem]) -> None:
    for item in schedule:
        out = item.out
        buffer = Buffer(out.device, prod(out.shape), out.dtype)
        op = item.ast.op
        if op is LoadOps.COPY:
            source = item.ast.arg if item.ast.arg is not None else item.inputs[0].realized.as_numpy()
            buffer.copyin(source)
        elif op is LoadOps.CONST:
            buffer.as_numpy()[:] = item.ast.arg
        elif op is not LoadOps.EMPTY:
            start = time.perf_counter()
            Device[out.device].get_runner(item.ast)([buffer, *(x.realized for x in item.inputs)])
            elapsed = time.perf_counter() - start
            GlobalCounters.kernel_count += 1
            GlobalCounters.time_sum_s += elapsed
            GlobalCounters.global_mem += buffer.nbytes + sum(x.realized.nbytes for x in item.inputs)
            if debug_level() >= 2:
                print(f"kernel {GlobalCounters.kernel_count:4d} {out.device:6s} {str(out.shape):20s} "
                      f"{elapsed * 1e3:8.3f} ms")
            if debug_level() >= 3:
                print(item.ast)
        out.realized = buffer
        out.srcs = ()  # a realized buffer is a leaf: its sources (and their memory) can go


class _Engine:
    """What lazy.py calls: realize some buffers, and name devices."""

    @property
    def default_device(self) -> str:
        return Device.DEFAULT

    def canonical_device(self, device: str | None) -> str:
        return Device.canonicalize(device)

    def realize(self, outs: list[lazy.LazyBuffer]) -> None:
        schedule = create_schedule(outs)
        if debug_level() >= 1:
            kernels = sum(1 for item in schedule if not isinstance(item.ast.op, LoadOps))
            print(f"scheduled {len(schedule)} items, {kernels} kernels")
        run_schedule(schedule)


lazy.install_engine(_Engine())
