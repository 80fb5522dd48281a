"""The loss heads the ``fuse`` pass writes for written-out idioms, with their rules.

Two idioms of published NumPy code end most classifiers' losses:

* the Bernoulli log-likelihood of a sigmoid, ``p = 1 / (1 + exp(-z))`` then
  ``y * log(p) + (1 - y) * log(1 - p)`` (logistic regression, binary heads);
* the picked log-probabilities of integer labels after a log-softmax,
  ``np.mean(logp[np.arange(n), y])``.

Differentiated statement by statement, each is a chain of divisions and spreads
(the log-likelihood's cotangent goes through ``1 / p`` and ``1 / (1 - p)``, the
picked one through a zero array, a scatter and the log-softmax's rule), where
the whole chain has a short closed form: ``g * (y - p)`` for the logits ``z``,
and ``g * (one_hot - softmax)`` for the log-softmax's input.

The primals here take the user's own intermediate values and compute the last
step of the written-out code from them (``first + second``, ``logp[rows,
cols]``, and the mean or sum after it), with the same operations, so the value
is the user's to the bit.  They also take the values the closed form needs
(``z``, ``y``, ``p``; ``x``, ``logp``): their adjoint rules send the cotangent
to ``z`` or ``x`` straight and none to the intermediates.  That is the
derivative only where those values are what the idiom says they are, which the
``fuse`` pass (``s2sad/transforms/front/fuse_losses.py``) proves before it
writes a call; nothing else should call them.

Each rule accepts ``into=(buffer,)`` (see :mod:`s2sad.runtime.contractions`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from s2sad.runtime.activations import d_log_softmax
from s2sad.runtime.reductions import float_dtype
from s2sad.runtime.registry import adjoint
from s2sad.runtime.support import unbroadcast
from s2sad.runtime.tangents import tangent

REDUCTIONS = (None, "mean", "sum")


def _reduce(value: Any, reduce: str | None) -> Any:
    """``np.mean(value)``/``np.sum(value)`` (an array's own method: the same
    reduction without the function's dispatch)."""
    if reduce is None:
        return value
    if type(value) is np.ndarray:
        if reduce == "sum":
            return value.sum()
        if value.dtype.kind == "f" and value.dtype.itemsize >= 4 and value.size:
            # what ``mean`` does for these (the sum over all axes, divided by the
            # count as an intp, cast back to the sum's type), without its Python
            # wrappers: the same bits (float16 sums in float32: left to mean)
            s = np.add.reduce(value, axis=None)
            t = type(s)
            if t is np.float32 or t is np.float64:
                # that division is a double's (a float32 sum over an intp
                # promotes), as Python's own: the same bits, without NumPy's
                # scalar operations (about 1.3 us)
                return t(float(s) / value.size)
            return s.dtype.type(s / np.intp(value.size))
        return value.mean()
    return np.mean(value) if reduce == "mean" else np.sum(value)


# -- the Bernoulli log-likelihood of a sigmoid --------------------------------------


def sigmoid_log_likelihood_as_written(
    z: Any,
    y: Any,
    p: Any,
    first: Any,
    second: Any,
    reduce: str | None = None,
    negated: bool = False,
) -> Any:
    """``first + second`` (its mean or sum with ``reduce="mean"``/``"sum"``), where
    the user's code computed ``p = 1 / (1 + exp(-z))``, ``first = y * log(p)`` and
    ``second = (1 - y) * log(1 - p)``: the value as written.  With ``negated``,
    ``first - second`` of ``first = -y * log(p)``: the negative log-likelihood.
    The rule sends ``g * (y - p)`` to ``z`` and ``g * (log(p) - log(1 - p))`` to
    ``y`` (both negated with ``negated``)."""
    return _reduce(first - second if negated else first + second, reduce)


def _scale(
    g: Any, first: Any, second: Any, reduce: str | None, negated: bool = False
) -> Any:
    """What multiplies ``y - p``: the cotangent of each term."""
    g = -g if negated else g
    if reduce != "mean":
        return g
    if type(first) is np.ndarray and first.shape == np.shape(second):
        return g / max(first.size, 1)
    shape = np.broadcast_shapes(np.shape(first), np.shape(second))
    return g / max(int(np.prod(shape)), 1)


def _spread(v: Any, first: Any, second: Any) -> Any:
    """``v`` broadcast to the terms' shape (where ``y`` has more entries than p)."""
    return np.broadcast_to(v, np.broadcast_shapes(np.shape(first), np.shape(second)))


def _fits(buf: Any, like: np.ndarray) -> bool:
    """``buf`` can hold a cotangent of ``like`` (see ``reductions.into_buffer``)."""
    return (
        type(buf) is np.ndarray
        and buf.shape == like.shape
        and buf.dtype == like.dtype
        and buf.flags.c_contiguous
        and buf.flags.writeable
    )


def _logits_ct(s: Any, z: Any, y: Any, p: Any, into: Any) -> Any:
    """``unbroadcast((y - p) * s, z)``: two NumPy calls into one array (``into[0]``
    when it fits) where ``y - p`` has z's shape and dtype and ``s`` is a number."""
    if (
        type(z) is np.ndarray
        and z.dtype.kind == "f"
        and type(p) is np.ndarray
        and p.shape == z.shape
        and p.dtype == z.dtype
        and (type(y) in (float, int) or type(y) is np.ndarray and y.shape == z.shape)
        and type(s) in (float, np.float64, np.float32)
    ):
        buf = into[0] if into and _fits(into[0], z) else None
        ct = np.subtract(y, p, out=buf)
        if ct.dtype == z.dtype:
            ct *= s
            return ct
    return unbroadcast((y - p) * s, z)


@adjoint(sigmoid_log_likelihood_as_written)
def d_sigmoid_log_likelihood(
    g, ans, z, y, p, first, second, reduce=None, negated=False, *, into=None
):
    s = _scale(g, first, second, reduce, negated)
    ct_y = unbroadcast(_spread((np.log(p) - np.log1p(-p)) * s, first, second), y)
    return (_logits_ct(s, z, y, p, into), ct_y, None, None, None)


@adjoint(sigmoid_log_likelihood_as_written, argnum=0)
def d_sigmoid_log_likelihood_z(
    g, ans, z, y, p, first, second, reduce=None, negated=False, *, into=None
):
    """Only the logits' cotangent (``y`` is a constant): two NumPy calls."""
    return (_logits_ct(_scale(g, first, second, reduce, negated), z, y, p, into),)


# -- picked log-probabilities of integer labels -------------------------------------


def picked_log_softmax_as_written(
    x: Any, logp: Any, rows: Any, cols: Any, axis: Any = -1, reduce: str = "mean"
) -> Any:
    """``np.mean(logp[rows, cols])`` (``np.sum`` with ``reduce="sum"``), where the
    user's code computed ``logp`` as the log-softmax of ``x`` along ``axis``: the
    value as written.  The rule sends ``x`` the log-softmax's cotangent of the
    picked entries directly: ``c * (one_hot - softmax)`` for one pick per row
    (``rows`` is ``np.arange(n)``), with ``c`` the cotangent of each pick."""
    return _reduce(logp[rows, cols], reduce)


def _one_per_row(logp: Any, rows: Any, cols: Any, axis: Any) -> bool:
    """``rows`` is ``arange(n)`` (or ``range(n)``) and ``cols`` one integer per row
    of a 2-d ``logp`` whose log-softmax ran along its rows: then each row holds
    exactly one pick."""
    if not (
        type(logp) is np.ndarray
        and logp.ndim == 2
        and logp.dtype.kind == "f"
        and axis in (1, -1)
        and type(cols) is np.ndarray
        and cols.dtype.kind in "iu"
        and cols.shape == (logp.shape[0],)
    ):
        return False
    n = logp.shape[0]
    if type(rows) is range:
        return rows == range(n)
    return (
        type(rows) is np.ndarray
        and rows.dtype.kind in "iu"
        and rows.shape == (n,)
        and _is_arange(rows, n)
    )


_ARANGE_BYTES: dict = {}


def _is_arange(rows: np.ndarray, n: int) -> bool:
    """``rows`` (integers, shape ``(n,)``) holds ``0, 1, ..., n - 1``: its bytes
    compared with those of ``np.arange(n)`` in its dtype, kept for batch sizes up
    to 4096 (equal bytes of one integer dtype are equal values)."""
    if n > 4096:
        return bool((rows == np.arange(n)).all())
    key = (n, rows.dtype.str)
    ref = _ARANGE_BYTES.get(key)
    if ref is None:
        if len(_ARANGE_BYTES) >= 64:
            _ARANGE_BYTES.clear()
        ref = _ARANGE_BYTES[key] = np.arange(n, dtype=rows.dtype).tobytes()
    return rows.tobytes() == ref


def _picked_ct(g: Any, logp: Any, rows: Any, cols: Any, reduce: str) -> Any:
    """The cotangent of ``logp``: ``c`` at each pick, zero elsewhere (any index:
    repeated rows add up, a 3-d ``logp`` gives rows of picks)."""
    shape = np.shape(logp[rows, cols])
    c = g / max(int(np.prod(shape)), 1) if reduce == "mean" else g
    # imported here: loading the rule modules may start inside indexing's import
    from s2sad.runtime.indexing import scatter

    return scatter(np.full(shape, c, dtype=float_dtype(logp)), logp, (rows, cols))


@adjoint(picked_log_softmax_as_written)
def d_picked_log_softmax(
    g, ans, x, logp, rows, cols, axis=-1, reduce="mean", *, into=None
):
    if _one_per_row(logp, rows, cols, axis):
        c = g / logp.shape[0] if reduce == "mean" else g
        buf = into[0] if into and _fits(into[0], logp) else None
        ct = np.exp(logp, out=buf)  # a new array where no buffer fits
        ct *= -c
        if ct.dtype.type is np.float64 and type(c) in (float, np.float64):
            # one pick per row: the same additions as ``+=`` through the index, in
            # one pass (not for float32: add.at adds a Python float as a double)
            np.add.at(ct, (rows, cols), c)
        else:
            ct[rows, cols] += c
        return (ct, None, None, None)
    ct = d_log_softmax(_picked_ct(g, logp, rows, cols, reduce), logp, x, axis)[0]
    return (ct, None, None, None)


# ================================================================ tangents
# Forward mode: the primals are honest functions of their arguments (a sum, a
# pick), and the rules' tangents serve forward-over-reverse (Hessian-vector
# products through gradient code that calls them).


@tangent(sigmoid_log_likelihood_as_written, argnum=3)
def jvp_sigmoid_log_likelihood_first(
    t, ans, z, y, p, first, second, reduce=None, negated=False
):
    shape = np.broadcast_shapes(np.shape(first), np.shape(second))
    return _reduce(np.broadcast_to(t, shape), reduce)


@tangent(sigmoid_log_likelihood_as_written, argnum=4)
def jvp_sigmoid_log_likelihood_second(
    t, ans, z, y, p, first, second, reduce=None, negated=False
):
    shape = np.broadcast_shapes(np.shape(first), np.shape(second))
    return _reduce(np.broadcast_to(-t if negated else t, shape), reduce)


@tangent(d_sigmoid_log_likelihood, container=True)
def jvp_d_sigmoid_log_likelihood_g(
    t, ans, g, out, z, y, p, first, second, reduce=None, negated=False
):
    return d_sigmoid_log_likelihood(t, out, z, y, p, first, second, reduce, negated)


@tangent(d_sigmoid_log_likelihood, argnum=3, container=True)
def jvp_d_sigmoid_log_likelihood_y(
    t, ans, g, out, z, y, p, first, second, reduce=None, negated=False
):
    ct_z = _spread(t * _scale(g, first, second, reduce, negated), first, second)
    return (unbroadcast(ct_z, z), None, None, None, None)


@tangent(d_sigmoid_log_likelihood, argnum=4, container=True)
def jvp_d_sigmoid_log_likelihood_p(
    t, ans, g, out, z, y, p, first, second, reduce=None, negated=False
):
    s = _scale(g, first, second, reduce, negated)
    ct_y = _spread(t * s * (1.0 / p + 1.0 / (1.0 - p)), first, second)
    ct_z = unbroadcast(_spread(-t * s, first, second), z)
    return (ct_z, unbroadcast(ct_y, y), None, None, None)


@tangent(d_sigmoid_log_likelihood_z, container=True)
def jvp_d_sigmoid_log_likelihood_z_g(
    t, ans, g, out, z, y, p, first, second, reduce=None, negated=False
):
    return d_sigmoid_log_likelihood_z(t, out, z, y, p, first, second, reduce, negated)


@tangent(d_sigmoid_log_likelihood_z, argnum=3, container=True)
def jvp_d_sigmoid_log_likelihood_z_y(
    t, ans, g, out, z, y, p, first, second, reduce=None, negated=False
):
    ct_z = _spread(t * _scale(g, first, second, reduce, negated), first, second)
    return (unbroadcast(ct_z, z),)


@tangent(d_sigmoid_log_likelihood_z, argnum=4, container=True)
def jvp_d_sigmoid_log_likelihood_z_p(
    t, ans, g, out, z, y, p, first, second, reduce=None, negated=False
):
    ct_z = _spread(-t * _scale(g, first, second, reduce, negated), first, second)
    return (unbroadcast(ct_z, z),)


@tangent(picked_log_softmax_as_written, argnum=1)
def jvp_picked_log_softmax(t, ans, x, logp, rows, cols, axis=-1, reduce="mean"):
    return _reduce(t[rows, cols], reduce)


@tangent(d_picked_log_softmax, container=True)
def jvp_d_picked_log_softmax_g(
    t, ans, g, out, x, logp, rows, cols, axis=-1, reduce="mean"
):
    return d_picked_log_softmax(t, out, x, logp, rows, cols, axis, reduce)


@tangent(d_picked_log_softmax, argnum=3, container=True)
def jvp_d_picked_log_softmax_logp(
    t, ans, g, out, x, logp, rows, cols, axis=-1, reduce="mean"
):
    """``g_x = G - softmax * sum(G)`` moves by ``-softmax * t * sum(G)``."""
    total = np.sum(_picked_ct(g, logp, rows, cols, reduce), axis=axis, keepdims=True)
    return (-np.exp(logp) * t * total, None, None, None)
