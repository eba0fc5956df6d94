"""What a TinyJit call passes in, and what every later call must repeat (tinyedu/jit.py runs them).

Each tensor argument is realized into memory of its own (a view that reorders or selects part of a
buffer, or a constant, is copied in), so a replay can swap that memory for the recorded one. A call
is then described by its signature (each tensor's shape, dtype and device; a copy of each Python
argument) and by which inputs share memory; a later call with another signature or sharing is
refused with a JitError that says what changed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyedu.runtime.device import Buffer
from tinyedu.tensor import Tensor


class JitError(RuntimeError):
    """What TinyJit cannot replay (the message says what changed and what to do instead)."""


Copies = list[tuple[int, Any, Buffer]]  # inputs copied in: (position, the viewed memory or None, the copy)


def realized_inputs(args: tuple, kwargs: dict) -> tuple[tuple, dict, list[Tensor], Copies]:
    """Each tensor argument in memory of its own, in element order (a replay swaps that memory), and the
    inputs given as copies: (position, the memory the view was taken from or None, the copy)."""
    inputs: list[Tensor] = []
    copies: Copies = []

    def prepare(x: Any) -> Any:
        if not isinstance(x, Tensor):
            return x
        lazydata = x.lazydata
        in_order = not lazydata.is_view or (lazydata.st.contiguous and lazydata.size == lazydata.base.size)
        if in_order and not lazydata.is_const():
            x.realize()  # its base is the memory the kernels read
        else:
            origin = None if lazydata.is_const() else lazydata.base.realized
            x = x.contiguous().realize()  # a slice, a transpose, a constant: a dense copy of its own
            copies.append((len(inputs), origin, x.lazydata.base.realized))
        inputs.append(x)
        return x

    args = tuple(prepare(a) for a in args)
    kwargs = {k: prepare(kwargs[k]) for k in sorted(kwargs)}  # the signature's order, whatever the call's
    return args, kwargs, inputs, copies


def check_copies_unwritten(copies: Copies, versions: list[tuple[int, int]]) -> None:
    """After a call that ran the function: did it write memory that an input was copied from, or a copy?"""
    for (k, origin, copy), (origin_version, copy_version) in zip(copies, versions, strict=True):
        if copy.version != copy_version:
            raise JitError(copy_written(k))
        if origin is not None and origin.version != origin_version:
            raise JitError(view_written(k))


def copy_written(k: int) -> str:
    return (f"TinyJit: the step writes input {k} (assign), but that argument is a view that reorders or "
            "selects part of a buffer, or a constant, which TinyJit copies into memory of its own: the write "
            "would not reach your tensor. Pass a tensor with memory of its own (x.clone().realize())")


def view_written(k: int) -> str:
    return (f"TinyJit: input {k} is a view (a slice, a transpose) of memory that the step writes (assign); "
            "TinyJit copies such a view before the step, so it would not see the write. Pass the whole "
            "tensor and take the view inside the step, or copy it yourself first (x.clone().realize())")


def memory_sharing(buffers: list[Buffer]) -> tuple[int, ...]:
    """For each input, the first input with the same memory: (0, 1) for two tensors, (0, 0) for one
    tensor passed twice (or two views that regroup one buffer)."""
    first: dict[int, int] = {}
    return tuple(first.setdefault(id(b), k) for k, b in enumerate(buffers))


def sharing_changed(now: tuple[int, ...], was: tuple[int, ...]) -> str:
    k = next(k for k, (a, b) in enumerate(zip(now, was, strict=True)) if a != b)
    j = now[k] if now[k] != k else was[k]
    shared_now = now[k] == j
    return (f"TinyJit: inputs {j} and {k} {'are' if shared_now else 'are not'} the same memory on this call "
            "(the same tensor passed twice, or views of one buffer), but "
            f"{'were not' if shared_now else 'were'} when the step was recorded, and the recorded kernels "
            f"{'read and write them as two buffers' if shared_now else 'read one buffer for both'}. Pass "
            "arguments that share memory the same way on every call (x.clone().realize() gives one its own), "
            "or use one TinyJit for each way")


def call_signature(args: tuple, kwargs: dict) -> tuple:
    """What a later call must repeat: each argument's position (or keyword) and what it is."""
    def describe(x: Any) -> tuple:
        if isinstance(x, Tensor):
            return ("tensor", x.shape, x.dtype, x.device)
        return ("value", frozen(x))
    return tuple((n, *describe(a)) for n, a in enumerate(args)) + tuple((k, *describe(v))
                                                                         for k, v in sorted(kwargs.items()))


def frozen(x: Any) -> Any:
    """A Python argument as a value that later calls compare with: its type and a copy of its contents (a
    list changed in place between calls counts as changed; 2 and 2.0 differ, as they may steer dtypes)."""
    if isinstance(x, Tensor):
        raise JitError("TinyJit: a Tensor inside a list, tuple or dict argument would be replayed as the "
                       "recorded one; pass each tensor as an argument of its own")
    if isinstance(x, (list, tuple)):
        return (type(x), tuple(frozen(v) for v in x))
    if isinstance(x, dict):
        return (dict, tuple((k, frozen(v)) for k, v in x.items()))
    if isinstance(x, (set, frozenset)):
        return (type(x), frozenset(x))
    if isinstance(x, np.ndarray):
        return (np.ndarray, x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, float) and x != x:
        return (float, "nan")  # (nan == nan is False: the same nan is not a change)
    return (type(x), x)


def shown(entry: list) -> str:
    """An argument as a signature describes it, readable in an error."""
    if entry[0] == "tensor":
        return f"a tensor of shape {entry[1]}"
    kind, value = entry[1][0], entry[1][-1]
    if kind in (bool, int, float, str, type(None)):
        return repr(float("nan") if value == "nan" and kind is float else value)
    if kind in (list, tuple, dict, set, frozenset, np.ndarray):
        return f"a {kind.__name__} with other contents"
    return repr(value)
