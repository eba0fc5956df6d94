"""A GPU kernel's launch dimensions, read from its UOps (stage 7).

The launch dimensions of a kernel are the sizes of its SPECIAL UOps: `gidN` counts workgroups along
grid dimension N, `lidN` threads along workgroup dimension N (tinyedu/core/uops.py). LaunchDims
and GPULimits themselves are plain data in tinyedu/launch.py, which devices import too.
"""

from __future__ import annotations

from tinyedu.core.uops import UOp, UOps
from tinyedu.launch import LaunchDims


def launch_dims(uops: list[UOp]) -> LaunchDims | None:
    """The launch dimensions a UOp list asks for (its SPECIALs), or None for a CPU kernel (none)."""
    specials = [u.arg for u in uops if u.op is UOps.SPECIAL]
    if not specials:
        return None
    groups, local = [1, 1, 1], [1, 1, 1]
    for name, size in specials:
        (groups if name.startswith("gid") else local)[int(name[3:])] = size
    return LaunchDims(tuple(groups), tuple(local))  # type: ignore[arg-type]
