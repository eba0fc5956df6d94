"""Hooks: run the real library with one piece of it replaced by a learner's code, then put it back.

Every stage of tinyedu looks its pieces up when it runs them: `Tensor.mul` asks the module
`tinyedu.core.function` for `Mul`, `ShapeTracker.permute` calls the View's `permute` method, the C
renderer calls `c_literal`, and so on. So replacing one of those names for a while makes the whole
pipeline, everything before and after that piece, run on the replacement:

    with plug(View, "permute", my_permute):
        (x.T @ y).numpy()          # scheduled, compiled and run with my_permute's views

`plug` restores the original when the block ends, even if it raised. Both on the way in and on
the way out it empties the caches that could hold results made without (or with) the replacement:
compiled programs are cached by kernel AST, and lazy nodes by what they compute.

The hooks the chapters use (each chapter's notebook says which one its exercise plugs into):

| hook                                  | chapter | the learner writes                            |
| ------------------------------------- | ------- | --------------------------------------------- |
| `Value.tanh`, `Value._topological_order` | 00   | a Value op with its backward; backward's order |
| `tinyedu.core.function.Mul`, `.Expand`     | 01      | a Function: forward and backward              |
| `function_composite.Softplus`, `LazyOp.toposort` | 01b | a stable Function; a walk over a DAG |
| `View.permute`, `View.pad`            | 02      | movement ops as arithmetic on a view          |
| `schedule.keeps_zero`, `schedule.store_is_cheaper` | 03 | a scheduler rule               |
| `UOpBuilder._simplify`, `Linearizer.lower_plain_reduce` | 04 | a UOp simplification; a REDUCE's loops |
| `cstyle.c_literal`, `cstyle.HELPERS["max_float32"]` | 05 | C for constants and for a NaN-aware max |
| `opts.MOVES[OptOps.UPCAST]`, `heuristics.hand_coded_optimizations` | 06 | an opt's moves; fast opts |
| `neon.vector_op`, `llvmir.int_divide` | 07      | a NEON intrinsic; LLVM IR division that never traps |
| `Optimizer.update` (a subclass), `jit.replay_can_skip` | 08 | an optimizer; which programs a replay skips |
| `models.transformer.causal_mask`, `LayerNorm.__call__` | 09 | the causal mask; LayerNorm from primitives |
| `models.lstm.lstm_cell`, `BasicBlock.__call__` | 10 | an LSTM step; a residual block |
| `export.memory.place_buffers`, `export.program.buffer_lifetimes` | 11 | the memory plan; buffer lifetimes |
| `codegen.gpu.combine_groups`, `heuristics.gpu_optimizations` | 12 | GROUP's combine; a workgroup's shape |
| `text.bpe.merge_pair`, `models.gpt.write_rows` | 13 | the BPE merge step; the KV-cache update |
| `multi.allreduce.reduce_scatter_step`, `multi.lazy.reshaped_axis` | 14 | a ring step; a sharded reshape |
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from dataclasses import dataclass
from typing import Any, Iterator, MutableMapping

from tinyedu import function_template, lazy
from tinyedu.runtime.device import Device

_MISSING = object()


def clear_caches() -> None:
    """Forget compiled programs, deduplicated lazy nodes, formula templates and memoized results, so
    nothing is reused.

    Also empties every `functools.cache`/`lru_cache` and `memo.memoized` of tinyedu's modules and
    classes. If you add a cache of another kind that could hand back something computed by a
    replaced piece, clear it here
    (the checkers notice a hook that the library never called: `Plugged.calls`).
    """
    lazy._NODES.clear()
    function_template.clear()  # (a template keeps the constant nodes it recorded)
    for backend in Device.devices.values():
        programs = getattr(backend, "programs", None)
        if isinstance(programs, dict):
            programs.clear()
    for name, module in list(sys.modules.items()):
        if name.startswith("tinyedu.") and not name.startswith("tinyedu.exercises") and module is not None:
            _clear_memoized(vars(module).values(), depth=1)


def _clear_memoized(objects: Any, depth: int) -> None:
    for obj in list(objects):
        target = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
        if isinstance(target, functools._lru_cache_wrapper) or _is_memoized(target):
            target.cache_clear()
        elif depth and isinstance(obj, type) and obj.__module__.startswith("tinyedu."):
            _clear_memoized(vars(obj).values(), depth - 1)


def _is_memoized(obj: Any) -> bool:
    """A function wrapped by `tinyedu.shape.memo.memoized` (it keeps its answers in `obj.cache`)."""
    return callable(getattr(obj, "cache_clear", None)) and isinstance(getattr(obj, "cache", None), dict)


@dataclass
class Plugged:
    """What `plug` hands back: `calls` counts how often the library called a replacement function."""

    replacement: Any
    calls: int = 0

    def require_called(self, what: str) -> None:
        """Fail loudly if the library ran without ever calling the replacement (a cache answered)."""
        if self.calls == 0:
            raise RuntimeError(f"tinyedu never called the plugged-in {what} while checking: some cache "
                               "answered for it (tinyedu.exercises.hooks.clear_caches must clear it).")


@contextlib.contextmanager
def plug(owner: Any, name: str, replacement: Any) -> Iterator[Plugged]:
    """Within the block, `owner.name` (or `owner[name]` for a dict) is `replacement`; then restored.

    `owner` is a class (a function replaces a method: `plug(Value, "tanh", tanh)`), a module
    (`plug(tinyedu.core.function, "Mul", MyMul)`) or a dict (`plug(HELPERS, "max_float32", source)`).
    The original must exist: a misspelled name raises instead of adding a new attribute nobody calls.
    A replacement function is installed behind a counter: `with plug(...) as plugged:` then
    `plugged.calls` says how often the library called it.
    """
    is_mapping = isinstance(owner, MutableMapping)
    if is_mapping:
        original = owner.get(name, _MISSING)
        inherited = False
    else:
        own = vars(owner) if hasattr(owner, "__dict__") else {}
        original = own.get(name, _MISSING)
        inherited = original is _MISSING and hasattr(owner, name)
    if original is _MISSING and not inherited:
        raise AttributeError(f"plug: {owner!r} has no {name!r} to replace; hooks only replace what exists")
    plugged = Plugged(replacement)
    installed = replacement
    if isinstance(replacement, types.FunctionType):
        @functools.wraps(replacement)
        def installed(*args: Any, **kwargs: Any) -> Any:
            plugged.calls += 1
            return replacement(*args, **kwargs)
    clear_caches()
    if is_mapping:
        owner[name] = installed
    else:
        setattr(owner, name, installed)
    try:
        yield plugged
    finally:
        if is_mapping:
            owner[name] = original
        elif inherited:
            delattr(owner, name)  # the name came from a base class: uncover it again
        else:
            setattr(owner, name, original)
        clear_caches()
