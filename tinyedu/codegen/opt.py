"""One optimization as data: which move (`OptOps`) on which axis (`Opt`).

A Kernel records the opts applied to it (`Kernel.applied_opts`), and opts.py applies them to a
Kernel; both read this module, which knows nothing of either.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto


class OptOps(Enum):
    UPCAST = auto(); UNROLL = auto(); THREAD = auto(); SWAP = auto(); TILE = auto(); PACK = auto()  # noqa: E702
    GLOBAL = auto(); LOCAL = auto(); GROUP = auto()  # noqa: E702 - GPU kernels only

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Opt:
    """One optimization: `op` on `axis` (an index into the kernel's full shape when it is applied)."""

    op: OptOps
    axis: int
    amount: int

    def __repr__(self) -> str:
        if self.op is OptOps.GLOBAL:  # the whole axis: no amount
            return f"Opt(GLOBAL, axis={self.axis})"
        names = {OptOps.SWAP: "other", OptOps.PACK: "buffer", OptOps.THREAD: "threads"}
        second = names.get(self.op, "amount")
        return f"Opt({self.op.name}, axis={self.axis}, {second}={self.amount})"
