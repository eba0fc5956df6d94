"""Memoization for the immutable shape objects (View, ShapeTracker).

Views and ShapeTrackers never change once made, so a question asked of one (reshape it to (4, 16);
what is its largest index?) always has the same answer. A training step asks the same questions
every step, with the same shapes: the lazy graph, the scheduler and the kernels all move views
around. Remembering the answers removes most of the Python time a step spends on shapes.

- `cached_hash`: a frozen dataclass hashes all its fields on every dict lookup; this computes the
  hash once per object (dict lookups keyed by trackers happen for every graph node). `same_fields`
  compares two by identity first, then by that hash, before comparing fields.
- `@memoized`: remembers a function's result per arguments, in a bounded dict (cleared when full,
  which is rare and cheap). Lists in the arguments are looked up as tuples, but on a miss the
  function gets the arguments exactly as given, so its checks and error messages are unchanged.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from tinyedu.core.helpers import cached_hash

F = TypeVar("F", bound=Callable[..., Any])
MAX_ENTRIES = 20_000  # per function; a long session with many shapes starts over instead of growing
_MISSING = object()


def same_fields(self: Any, other: Any) -> bool:
    """__eq__ for a frozen dataclass with `cached_hash`: the same object, or the same class, hash and
    fields. The dataclass's own __eq__ builds and compares tuples of all fields even for an object
    compared with itself, which the lazy graph does for every view it makes."""
    if self is other:
        return True
    if other.__class__ is not self.__class__:
        return NotImplemented
    mine, theirs = self.__dict__.get("_hash"), other.__dict__.get("_hash")  # (cached_hash, without calls)
    if mine is None or theirs is None:
        mine, theirs = cached_hash(self), cached_hash(other)
    return mine == theirs and all(
        getattr(self, name) == getattr(other, name) for name in self.__dataclass_fields__)


def _frozen(x: Any) -> Any:
    return tuple(_frozen(e) for e in x) if isinstance(x, (list, tuple)) else x


def memoized(function: F) -> F:
    """Remember `function`'s results (it must be a pure function of hashable, immutable arguments)."""
    cache: dict[Any, Any] = {}

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        key = (args, tuple(sorted(kwargs.items()))) if kwargs else args
        try:
            hit = cache.get(key, _MISSING)
        except TypeError:  # a list somewhere: look it up as a tuple
            try:
                key = _frozen(key)
                hit = cache.get(key, _MISSING)
            except TypeError:  # something unhashable: no memo, just the answer
                return function(*args, **kwargs)
        if hit is _MISSING:
            hit = function(*args, **kwargs)
            if len(cache) >= MAX_ENTRIES:
                cache.clear()
            cache[key] = hit
        return hit

    wrapper.cache = cache  # type: ignore[attr-defined]
    wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]  # as functools.cache has
    return wrapper  # type: ignore[return-value]
