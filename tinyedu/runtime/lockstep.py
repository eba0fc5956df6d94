"""Lockstep: the PYTHON device running a GPU-style UOp list the way a GPU does.

A GPU kernel is one program run by many threads. Threads come in workgroups; a workgroup's threads
share a small memory (DEFINE_SHARED) and wait for each other at a BARRIER. Here each workgroup of
the grid runs on its own, and all its threads run *in lockstep*: one UOp at a time for every thread
at once, each value a numpy array with one entry per thread (a "lane"). Loops have the same bounds
in every thread, so all lanes iterate together; an IF narrows the set of active lanes (the mask)
until its ENDIF; inactive lanes load, store and assign nothing.

The emulator also checks what a GPU would not: a race on shared memory (two threads touch one
element, at least one writing, with no BARRIER between), a BARRIER that only some threads of a
workgroup reach, a loop whose bounds differ between threads, and an index outside a buffer. Each is
an exception naming the UOp (its position and its `uops_listing` line), the workgroup and the threads.

And it counts what the kernel costs a GPU (runtime/gpu_counts.py): the 32-byte sectors each warp's
global loads and stores touch, shared-memory bank conflicts, barriers executed and idle threads.
After a run, `program.traffic` holds that run's MemoryCounts (DEBUG=2 prints them).

Every operation gives the same bits as the scalar interpreter (ops_python.PythonProgram): the ALU's
array forms (lockstep_alu.py) follow tinyedu/runtime/python_alu.py exactly, and use its scalar
functions lane by lane where an array form would not (64-bit integer division, MULACC that needs
exact rounding, rare ops). The one freedom: when two NaNs meet, which one's sign and payload the
result keeps (IEEE 754 leaves it open; numpy's scalar and array ADD choose differently).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from tinyedu.core.dtype import cast_array, dtypes, from_storage, to_storage
from tinyedu.core.uops import UOp, UOps, is_vector, scalar_of, uops_listing
from tinyedu.launch import LaunchDims
from tinyedu.runtime.gpu_counts import MemoryCounts, bank_passes, global_sectors
from tinyedu.runtime.lockstep_alu import LanesALU, lane_type, spread
from tinyedu.runtime.python_alu import to_dtype


class GPUEmulationError(RuntimeError):
    """A GPU kernel did something whose result on a real GPU depends on timing, or hangs."""


class GPURaceError(GPUEmulationError):
    """Two threads touched one shared-memory element (at least one writing) with no BARRIER between."""


class BarrierDivergenceError(GPUEmulationError):
    """A BARRIER reached by some threads of a workgroup but not all: on a GPU, a hang or garbage."""


class DivergentLoopError(GPUEmulationError):
    """A loop whose bounds differ between the threads of a workgroup (lockstep needs them equal)."""


class GPUOutOfBoundsError(GPUEmulationError, IndexError):
    """A LOAD or STORE outside its buffer (global, shared or private)."""


# ---- race detection on shared memory ----
@dataclass(frozen=True)
class Race:
    """Thread `thread`, at the UOp running now, touches `element`, which thread `other` touched at UOp
    `other_at` since the last BARRIER."""

    kind: str  # "read-after-write", "write-write" or "write-after-read"
    element: int
    thread: int
    other: int
    other_at: int


# --8<-- [start:race-check]
class SharedAccess:
    """Who touched each element of one shared array since the last BARRIER (-1: no thread).

    A race is two threads touching one element, at least one of them writing, with no BARRIER
    between: on a GPU the result then depends on which thread happens to run first. Per element we
    keep its last writer and up to two of its readers (two distinct ones are enough to tell whether
    a thread other than the writer read it)."""

    def __init__(self, size: int):
        self.writer, self.written_at = np.full(size, -1), np.zeros(size, dtype=np.int64)
        self.reader, self.read_at = np.full(size, -1), np.zeros(size, dtype=np.int64)
        self.reader2, self.read2_at = np.full(size, -1), np.zeros(size, dtype=np.int64)

    def barrier(self) -> None:
        """Every write before a BARRIER is seen by every thread after it: start afresh."""
        for who in (self.writer, self.reader, self.reader2):
            who.fill(-1)

    def read(self, threads: np.ndarray, at: np.ndarray, pc: int) -> Race | None:
        """`threads` read elements `at` at UOp pc: a race if another thread wrote one of them."""
        writer = self.writer[at]
        clash = (writer >= 0) & (writer != threads)
        if clash.any():
            i = int(np.argmax(clash))
            return Race("read-after-write", int(at[i]), int(threads[i]), int(writer[i]),
                        int(self.written_at[at[i]]))
        first = self.reader[at] < 0
        self.reader[at[first]], self.read_at[at[first]] = threads[first], pc
        second = (self.reader[at] != threads) & (self.reader2[at] < 0)
        self.reader2[at[second]], self.read2_at[at[second]] = threads[second], pc
        return None

    def write(self, threads: np.ndarray, at: np.ndarray, pc: int) -> Race | None:
        """`threads` write elements `at` at UOp pc: a race if another thread wrote or read one of them
        (or two of these threads write the same element)."""
        order = np.argsort(at, kind="stable")
        same = at[order][1:] == at[order][:-1]
        if same.any():
            j = int(np.argmax(same))
            first, second = threads[order][j], threads[order][j + 1]
            return Race("write-write", int(at[order][j]), int(second), int(first), pc)
        writer, reader, reader2 = self.writer[at], self.reader[at], self.reader2[at]
        for kind, who, when in (("write-write", writer, self.written_at), ("write-after-read", reader,
                                self.read_at), ("write-after-read", reader2, self.read2_at)):
            clash = (who >= 0) & (who != threads)
            if clash.any():
                i = int(np.argmax(clash))
                return Race(kind, int(at[i]), int(threads[i]), int(who[i]), int(when[at[i]]))
        self.writer[at], self.written_at[at] = threads, pc
        return None
# --8<-- [end:race-check]


@dataclass(frozen=True)
class Place:
    """Where something happened, for error messages: a program, a workgroup, and how to name threads."""

    program: LockstepProgram
    group: tuple[int, int, int]

    def uop(self, pc: int) -> str:
        words = [w for w in self.program.listing[pc].split()[1:] if w != "[]"]  # as uops_listing shows it
        return f"UOp {pc} ({' '.join(words)})"

    def thread(self, lane: int) -> str:
        local = self.program.launch.local
        if local[1] == local[2] == 1:
            return f"thread {lane}"
        return f"thread ({lane % local[0]}, {lane // local[0] % local[1]}, {lane // (local[0] * local[1])})"

    def threads(self, lanes: np.ndarray) -> str:
        names = [self.thread(int(lane)).removeprefix("thread ") for lane in lanes[:6]]
        more = f", ... ({len(lanes)} threads)" if len(lanes) > 6 else ""
        return ("thread " if len(lanes) == 1 else "threads ") + ", ".join(names) + more

    def race_error(self, race: Race, pc: int, shared: UOp) -> GPURaceError:
        t, o = self.thread(race.thread), self.thread(race.other)
        head = f"PYTHON: race on shared{shared.arg[0]}[{race.element}] in workgroup {self.group}: "
        if race.kind == "read-after-write":
            body = (f"{t} reads it at {self.uop(pc)}, {o} wrote it at {self.uop(race.other_at)} with no "
                    "BARRIER between; put a BARRIER after the write")
        elif race.kind == "write-after-read":
            body = (f"{t} writes it at {self.uop(pc)}, {o} read it at {self.uop(race.other_at)} with no "
                    f"BARRIER between, so {o} may read the new value instead of the old one; put a BARRIER "
                    "between the read and the write")
        elif race.other_at == pc:
            body = (f"{o} and {t} both write it at {self.uop(pc)}: which value stays depends on which "
                    "thread runs last; let one thread write each element")
        else:
            body = (f"{t} writes it at {self.uop(pc)}, {o} wrote it at {self.uop(race.other_at)} with no "
                    "BARRIER between: which value stays depends on timing; put a BARRIER between the writes")
        if race.other_at > pc:  # the other access comes later in the list: an earlier loop iteration made it
            body += " (the other access was in an earlier iteration of the loop: the BARRIER goes at its end)"
        return GPURaceError(head + body)


def vector_count(dtype: Any) -> int:
    """The number of elements of a value of `dtype`: a vector's count, else 1."""
    return dtype.count if is_vector(dtype) else 1


