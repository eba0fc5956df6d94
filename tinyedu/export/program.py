"""Export: a trained model's forward pass as one standalone C program (PORT=1: every buffer inside it).

Inside tinyedu a forward pass is a schedule of kernels that Python runs one by one on buffers it
allocates. Exporting writes that same schedule down as a C file that needs nothing else:

- every kernel of the schedule, in order, through the lowering steps of tinyedu/engine/lower.py
  (Kernel, opts, linearize, render), with the settings of the target machine instead of this one:
  4-lane vectors and one thread. Target "c" is portable C from the C device's renderer (its vector
  types become SSE on any x86-64, NEON on arm64, as the compiler chooses); target "neon" is C with
  ARM NEON intrinsics from the NEON device's renderer, for arm64 only (cross-compiled and run under
  qemu-user on another machine);
- the weights, as `static const` arrays in the file (PORT=1, the default up to EMBED_LIMIT bytes),
  or in a sidecar binary file read at start-up (PORT=0, for large models);
- the intermediate buffers, placed by a memory plan in one arena per dtype so that a buffer whose
  last reader has run gives its memory to a later one (see plan_memory);
- `<name>_forward(inputs..., outputs...)`, which calls the kernels, and a small `main` that reads
  batches of inputs (raw bytes) from a file or stdin and writes the outputs (raw, or as text).

It compiles with `cc -O2 model.c -lm` (target "neon" on x86-64: `aarch64-linux-gnu-gcc -O2 -static`)
and runs with no Python. Only inference: the model runs in
eval mode (BatchNorm reads its running statistics, dropout is off), whatever Tensor.training is.

This file is the builder: it fills in an ExportedProgram (model.py) and has cfile.py write it down.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable

import numpy as np

from tinyedu.core.dtype import to_storage
from tinyedu.core.helpers import getenv
from tinyedu.core.ops import LoadOps
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import ScheduleItem, create_schedule
from tinyedu.export.cfile import render_program
from tinyedu.export.memory import plan_memory
from tinyedu.export.model import BufferInfo, ExportedProgram, KernelCall
from tinyedu.export.targets import TARGETS, Target
from tinyedu.lazy import LazyBuffer
from tinyedu.nn.state import get_state_dict
from tinyedu.tensor import Tensor
from tinyedu.tensor_api.grad_mode import no_grad

EMBED_LIMIT = 16 << 20  # bytes of weights above which PORT unset means a sidecar file


# --8<-- [start:export]
def export_c(model: Callable[..., Any], *example_inputs: Tensor, name: str = "model",
             target: str | Target = "c", embed: bool | None = None) -> ExportedProgram:
    """The forward pass `model(*example_inputs)` as a standalone C program for inputs of these shapes and
    dtypes. `model` is any callable; if it holds tensors (a layer, a model) their state-dict names
    become the names of the weight arrays. `embed` puts the weights in the file (default: the PORT
    environment variable, else yes when they take at most EMBED_LIMIT bytes)."""
    if isinstance(target, str):
        if target not in TARGETS:
            raise ValueError(f"export_c: unknown target {target!r}; the targets are {', '.join(TARGETS)} "
                             "(or pass a Target)")
        target = TARGETS[target]()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"export_c: name must be a C identifier (it names the file and the functions), "
                         f"got {name!r}")
    inputs = [_input_tensor(x, k) for k, x in enumerate(example_inputs)]
    for holder in _weight_holders(model).values():  # weights in memory, where their names can find them
        Tensor.realize_all(*get_state_dict(holder).values())
    with no_grad(), Tensor.train(False):  # inference: BatchNorm reads its running statistics, no dropout
        outputs = _output_tensors(model(*inputs))
    outs = [t.contiguous() for t in outputs]
    Tensor.realize_all(*(t for t in outs if t.lazydata.base.is_const()))  # (a constant output: a fill)
    schedule = create_schedule([t.lazydata for t in outs])
    input_memory = {id(t.lazydata.base.realized): k for k, t in enumerate(inputs)}
    names = _weight_names(model)
    # 1. what every buffer is: the inputs, the outputs, data known now (weights, constants), scratch
    buffers: dict[int, BufferInfo] = {}

    def info(lb: LazyBuffer) -> BufferInfo:
        key = id(lb)
        if key not in buffers:
            realized = lb.realized
            if realized is not None and id(realized) in input_memory:
                k = input_memory[id(realized)]
                buffers[key] = BufferInfo(f"input{k}", "input", lb.dtype, lb.size)
            elif realized is not None:
                buffers[key] = BufferInfo(_c_name(names.get(id(realized), "weight"), buffers), "weight",
                                          lb.dtype, lb.size, realized.as_numpy().copy())
            else:
                buffers[key] = BufferInfo(f"buf{len(buffers)}", "scratch", lb.dtype, lb.size)
        return buffers[key]

    for k, t in enumerate(outs):
        base = t.lazydata.base
        if base.realized is not None:
            raise ValueError(f"export_c: output {k} is already in memory (an input or a weight returned as "
                             "it is); return a computed tensor")
        buffers[id(base)] = BufferInfo(f"output{k}", "output", base.dtype, base.size)
    # 2. the calls, in schedule order; data that needs no computation becomes a weight
    calls: list[KernelCall] = []
    functions: dict[str, str] = {}
    by_ast: dict[Any, str] = {}
    for item in schedule:
        out = info(item.out)
        if isinstance(item.ast.op, LoadOps):
            _known_data(item, out)
            continue
        if item.ast not in by_ast:
            by_ast[item.ast] = _unique(item.name, functions)
            functions[by_ast[item.ast]] = lower_for_target(item, by_ast[item.ast], target)
        calls.append(KernelCall(by_ast[item.ast], [out, *(info(x) for x in item.inputs)]))
    # 3. scratch memory: one arena per dtype, reused once a buffer's last reader has run
    lifetimes = buffer_lifetimes(calls)
    arena_bytes = {}
    for dtype in sorted({b.dtype for b in lifetimes}, key=lambda d: d.name):
        ours = {b: span for b, span in lifetimes.items() if b.dtype == dtype}
        plan = plan_memory({id(b): (span, b.nbytes) for b, span in ours.items()})
        for b in ours:
            b.allocation = plan.allocations[id(b)]
        arena_bytes[dtype.name] = plan.size
    port = getenv("PORT", -1)
    weight_bytes = sum(b.nbytes for b in buffers.values() if b.role == "weight")
    embedded = embed if embed is not None else (port == 1 if port in (0, 1) else weight_bytes <= EMBED_LIMIT)
    program = ExportedProgram(name, target, [(tuple(t.shape), t.dtype) for t in inputs],
                              [(tuple(t.shape), t.dtype) for t in outs], calls, functions,
                              list(buffers.values()), arena_bytes, embedded)
    program.stats = {"kernels": len(calls), "functions": len(functions), "weight_bytes": weight_bytes,
                     "scratch_bytes": sum(arena_bytes.values()),
                     "unplanned_scratch_bytes": sum(b.nbytes for b in lifetimes)}
    program.source, program.weights_file = render_program(program)
    return program
# --8<-- [end:export]


# --8<-- [start:lower]
def lower_for_target(item: ScheduleItem, function: str, target: Target) -> str:
    """The kernel's C function: the engine's lowering with the target's settings (the heuristics' opts
    for its vector width, on one thread: the file runs wherever it is copied), up to the source."""
    return lower(target, item.ast, name=function, threads=1, compile=False).source
# --8<-- [end:lower]


def _weight_names(model: Any) -> dict[int, str]:
    """Buffer -> state-dict name, for the tensors `model` holds; a plain function is searched through the
    variables it closes over (`lambda x: net(x)` names net's weights "net.conv1.weight", ...)."""
    names: dict[int, str] = {}
    for prefix, holder in _weight_holders(model).items():
        for n, t in get_state_dict(holder, prefix).items():
            names.setdefault(id(t.lazydata.base.realized), n)
    return names


def _weight_holders(model: Any) -> dict[str, Any]:
    """`model` itself, or for a plain function the objects it uses by name (closures and globals),
    leaving out modules, classes and functions (get_state_dict would walk a whole library)."""
    if not inspect.isfunction(model):
        return {"": model}
    found = inspect.getclosurevars(model)
    return {name: value for name, value in {**found.globals, **found.nonlocals}.items()
            if not (inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value))}


