"""Per-step products of a loop, computed before it (the hoisting pass's helper).

Inside ``for t in range(n)``, a product ``x[:, t, :] @ w`` whose ``x`` and
``w`` the loop never changes is the same as step ``t`` of one product over the
whole ``x``.  The ``hoist`` front pass (``s2sad/transforms/front/hoist.py``)
writes, before the loop::

    x_at_w = stepwise_matmul(x, w, 1, r)      # r: the loop's range
    for t in r:
        matmul = x_at_w[t]                    # was: x[:, t, :] @ w

``stepwise_matmul(x, w, axis, steps)[t]`` is ``x[(:,) * axis + (t,)] @ w`` for
every ``t`` the loop can read.  When ``w`` is a matrix and ``axis`` is not
``x``'s last, that is one matrix product on ``x`` reshaped to rows (one BLAS
call instead of one per step); any other case (a vector ``w``, stacks of
matrices) stacks the per-step products, so the result is the same whatever the
operands' dimensions.  Its adjoint rule takes the cotangents of every step at
once: one ``x.T @ g`` for ``w`` instead of one per step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from s2sad.runtime.registry import adjoint, nondifferentiable
from s2sad.runtime.tangents import adjoint_of_multilinear, constant, linear


def _reach(steps: Any, n: int) -> int:
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
    m = _reach(steps, x.shape[axis])
    if m < x.shape[axis]:
        x = x[_index(axis, slice(0, m))]
    return x, m, np.ndim(w) == 2 and axis < x.ndim - 1


def _to_front(a: np.ndarray, axis: int) -> np.ndarray:
    """``np.moveaxis(a, axis, 0)`` (a view), without its argument checks."""
    if axis == 0:
        return a
    return a.transpose((axis, *range(axis), *range(axis + 1, a.ndim)))


def _from_front(a: np.ndarray, axis: int) -> np.ndarray:
    """``np.moveaxis(a, 0, axis)`` (a view)."""
    if axis == 0:
        return a
    return a.transpose((*range(1, axis + 1), 0, *range(axis + 1, a.ndim)))


def stepwise_matmul(x: Any, w: Any, axis: int, steps: Any) -> np.ndarray:
    """``out[t] = x[(:,) * axis + (t,)] @ w`` for each ``t`` in ``steps``, stacked
    on a new first axis (entries past the last step the loop reads are left out;
    a negative step reads from the end, as ``x[..., t, ...]`` would)."""
    x, m, one = _parts(x, w, axis, steps)
    if m == 0:
        return np.empty((0,), dtype=np.result_type(x, w))
    if one:
        rows = x.reshape(-1, x.shape[-1])  # a copy only when x is cut
        prod = np.matmul(rows, w).reshape(x.shape[:-1] + (np.shape(w)[-1],))
        return _to_front(prod, axis)
    return np.stack([np.matmul(x[_index(axis, t)], w) for t in range(m)])


def _grads(g: Any, x0: Any, w: Any, axis: int, steps: Any, need: tuple) -> tuple:
    x, m, one = _parts(x0, w, axis, steps)
    gx = gw = None
    if m == 0:
        return (
            np.zeros(np.shape(x0), np.result_type(x0, w)) if need[0] else None,
            np.zeros(np.shape(w), np.result_type(x0, w)) if need[1] else None,
        )
    if need[0]:
        gx = np.zeros(np.shape(x0), dtype=np.result_type(g, w))
    if one:
        gm = _from_front(np.asarray(g), axis)  # the layout of x @ w
        if need[1]:
            rows = x.reshape(-1, x.shape[-1])
            gw = np.matmul(rows.T, gm.reshape(-1, gm.shape[-1]))
        if need[0]:
            gx[_index(axis, slice(0, m))] = np.matmul(gm, np.swapaxes(w, -1, -2))
        return gx, gw
    from s2sad.runtime.contractions import d_matmul  # (a rule module: loaded later)

    for t in range(m):
        xt = x[_index(axis, t)]
        gxt, gwt = d_matmul(g[t], None, xt, w)
        if need[0]:
            gx[_index(axis, t)] += gxt
        if need[1]:
            gw = gwt if gw is None else gw + gwt
    return gx, gw


@adjoint(stepwise_matmul)
def d_stepwise_matmul(g, ans, x, w, axis, steps):
    return _grads(g, x, w, axis, steps, (True, True)) + (None, None)


@adjoint(stepwise_matmul, argnum=0)
def d_stepwise_matmul_lhs(g, ans, x, w, axis, steps):
    return (_grads(g, x, w, axis, steps, (True, False))[0],)


@adjoint(stepwise_matmul, argnum=1)
def d_stepwise_matmul_rhs(g, ans, x, w, axis, steps):
    return (_grads(g, x, w, axis, steps, (False, True))[1],)


# ================================================================ tangents
linear(stepwise_matmul, slots=(0, 1))  # bilinear in x and w
linear(d_stepwise_matmul_lhs, slots=(0, 3), container=True)
linear(d_stepwise_matmul_rhs, slots=(0, 2), container=True)
adjoint_of_multilinear(d_stepwise_matmul)


# ================================================================ a product with zeros


def matmul_zeros(a: Any, b: Any) -> np.ndarray:
    """``a @ b`` where the ``peel`` pass has proved ``a`` or ``b`` all zeros (a
    loop's initial state, ``h = np.zeros(...)``, in its first iteration): zeros
    of the product's shape and dtype, without the product.  When the other
    operand holds an inf or a nan (``0 * inf`` is nan), or the shapes are not a
    matrix times a matrix, it is the product itself, as written.  Its value is
    no function of the differentiated inputs: its gradient is zero."""
    a_ = a if type(a) is np.ndarray else np.asarray(a)
    b_ = b if type(b) is np.ndarray else np.asarray(b)
    if (
        a_.ndim >= 2
        and b_.ndim == 2
        and a_.shape[-1] == b_.shape[0]
        and a_.dtype.kind in "fc"
        and b_.dtype.kind in "fc"
        and np.isfinite(a_).all()
        and np.isfinite(b_).all()
    ):
        return np.zeros(a_.shape[:-1] + b_.shape[1:], dtype=np.result_type(a_, b_))
    return np.matmul(a, b)


nondifferentiable(matmul_zeros)
constant(matmul_zeros)