class LockstepProgram:
    """A GPU-style UOp list, ready to run: `program([out, *inputs])` runs every workgroup of the grid."""

    def __init__(self, uops: list[UOp], launch: LaunchDims):
        self.uops, self.launch, self.lanes = uops, launch, launch.threads_per_group
        position = {u: i for i, u in enumerate(uops)}
        # as in PythonProgram: reading an ASSIGN reads its accumulator's register
        register = {u: position[u.src[0]] if u.op is UOps.ASSIGN else position[u] for u in uops}
        self.srcs = [[register[s] for s in u.src] for u in uops]
        # ENDRANGE jumps back after its RANGE; an empty loop, or an IF no thread enters, jumps past its end
        self.block_end = {position[u.src[0]]: i for i, u in enumerate(uops)
                          if u.op in (UOps.ENDRANGE, UOps.ENDIF)}
        opened = [i for i, u in enumerate(uops) if u.op in (UOps.RANGE, UOps.IF)]
        unclosed = [i for i in opened if i not in self.block_end]
        if unclosed:
            raise ValueError(f"PYTHON: the {uops[unclosed[0]].op.name} at UOp {unclosed[0]} has no "
                             f"{'ENDRANGE' if uops[unclosed[0]].op is UOps.RANGE else 'ENDIF'}")
        self.types = [None if u.dtype is None else lane_type(scalar_of(u.dtype)) for u in uops]
        # how many elements a value (a LOAD) or a STORE's value has: a vector's count, else 1
        self.counts = [vector_count(u.src[2].dtype if u.op is UOps.STORE else u.dtype) for u in uops]
        self.alu = {pc: LanesALU.of(u) for pc, u in enumerate(uops) if u.op is UOps.ALU}
        self.threads = np.arange(self.lanes)
        l0, l1, _ = launch.local
        lane = self.threads  # thread x varies fastest, as in CUDA
        self.lid = (lane % l0, lane // l0 % l1, lane // (l0 * l1))
        self.traffic = MemoryCounts()  # the last run's

    @cached_property
    def listing(self) -> list[str]:
        return uops_listing(self.uops).splitlines()

    def __call__(self, buffers: list[Any]) -> None:
        memory = [b.as_numpy() for b in buffers]
        g0, g1, g2 = self.launch.groups
        self.traffic = MemoryCounts()
        with np.errstate(all="ignore"):  # inf and nan are values here, as in C and numpy
            for z, y, x in itertools.product(range(g2), range(g1), range(g0)):
                Workgroup(self, memory, (x, y, z)).run()


class Workgroup:
    """One workgroup's run: its registers (an array over the lanes per UOp), shared memory, and the
    stack of active-lane masks of the IFs it is inside."""

    def __init__(self, program: LockstepProgram, memory: list[np.ndarray], group: tuple[int, int, int]):
        self.program, self.memory, self.group = program, memory, group
        self.place = Place(program, group)
        self.values: list[Any] = [None] * len(program.uops)
        self.masks: list[tuple[int, np.ndarray]] = []  # (position of the IF, lanes that run its body)
        self.active = np.ones(program.lanes, dtype=bool)  # the lanes that run the current UOp
        self.shared: dict[int, SharedAccess] = {}  # position of a DEFINE_SHARED -> its access record
        self.traffic = program.traffic
        self.idle = 0  # threads of the workgroup outside the IF they are in (sitting out each step)

    # --8<-- [start:lockstep]
    def run(self) -> None:
        """The UOps in order, each for all active lanes at once; jumps for loops and IFs."""
        uops, srcs, values = self.program.uops, self.program.srcs, self.values
        pc = steps = idle = 0
        while pc < len(uops):
            u, args = uops[pc], [values[i] for i in srcs[pc]]
            steps, idle = steps + 1, idle + self.idle
            if u.op is UOps.RANGE:
                pc = self.start_loop(pc, args)
                continue
            if u.op is UOps.ENDRANGE:
                pc = self.end_loop(pc)
                continue
            if u.op is UOps.IF:
                pc = self.start_if(pc, args[0])
                continue
            if u.op is UOps.ENDIF:
                self.masks.pop()
                self.active = self.masks[-1][1] if self.masks else np.ones(self.program.lanes, dtype=bool)
                self.idle = self.program.lanes - int(self.active.sum())
            elif u.op is UOps.BARRIER:
                self.barrier(pc)
            elif u.op is UOps.LOAD:
                values[pc] = self.load(pc, args)
            elif u.op is UOps.STORE:
                self.store(pc, args)
            elif u.op is UOps.ALU:
                values[pc] = self.program.alu[pc](args)
            elif u.op is UOps.ASSIGN:  # only active lanes change their accumulator
                values[srcs[pc][0]] = np.where(self.lanes_of(pc), args[1], args[0]) if self.masks else args[1]
            else:
                values[pc] = self.value(pc, u, args)
            pc += 1
        self.traffic.thread_steps += steps * self.program.lanes
        self.traffic.idle_steps += idle
    # --8<-- [end:lockstep]

    def value(self, pc: int, u: UOp, args: list[Any]) -> Any:
        """The value of a UOp that reads no memory: indices, arrays, constants, casts, vector lanes."""
        count, kind = self.program.counts[pc], self.program.types[pc]
        if u.op is UOps.SPECIAL:
            name, dim = u.arg[0][:3], int(u.arg[0][3:])
            return np.asarray(self.group[dim] if name == "gid" else self.program.lid[dim], dtype=kind)
        if u.op is UOps.DEFINE_GLOBAL:
            return self.memory[u.arg]
        if u.op is UOps.DEFINE_SHARED:  # one array for the whole workgroup
            self.shared[pc] = SharedAccess(u.arg[1])
            return np.zeros(u.arg[1], dtype=u.dtype.np)
        if u.op is UOps.DEFINE_LOCAL:  # private: one array per thread
            return np.zeros((self.program.lanes, u.arg), dtype=u.dtype.np)
        if u.op in (UOps.CONST, UOps.DEFINE_ACC):
            value = np.asarray(to_dtype(u.arg, scalar_of(u.dtype)), dtype=kind)
            return value if count == 1 else np.full(count, value)
        if u.op is UOps.CAST:
            source, target = scalar_of(u.src[0].dtype), scalar_of(u.dtype)
            return np.asarray(cast_array(np.asarray(args[0], dtype=source.value_np), target)).astype(kind)
        if u.op is UOps.VECTORIZE:  # a vector's elements are the last axis
            return np.stack(np.broadcast_arrays(*args), axis=-1)
        if u.op is UOps.BROADCAST:
            return np.repeat(np.asarray(args[0])[..., None], count, axis=-1)
        if u.op is UOps.GEP:
            return args[0][..., u.arg]
        raise NotImplementedError(f"PYTHON: no lockstep rule for UOp {pc} ({u.op.name})")

    def start_loop(self, pc: int, args: list[Any]) -> int:
        start, end = self.uniform(pc, args[0], "start"), self.uniform(pc, args[1], "end")
        self.values[pc] = np.asarray(start, dtype=self.program.types[pc])
        return pc + 1 if start < end else self.program.block_end[pc] + 1

    def end_loop(self, pc: int) -> int:
        start = self.program.srcs[pc][0]
        self.values[start] = self.values[start] + 1
        end = self.uniform(start, self.values[self.program.srcs[start][1]], "end")
        return start + 1 if int(self.values[start]) < end else pc + 1

    def uniform(self, pc: int, value: Any, what: str) -> int:
        """A loop bound, which must be the same in every active thread."""
        if not getattr(value, "shape", ()):  # one value for all lanes (a constant, usually)
            return int(value)
        seen = value[self.active]
        differ = np.flatnonzero(seen != seen[0])
        if differ.size:
            lanes = np.flatnonzero(self.active)
            a, b = self.place.thread(int(lanes[0])), self.place.thread(int(lanes[differ[0]]))
            raise DivergentLoopError(
                f"PYTHON: the loop at {self.place.uop(pc)} in workgroup {self.group} has a different {what} "
                f"in {a} ({seen[0]}) and {b} ({seen[differ[0]]}); loop bounds must be the same in every "
                "thread of a workgroup")
        return int(seen[0])

    def start_if(self, pc: int, condition: np.ndarray) -> int:
        """Narrow the active lanes to those where the condition holds; skip the body if none does."""
        inside = self.active & condition
        if not inside.any():
            return self.program.block_end[pc] + 1
        self.masks.append((pc, inside))
        self.active = inside
        self.idle = self.program.lanes - int(inside.sum())
        return pc + 1

    def barrier(self, pc: int) -> None:
        if not self.active.all():
            branch = next(at for at, mask in self.masks if not mask.all())
            raise BarrierDivergenceError(
                f"PYTHON: the BARRIER at {self.place.uop(pc)} in workgroup {self.group} is reached by "
                f"{self.place.threads(np.flatnonzero(self.active))} but not by "
                f"{self.place.threads(np.flatnonzero(~self.active))}: the IF at {self.place.uop(branch)} is "
                "true in some threads of the workgroup only. A barrier waits for every thread of the "
                "workgroup, so on a GPU this hangs or goes wrong; move the BARRIER out of the IF")
        self.traffic.barriers += 1
        for record in self.shared.values():
            record.barrier()

    def lanes_of(self, pc: int) -> np.ndarray:
        """The active-lane mask, shaped to select whole vectors when UOp pc's value is one."""
        return self.active if self.program.counts[pc] == 1 else self.active[:, None]

    def access(self, pc: int, args: list[Any], gate: Any = None) -> tuple[np.ndarray, np.ndarray, UOp]:
        """The lanes that perform a LOAD/STORE (active, gate true) and the elements each touches (one
        index per lane, or a row of `count` consecutive ones for a vector), bounds checked."""
        count = self.program.counts[pc]
        lanes = self.program.lanes
        if gate is None and not self.masks:  # every thread
            threads, at = self.program.threads, spread(args[1], lanes)
        else:
            active = self.active if gate is None else self.active & gate
            threads = np.flatnonzero(active)
            at = spread(args[1], lanes)[threads]
        buffer, source = args[0], self.program.uops[self.program.srcs[pc][0]]
        size = buffer.shape[-1]
        outside = (at < 0) | (at + count > size)
        if outside.any():
            i = int(np.argmax(outside))
            name = (f"data{source.arg}" if source.op is UOps.DEFINE_GLOBAL else "a private array"
                    if source.op is UOps.DEFINE_LOCAL else f"shared{source.arg[0]}")
            verb = "reads" if self.program.uops[pc].op is UOps.LOAD else "writes"
            raise GPUOutOfBoundsError(
                f"PYTHON: out of bounds at {self.place.uop(pc)} in workgroup {self.group}: "
                f"{self.place.thread(int(threads[i]))} {verb} "
                + (f"index {at[i]}" if count == 1 else f"{count} elements from index {at[i]}")
                + f" of {name}, which has {size} elements (valid: 0 to {size - 1})")
        at = at if count == 1 else at[:, None] + np.arange(count)
        self.count_access(threads, at, source, buffer.dtype.itemsize)
        return threads, at, source

    def count_access(self, threads: np.ndarray, at: np.ndarray, source: UOp, itemsize: int) -> None:
        """Add one access's warp requests and sectors (global) or bank conflicts (shared)."""
        if source.op is UOps.DEFINE_GLOBAL:
            requests, sectors, useful = global_sectors(threads, at, itemsize)
            self.traffic.global_requests += requests
            self.traffic.global_sectors += sectors
            self.traffic.global_bytes += useful
        elif source.op is UOps.DEFINE_SHARED:
            requests, conflicts = bank_passes(threads, at, itemsize)
            self.traffic.shared_requests += requests
            self.traffic.bank_conflicts += conflicts

    def load(self, pc: int, args: list[Any]) -> np.ndarray:
        """buffer[index] in every lane that is active and whose gate holds; 0 in the others."""
        u = self.program.uops[pc]
        threads, at, source = self.access(pc, args, args[2] if len(args) == 3 else None)
        if source.op is UOps.DEFINE_SHARED:
            record = self.shared[self.program.srcs[pc][0]]
            self.check_race(pc, source, record.read(*self.flat(threads, at), pc))
        private = source.op is UOps.DEFINE_LOCAL
        stored = args[0][self.private_rows(threads, at), at] if private else args[0][at]
        stored = from_storage(stored, scalar_of(u.dtype))  # bfloat16: bits to float32
        if len(threads) == self.program.lanes:
            return stored.astype(self.program.types[pc])
        result = np.zeros(self.shape(pc), dtype=self.program.types[pc])
        result[threads] = stored
        return result

    def store(self, pc: int, args: list[Any]) -> None:
        """buffer[index] = value in every active lane."""
        u = self.program.uops[pc]
        threads, at, source = self.access(pc, args)
        value = np.broadcast_to(args[2], self.shape(pc))[threads]
        if scalar_of(u.src[2].dtype) == dtypes.bfloat16:
            value = to_storage(value.astype(np.float32), dtypes.bfloat16)
        if source.op is UOps.DEFINE_SHARED:
            record = self.shared[self.program.srcs[pc][0]]
            self.check_race(pc, source, record.write(*self.flat(threads, at), pc))
        if source.op is UOps.DEFINE_LOCAL:
            args[0][self.private_rows(threads, at), at] = value
        else:
            args[0][at] = value  # global memory: threads that collide race; one of their values stays

    def shape(self, pc: int) -> tuple[int, ...]:
        """A LOAD's or a STORE's value for every lane: (lanes,), or (lanes, count) for vectors."""
        count = self.program.counts[pc]
        return (self.program.lanes,) if count == 1 else (self.program.lanes, count)

    @staticmethod
    def private_rows(threads: np.ndarray, at: np.ndarray) -> np.ndarray:
        """Each thread's row of a private (per-thread) array, shaped like the indices `at`."""
        return threads if at.ndim == 1 else threads[:, None]

    @staticmethod
    def flat(threads: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(thread, element) pairs, one per element touched: a vector access touches several."""
        return (threads, at) if at.ndim == 1 else (np.repeat(threads, at.shape[1]), at.reshape(-1))

    def check_race(self, pc: int, shared: UOp, race: Race | None) -> None:
        if race is not None:
            raise self.place.race_error(race, pc, shared)
