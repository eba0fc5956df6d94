"""The error classes tinyedu's Tensor API raises where PyTorch raises a RuntimeError.

tinyedu words its errors for a learner and raises them as the Python class that says what went
wrong: a ValueError for a shape or value that does not fit, a TypeError for a dtype an op is not
defined on. PyTorch raises RuntimeError for most of these, so code ported from PyTorch that says
`except RuntimeError:` would miss tinyedu's. Each class here is both: a ShapeError is a ValueError
*and* a RuntimeError, so `except ValueError` and `except RuntimeError` both catch it. Argument-type
mistakes (a string where a number goes) stay plain TypeErrors, as in PyTorch.

This module imports nothing from tinyedu, so every layer can raise these.
"""

from __future__ import annotations


class ShapeError(ValueError, RuntimeError):
    """Shapes or axes that do not fit the op: matmul's inner sizes, a reshape to another element
    count, a permutation that is not one, an axis named twice, a kernel larger than its input."""


class DTypeError(TypeError, RuntimeError):
    """An op that is not defined on this dtype, e.g. a bitwise op on floats (PyTorch says
    "not implemented for 'Float'")."""


class DeviceError(ValueError, RuntimeError):
    """Tensors on different devices meet in one op (PyTorch: "Expected all tensors to be on the
    same device")."""


class ArgumentError(ValueError, RuntimeError):
    """An argument value the op refuses where PyTorch raises a RuntimeError: clamp with neither
    bound, a zero step, a negative count, a mode the op does not have."""


class UnsupportedError(ValueError, NotImplementedError):
    """A mode or option the op does not have, e.g. pad(mode="typo"): PyTorch raises
    NotImplementedError (itself a RuntimeError) for these."""
