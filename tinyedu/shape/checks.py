"""Argument checks for the movement ops, with errors that say what would have been valid.

Each check takes the op name, the current shape and the user's argument, and returns the argument
as a tuple of Python ints (numpy ints are accepted). Wrong values raise ValueError; an axis that
does not exist raises IndexError. Every message starts with the op's name.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence  # (typing.Sequence works too, but isinstance is 3x slower with it)
from typing import Any

from tinyedu.core.helpers import prod

Shape = tuple[int, ...]


def int_tuple(op: str, what: str, value: Any) -> tuple[int, ...]:
    """`value` as a tuple of ints, or a ValueError naming the op and the bad entry."""
    if type(value) is tuple and all(type(item) is int for item in value):
        return value  # already the answer: the common case, checked first as every view op asks
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{op}: {what} must be a tuple of ints such as (2, 3), got {value!r}")
    out = []
    for item in value:
        try:
            out.append(operator.index(item))
        except TypeError:
            raise ValueError(f"{op}: {what} {tuple(value)!r} must contain ints, "
                             f"got {item!r} ({type(item).__name__})") from None
    return tuple(out)


def pairs(op: str, what: str, shape: Shape, value: Any) -> tuple[tuple[int, int], ...]:
    """One (a, b) pair of ints per axis of `shape`."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{op}: {what} must be one (a, b) pair per axis, e.g. {((0, 1),) * len(shape)}, "
                         f"got {value!r}")
    if len(value) != len(shape):
        raise ValueError(f"{op}: {what} {tuple(value)!r} has {len(value)} pairs but shape {shape} has "
                         f"{len(shape)} axes; give one (a, b) pair per axis")
    out = [int_tuple(op, what, pair) for pair in value]
    if any(len(pair) != 2 for pair in out):
        raise ValueError(f"{op}: {what} {tuple(value)!r} must be (a, b) pairs, one per axis")
    return tuple((a, b) for a, b in out)


def check_shape(op: str, shape: Any) -> Shape:
    shape = int_tuple(op, "shape", shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"{op}: shape {shape} has a negative size; sizes must be >= 0")
    return shape


def check_reshape(shape: Shape, new_shape: Any) -> Shape:
    new_shape = int_tuple("reshape", "new shape", new_shape)
    if any(s < 0 for s in new_shape):
        raise ValueError(f"reshape: new shape {new_shape} has a negative size; sizes must be >= 0 "
                         "(a -1 placeholder must be resolved before it reaches the ShapeTracker)")
    if prod(new_shape) != prod(shape):
        raise ValueError(f"reshape: cannot reshape shape {shape} ({prod(shape)} elements) to {new_shape} "
                         f"({prod(new_shape)} elements); the number of elements must match")
    return new_shape


def check_permute(shape: Shape, order: Any) -> Shape:
    order = int_tuple("permute", "order", order)
    if len(order) != len(shape):
        raise ValueError(f"permute: order {order} has {len(order)} axes but shape {shape} has "
                         f"{len(shape)}; give each axis 0..{len(shape) - 1} once, "
                         f"e.g. {tuple(reversed(range(len(shape))))}")
    for axis in order:
        if not 0 <= axis < len(shape):
            raise IndexError(f"permute: axis {axis} in order {order} is out of range for shape {shape}; "
                             f"valid axes are 0..{len(shape) - 1}")
    if sorted(order) != list(range(len(shape))):
        raise ValueError(f"permute: order {order} repeats an axis; give each axis 0..{len(shape) - 1} "
                         f"exactly once, e.g. {tuple(reversed(range(len(shape))))}")
    return order


def check_expand(shape: Shape, new_shape: Any) -> Shape:
    new_shape = int_tuple("expand", "new shape", new_shape)
    if len(new_shape) != len(shape):
        raise ValueError(f"expand: new shape {new_shape} has {len(new_shape)} axes but shape {shape} has "
                         f"{len(shape)}; reshape first to add size-1 axes")
    for axis, (old, new) in enumerate(zip(shape, new_shape, strict=True)):
        if new < 0:
            raise ValueError(f"expand: new shape {new_shape} has a negative size; sizes must be >= 0")
        if old != new and old != 1:
            raise ValueError(f"expand: cannot expand shape {shape} to {new_shape}: axis {axis} has size "
                             f"{old}; only size-1 axes can be expanded, other axes must keep their size")
    return new_shape


def check_pad(shape: Shape, padding: Any) -> tuple[tuple[int, int], ...]:
    padding = pairs("pad", "padding", shape, padding)
    for axis, (before, after) in enumerate(padding):
        if before < 0 or after < 0:
            raise ValueError(f"pad: padding {padding} for shape {shape} is negative at axis {axis}; "
                             "pad amounts must be >= 0 (use shrink to cut elements away)")
    return padding


def check_shrink(shape: Shape, bounds: Any) -> tuple[tuple[int, int], ...]:
    bounds = pairs("shrink", "bounds", shape, bounds)
    for axis, ((start, end), size) in enumerate(zip(bounds, shape, strict=True)):
        if not 0 <= start <= end <= size:
            raise ValueError(f"shrink: bounds {(start, end)} at axis {axis} do not fit shape {shape}; "
                             f"each axis needs 0 <= start <= end <= size (here size {size})")
    return bounds


def check_stride(shape: Shape, steps: Any) -> Shape:
    steps = int_tuple("stride", "steps", steps)
    if len(steps) != len(shape):
        raise ValueError(f"stride: steps {steps} has {len(steps)} entries but shape {shape} has "
                         f"{len(shape)} axes; give one step per axis (1 keeps an axis as it is)")
    if 0 in steps:
        raise ValueError(f"stride: steps {steps} for shape {shape} has a 0 at axis {steps.index(0)}; "
                         "steps must be non-zero (k takes every k-th element, -1 flips)")
    return steps


def check_axes(op: str, shape: Shape, axes: Any) -> Shape:
    """Axes in -ndim..ndim-1 (negative counts from the end), normalized, each at most once."""
    axes = int_tuple(op, "axes", axes)
    ndim = len(shape)
    for axis in axes:
        if not -ndim <= axis < ndim:
            valid = f"{-ndim}..{ndim - 1}" if ndim else "none (the shape is 0-d)"
            raise IndexError(f"{op}: axis {axis} is out of range for shape {shape}; valid axes are {valid}")
    normalized = tuple(a % ndim for a in axes)
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"{op}: axes {axes} name the same axis twice for shape {shape}")
    return normalized
