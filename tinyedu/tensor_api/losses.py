"""Loss functions, with PyTorch's names, arguments and reductions ('mean', 'sum', 'none').

Each is a few lines on top of log_softmax, log, softplus and a one-hot mask; the numerically
delicate parts (huge logits, probabilities of exactly 0 or 1) are handled the way PyTorch does,
and the comments say how.
"""

from __future__ import annotations

import numpy as np

from tinyedu.core.dtype import dtypes
from tinyedu.core.errors import ArgumentError, DTypeError, ShapeError
from tinyedu.tensor_api.base import TensorLike

REDUCTIONS = ("mean", "sum", "none")


def _reduce(loss: TensorLike, reduction: str, op: str) -> TensorLike:
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def _check_tensor(x: TensorLike, value: object, name: str, op: str) -> None:
    """The argument `name` of the loss of x must be a tensor (of x's class)."""
    if not isinstance(value, type(x)):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")


class LossMixin:
    def mse_loss(self: TensorLike, target: TensorLike, reduction: str = "mean") -> TensorLike:
        """Mean squared error: (x - target)^2, averaged (target broadcasts against x, as in PyTorch)."""
        _check_tensor(self, target, "target", "mse_loss")
        return _reduce((self - target).square(), reduction, "mse_loss")

    def l1_loss(self: TensorLike, target: TensorLike, reduction: str = "mean") -> TensorLike:
        """Mean absolute error: |x - target|, averaged."""
        _check_tensor(self, target, "target", "l1_loss")
        return _reduce((self - target).abs(), reduction, "l1_loss")

    def binary_cross_entropy(self: TensorLike, target: TensorLike, reduction: str = "mean") -> TensorLike:
        """-(t log p + (1 - t) log(1 - p)) for probabilities p = self (e.g. after sigmoid).

        As in PyTorch each log is clamped to >= -100, so p = 0 or 1 exactly (a saturated sigmoid in
        float32) gives a large finite loss instead of inf. Prefer binary_cross_entropy_with_logits,
        which never forms p at all.
        """
        self._check_same_shape(target, "binary_cross_entropy")
        p = self._float()
        return _reduce(-(target * _clamped_log(p) + (1 - target) * _clamped_log(1 - p)), reduction,
                       "binary_cross_entropy")

    def binary_cross_entropy_with_logits(self: TensorLike, target: TensorLike, reduction: str = "mean",
                                         pos_weight: TensorLike | None = None) -> TensorLike:
        """Binary cross-entropy of sigmoid(self), computed from the logits x without overflow.

        -log(sigmoid(x)) = softplus(-x) and -log(1 - sigmoid(x)) = x + softplus(-x), and softplus is
        computed stably, so the loss is (1 - t) x + w softplus(-x) with w = 1 + (pos_weight - 1) t
        (w = 1 without pos_weight; pos_weight > 1 makes missed positives cost more).
        """
        self._check_same_shape(target, "binary_cross_entropy_with_logits")
        x = self._float()
        weight = 1 if pos_weight is None else 1 + (pos_weight - 1) * target
        loss = (1 - target) * x + weight * (-x).softplus()
        return _reduce(loss, reduction, "binary_cross_entropy_with_logits")

    # ---- tinygrad's names ----
    def binary_crossentropy(self: TensorLike, y: TensorLike, reduction: str = "mean") -> TensorLike:
        """tinygrad's name for binary_cross_entropy (here with PyTorch's clamp of each log at -100)."""
        return self.binary_cross_entropy(y, reduction)

    def binary_crossentropy_logits(self: TensorLike, y: TensorLike, reduction: str = "mean") -> TensorLike:
        """tinygrad's name for binary_cross_entropy_with_logits."""
        return self.binary_cross_entropy_with_logits(y, reduction)

    def sparse_categorical_crossentropy(self: TensorLike, y: TensorLike, ignore_index: int = -1,
                                        label_smoothing: float = 0.0) -> TensorLike:
        """tinygrad's cross entropy: classes on the *last* axis, ignore_index -1, the mean over the
        targets that are not ignored. (cross_entropy is PyTorch's: classes on axis 1, -100.)"""
        _check_tensor(self, y, "y", "sparse_categorical_crossentropy")
        if self.ndim == 0:
            raise ValueError("sparse_categorical_crossentropy: the input needs a class axis (the last)")
        logits = self.movedim(-1, 1) if self.ndim > 2 else self
        return logits.cross_entropy(y, label_smoothing=label_smoothing, ignore_index=ignore_index)

    def nll_loss(self: TensorLike, target: TensorLike, reduction: str = "mean", ignore_index: int = -100,
                 weight: TensorLike | None = None) -> TensorLike:
        """Negative log-likelihood: -self[n, target[n]] for log-probabilities self of shape (N, C) (or (C,),
        or (N, C, d1, ...)), with class indices as target. Targets equal to ignore_index count for nothing,
        and 'mean' averages over the others, as in PyTorch. weight (C,) scales each target's loss by its
        class's weight, and 'mean' is then PyTorch's weighted mean: sum(w[t] * loss) / sum(w[t])."""
        return self._class_loss(self, target, reduction, ignore_index, 0.0, "nll_loss", weight)

    def cross_entropy(self: TensorLike, target: TensorLike, reduction: str = "mean",
                      label_smoothing: float = 0.0, ignore_index: int = -100) -> TensorLike:
        """The classification loss on logits: nll_loss(log_softmax(x, class axis), target).

        target is either class indices (integers, shape = input without the class axis) or class
        probabilities (floats, the input's shape). label_smoothing = e mixes the target with the
        uniform distribution: (1 - e) * loss + e * mean over classes of -log p.
        """
        if not isinstance(label_smoothing, (int, float)) or not 0.0 <= label_smoothing <= 1.0:
            raise ArgumentError("cross_entropy: label_smoothing must be a number in [0, 1], got "
                                f"{label_smoothing!r}")
        _check_tensor(self, target, "target", "cross_entropy")
        if self.ndim == 0:
            raise ShapeError("cross_entropy: the input needs a class axis: shape (C,), (N, C) or (N, C, d1, "
                             "...)")
        class_axis = 1 if self.ndim >= 2 else 0
        logp = self.log_softmax(class_axis)
        if target.dtype.is_float:  # class probabilities
            self._check_same_shape(target, "cross_entropy")
            n_classes = self.shape[class_axis]
            if label_smoothing:
                target = target * (1 - label_smoothing) + label_smoothing / n_classes
            return _reduce(-(logp * target).sum(class_axis), reduction, "cross_entropy")
        return self._class_loss(logp, target, reduction, ignore_index, label_smoothing, "cross_entropy")

    def _class_loss(self: TensorLike, logp: TensorLike, target: TensorLike, reduction: str, ignore_index: int,
                    smoothing: float, op: str, weight: TensorLike | None = None) -> TensorLike:
        """-logp at each target class (a one-hot mask picks it), maybe smoothed, with ignored targets."""
        _check_tensor(self, target, "target", op)
        if logp.ndim == 0:
            raise ValueError(f"{op}: the input needs a class axis: shape (C,), (N, C) or (N, C, d1, ...)")
        class_axis = 1 if logp.ndim >= 2 else 0
        n_classes = logp.shape[class_axis]
        expected = logp.shape[:class_axis] + logp.shape[class_axis + 1:]
        if target.dtype.is_float or target.dtype == dtypes.bool:
            raise DTypeError(f"{op}: target must hold class indices (integers), got {target.dtype.name}")
        if target.shape != expected:
            raise ValueError(f"{op}: target of shape {target.shape} does not fit input of shape "
                             f"{logp.shape}; class-index targets must have shape {expected} (the input "
                             "without its class axis)")
        if reduction not in REDUCTIONS:
            raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
        values = target.lazydata.known_values()  # data given by the user: checked without running anything
        if values is None and target.numel():  # computed on the device: checking it means running it
            bad = (target != ignore_index) & ((target < 0) | (target >= n_classes))
            values = target.numpy() if bad.any().item() else None
        all_valid = False  # (known only when the values are: then no mask is needed)
        if values is not None:
            values = values.astype(np.int64)
            counted = values != ignore_index
            bad = values[counted & ((values < 0) | (values >= n_classes))]
            if bad.size:
                raise IndexError(f"{op}: target {bad.reshape(-1)[0]} is out of range for {n_classes} "
                                 f"classes; valid targets are 0..{n_classes - 1} (or "
                                 f"ignore_index={ignore_index})")
            all_valid = bool(counted.all())
        classes = _class_index(type(self), n_classes, logp.ndim - 1 - class_axis, target)
        onehot = target.unsqueeze(class_axis) == classes
        loss = -onehot.where(logp, 0.0).sum(class_axis)
        if smoothing:
            loss = (1 - smoothing) * loss - smoothing * logp.mean(class_axis)
        if all_valid and weight is None:  # every target counts once: no mask, and 'mean' divides by the count
            if reduction == "mean":  # (the same division as by share.sum() below, of the same float32 count)
                return loss.sum() / target.numel()
            return loss.sum() if reduction == "sum" else loss
        valid = target != ignore_index
        share = valid
        if weight is not None:  # each target's class weight
            weights = _class_weights(weight, logp, class_axis, op)
            share = valid.where(onehot.where(weights, 0.0).sum(class_axis), 0.0)
            loss = loss * share
        loss = valid.where(loss, 0.0)
        if reduction == "mean":
            return loss.sum() / share.sum()
        return loss.sum() if reduction == "sum" else loss

    def _check_same_shape(self: TensorLike, target: TensorLike, op: str) -> None:
        _check_tensor(self, target, "target", op)
        if target.shape != self.shape:
            raise ValueError(f"{op}: target of shape {target.shape} must have the same shape as the input "
                             f"{self.shape}")


