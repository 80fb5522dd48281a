"""Per-step products of a loop, computed before it (the hoisting pass's helper).

Inside ``for t in range(n)``, a product ``x[:, t, :] @ w`` whose ``x`` and
``w`` the loop never changes is the same as step ``t`` of one product over the
whole ``x``.  The ``hoist`` front pass (``s2sad/transforms/front/hoist.py``)
writes, before the loop::

    x_at_w = stepwise_matmul(x, w, 1, r)      # r: the loop's range
    for t in r:
        matmul = x_at_w[:, t]                 # was: x[:, t, :] @ w

``stepwise_matmul(x, w, axis, steps)[(:,) * axis + (t,)]`` is
``x[(:,) * axis + (t,)] @ w`` for every ``t`` the loop can read.  When ``w`` is
a matrix and ``axis`` is not ``x``'s last, that is ``x @ w``: one matrix product
on ``x``'s rows (one BLAS call instead of one per step); any other case (a
vector ``w``, stacks of matrices) stacks the per-step products along ``axis``,
so the result is the same whatever the operands' dimensions.  Its adjoint rule
takes the cotangents of every step at once: one ``x.T @ g`` for ``w`` instead
of one per step, both in the layout of ``x @ w`` (no copies).

A loop may also cut its steps out of ``x`` with slices instead of an index,
``x[:, t * c : (t + 1) * c] @ w``: the pass then hands the slice's bounds as
``tiles = (a, b, p, q)``, step ``t`` being ``x[..., a * t + b : p * t + q, ...]``
along ``axis``.  When those slices tile the axis as a reshape would (``a == p
== q - b > 0``, every step's slice inside ``x``), step ``t`` is step ``t`` of
``x`` cut and reshaped to ``(..., steps, a, ...)``, and the product is the one
above; otherwise (overlapping or ragged slices, negative steps) each step's
product is computed as written and stacked, the same values.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from s2sad.runtime.reductions import into_buffer
from s2sad.runtime.registry import adjoint, nondifferentiable
from s2sad.runtime.tangents import adjoint_of_multilinear, constant, linear


def reach(steps: Any, n: int) -> int:
    """How many leading entries along the axis the loop's indices can read:
    ``max(steps) + 1`` for a range of indices that are all >= 0, else ``n``."""
    if type(steps) is range:
        if len(steps) == 0:
            return 0
        low, high = min(steps[0], steps[-1]), max(steps[0], steps[-1])
        if low >= 0:
            return min(high + 1, n)
    return n


def _index(axis: int, t: Any) -> tuple:
    return (slice(None),) * axis + (t,)


def _parts(x: Any, w: Any, axis: int, steps: Any) -> tuple:
    """(x cut to what the loop reads, how many steps, whether one product does)."""
    if type(x) is not np.ndarray:
        x = np.asarray(x)
    m = reach(steps, x.shape[axis])
    if m < x.shape[axis]:
        x = x[_index(axis, slice(0, m))]
    return x, m, np.ndim(w) == 2 and axis < x.ndim - 1


def as_matrix(a: np.ndarray) -> np.ndarray:
    """``a``'s rows as a matrix (``reshape(-1, n)`` fails on ``n == 0``)."""
    return a.reshape(
        a.size // a.shape[-1] if a.shape[-1] else math.prod(a.shape[:-1]), a.shape[-1]
    )


def _buffer(out: Any, shape: tuple, dtype: Any) -> np.ndarray | None:
    if (
        type(out) is np.ndarray
        and out.shape == shape
        and out.dtype == dtype
        and out.flags.c_contiguous
        and out.flags.writeable
    ):
        return out
    return None


def stepwise_matmul(
    x: Any, w: Any, axis: int, steps: Any, tiles: Any = None, out: Any = None
) -> Any:
    """Every step's product at once: ``out[(:,) * axis + (t,)]`` is
    ``x[(:,) * axis + (t,)] @ w`` for each ``t`` in ``steps`` (``x`` cut after
    the last step the loop reads; a negative step reads from the end, as
    ``x[..., t, ...]`` would).  With ``tiles = (a, b, p, q)``, step ``t`` of
    ``x`` is instead the slice ``a * t + b : p * t + q`` along ``axis``.
    ``out``: a buffer for the result, used when it fits."""
    if tiles is not None:
        xr = tiled(x, axis, steps, tiles)
        if xr is None:
            return _sliced_products(x, w, axis, steps, tiles)
        x = xr
    x, m, one = _parts(x, w, axis, steps)
    if m == 0:
        return np.empty((0,), dtype=np.result_type(x, w))
    if one:
        shape = x.shape[:-1] + (np.shape(w)[-1],)
        buf = _buffer(out, shape, np.result_type(x, w))
        if x.flags.c_contiguous:  # one product over the rows of every step
            rows = as_matrix(x)
            if buf is None:
                return np.matmul(rows, w).reshape(shape)
            np.matmul(rows, w, out=as_matrix(buf))
            return buf
        return np.matmul(x, w) if buf is None else np.matmul(x, w, out=buf)
    return np.stack([np.matmul(x[_index(axis, t)], w) for t in range(m)], axis=axis)


