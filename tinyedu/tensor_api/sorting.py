"""Sorting by counting: sort, argsort and topk (the picks keep exact bits: indexing._one_hot_pick).

Without a loop primitive, sort ranks every element by comparing it with all others (a broadcast
(n, n) grid, which fuses into one reduce kernel and is never stored): the rank of x[i] is how many
elements come before it, those strictly smaller plus the equal ones at earlier positions (so equal
values keep their order: a stable sort). Output p is then the element whose rank is p. NaN ranks
as the largest value, as in PyTorch. The cost is n^2 comparisons per sorted row, three times over
(rank, values, indices); a sorting network would need about n log^2 n but log^2 n dependent
kernels. So for a row of 1,000 elements sort does 3 million comparisons, cheap; for 40,000 it does
4.8 billion, slow, and past 2^31 grid cells per tensor (46,340 elements in one row) the grid's
int32 index would wrap, so such a sort is refused with an error that says so.
"""

from __future__ import annotations

from tinyedu.core.dtype import dtypes
from tinyedu.core.helpers import prod
from tinyedu.tensor_api.base import TensorLike
from tinyedu.tensor_api.indexing import _one_hot_pick

GRID_LIMIT = 2**31 - 1  # the largest element count a kernel's int32 index reaches


class SortingMixin:
    def sort(self: TensorLike, dim: int = -1, descending: bool = False,
             stable: bool = False,) -> tuple[TensorLike, TensorLike]:
        """(values, indices) sorted along dim, as torch.sort. Ties keep their order whether or not
        stable=True (torch only promises that with stable=True); NaN sorts as the largest value;
        the indices are int32 (torch: int64). The gradient of each value goes to its element."""
        return self._sorted(dim, descending, None, "sort")

    def argsort(self: TensorLike, dim: int = -1, descending: bool = False,
                stable: bool = False) -> TensorLike:
        """The indices that sort dim (int32), as torch.argsort; see sort."""
        return self._sorted(dim, descending, None, "argsort")[1]

    def topk(self: TensorLike, k: int, dim: int = -1, largest: bool = True, sorted: bool = True,  # noqa: A002
             ) -> tuple[TensorLike, TensorLike]:
        """(values, indices) of the k largest (largest=False: smallest) along dim, as torch.topk.
        They always come sorted, so sorted=False gives the same; among equal values the earlier
        position is taken first (torch does not promise which). Built like sort, ranking only k."""
        if not isinstance(k, int) or isinstance(k, bool):
            raise TypeError(f"topk: k must be an int, got {type(k).__name__}")
        n = self.shape[self._axis(dim, "topk")] if self.ndim else 1
        if not 0 <= k <= n:
            raise ValueError(f"topk: k={k} is out of range: dim {dim} of shape {self.shape} has {n} "
                             f"elements, so k must be in 0..{n}")
        return self._sorted(dim, largest, k, "topk")

    def _sorted(self: TensorLike, dim: int, descending: bool, k: int | None, op: str) -> tuple[TensorLike,
                TensorLike]:
        if self.ndim == 0:  # one element: sorted as a row of one
            self._axis(dim, op)
            values, indices = self.reshape(1)._sorted(0, descending, k, op)
            return (values, indices) if k == 0 else (values.reshape(()), indices.reshape(()))
        a = self._axis(dim, op)
        x = self.transpose(a, -1)
        n = x.shape[-1]
        if prod(x.shape) * n > GRID_LIMIT:
            raise ValueError(f"{op}: a tensor of shape {self.shape} along dim {dim} needs a comparison "
                             f"grid of {prod(x.shape) * n:,} cells (n^2 per row of {n}); the limit is "
                             f"{GRID_LIMIT:,}, where the kernel's int32 index would wrap. Sort fewer "
                             "or shorter rows")
        pick = _rank(x.detach(), descending).unsqueeze(-2) == _positions(x, n if k is None else k)
        values = _one_hot_pick(pick, x.unsqueeze(-2), -1)  # exact bits, -0.0 kept; scatter gradient
        indices = pick.where(type(self).arange(n, device=x.device), 0).sum(-1)
        return values.transpose(a, -1), indices.cast(dtypes.int32).transpose(a, -1)


def _rank(x: TensorLike, descending: bool) -> TensorLike:
    """How many elements of each row (the last axis) come before each element in sorted order."""
    mine, theirs = x.unsqueeze(-1), x.unsqueeze(-2)  # [..., i, j]: element i against element j
    before = theirs > mine if descending else theirs < mine
    same = mine == theirs
    if x.dtype.is_float:  # NaN is the largest value, and equal to itself
        nan_mine, nan_theirs = mine != mine, theirs != theirs
        before = before | ((nan_theirs & ~nan_mine) if descending else (nan_mine & ~nan_theirs))
        same = same | (nan_mine & nan_theirs)
    n = x.shape[-1]
    earlier = _positions(x, n) > _positions(x, n).reshape(1, n)  # j < i
    return (before | (same & earlier)).sum(-1)


def _positions(x: TensorLike, n: int) -> TensorLike:
    """0..n-1 as a column (n, 1), on x's device: output position p along the rows of a (..., n, n) grid."""
    return type(x).arange(n, device=x.device).reshape(n, 1)
