"""Stage 2 and on: the engine that turns the lazy graph into kernels and runs them.

schedule.py cuts the graph into kernels, and schedule_cache.py remembers the cut per graph structure
(a repeated step is not scheduled again); lower.py lowers each kernel to a program (through codegen/,
renderer/ and runtime/), realize.py runs the schedule, assign.py writes into existing buffers.

The lazy graph (tinyedu/lazy.py) sits above the engine and never imports it; it declares the small
`Engine` interface it calls, and this is the one place that installs it, in the core's seam
`LazyBuffer.engine`: importing tinyedu imports this package, which installs `Engine()` below.

`schedule_hooks` is the seam for watching: each function in it sees every schedule before it runs.
The engine never imports the drawings; tinyedu/viz/__init__.py adds the hook that draws a schedule
when GRAPH=1.
"""

from typing import Callable

from tinyedu import lazy
from tinyedu.core.helpers import SETTINGS, debug_level
from tinyedu.core.ops import LoadOps
from tinyedu.engine import assign, realize
from tinyedu.engine.schedule import ScheduleItem
from tinyedu.engine.schedule_cache import schedules
from tinyedu.runtime.device import Device

#: called as hook(outs, items) with every schedule, before it runs (GRAPH=1 draws it: see tinyedu/viz/)
schedule_hooks: list[Callable[[list[lazy.LazyBuffer], list[ScheduleItem]], None]] = []


class Engine:
    """What lazy.py calls: realize some buffers, write into existing ones, and name devices."""

    def canonical_device(self, device: str | None) -> str:
        if device in Device.known:  # already canonical (every op passes its input's device on)
            return device
        if isinstance(device, tuple):  # several devices: a sharded or replicated tensor (tinyedu/multi)
            return _canonical_devices(device)
        return Device.canonicalize(device)

    def realize(self, outs: list[lazy.LazyBuffer]) -> None:
        with SETTINGS:  # (the environment's flags, read once per realize: see core/helpers.py)
            items = schedules.schedule(outs)
            if debug_level() >= 1:
                loads = [item.name for item in items if isinstance(item.ast.op, LoadOps)]
                named = f": {', '.join(loads)}" if loads else ""
                print(f"scheduled {len(items) - len(loads)} kernels ({len(loads)} loads{named})")
            for hook in schedule_hooks:
                hook(outs, items)
            realize.run_schedule(items)

    def assign(self, pairs: list[tuple[lazy.LazyBuffer, lazy.LazyBuffer]]) -> None:
        with SETTINGS:
            assign.assign(pairs)


def _canonical_devices(devices: tuple) -> tuple[str, ...]:
    names = tuple(Device.canonicalize(d) for d in devices)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"devices: expected distinct devices, got {devices}; number devices of one kind "
                         "('C:0', 'C:1', ...)")
    return names


lazy.LazyBuffer.engine = Engine()  # the core's seam (tinyedu/core/lazy.py), on the full LazyBuffer
