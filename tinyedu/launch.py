"""How a GPU kernel is launched (stage 7): its grid of workgroups and their threads, and a GPU's limits.

Plain data, below both the code generator and the devices: the codegen reads a device's GPULimits
to choose its opts (tinyedu/codegen/opts.py, heuristics.py) and computes a kernel's LaunchDims from
its SPECIAL UOps (tinyedu/codegen/launch.py); a device reports its limits and launches with the dims
(tinyedu/runtime/). Neither side imports the other for them.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    # Work-items are the SIMD lanes of a CPU core (OpenCL's CL_DEVICE_TYPE_CPU, e.g. PoCL), not the
    # threads of a GPU's warp. Such a device vectorizes a kernel across neighbouring work-items, so a
    # work-item's own float4 becomes a gather across lanes, and a shared tile laid out for a GPU's
    # banks (a thread's 4 rows side by side) makes neighbouring lanes read words 4 apart: PoCL ran
    # the register-blocked 512² matmul 5-10x slower with them. Where this is True, the code generator
    # keeps shared tiles in the tile's axis order and every access scalar (codegen/gpu.py,
    # linearizer.py), which such a device vectorizes across lanes by itself.
    threads_are_simd_lanes: bool = False