_CLASS_INDEX: dict[tuple, object] = {}  # (class, C, trailing axes, dtype, device) -> LazyBuffer in memory
MAX_CLASS_INDEXES = 64  # (a session with many class counts and devices starts over instead of growing)


def _class_index(cls: type, n_classes: int, trailing: int, target: TensorLike) -> TensorLike:
    """0..C-1 in target's dtype on target's device, shaped (C, 1, ...) to lie along the class axis.

    A training step asks for the same one every step: making it anew means copying it from the host
    each time (a COPY node and its realize), so it is kept in memory once per class count, dtype and
    device. Nothing writes to it: the caller gets a new Tensor over it and only compares against it.
    Multi-device targets (several buffers) get a fresh one.
    """
    device = target.device
    # target's own dtype spares the comparison a cast; one narrower than 32 bits might not hold C - 1
    dtype = target.dtype if target.dtype.itemsize >= 4 else dtypes.int32
    if not isinstance(device, str):
        return cls.arange(n_classes, device=device).cast(dtype).reshape((n_classes,) + (1,) * trailing)
    key = (cls, n_classes, trailing, dtype, device)
    cached = _CLASS_INDEX.get(key)
    if cached is None or cached.base.realized is None:
        if len(_CLASS_INDEX) >= MAX_CLASS_INDEXES:
            _CLASS_INDEX.clear()
        classes = cls(np.arange(n_classes).reshape((n_classes,) + (1,) * trailing), device=device,
                      dtype=dtype).realize()
        cached = _CLASS_INDEX[key] = classes.lazydata
    return cls._wrap(cached)


def _class_weights(weight: TensorLike, logp: TensorLike, class_axis: int, op: str) -> TensorLike:
    """weight (C,), checked, as a column along the class axis of logp; constants, as in PyTorch
    (which refuses a weight that requires grad)."""
    _check_tensor(logp, weight, "weight", op)
    n_classes = logp.shape[class_axis]
    if weight.shape != (n_classes,) or not weight.dtype.is_float:
        raise ValueError(f"{op}: weight must be a float tensor of shape ({n_classes},), one weight per "
                         f"class, got {weight.dtype.name} of shape {weight.shape}")
    return weight.detach().reshape((n_classes,) + (1,) * (logp.ndim - 1 - class_axis))


def _clamped_log(x: TensorLike) -> TensorLike:
    """log(x), but never below -100 (PyTorch's BCE clamp), with a finite gradient even at x = 0.

    log(0) = -inf, and its gradient 1/0 would turn into NaN when the clamp multiplies it by 0. So we
    take the log of a safe stand-in (1 where x is 0) and pick -100 with `where`, which sends no
    gradient at all into the branch it did not choose.
    """
    positive = x > 0
    return positive.where(positive.where(x, 1.0).log(), -100.0).clamp(min=-100.0)
