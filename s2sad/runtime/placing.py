"""Rules for ``np.insert`` and ``np.partition``: each output entry is one
input entry, so the cotangent goes back to where that entry came from.

``np.insert`` is read from NumPy itself: the same call on integer labels
(``arr``'s entries ``0, 1, ...``, the values' ``-1, -2, ...``) says where
each output entry comes from, whatever ``obj`` is (an int, a slice, a list,
negative indices), however ``values`` broadcasts and with ``axis=None``'s
flattening.  A value broadcast to several places gets the sum of their
cotangents.

``np.partition`` is a permutation of each slice: ``np.argpartition``'s when it
reproduces the result (checked), else the one that matches the sorted order of
the result with the stable sorted order of the input (the two may arrange a
partition differently).  Among ties the order picks one entry, as
``np.sort``'s rule does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from s2sad.runtime.reductions import like
from s2sad.runtime.registry import adjoint
from s2sad.runtime.tangents import linear, tangent

# ---------------------------------------------------------------- insert


def _insert_labels(arr: Any, obj: Any, values: Any, axis: Any) -> np.ndarray:
    """``np.insert`` of labels: ``k >= 0`` is ``arr``'s flat entry ``k``,
    ``-1 - k`` the values' flat entry ``k``."""
    shape, vshape = np.shape(arr), np.shape(values)
    labels = np.arange(int(np.prod(shape)), dtype=np.intp).reshape(shape)
    vlabels = -1 - np.arange(int(np.prod(vshape)), dtype=np.intp).reshape(vshape)
    return np.insert(labels, obj, vlabels, axis=axis)


@adjoint(np.insert)
def d_insert(g, ans, arr, obj, values, axis=None):
    """``arr``'s entries get ``g`` where they landed; each value the sum of
    ``g`` over the places it was broadcast to."""
    labels = _insert_labels(arr, obj, values, axis)
    ge = np.asarray(g).reshape(labels.shape)
    own = labels >= 0
    g_arr = np.zeros(np.size(arr), dtype=ge.dtype)
    g_arr[labels[own]] = ge[own]
    g_values = np.bincount(
        -1 - labels[~own], weights=ge[~own], minlength=np.size(values)
    ).astype(ge.dtype, copy=False)
    g_values = g_values.reshape(np.shape(values))
    if not isinstance(values, np.ndarray) and np.ndim(values) == 0:
        g_values = float(g_values)  # a number inserted: a number's cotangent
    else:
        g_values = like(g_values, values)
    return like(g_arr.reshape(np.shape(arr)), arr), None, g_values


@tangent(np.insert)
def jvp_insert_arr(t, ans, arr, obj, values, axis=None):
    return np.insert(t, obj, np.zeros(np.shape(values)), axis=axis)


@tangent(np.insert, argnum=2)
def jvp_insert_values(t, ans, arr, obj, values, axis=None):
    zeros = np.zeros(np.shape(arr), dtype=np.result_type(t, np.float32))
    return np.insert(zeros, obj, t, axis=axis)


# ---------------------------------------------------------------- partition


def _partition_order(a: np.ndarray, ans: np.ndarray, kth: Any, axis: int) -> Any:
    """Indices along ``axis`` with ``ans = take_along_axis(a, order, axis)``."""
    order = np.argpartition(a, kth, axis=axis)
    if np.array_equal(np.take_along_axis(a, order, axis), ans, equal_nan=True):
        return order
    order_in = np.argsort(a, axis=axis, kind="stable")
    order_out = np.argsort(ans, axis=axis, kind="stable")
    order = np.empty_like(order_in)
    np.put_along_axis(order, order_out, order_in, axis)
    return order


def _partition_args(a: Any, ans: Any, kth: Any, axis: Any, order: Any) -> tuple:
    """``(a as an array, its result, the permutation, the axis)``; ``axis=None``
    partitions the flattened array."""
    if order is not None:
        raise NotImplementedError(
            "np.partition: no rule for order= (structured arrays hold no floats "
            "to differentiate)"
        )
    x = np.asarray(a)
    result = np.asarray(ans)
    if axis is None:
        x, axis = x.reshape(-1), 0
    return x, result, _partition_order(x, result, kth, axis), axis


@adjoint(np.partition)
def d_partition(g, ans, a, kth, axis=-1, kind="introselect", order=None):
    """``g`` scattered back through the permutation of each slice."""
    x, _, perm, ax = _partition_args(a, ans, kth, axis, order)
    ct = np.zeros(x.shape, dtype=np.result_type(g, np.float32))
    np.put_along_axis(ct, perm, np.asarray(g).reshape(x.shape), ax)
    return (like(ct.reshape(np.shape(a)), a),)


@tangent(np.partition)
def jvp_partition(t, ans, a, kth, axis=-1, kind="introselect", order=None):
    x, _, perm, ax = _partition_args(a, ans, kth, axis, order)
    tx = np.broadcast_to(t, np.shape(a)).reshape(x.shape)
    return np.take_along_axis(tx, perm, ax)


# second order: both adjoint rules read their other arguments only for where
# entries go (piecewise constant): linear in g
linear(d_insert, d_partition, container=True)
