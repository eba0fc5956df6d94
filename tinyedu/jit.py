"""TinyJit: run a function's kernels again without running the function.

A training step spends most of its Python time *deciding* what to run: building the lazy graph,
scheduling it into kernels, looking each kernel up in the compile cache. The decisions come out
the same every step, because the shapes are the same; only the data differs. So TinyJit

1. calls the function normally three times: the first call warms up (it compiles kernels and
   realizes whatever the step reads that was still lazy), the next two record every program that
   runs and on which buffers (through the capture hook in engine/realize.py), and TinyJit checks
   that both recorded calls ran the same programs on buffers playing the same roles;
2. from then on, *replays* the recording: the same programs on the same buffers, with the new
   inputs' buffers in place of the old ones, and fresh memory for the outputs it returns.

The function body does not run at all on a replay, so a replay can only do what the recording
did. What it cannot follow is refused with a clear error: inputs of another shape, dtype or
device; a Python (non-tensor) argument that changed; a step whose programs differ between the two
recorded calls; host data that differs between them (random numbers drawn on the host, a Tensor
made from Python data inside the step): pass such data in as an input tensor instead.

The recording also relies on how the inputs' memory is related, and checks it on every call:
inputs that are one buffer (a tensor passed twice) replay only while they are one buffer; an input
the step writes (assign) or returns is the new input's memory on a replay; an input that is the
memory of a weight the step writes, or a write that would miss the caller's tensor because the
input was copied in (a slice, a constant), is refused. Python arguments are compared by type and by
a copy of their contents (tinyedu/jit_inputs.py prepares the inputs and describes a call).

What persists across calls is what the kernels write: tensors updated with `assign` (weights,
optimizer state, running statistics) and the returned tensors. Python side effects of the
function (a counter, a print, `p.grad`) happen on the first three calls only.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tinyedu.core.helpers import GlobalCounters, debug_level
from tinyedu.core.ops import LazyOp
from tinyedu.engine import realize
from tinyedu.engine.assign import SnapshotCopy, snapshot_for_pending_readers
from tinyedu.jit_inputs import (
    Copies,
    JitError,
    call_signature,
    check_copies_unwritten,
    copy_written,
    memory_sharing,
    realized_inputs,
    sharing_changed,
    shown,
    view_written,
)
from tinyedu.lazy import LazyBuffer
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.launch_queue import QUEUE
from tinyedu.runtime.ops_c import LOADED, CProgram
from tinyedu.tensor import Tensor


@dataclass
class JitItem:
    """One program run on buffers, as recorded: a kernel (with its AST), a copy or a fill."""

    name: str
    ast: LazyOp | None
    program: realize.Program
    buffers: list[Buffer]

    @property
    def is_kernel(self) -> bool:
        return self.ast is not None


@dataclass(frozen=True)
class ItemFacts:
    """What TinyJit knows about one recorded program when it decides whether a replay must run it."""

    constant: bool      # a copy of host data or a fill: the same data on both recorded calls (checked)
    made_in_step: bool  # the buffer it writes was created during the step (not a weight from before it)
    writers: int        # how many recorded programs write that buffer
    returned: bool      # the buffer is what the step returns (a replay hands back fresh memory)


# --8<-- [start:skip]
def replay_can_skip(item: JitItem, facts: ItemFacts) -> bool:
    """May a replay leave this recorded program out? Only when its result cannot change: constant data
    (say class weights `Tensor([1.0, 2.0, 1.0])` made in the step) written into memory that the step
    itself made, that no other program writes and that is not returned. That memory then keeps the
    recorded contents.

    (Chapter 08's exercise plugs a learner's version in here: TinyJit looks this name up.)
    """
    return facts.constant and facts.made_in_step and facts.writers == 1 and not facts.returned


# --8<-- [end:skip]
# --8<-- [start:jit]
class TinyJit:
    """`step = TinyJit(fn)`: call 1 runs fn, calls 2 and 3 run it and record its programs, later calls
    replay the recording."""

    WARMUP = 1  # calls before recording

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.calls = 0
        self.items: list[JitItem] = []      # the recording that is replayed
        self.dropped: list[JitItem] = []    # recorded, but not replayed: their result cannot change
        self._first: list[JitItem] | None = None
        self._direct: tuple[tuple[int, int, int], list | None] | None = None  # see _direct_calls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs, inputs, copies = realized_inputs(args, kwargs)
        buffers = [t.lazydata.base.realized for t in inputs]
        signature, sharing = call_signature(args, kwargs), memory_sharing(buffers)
        if self.calls > 0:
            self._check_same_call(signature, sharing)
        self.signature, self.sharing = signature, sharing
        if self.calls >= self.WARMUP + 2:
            self._check_replay_memory(buffers, copies)
            out = self._replay(buffers)
        else:
            versions = [(origin.version if origin else 0, copy.version) for _, origin, copy in copies]
            if self.calls < self.WARMUP:
                out = self.fn(*args, **kwargs)
                Tensor.realize_all(*_output_tensors(out))
            else:
                out = self._record(args, kwargs, buffers)
            check_copies_unwritten(copies, versions)
        self.calls += 1
        return out

    # ---- calls 2 and 3: run the function and record what ran ----
    def _record(self, args: tuple, kwargs: dict, input_buffers: list[Buffer]) -> Any:
        recorded: list[JitItem] = []
        start = Buffer.next_serial()

        def observe(name: str, ast: LazyOp | None, program: realize.Program, buffers: list[Buffer]) -> None:
            recorded.append(JitItem(name, ast, program, list(buffers)))

        realize.observers.append(observe)
        try:
            out = self.fn(*args, **kwargs)
            outputs = _output_tensors(out)
            Tensor.realize_all(*outputs)
        finally:
            realize.observers.remove(observe)
        recorded = _without_outside_snapshots(recorded)
        roles = _roles(recorded, input_buffers, start)
        if self.calls == self.WARMUP:
            self._first, self._first_roles = recorded, roles
        else:
            _compare(self._first, self._first_roles, recorded, roles)
            self._first = self._first_roles = None
            self._prepare(recorded, roles, input_buffers, out, outputs, start)
        return out
    # --8<-- [end:jit]

    def _prepare(self, recorded: list[JitItem], roles: list[list[Any]], input_buffers: list[Buffer], out: Any,
                 outputs: list[Tensor], start: int) -> None:
        """Turn the second recording into the replay list, and note where inputs and outputs go."""
        output_buffers = [t.lazydata.base.realized for t in outputs]
        made_here = {id(b) for item in recorded for b in item.buffers if b.serial >= start}
        written_by = {}
        for item in recorded:
            written_by.setdefault(id(item.buffers[0]), []).append(item)
        self.items, self.dropped, self._direct = [], [], None
        for item in recorded:
            target = item.buffers[0]
            facts = ItemFacts(constant=isinstance(item.program, (realize.HostCopy, realize.Fill)),
                              made_in_step=id(target) in made_here, writers=len(written_by[id(target)]),
                              returned=any(target is b for b in output_buffers))
            # (a module-level name is looked up when called, so an exercise can plug its own rule in)
            (self.dropped if replay_can_skip(item, facts) else self.items).append(item)
        # where the buffers of the inputs and of the outputs sit, to swap in new ones on a replay
        self.input_slots = [(i, j, k) for i, item in enumerate(self.items) for j, b in enumerate(item.buffers)
                            for k, ib in enumerate(input_buffers) if b is ib]
        # the first output with each buffer (a step may return the same tensor twice)
        self.output_alias = [next(n for n, o in enumerate(output_buffers) if o is b) for b in output_buffers]
        fresh = [k for k, b in enumerate(output_buffers) if id(b) in made_here and self.output_alias[k] == k
                 and not any(b is ib for ib in input_buffers)]
        self.output_slots = [(i, j, k) for i, item in enumerate(self.items)
                             for j, b in enumerate(item.buffers) for k in fresh if b is output_buffers[k]]
        self.output_buffers, self.fresh_outputs = output_buffers, fresh
        # an output that is an input (returned as it is, or written with assign) is the new input's memory
        self.output_inputs = [(n, next(k for k, ib in enumerate(input_buffers) if ib is b))
                              for n, b in enumerate(output_buffers) if any(ib is b for ib in input_buffers)]
        self.output_views = [(t.lazydata.st, t.lazydata.base.shape, t.dtype, t.device) for t in outputs]
        self.output_structure = _structure(out)
        self.input_buffers = input_buffers
        self._note_memory(recorded, input_buffers, [output_buffers[k] for k in fresh], start)

    def _note_memory(self, recorded: list[JitItem], inputs: list[Buffer], fresh: list[Buffer],
                     start: int) -> None:
        """What a replay writes, and which memory it keeps from the recording (an input must not be that)."""
        written = {id(item.buffers[0]): item.buffers[0] for item in recorded}
        # inputs the step writes (assign): a replay writes the new input's memory instead
        self.written_inputs = [k for k, b in enumerate(inputs) if id(b) in written and self.sharing[k] == k]
        # memory from before the step that the replay writes (weights, optimizer state): assign's rules
        # (snapshots for pending readers, version counts) must hold for replays too
        self.written_old = [b for b in written.values()
                            if b.serial < start and not any(b is ib for ib in inputs)]
        # memory a replay uses as recorded: everything but the inputs and the fresh outputs it swaps
        swapped = {id(b) for b in (*inputs, *fresh)}
        self.kept_memory = {id(b) for item in recorded for b in item.buffers} - swapped
        self.kept_written = set(written) - swapped

    # ---- call 3 on: replay ----
    # --8<-- [start:replay]
    def _replay(self, inputs: list[Buffer]) -> Any:
        buffers = [list(item.buffers) for item in self.items]
        for i, j, k in self.input_slots:
            buffers[i][j] = inputs[k]
        outputs = list(self.output_buffers)
        for k in self.fresh_outputs:  # new memory for what we return, so earlier results stay valid
            old = self.output_buffers[k]
            outputs[k] = Buffer(old.device, old.size, old.dtype)
        for n, k in self.output_inputs:
            outputs[n] = inputs[k]
        outputs = [outputs[first] for first in self.output_alias]
        for i, j, k in self.output_slots:
            buffers[i][j] = outputs[k]
        written = self.written_old + [inputs[k] for k in self.written_inputs]
        for buffer in written:
            snapshot_for_pending_readers(buffer)
        timed = debug_level() >= 2
        direct = None if timed or realize.observers else self._direct_calls()
        if direct is not None:  # only the swapped pointers change; every other one was converted once
            QUEUE.drain()  # (ASYNC=1: the pointers converted once are not waited for one by one)
            for i, j, _ in (*self.input_slots, *self.output_slots):
                direct[i][1][j] = ctypes.c_void_p(buffers[i][j].host_address())
            for function, arguments in direct:
                function(*arguments)
        else:
            for item, bufs in zip(self.items, buffers, strict=True):
                begin = time.perf_counter() if timed else 0.0
                realize.run_program(item.name, item.ast, item.program, bufs)
                if timed:
                    print(f"*** JIT    {item.name:28s} {(time.perf_counter() - begin) * 1e3:9.3f} ms")
        GlobalCounters.kernel_count += self.kernel_count
        for buffer in written:
            buffer.version += 1
        return self._outputs(outputs)
    # --8<-- [end:replay]

    def _direct_calls(self) -> list[tuple[Any, list]] | None:
        """Every item's C function and pointer arguments, looked up once, when every item is a C
        program (None otherwise: each item then runs through run_program, as it was recorded).

        Why: a replayed decoding step of a small model is dozens of tiny kernels, and looking up each
        function in its library and converting each pointer again costs more than many of them run.
        A function stays valid while its library stays loaded: any load or unload since (LOADED's
        counts) makes them be looked up again."""
        state = (LOADED.loads, LOADED.evictions, len(LOADED))
        if self._direct is None or self._direct[0] != state:
            calls = None
            if all(type(item.program) is CProgram for item in self.items):
                calls = [(item.program.function, [ctypes.c_void_p(b.host_address()) for b in item.buffers])
                         for item in self.items]
                if (LOADED.loads, LOADED.evictions, len(LOADED)) != state:  # a lookup loaded a library,
                    return None  # which may have unloaded another one looked up before: next replay
            self._direct = (state, calls)
        return self._direct[1]

    @property
    def kernel_count(self) -> int:
        """Kernels in the replay (copies and fills not counted)."""
        return sum(item.is_kernel for item in self.items)

    def time_items(self, *args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        """Replay once (a real step: it updates whatever the step updates), timing each item in seconds."""
        if self.calls < self.WARMUP + 2:
            raise JitError("TinyJit.time_items: the step is not recorded yet; call it three times first")
        args, kwargs, _, _ = realized_inputs(args, kwargs)  # any copy-in happens before the timing
        times = []

        def observe(name: str, ast: Any, program: Any, buffers: Any) -> None:
            now = time.perf_counter()
            times.append((name, now))

        realize.observers.append(observe)
        try:
            begin = time.perf_counter()
            self(*args, **kwargs)
        finally:
            realize.observers.remove(observe)
        result, previous = [], begin
        for name, now in times:
            result.append((name, now - previous))
            previous = now
        return result

    def _outputs(self, buffers: list[Buffer]) -> Any:
        tensors = []
        for buffer, (st, base_shape, dtype, device) in zip(buffers, self.output_views, strict=True):
            base = LazyBuffer.from_buffer(buffer, base_shape, dtype, device)
            lazydata = base if st == base.st else LazyBuffer(device, st, dtype, base=base)
            tensors.append(Tensor(lazydata, device=device))
        return _rebuild(self.output_structure, iter(tensors))

    def _check_same_call(self, signature: tuple, sharing: tuple[int, ...]) -> None:
        old = self.signature
        if len(signature) != len(old):
            raise JitError(f"TinyJit: called with {len(signature)} arguments, recorded with {len(old)}")
        for (position, *new), (_, *was) in zip(signature, old, strict=True):
            if new == was:
                continue
            if new[0] == "tensor" and was[0] == "tensor":
                raise JitError(f"TinyJit: input {position} is a tensor of shape {new[1]}, {new[2].name} on "
                               f"{new[3]}, but the step was recorded with shape {was[1]}, {was[2].name} on "
                               f"{was[3]}; a replay runs the recorded kernels, which are made for one shape: "
                               "use a new TinyJit for each shape (e.g. drop the last, smaller batch)")
            raise JitError(f"TinyJit: argument {position} changed from {shown(was)} to {shown(new)}; a "
                           "replay does not run the Python code that used it: pass values that change as "
                           "tensors")
        if sharing != self.sharing:
            raise JitError(sharing_changed(sharing, self.sharing))

    def _check_replay_memory(self, buffers: list[Buffer], copies: Copies) -> None:
        """Refuse an input whose memory the recording uses in another role, before the replay writes."""
        for k, b in enumerate(buffers):
            if id(b) in self.kept_memory and (id(b) in self.kept_written or k in self.written_inputs):
                raise JitError(f"TinyJit: input {k} is memory the step also uses without it being passed in "
                               "(a weight or state that the step writes, or reads while it writes this "
                               "input); the recorded kernels treat the two as separate memory. Pass a copy "
                               "(x.clone().realize()), or run the step without TinyJit")
        if not copies:
            return
        written = self.kept_written | {id(buffers[k]) for k in self.written_inputs}
        for k, origin, _ in copies:
            if k in self.written_inputs:
                raise JitError(copy_written(k))
            if origin is not None and id(origin) in written:
                raise JitError(view_written(k))


def _output_tensors(out: Any) -> list[Tensor]:
    if out is None:
        return []
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(t, Tensor) for t in out):
        return list(out)
    raise JitError(f"TinyJit: the step returned {type(out).__name__}; return a Tensor, a tuple or list of "
                   "Tensors, or None (a Python number would be the recorded one forever: call .item() on the "
                   "returned tensor instead)")


def _structure(out: Any) -> Any:
    return None if out is None else "tensor" if isinstance(out, Tensor) else (type(out), len(out))


def _rebuild(structure: Any, tensors: Any) -> Any:
    if structure is None:
        return None
    if structure == "tensor":
        return next(tensors)
    kind, n = structure
    return kind(next(tensors) for _ in range(n))


def _without_outside_snapshots(items: list[JitItem]) -> list[JitItem]:
    """Drop snapshots kept for computations outside the step (nothing in the step reads them): they
    depend on what else the program holds, not on the step, and a replay makes its own when needed."""
    kept = []
    for n, item in enumerate(items):
        snapshot = item.buffers[0]
        if isinstance(item.program, SnapshotCopy) and not any(
                b is snapshot for later in items[n + 1:] for b in later.buffers):
            continue
        kept.append(item)
    return kept


def _roles(items: list[JitItem], inputs: list[Buffer], start: int) -> list[list[Any]]:
    """What each buffer of each item is, comparable across calls: input k, the n-th buffer the step made,
    or a buffer from before the step (the same object on both calls: a weight)."""
    made: dict[int, int] = {}
    roles = []
    for item in items:
        row = []
        for b in item.buffers:
            position = next((k for k, ib in enumerate(inputs) if b is ib), None)
            if position is not None:
                row.append(("input", position))
            elif b.serial >= start:
                row.append(("made", made.setdefault(id(b), len(made))))
            else:
                row.append(("old", id(b)))
        roles.append(row)
    return roles


def _compare(first: list[JitItem], first_roles: list, second: list[JitItem], second_roles: list) -> None:
    """Both recorded calls must have run the same programs on buffers in the same roles."""
    if len(first) != len(second):
        raise JitError(f"TinyJit: the step ran {len(first)} programs on its first call and {len(second)} on "
                       "its second; it does different work on different calls (Python control flow on data, "
                       "or a cache warming up) and cannot be replayed")
    for n, (a, b, ra, rb) in enumerate(zip(first, second, first_roles, second_roles, strict=True)):
        same_program = a.name == b.name and a.ast == b.ast and type(a.program) is type(b.program)
        if not same_program:
            raise JitError(f"TinyJit: program {n} was {a.name} on the first call and {b.name} on the second; "
                           "the step runs different kernels on different calls and cannot be replayed")
        if isinstance(a.program, realize.HostCopy) and not np.array_equal(a.program.array, b.program.array):
            raise JitError(f"TinyJit: program {n} ({a.name}) copies different host data on each call: random "
                           "numbers drawn on the host (Tensor.rand, dropout) or a Tensor made from Python "
                           "data inside the step. A replay would repeat the recorded data; pass it in as an "
                           "input tensor instead")
        if isinstance(a.program, realize.Fill) and a.program.value != b.program.value:
            raise JitError(f"TinyJit: program {n} ({a.name}) fills a different value on each call; pass the "
                           "value as an input tensor")
        if ra != rb:
            raise JitError(f"TinyJit: program {n} ({a.name}) ran on different memory on the two recorded "
                           f"calls ({ra} vs {rb}); the step reads tensors that change between calls other "
                           "than its inputs (pass them as arguments)")


__all__ = ["TinyJit", "JitError", "JitItem", "ItemFacts", "replay_can_skip"]
