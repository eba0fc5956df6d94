"""Chapter 11 (notebook 11: exporting a model to C): the exercises and their checkers.

Implement-this: `11.place_buffers` (the memory plan's placement, plugged in as
`tinyedu.export.memory.place_buffers`) and `11.buffer_lifetimes` (when each intermediate buffer is
alive, plugged in as `tinyedu.export.program.buffer_lifetimes`). Both are then used to export a
small convolutional network, whose C program is compiled and run against tinyedu.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Callable

import numpy as np

from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.export import memory, program
from tinyedu.export.memory import ALIGNMENT, Allocation
from tinyedu.nn import BatchNorm2d, Conv2d, Linear
from tinyedu.tensor import Tensor


class _Net:
    """A small CNN whose activation `h` is read by two later kernels (the pooling and the mean), so an
    intermediate buffer's first reader and last reader differ."""

    def __init__(self) -> None:
        self.conv, self.bn, self.head = Conv2d(1, 4, 3), BatchNorm2d(4), Linear(4 * 6 * 6, 10)

    def __call__(self, x: Tensor) -> Tensor:
        h = self.bn(self.conv(x)).relu()
        return self.head(h.max_pool2d(2).flatten(1)) + h.mean(axis=(1, 2, 3)).reshape(-1, 1)


def _run_exported(hook: str, answer: Callable) -> tuple[program.ExportedProgram, str]:
    """Export a small network with the answer plugged in; compile and run it when a C compiler exists."""
    Tensor.manual_seed(0)
    net = _Net()
    x = np.random.default_rng(0).standard_normal((2, 3, 1, 14, 14)).astype(np.float32)
    owner = memory if hook == "place_buffers" else program
    with plug(owner, hook, answer) as plugged:
        exported = program.export_c(net, Tensor(x[0]), name="net")
    plugged.require_called(hook)
    if shutil.which(exported.target.compiler[0]) is None:
        return exported, "(no C compiler here, so the program was not run)"
    with tempfile.TemporaryDirectory() as folder:
        (out,) = exported.run(exported.compile(folder), x)
    want = np.stack([net(Tensor(b)).numpy() for b in x])
    if not np.allclose(out, want, rtol=1e-4, atol=1e-5):
        raise AssertionError("the exported program, compiled with your answer plugged in, computes different "
                             "numbers than tinyedu: two buffers that are alive together share memory")
    return exported, "the exported network compiles, runs and matches tinyedu"


# -- exercise: placing the buffers -----------------------------------------------------------------------
def _overlap_hint(buffers: dict, offsets: dict) -> str | None:
    keys = list(buffers)
    for i, a in enumerate(keys):
        (fa, la), na = buffers[a]
        for b in keys[i + 1:]:
            (fb, lb), nb = buffers[b]
            alive_together = fa <= lb and fb <= la
            share = offsets[a] < offsets[b] + nb and offsets[b] < offsets[a] + na
            if alive_together and share:
                when = max(fa, fb)
                touch = " (one is read by the call that writes the other: both are alive during it)" \
                    if la == fb or lb == fa else ""
                return (f"buffers {a!r} (calls {fa}..{la}, {na} bytes at {offsets[a]}) and {b!r} (calls "
                        f"{fb}..{lb}, "
                        f"{nb} bytes at {offsets[b]}) are both alive at call {when}{touch} and share bytes")
    return None


_CASES = {
    "a chain of layers": {f"layer{k}": ((k, k + 1), 1000) for k in range(6)},
    "one long-lived buffer": {"long": ((0, 5), 256), "a": ((0, 1), 512), "b": ((2, 3), 512),
                              "c": ((4, 5), 512)},
    "read and written by the same call": {"x": ((0, 1), 100), "y": ((1, 2), 100), "z": ((2, 2), 100)},
}


@exercise("11.place_buffers", answer="place_buffers", title="The memory plan: an offset for every buffer",
          hook="tinyedu.export.memory.place_buffers")
