"""Row-sparse cotangents: the gradient of a table that was only read at a few rows.

The rule of ``nn.embedding(table, ids)`` touches ``len(unique(ids))`` rows of a
table that may have a hundred thousand.  Scattering that gradient densely would
cost a full table of zeros per step, so the rule returns a :class:`RowSparse`:

    RowSparse(rows, values, shape)  # rows sorted and unique; values[i] is row rows[i]

It behaves like the dense array it stands for wherever cotangents flow:

* ``sparse + dense`` (either order) is a dense copy of ``dense`` with the rows added;
* ``sparse + sparse`` is a :class:`RowSparse` over the union of rows;
* ``sparse * scalar``, ``-sparse`` and ``sparse / scalar`` stay sparse;
* any other NumPy operation (a ufunc, ``np.asarray``) sees the dense array.

``to_dense()`` is what ``support.finalize`` calls before a gradient is handed to
the user; ``s2sad.optim.SGD`` applies a RowSparse gradient without densifying it.
"""

from __future__ import annotations

from numbers import Number
from typing import Any

import numpy as np

__all__ = ["RowSparse", "coalesce"]


class RowSparse:
    """A dense array of ``shape`` that is zero except at ``rows`` (axis 0)."""

    __slots__ = ("rows", "shape", "values")

    def __init__(self, rows: np.ndarray, values: np.ndarray, shape: tuple) -> None:
        self.rows = np.asarray(rows, dtype=np.intp)
        self.values = np.asarray(values)
        self.shape = tuple(shape)
        if self.values.shape != (self.rows.size, *self.shape[1:]):
            raise ValueError(
                f"RowSparse values of shape {self.values.shape} do not fit "
                f"{self.rows.size} rows of a {self.shape} array"
            )

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def __repr__(self) -> str:
        return (
            f"RowSparse({self.rows.size} of {self.shape[0]} rows, "
            f"shape={self.shape}, dtype={self.dtype})"
        )

    def to_dense(self, out: np.ndarray | None = None) -> np.ndarray:
        """The dense array this stands for (a fresh array, or written into ``out``)."""
        if out is None or out.shape != self.shape:
            out = np.zeros(self.shape, dtype=self.dtype)
        else:
            out.fill(0)
        out[self.rows] = self.values
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if copy is False:
            raise ValueError("a RowSparse becomes a dense array only by copying")
        dense = self.to_dense()
        return dense if dtype is None else dense.astype(dtype, copy=False)

    def copy(self) -> RowSparse:
        return RowSparse(self.rows.copy(), self.values.copy(), self.shape)

    def astype(self, dtype: Any, copy: bool = True) -> RowSparse:
        return RowSparse(self.rows, self.values.astype(dtype, copy=copy), self.shape)

    # -- arithmetic --------------------------------------------------------------

    def __add__(self, other: Any) -> Any:
        if isinstance(other, RowSparse):
            return self._add_sparse(other)
        if np.shape(other) == self.shape:
            return self._add_dense(other)
        return self.to_dense() + other

    __radd__ = __add__

    def __mul__(self, other: Any) -> Any:
        if isinstance(other, Number) or np.ndim(other) == 0:
            return RowSparse(self.rows, self.values * other, self.shape)
        return self.to_dense() * other

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Any:
        if isinstance(other, Number) or np.ndim(other) == 0:
            return RowSparse(self.rows, self.values / other, self.shape)
        return self.to_dense() / other

    def __neg__(self) -> RowSparse:
        return RowSparse(self.rows, -self.values, self.shape)

    def __sub__(self, other: Any) -> Any:
        return self + (-other)

    def __rsub__(self, other: Any) -> Any:
        return (-self) + other

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kw: Any) -> Any:
        """``ndarray + RowSparse`` lands here: cheap paths kept, the rest densified."""
        if method == "__call__" and not kw and len(inputs) == 2:
            a, b = inputs
            if ufunc is np.add:
                return b + a if isinstance(b, RowSparse) else a + b
            if ufunc is np.multiply:
                return b * a if isinstance(b, RowSparse) else a * b
        dense = [x.to_dense() if isinstance(x, RowSparse) else x for x in inputs]
        return getattr(ufunc, method)(*dense, **kw)

    def _add_dense(self, dense: Any) -> np.ndarray:
        out = np.array(dense, dtype=np.result_type(dense, self.values), copy=True)
        out[self.rows] += self.values  # rows are unique, so fancy += is exact
        return out

    def _add_sparse(self, other: RowSparse) -> RowSparse:
        if other.shape != self.shape:
            raise ValueError(f"cannot add RowSparse {self.shape} and {other.shape}")
        rows = np.concatenate([self.rows, other.rows])
        values = np.concatenate([self.values, other.values])
        return coalesce(rows, values, self.shape)


def coalesce(rows: np.ndarray, values: np.ndarray, shape: tuple) -> RowSparse:
    """Sum ``values`` that share a row: ``RowSparse`` with sorted unique rows.

    ``rows`` is any int array and ``values`` has shape ``rows.shape + shape[1:]``.
    Negative rows count from the end, as in indexing.  A stable sort keeps the
    summation order of repeated rows fixed, so results are deterministic.
    """
    flat = np.asarray(rows).ravel()
    vals = np.asarray(values).reshape(flat.size, *shape[1:])
    if flat.size and flat.min() < 0:
        flat = flat % shape[0]
    if flat.size == 0:
        return RowSparse(flat.astype(np.intp), vals, shape)
    order = np.argsort(flat, kind="stable")
    srt = flat[order]
    first = np.empty(srt.size, dtype=bool)
    first[0] = True
    np.not_equal(srt[1:], srt[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    summed = _segment_sums(vals.reshape(flat.size, -1), order, starts)
    return RowSparse(srt[starts], summed.reshape(starts.size, *shape[1:]), shape)


_LEVELS = 4  # occurrences 2.._LEVELS of each row are added level by level


def _segment_sums(
    vals: np.ndarray, order: np.ndarray, starts: np.ndarray
) -> np.ndarray:
    """Sums of the rows ``vals[order]`` over the runs that begin at ``starts``.

    The r-th occurrences of all rows (r < ``_LEVELS``) are added with one
    fancy-indexed ``+=`` per r, exact because each touches distinct rows; only
    the tails of longer runs go through ``np.add.reduceat``, whose cost is per
    run.  Rows repeat a few times in a typical batch, a few words very often,
    and this is fast for both.  The summation order is fixed: deterministic.
    """
    n = order.size
    counts = np.diff(starts, append=n)
    run = np.repeat(np.arange(starts.size), counts)  # run of each sorted position
    rank = np.arange(n) - starts[run]  # occurrence number within its run
    out = vals[order[starts]]
    for r in range(1, _LEVELS):
        at = np.flatnonzero(rank == r)
        if at.size == 0:
            return out
        out[run[at]] += vals[order[at]]
    long = counts > _LEVELS
    if long.any():
        tail_lengths = counts[long] - _LEVELS
        tail_starts = np.zeros(tail_lengths.size, dtype=np.intp)
        np.cumsum(tail_lengths[:-1], out=tail_starts[1:])
        tails = vals.T[:, order[rank >= _LEVELS]]  # (dim, rows in tails), contiguous
        out[long] += np.add.reduceat(tails, tail_starts, axis=1).T
    return out
