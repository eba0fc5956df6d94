"""Datasets: small generated sets for the early stages (and, later, MNIST).

Every loader returns numpy arrays `(X, y)`: `X` is float64 with one row per sample, `y` is int64
with one label per row. Generated sets take a `seed`, so a notebook draws the same points on
every machine.
"""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------------------------------------
# Generated 2-D sets (stage 0): small enough for scalar autograd, not linearly separable.
# ---------------------------------------------------------------------------------------------


def make_moons(n_samples: int = 100, noise: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaving half circles, the classic "a line cannot separate this" toy problem.

    Returns `X` of shape (n_samples, 2) and labels `y` of shape (n_samples,) in {0, 1}: 0 for the
    upper moon (centred at (0, 0)), 1 for the lower one (centred at (1, 0.5) and flipped). These
    are the same conventions as scikit-learn's `make_moons`; for a hinge loss, which wants
    labels in {-1, +1}, use `2 * y - 1`. Gaussian noise with standard deviation `noise` is added
    to every coordinate, then the rows are shuffled, all from `np.random.default_rng(seed)`.
    """
    if not isinstance(n_samples, int) or isinstance(n_samples, bool) or n_samples < 2:
        raise ValueError(f"make_moons: n_samples must be an int >= 2 (one point per moon at least), "
                         f"got {n_samples!r}")
    if not noise >= 0:
        raise ValueError(f"make_moons: noise is a standard deviation and must be >= 0, got {noise!r}")
    rng = np.random.default_rng(seed)
    n_upper = n_samples // 2
    n_lower = n_samples - n_upper
    t_upper = np.linspace(0.0, np.pi, n_upper)
    t_lower = np.linspace(0.0, np.pi, n_lower)
    upper = np.stack([np.cos(t_upper), np.sin(t_upper)], axis=1)
    lower = np.stack([1.0 - np.cos(t_lower), 0.5 - np.sin(t_lower)], axis=1)
    X = np.concatenate([upper, lower]) + rng.normal(0.0, noise, size=(n_samples, 2))
    y = np.concatenate([np.zeros(n_upper, dtype=np.int64), np.ones(n_lower, dtype=np.int64)])
    order = rng.permutation(n_samples)
    return X[order], y[order]