def check_place_buffers(place_buffers: Callable[[dict], dict]) -> str:
    if not callable(place_buffers):
        raise AssertionError(f"place_buffers: expected a function, got {type(place_buffers).__name__}")
    rng = np.random.default_rng(0)
    cases = dict(_CASES)
    for n in range(5):
        firsts = rng.integers(0, 12, 12)
        cases["random lifetimes "
              f"#{n}"] = {f"b{k}": ((int(f), int(f + rng.integers(0, 4))), int(rng.integers(1, 3000)))
                                           for k, f in enumerate(firsts)}
    for what, buffers in cases.items():
        offsets = place_buffers(dict(buffers))
        if not isinstance(offsets, dict) or set(offsets) != set(buffers):
            raise AssertionError(f"place_buffers on {what}: return a dict with an offset for every key "
                                 f"{sorted(buffers)}, got {offsets!r}")
        bad = [k for k, o in offsets.items()
               if not isinstance(o, (int, np.integer)) or o < 0 or o % ALIGNMENT]
        if bad:
            raise AssertionError(f"place_buffers on {what}: the offsets of {bad} are "
                                 f"{[offsets[k] for k in bad]}; "
                                 f"every offset must be an int >= 0 and a multiple of {ALIGNMENT} (round up "
                                 "with "
                                 f"-(-n // {ALIGNMENT}) * {ALIGNMENT})")
        hint = _overlap_hint(buffers, offsets)
        if hint:
            raise AssertionError(f"place_buffers on {what}: {hint}. Only buffers whose lifetimes do not "
                                 "overlap "
                                 "may share memory.")
        allocations = {k: Allocation(offsets[k], n, f, la) for k, ((f, la), n) in buffers.items()}
        size = max(-(-(a.offset + a.nbytes) // ALIGNMENT) * ALIGNMENT for a in allocations.values())
        unplanned = sum(-(-n // ALIGNMENT) * ALIGNMENT for _, n in buffers.values())
        peak = memory.MemoryPlan(allocations, size).peak()
        if what == "a chain of layers" and size >= unplanned:
            raise AssertionError(f"place_buffers on a chain of 6 layers uses {size} bytes, as much as one "
                                 "buffer "
                                 "per kernel: reuse the memory of a buffer once its last reader has run (on "
                                 "a "
                                 "chain, two buffers are alive at a time)")
        if size > 1.5 * peak + ALIGNMENT * len(buffers):
            raise AssertionError(f"place_buffers on {what} needs an arena of {size} bytes, but at most "
                                 f"{peak} are "
                                 "alive at once: place each buffer at the lowest offset where it fits (try "
                                 "the "
                                 "largest buffers first)")
    _, ran = _run_exported("place_buffers", place_buffers)
    return f"no two live buffers share a byte, the arenas stay near the lower bound; {ran}."


# -- exercise: lifetimes ---------------------------------------------------------------------------------
@exercise("11.buffer_lifetimes", answer="buffer_lifetimes", title="When is each intermediate buffer alive?",
          hook="tinyedu.export.program.buffer_lifetimes")
def check_buffer_lifetimes(buffer_lifetimes: Callable[[list], dict]) -> str:
    if not callable(buffer_lifetimes):
        raise AssertionError(f"buffer_lifetimes: expected a function, got {type(buffer_lifetimes).__name__}")
    Tensor.manual_seed(0)
    exported = program.export_c(_Net(), Tensor(np.zeros((3, 1, 14, 14), dtype=np.float32)), name="net")
    want = program.buffer_lifetimes(exported.calls)
    got = buffer_lifetimes(exported.calls)
    if not isinstance(got, dict):
        raise AssertionError(f"buffer_lifetimes: return a dict buffer -> (first call, last call), got "
                             f"{type(got).__name__}")
    extra = [b for b in got if getattr(b, "role", None) != "scratch"]
    if extra:
        roles = sorted({getattr(b, "role", type(b).__name__) for b in extra})
        raise AssertionError(f"buffer_lifetimes: it lists buffers with role {roles}; only the intermediate "
                             "buffers (role 'scratch') go into the arena: inputs, outputs and weights have "
                             "memory of their own")
    missing = [b.name for b in want if b not in got]
    if missing:
        raise AssertionError(f"buffer_lifetimes: no lifetime for {missing}; every scratch buffer that a call "
                             "writes needs one")
    for b, span in want.items():
        if tuple(got[b]) == span:
            continue
        first, last = got[b]
        if first != span[0]:
            hint = "the first call is the one that writes the buffer (it is call.buffers[0])"
        elif last == span[0]:
            hint = "a buffer stays alive until the last call that reads it (appears in call.buffers[1:])"
        else:
            hint = "the last call is the last one that lists the buffer among its inputs, call.buffers[1:]"
        raise AssertionError(f"buffer_lifetimes: {b.name} is written by call {span[0]} and last read by call "
                             f"{span[1]}, you said {tuple(got[b])}. Hint: {hint}.")
    _, ran = _run_exported("buffer_lifetimes", buffer_lifetimes)
    return f"every intermediate buffer's lifetime is right; {ran}."