def _known_data(item: ScheduleItem, out: BufferInfo) -> None:
    """A load in the schedule (host data, a fill, empty memory) is data known now: a weight."""
    op, arg = item.ast.op, item.ast.arg
    if op is LoadOps.COPY and arg is None:
        raise ValueError("export_c: the forward pass copies a buffer from another device; export a model "
                         "whose tensors are all on one device")
    if op is LoadOps.COPY:
        data = np.asarray(arg, dtype=out.dtype.np).reshape(-1)
    else:  # CONST fills one value; EMPTY is zeros (as the realizer makes it)
        values = np.full(out.size, arg if op is LoadOps.CONST else 0, dtype=out.dtype.value_np)
        data = to_storage(values, out.dtype)  # bfloat16: the bits of the value
    out.role, out.data, out.name = "weight", data, f"const_{out.name}"


# --8<-- [start:lifetimes]
def buffer_lifetimes(calls: list[KernelCall]) -> dict[BufferInfo, tuple[int, int]]:
    """For every scratch buffer: (the call that writes it, the last call that reads it).

    Inputs, outputs and weights have memory of their own and are not planned. (Chapter 11's exercise
    plugs a learner's version in here: export_c looks this name up.)
    """
    spans: dict[BufferInfo, tuple[int, int]] = {}
    for k, call in enumerate(calls):
        for position, b in enumerate(call.buffers):
            if b.role != "scratch":
                continue
            if position == 0:
                if b in spans:
                    raise ValueError(f"export_c: {b.name} is written twice; the forward pass updates a "
                                     "buffer in place (say, BatchNorm in training mode): export in eval mode")
                spans[b] = (k, k)
            else:
                spans[b] = (spans[b][0], k)
    return spans
# --8<-- [end:lifetimes]


def _input_tensor(x: Any, k: int) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"export_c: example input {k} must be a Tensor (its shape and dtype are the ones the "
                        f"program takes), got {type(x).__name__}")
    return x.contiguous().realize() if x.lazydata.is_view or x.lazydata.is_const() else x.realize()


def _output_tensors(out: Any) -> list[Tensor]:
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and out and all(isinstance(t, Tensor) for t in out):
        return list(out)
    raise TypeError(f"export_c: the model must return a Tensor or a tuple of Tensors, got "
                    f"{type(out).__name__}")


def _c_name(name: str, taken: dict[int, BufferInfo]) -> str:
    base = re.sub(r"\W", "_", name)
    used = {b.name for b in taken.values()}
    candidate, n = base, 1
    while candidate in used:
        candidate, n = f"{base}_{n}", n + 1
    return candidate


def _unique(name: str, functions: dict[str, str]) -> str:
    candidate, n = name, 1
    while candidate in functions:
        candidate, n = f"{name}_{n}", n + 1
    return candidate


__all__ = ["export_c", "lower_for_target", "buffer_lifetimes"]
