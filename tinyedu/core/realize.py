"""The engine: schedule the graph, lower each kernel to a program, run the programs in order.

`lower` is the whole back half of the pipeline: Kernel (axes in loop order) -> linearize (UOps)
-> render (source) -> compile and load (a function). Programs are kept by their source, so a
training loop compiles each kernel once (it still linearizes and renders it every time).
`DEBUG=2` prints each kernel as it runs, `DEBUG=4` its source too.
"""

from __future__ import annotations

from typing import Callable

from .device import DEVICES, Buffer
from .helpers import debug_level
from .lazy import LazyBuffer
from .linearizer import Kernel, linearize
from .ops import LazyOp, LoadOps
from .schedule import ScheduleItem, create_schedule

_programs: dict[tuple[str, str], Callable[..., None]] = {}


# --8<-- [start:lower]
def lower(ast: LazyOp, device: str) -> Callable[..., None]:
    """A kernel AST -> a function of its buffers, compiled for `device`."""
    dev, kernel = DEVICES[device], Kernel(ast)
    source = dev.renderer(kernel.name, linearize(kernel)).render()
    if debug_level() >= 4:
        print(source)
    if not isinstance(source, str):  # (PYTHON's program is the UOp list itself: nothing to compile or keep)
        return dev.load(dev.compile(source), kernel.name)
    if (device, source) not in _programs:
        _programs[(device, source)] = dev.load(dev.compile(source), kernel.name)
    return _programs[(device, source)]
# --8<-- [end:lower]


def run_schedule(items: list[ScheduleItem]) -> None:
    for item in items:
        out = item.bufs[0]
        out.realized = Buffer(out.device, out.size, out.dtype)
        if item.ast.op is LoadOps.COPY:
            out.realized.copyin(item.ast.arg)
        else:
            if debug_level() >= 2:
                print(f"kernel {Kernel(item.ast).name} on {out.device}: {len(item.bufs)} buffers")
            lower(item.ast, out.device)(*[b.realized for b in item.bufs])
        out.srcs = ()  # in memory now: the graph behind it can be freed


class Engine:
    """What the lazy graph calls (`LazyBuffer.engine`): realize these buffers, in one schedule."""

    def realize(self, outs: list[LazyBuffer]) -> None:
        run_schedule(create_schedule(outs))


LazyBuffer.engine = Engine()
