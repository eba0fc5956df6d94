"""What a GPU kernel costs in memory traffic, counted by the lockstep emulator (runtime/lockstep.py).

A GPU does not serve threads one by one: it serves a *warp*, 32 consecutive threads of a workgroup,
with one instruction. How much a LOAD or STORE of a warp costs depends on the addresses its threads
ask for together:

- **global memory** moves in 32-byte *sectors*. A warp whose 32 threads read 32 consecutive floats
  touches 4 sectors (128 bytes, every byte used: *coalesced*); if each thread's float is 4 KB from
  its neighbour's, the warp touches 32 sectors and uses 4 bytes of each 32 it moves. A warp of
  float4 loads (codegen/gpu_vectors.py) moves 512 bytes with one instruction: 16 sectors, all used;
- **shared memory** is split into 32 *banks* of 4-byte words (word w is in bank w % 32). A warp is
  served in one pass if no two of its threads want different words of one bank; threads reading the
  same word share it (a broadcast). Otherwise the warp takes as many passes as the busiest bank has
  distinct words: `passes - 1` is the warp's *bank conflicts*;
- a **barrier** makes the whole workgroup wait for its slowest thread;
- an **idle thread** is one that sits out a step (its IF is false): its lane of the warp does nothing.

These are the counts of NVIDIA's profiler (sectors per request, bank conflicts), computed here on
the addresses the kernel really makes, for any device's lowering; a buffer starts on a 64-byte
boundary (runtime/device.py), so sectors are counted from byte 0.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

WARP = 32           # threads served together
SECTOR = 32         # bytes of global memory moved at once
BANKS, BANK_WORD = 32, 4


@dataclass
class MemoryCounts:
    """One kernel run's counts, added up over every workgroup of the grid."""

    global_requests: int = 0     # warp-wide global LOADs and STOREs executed
    global_sectors: int = 0      # 32-byte sectors those touched
    global_bytes: int = 0        # distinct bytes each warp asked for (the useful part of the sectors)
    shared_requests: int = 0     # warp-wide shared LOADs and STOREs executed
    bank_conflicts: int = 0      # extra passes they needed (0: conflict-free)
    barriers: int = 0            # BARRIERs executed, summed over workgroups
    thread_steps: int = 0        # UOps executed x threads of the workgroup
    idle_steps: int = 0          # ... of which by threads outside their IF (idle)

    def add(self, other: "MemoryCounts") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def sectors_per_request(self) -> float:
        """4 for 32 coalesced floats; up to 32 when every thread's address is in its own sector."""
        return self.global_sectors / max(self.global_requests, 1)

    @property
    def efficiency(self) -> float:
        """Bytes asked for / bytes moved: 1.0 when every sector is fully used."""
        return self.global_bytes / max(self.global_sectors * SECTOR, 1)

    @property
    def idle_fraction(self) -> float:
        return self.idle_steps / max(self.thread_steps, 1)

    def __str__(self) -> str:
        return (f"global: {self.global_requests} warp requests, {self.global_sectors} sectors "
                f"({self.sectors_per_request:.1f} per request, {self.efficiency:.0%} of bytes used); "
                f"shared: {self.shared_requests} warp requests, {self.bank_conflicts} bank conflicts; "
                f"{self.barriers} barriers; {self.idle_fraction:.0%} idle thread steps")


def warps_of(threads: np.ndarray) -> np.ndarray:
    """The warp of each thread (thread numbers count x fastest within the workgroup)."""
    return threads // WARP


def global_sectors(threads: np.ndarray, at: np.ndarray, itemsize: int) -> tuple[int, int, int]:
    """(warp requests, distinct 32-byte sectors per warp, distinct bytes per warp), summed over the
    warps, of one global access: thread `threads[i]` touching element `at[i]` (a row of elements for
    a vector access). An element of 1, 2, 4 or 8 bytes never straddles two sectors; threads of a warp
    that read the same element share it."""
    if threads.size == 0:
        return 0, 0, 0
    rows = at if at.ndim == 2 else at[:, None]
    elements = rows.reshape(-1)
    warp = np.repeat(warps_of(threads), rows.shape[1])
    sectors = np.unique(np.stack([warp, elements * itemsize // SECTOR]), axis=1).shape[1]
    distinct = np.unique(np.stack([warp, elements]), axis=1).shape[1]
    return int(np.unique(warp).size), int(sectors), int(distinct * itemsize)


def bank_passes(threads: np.ndarray, at: np.ndarray, itemsize: int) -> tuple[int, int]:
    """(warp requests, bank conflicts) of one shared-memory access: per warp, the busiest bank's
    number of distinct 4-byte words, minus the one pass every request needs.

    A vector access moves more than the 128 bytes the banks serve in one pass (32 threads x 16
    bytes for a float4): the GPU serves it in phases of 128 bytes (8 threads for a float4, 16 for a
    float2), and counts the conflicts within each phase."""
    if threads.size == 0:
        return 0, 0
    rows = at if at.ndim == 2 else at[:, None]
    words = (rows * itemsize // BANK_WORD).reshape(-1)
    phase = max(1, WARP * BANK_WORD // (rows.shape[1] * itemsize))  # threads served in one pass
    requests = int(np.unique(warps_of(threads)).size)
    warp = np.repeat(threads // min(phase, WARP), rows.shape[1])
    distinct = np.unique(np.stack([warp, words % BANKS, words]), axis=1)  # (warp, bank, word) once each
    per_bank = np.unique(distinct[:2], axis=1, return_counts=True)[1]     # words per (warp, bank)
    warp_of_bank = np.unique(distinct[:2], axis=1)[0]
    passes = np.zeros(int(warp.max()) + 1, dtype=np.int64)
    np.maximum.at(passes, warp_of_bank, per_bank)
    used = np.unique(warp)
    return requests, int((passes[used] - 1).sum())
