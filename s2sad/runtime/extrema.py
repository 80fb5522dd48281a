"""``a.max(axis=k)`` and ``a.min(axis=k)`` along a short axis.

NumPy reduces a short middle axis (a max-pool's window of 8 in a
``(64, 16, 8, 8)`` view) with many tiny inner loops, six times slower than the
same comparisons written as ufunc calls over the slices along that axis::

    np.maximum(a[:, :, 0], a[:, :, 1], out=o)
    np.maximum(o, a[:, :, k], out=o)        # k = 2, ..., n - 1

This is the order in which ``np.maximum.reduce`` (the method) takes the
entries of each output along such an axis, and ``np.maximum`` propagates NaN
as the reduction does, so the result is the method's, bit for bit (the tests
check NaN, infinities, signed zeros and ties).  :func:`max_along` and
:func:`min_along` take that path for real and integer arrays whose axis is
short (2 to :data:`SHORT`) and not the last, with many runs of it (NumPy's
inner loops are short) and enough outputs to pay for the Python calls;
everywhere else they call the method itself.

Along a short *last* axis of many rows (``z.max(axis=1, keepdims=True)`` of a
``(1024, 10)`` array of logits: one NumPy loop per row, four times slower than
ten ufunc calls over the columns) they take the columns too; the method's own
loop compares in another order there, which can only show in the sign of a
zero result or the payload of a NaN, so a float result holding either is
computed again by the method.  The compiler emits them where the source
reduces a NumPy value along a literal axis (``buffers/along.py``); their
adjoint rule is ``d_max``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: the longest axis reduced slice by slice
SHORT = 16
#: the fewest outputs for which the slices pay for their Python calls
MIN_OUTPUTS = 256
#: the fewest runs of the axis before it (fewer: NumPy's own loops are long)
MIN_OUTER = 16


def max_along(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False):
    """``a.max(axis, out=out, keepdims=keepdims)``, faster along a short axis."""
    if type(a) is not np.ndarray:
        return a.max(axis=axis, **_given(out, keepdims))
    if a.size >= 2 * MIN_OUTPUTS:  # smaller: the method, without more checks
        if _fast(a, axis, out):
            return _along(np.maximum, a, axis, out, keepdims)
        if _last_fast(a, axis, out):
            got = _along(np.maximum, a, axis, out, keepdims)
            if _unambiguous(got):
                return got
    return a.max(axis=axis, out=out, keepdims=keepdims)


def min_along(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False):
    """``a.min(axis, out=out, keepdims=keepdims)``, faster along a short axis."""
    if type(a) is not np.ndarray:
        return a.min(axis=axis, **_given(out, keepdims))
    if a.size >= 2 * MIN_OUTPUTS:  # smaller: the method, without more checks
        if _fast(a, axis, out):
            return _along(np.minimum, a, axis, out, keepdims)
        if _last_fast(a, axis, out):
            got = _along(np.minimum, a, axis, out, keepdims)
            if _unambiguous(got):
                return got
    return a.min(axis=axis, out=out, keepdims=keepdims)


def _last_fast(a: Any, axis: Any, out: Any) -> bool:
    """A short last axis of many rows (NumPy's loop per row costs more than the
    ufunc calls over its columns)."""
    if type(a) is not np.ndarray or type(axis) is not int or a.dtype.kind not in "fiu":
        return False
    nd = a.ndim
    if nd < 2 or axis not in (-1, nd - 1):
        return False
    n = a.shape[-1]
    if not 2 <= n <= SHORT or a.size < n * MIN_OUTPUTS:
        return False
    return out is None or (
        type(out) is np.ndarray
        and out.dtype == a.dtype
        and not np.may_share_memory(out, a)
    )


def _unambiguous(got: np.ndarray) -> bool:
    """The columns' result is the method's bit for bit: integers always; floats
    unless some result is a zero (whose sign depends on the order NumPy's own
    loop compares in) or NaN (whose payload may)."""
    if got.dtype.kind != "f":
        return True
    return bool(np.minimum.reduce(np.abs(got), axis=None) > 0)


def _given(out: Any, keepdims: Any) -> dict:
    """The keywords the method was given (an object's ``max`` may take no others)."""
    kw = {} if out is None else {"out": out}
    if keepdims is not False:
        kw["keepdims"] = keepdims
    return kw


def _fast(a: Any, axis: Any, out: Any) -> bool:
    if type(a) is not np.ndarray or type(axis) is not int or a.dtype.kind not in "fiu":
        return False
    nd = a.ndim
    if not -nd <= axis < nd - 1 or axis == -1:
        return False  # the last axis (or out of range: the method raises)
    n = a.shape[axis]
    if not 2 <= n <= SHORT or a.size < n * MIN_OUTPUTS:
        return False
    if math.prod(a.shape[: axis % nd]) < MIN_OUTER:
        return False
    if out is None:
        return True
    return (
        type(out) is np.ndarray
        and out.dtype == a.dtype
        and not np.may_share_memory(out, a)
    )


def _along(ufunc: Any, a: np.ndarray, axis: int, out: Any, keepdims: bool):
    axis %= a.ndim
    shape = a.shape[:axis] + a.shape[axis + 1 :]
    kept = a.shape[:axis] + (1,) + a.shape[axis + 1 :]
    if out is None:
        out = np.empty(kept if keepdims else shape, a.dtype)
    if out.shape != (kept if keepdims else shape):
        return ufunc.reduce(a, axis, out=out, keepdims=keepdims)  # NumPy's error
    o = np.squeeze(out, axis) if keepdims else out
    lead = (slice(None),) * axis
    ufunc(a[lead + (0,)], a[lead + (1,)], out=o)
    for k in range(2, a.shape[axis]):
        ufunc(o, a[lead + (k,)], out=o)
    return out
