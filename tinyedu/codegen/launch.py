"""How a GPU kernel is launched (stage 7): its grid of workgroups and their threads, and a GPU's limits.

The launch dimensions of a kernel are the sizes of its SPECIAL UOps: `gidN` counts workgroups along
grid dimension N, `lidN` threads along workgroup dimension N (tinyedu/codegen/uops.py). A device's
GPULimits bound what the GPU opts may ask for (tinyedu/codegen/opts.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from tinyedu.codegen.uops import UOp, UOps


@dataclass(frozen=True)
class LaunchDims:
    """How a GPU kernel is launched: `groups` workgroups in the grid, `local` threads in each
    (three dimensions each, 1 where unused). OpenCL's "global size" is groups * local per dimension;
    CUDA's grid is `groups`, its block `local`."""

    groups: tuple[int, int, int] = (1, 1, 1)
    local: tuple[int, int, int] = (1, 1, 1)

    @property
    def global_size(self) -> tuple[int, int, int]:
        return tuple(g * n for g, n in zip(self.groups, self.local, strict=True))  # type: ignore[return-value]

    @property
    def threads_per_group(self) -> int:
        return self.local[0] * self.local[1] * self.local[2]

    def __str__(self) -> str:
        return f"groups {self.groups} x local {self.local}"


@dataclass(frozen=True)
class GPULimits:
    """What a GPU allows one kernel: the GPU opts are checked against these (tinyedu/codegen/opts.py)
    and the heuristics choose within them."""

    max_workgroup_size: int = 1024            # threads in one workgroup, all dimensions together
    max_local: tuple[int, int, int] = (1024, 1024, 64)   # threads per workgroup dimension
    max_groups: tuple[int, int, int] = (2**31 - 1, 65535, 65535)   # workgroups per grid dimension
    shared_memory_bytes: int = 48 * 1024      # shared (local) memory of one workgroup
    warp_size: int = 32                       # threads that run as one SIMD instruction


def launch_dims(uops: list[UOp]) -> LaunchDims | None:
    """The launch dimensions a UOp list asks for (its SPECIALs), or None for a CPU kernel (none)."""
    specials = [u.arg for u in uops if u.op is UOps.SPECIAL]
    if not specials:
        return None
    groups, local = [1, 1, 1], [1, 1, 1]
    for name, size in specials:
        (groups if name.startswith("gid") else local)[int(name[3:])] = size
    return LaunchDims(tuple(groups), tuple(local))  # type: ignore[arg-type]