def _grads(g: Any, x0: Any, w: Any, axis: int, steps: Any, need: tuple, into) -> tuple:
    x, m, one = _parts(x0, w, axis, steps)
    dtype = np.result_type(x0, w)
    if m == 0:
        return (
            np.zeros(np.shape(x0), dtype) if need[0] else None,
            np.zeros(np.shape(w), dtype) if need[1] else None,
        )
    gx = gw = None
    if need[0]:
        gx = np.zeros(np.shape(x0), dtype=np.result_type(g, w))
    if one:
        g = np.asarray(g)
        if need[1]:
            buf = into_buffer(into, 0, np.shape(w), np.result_type(x, g))
            if x.flags.c_contiguous and g.flags.c_contiguous:
                rows, grows = as_matrix(x), as_matrix(g)
                gw = np.matmul(rows.T, grows, out=buf)
            else:
                gw = np.tensordot(x, g, axes=(list(range(x.ndim - 1)),) * 2)
        if need[0]:
            gx[_index(axis, slice(0, m))] = np.matmul(g, np.swapaxes(w, -1, -2))
        return gx, gw
    from s2sad.runtime.contractions import d_matmul  # (a rule module: loaded later)

    for t in range(m):
        at = _index(axis, t)
        gxt, gwt = d_matmul(g[at], None, x[at], w)
        if need[0]:
            gx[at] += gxt
        if need[1]:
            gw = gwt if gw is None else gw + gwt
    return gx, gw


def _all_grads(g, x, w, axis, steps, tiles, need, into) -> tuple:
    """(cotangent of x, of w) of ``stepwise_matmul(x, w, axis, steps, tiles)``."""
    if tiles is None:
        return _grads(g, x, w, axis, steps, need, into)
    xr = tiled(x, axis, steps, tiles)
    if xr is None:
        return _sliced_grads(g, x, w, axis, steps, tiles, need)
    gxr, gw = _grads(g, xr, w, axis, steps, need, into)
    if gxr is None:
        return None, gw
    gx = np.zeros(np.shape(x), dtype=gxr.dtype)
    cut = _index(axis, slice(tiles[1], tiles[1] + gxr.shape[axis] * tiles[0]))
    gx[cut] = gxr.reshape(gx[cut].shape)
    return gx, gw


@adjoint(stepwise_matmul)
def d_stepwise_matmul(g, ans, x, w, axis, steps, tiles=None, out=None):
    return _all_grads(g, x, w, axis, steps, tiles, (True, True), None) + (
        None,
        None,
        None,
    )


@adjoint(stepwise_matmul, argnum=0)
def d_stepwise_matmul_lhs(g, ans, x, w, axis, steps, tiles=None, out=None):
    return (_all_grads(g, x, w, axis, steps, tiles, (True, False), None)[0],)


@adjoint(stepwise_matmul, argnum=1)
def d_stepwise_matmul_rhs(
    g, ans, x, w, axis, steps, tiles=None, out=None, *, into=None
):
    return (_all_grads(g, x, w, axis, steps, tiles, (False, True), into)[1],)


# ================================================================ slices as steps


def _ints(values: Any) -> tuple | None:
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        return None


def tiled(x: Any, axis: int, steps: Any, tiles: Any) -> np.ndarray | None:
    """``x`` cut to the steps' slices and reshaped so that step ``t`` of the loop
    is index ``t`` along ``axis``, or None when the slices do not tile the axis
    exactly as such a reshape would (then each step is sliced as written)."""
    bounds = _ints(tiles)
    if bounds is None or type(x) is not np.ndarray or type(steps) is not range:
        return None
    a, b, p, q = bounds
    if not (a == p == q - b > 0 and b >= 0 and 0 <= axis < x.ndim):
        return None
    m = reach(steps, 1 << 62)
    if len(steps) and min(steps[0], steps[-1]) < 0 or b + m * a > x.shape[axis]:
        return None
    cut = x[_index(axis, slice(b, b + m * a))]
    return cut.reshape(x.shape[:axis] + (m, a) + x.shape[axis + 1 :])


