"""The softmax cross-entropy of a batch of rows: its value and its gradient,
the gradient reusing the exponentials the value computed.

``nn.softmax_cross_entropy(logits, labels)`` with a float matrix of logits and
one integer label per row computes, row by row, the shift ``z = logits -
max``, ``e = exp(z)``, ``s = sum(e)`` and ``log(s) - z[label]``, then their
mean.  Its rule needs ``softmax(logits) = e / s``: computed again from the
logits, that is the max (one NumPy loop per row: about 5 us for 100 rows of
10), the subtraction, the exponentials and the sums a second time, most of the
rule's time on a classifier's batch.

So the value keeps ``e`` and ``s`` (:func:`value`), with the value it
returned and weak references to the logits and labels, in one slot; the
gradient (:func:`gradient`) takes them from there when it is asked for the
gradient at that very value (the same object: a fresh scalar each call, held by
the slot, so no other call's value can be it) of those very arrays.  A rule
reads its arguments as they were when the value was computed (emitted code
restores whatever it overwrote before the rule runs), so ``e / s`` is then the
softmax the rule would compute, from the same operations: the same bits.
Anything else (another value, a copy of the logits, a second call, another
thread's slot, more than :data:`KEEP_ENTRIES` entries) computes it again.
The gradient that uses the slot takes it (and divides in place), so one
value's exponentials serve one gradient; they are never held past the next
value.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

#: the largest logits (entries) whose exponentials the value keeps (256 KiB of
#: float32): the calls where recomputing them is a large part of the rule's time
KEEP_ENTRIES = 65536

#: one entry at most: (value, weakref(logits), weakref(labels), e, s); a list,
#: so that the gradient takes it with one atomic ``pop``
_KEPT: list = []

#: ``np.arange(n)`` (read-only), the rows of the label picks, per batch size
_ROWS: dict[int, np.ndarray] = {}


def rows(n: int) -> np.ndarray:
    """``np.arange(n)``, kept for batch sizes up to 4096 (read-only)."""
    r = _ROWS.get(n)
    if r is None:
        r = np.arange(n)
        if n <= 4096:
            if len(_ROWS) >= 64:
                _ROWS.clear()
            r.flags.writeable = False
            _ROWS[n] = r
    return r


def value(logits: np.ndarray, labels: np.ndarray) -> np.floating:
    """The mean cross-entropy of float ``logits`` (n, classes), n > 0, and integer
    ``labels`` (n,): the operations of ``nn.softmax_cross_entropy``'s general
    form, the picks by one fancy index, the mean as ``np.mean`` computes it."""
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=-1)
    log_norm = np.log(s)
    log_norm -= z[rows(labels.shape[0]), labels]
    total = np.add.reduce(log_norm, axis=None)
    t = type(total)
    if t is np.float32 or t is np.float64:
        # np.mean's division (a float32 sum over an intp count promotes to a
        # double, as Python's own division does), cast back: the same bits
        out = t(float(total) / log_norm.size)
    else:
        out = total.dtype.type(total / np.intp(log_norm.size))
    if e.size <= KEEP_ENTRIES:
        _KEPT[:] = [(out, weakref.ref(logits), weakref.ref(labels), e, s)]
    return out


def gradient(
    g: Any, ans: Any, logits: np.ndarray, labels: np.ndarray, out: Any
) -> np.ndarray:
    """``(softmax(logits) - one_hot(labels)) * g / n`` (in ``out`` when given: an
    array of the logits' shape and dtype), the softmax from :func:`value`'s
    exponentials where that call computed ``ans``."""
    kept = None
    head = _KEPT[:1]  # a copy, in one step: another thread may empty the slot
    if ans is not None and head and head[0][0] is ans:
        try:  # taken: another thread's value may have replaced it meanwhile
            kept = _KEPT.pop()
        except IndexError:
            pass
    if (
        kept is not None
        and kept[0] is ans
        and kept[1]() is logits
        and kept[2]() is labels
    ):
        e, s = kept[3], kept[4]
        # softmax's division, e / sum(e); e is this call's alone once taken
        p = np.divide(e, s[:, None], out=e if out is None else out)
    elif out is None:  # softmax's operations, the max by the array's method
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
    else:
        np.subtract(logits, np.max(logits, axis=-1, keepdims=True), out=out)
        np.exp(out, out=out)
        out /= out.sum(axis=-1, keepdims=True)
        p = out
    n = labels.shape[0]
    p[rows(n), labels] -= 1
    if type(g) is float:
        c = p.dtype.type(g)
        c /= p.dtype.type(n)  # what a 0-d array of g divided by n gives
    else:
        c = np.asarray(g, dtype=p.dtype) / n
    p *= c
    return p