def _layout(steps: Any) -> tuple[int, dict]:
    """(length of the stacked axis, step -> its index there): ``stacked[t]``
    reads step ``t``'s product, a negative ``t`` counting from the end."""
    ts = sorted({operator.index(t) for t in steps})
    pos = max((t + 1 for t in ts if t >= 0), default=0)
    n = pos - min((t for t in ts if t < 0), default=0)
    return n, {t: t if t >= 0 else n + t for t in ts}


def _slice_of(axis: int, tiles: tuple, t: int) -> tuple:
    a, b, p, q = tiles
    return _index(axis, slice(a * t + b, p * t + q))


def _sliced_products(x: Any, w: Any, axis: int, steps: Any, tiles: Any) -> Any:
    """Each step's product of its slice, as written, stacked along ``axis``."""
    n, where = _layout(steps)
    if n == 0:
        return np.empty((0,), dtype=np.result_type(x, w))
    parts = {t: np.matmul(x[_slice_of(axis, tiles, t)], w) for t in where}
    shapes = {p.shape for p in parts.values()}
    if len(shapes) != 1:
        raise ValueError(
            "s2sad's hoisted loop product: the loop's slices of its input give "
            f"products of different shapes {sorted(shapes)}; they cannot be "
            "computed before the loop (a ragged last slice along a batch axis)"
        )
    first = next(iter(parts.values()))
    out = np.zeros(first.shape[:axis] + (n,) + first.shape[axis:], first.dtype)
    for t, prod in parts.items():
        out[_index(axis, where[t])] = prod
    return out


def _sliced_grads(g, x, w, axis, steps, tiles, need) -> tuple:
    from s2sad.runtime.contractions import d_matmul  # (a rule module: loaded later)

    where = _layout(steps)[1]
    dtype = np.result_type(x, w)
    gx = np.zeros(np.shape(x), dtype) if need[0] else None
    gw = np.zeros(np.shape(w), dtype) if need[1] else None
    for t, j in where.items():
        at = _slice_of(axis, tiles, t)
        gxt, gwt = d_matmul(g[_index(axis, j)], None, x[at], w)
        if need[0]:
            gx[at] += gxt
        if need[1]:
            gw += gwt
    return gx, gw


# ================================================================ tangents
linear(stepwise_matmul, slots=(0, 1))  # bilinear in x and w
linear(d_stepwise_matmul_lhs, slots=(0, 3), container=True)
linear(d_stepwise_matmul_rhs, slots=(0, 2), container=True)
# g, x and w: the loop's range (restored from the tape in a gradient that is
# differentiated again) is no operand (its 'tangent' gave every step's product)
adjoint_of_multilinear(d_stepwise_matmul, slots=(0, 2, 3))


# ================================================================ a product with zeros


def matmul_zeros(a: Any, b: Any, zero: Any = None, out: Any = None) -> np.ndarray:
    """``a @ b`` where the ``peel`` pass has proved ``a`` or ``b`` all zeros (a
    loop's initial state, ``h = np.zeros(...)``, in its first iteration): zeros
    of the product's shape and dtype, without the product.  When the other
    operand holds an inf or a nan (``0 * inf`` is nan), or the shapes are not a
    matrix times a matrix, it is the product itself, as written.  ``zero``: which
    operand (0: ``a``, 1: ``b``) is the zero one, so only the other is checked;
    None checks both.  Its value is no function of the differentiated inputs:
    its gradient is zero."""
    a_ = a if type(a) is np.ndarray else np.asarray(a)
    b_ = b if type(b) is np.ndarray else np.asarray(b)
    if (
        a_.ndim >= 2
        and b_.ndim == 2
        and a_.shape[-1] == b_.shape[0]
        and a_.dtype.kind in "fc"
        and b_.dtype.kind in "fc"
        # a sum is finite only if every entry is (and allocates nothing, unlike
        # isfinite(x)); the zero operand's entries are zeros
        and (zero == 1 or np.isfinite(b_.sum()))
        and (zero == 0 or np.isfinite(a_.sum()))
    ):
        shape = a_.shape[:-1] + b_.shape[1:]
        buf = _buffer(out, shape, np.result_type(a_, b_))
        if buf is None:
            return np.zeros(shape, dtype=np.result_type(a_, b_))
        buf.fill(0)
        return buf
    return np.matmul(a, b)


nondifferentiable(matmul_zeros)
constant(matmul_zeros)
