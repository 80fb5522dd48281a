"""Rules for ``np.quantile`` and ``np.percentile`` (method ``"linear"``, one q).

The linear quantile interpolates two order statistics of each reduced slice,
``x_lo + frac * (x_hi - x_lo)`` at the position ``q * (n - 1)``: ``g`` goes to
those two entries (the stable sort order picks them among ties, as
``np.median``'s rule does), and ``q`` gets ``g * (n - 1) * (x_hi - x_lo)``.
Other methods, weights and an array of q raise ``NotImplementedError`` (call
once per q).
"""

from __future__ import annotations

import numpy as np

from s2sad.runtime.reductions import (
    axes_of,
    expand,
    float_dtype,
    from_last,
    like,
    to_last,
)
from s2sad.runtime.registry import adjoint
from s2sad.runtime.tangents import linear, tangent


def _quantile_picks(a, q, axis, method, weights, interpolation):
    """``(flat, order, lo, hi, frac)``: ``a`` with the reduced axes last and
    flattened, the stable sort order along them, and the two order statistics
    that the ``"linear"`` quantile ``q`` interpolates, with the weight of
    ``hi``.  Other methods, weights and an array ``q`` have no rule."""
    if method != "linear" or weights is not None or interpolation is not None:
        raise NotImplementedError(
            "np.quantile/np.percentile have a rule for method='linear' without "
            "weights only"
        )
    if np.ndim(q) != 0:
        raise NotImplementedError(
            "np.quantile/np.percentile have a rule for one q (a number) only: "
            "call them once per q"
        )
    flat = to_last(a, axes_of(a.ndim, axis))
    n = flat.shape[-1]
    pos = float(q) * (n - 1)
    lo = min(int(np.floor(pos)), n - 1)
    hi = min(lo + 1, n - 1)
    return flat, np.argsort(flat, axis=-1, kind="stable"), lo, hi, pos - lo


def _d_quantile(g, a, q, axis, keepdims, method, weights, interpolation):
    """Cotangents of ``a`` and of ``q``: the two order statistics the quantile
    interpolates share ``g``, and ``q`` moves the point between them at the
    rate ``(n - 1) * (x_hi - x_lo)``."""
    x = np.asarray(a)
    flat, order, lo, hi, frac = _quantile_picks(
        x, q, axis, method, weights, interpolation
    )
    ge = np.reshape(expand(g, x, axis, keepdims), flat.shape[:-1] + (1,))
    ct = np.zeros(flat.shape, dtype=float_dtype(g))
    np.put_along_axis(ct, order[..., [lo]], ge * (1.0 - frac), -1)
    if hi != lo:  # pos = n - 1 has frac 0 and one pick
        np.put_along_axis(ct, order[..., [hi]], ge * frac, -1)
    x_lo = np.take_along_axis(flat, order[..., [lo]], -1)
    x_hi = np.take_along_axis(flat, order[..., [hi]], -1)
    ct_q = np.sum(ge * (x_hi - x_lo)) * (flat.shape[-1] - 1)
    return like(from_last(ct, x.shape, axes_of(x.ndim, axis)), a), like(ct_q, q)


@adjoint(np.quantile)
def d_quantile(g, ans, a, q, axis=None, out=None, overwrite_input=False,
               method="linear", keepdims=False, *, weights=None, interpolation=None):  # fmt: skip
    """See ``_d_quantile``."""
    return _d_quantile(g, a, q, axis, keepdims, method, weights, interpolation)


@adjoint(np.percentile)
def d_percentile(g, ans, a, q, axis=None, out=None, overwrite_input=False,
                 method="linear", keepdims=False, *, weights=None, interpolation=None):  # fmt: skip
    """``np.quantile`` at ``q / 100``."""
    ct, ct_q = _d_quantile(
        g, a, np.true_divide(q, 100), axis, keepdims, method, weights, interpolation
    )
    return ct, like(ct_q / 100, q)


def _jvp_quantile(t, a, q, axis, keepdims, method, weights, interpolation):
    x = np.asarray(a)
    _, order, lo, hi, frac = _quantile_picks(x, q, axis, method, weights, interpolation)
    tf = to_last(np.broadcast_to(t, x.shape), axes_of(x.ndim, axis))
    picked = np.take_along_axis(tf, order[..., [lo]], -1)[..., 0] * (1.0 - frac)
    if hi != lo:
        picked = picked + np.take_along_axis(tf, order[..., [hi]], -1)[..., 0] * frac
    if keepdims:
        shape = [1 if i in axes_of(x.ndim, axis) else n for i, n in enumerate(x.shape)]
        return np.reshape(picked, shape)
    return picked


@tangent(np.quantile)
def jvp_quantile(t, ans, a, q, axis=None, out=None, overwrite_input=False,
                 method="linear", keepdims=False, *, weights=None, interpolation=None):  # fmt: skip
    return _jvp_quantile(t, a, q, axis, keepdims, method, weights, interpolation)


def _jvp_quantile_q(t, a, q, axis, keepdims, method, weights, interpolation):
    x = np.asarray(a)
    flat, order, lo, hi, _ = _quantile_picks(x, q, axis, method, weights, interpolation)
    rate = np.take_along_axis(flat, order[..., [hi]], -1)[..., 0]
    rate = (rate - np.take_along_axis(flat, order[..., [lo]], -1)[..., 0]) * (
        flat.shape[-1] - 1
    )
    if keepdims:
        shape = [1 if i in axes_of(x.ndim, axis) else n for i, n in enumerate(x.shape)]
        rate = np.reshape(rate, shape)
    return rate * t


@tangent(np.quantile, argnum=1)
def jvp_quantile_q(t, ans, a, q, axis=None, out=None, overwrite_input=False,
                   method="linear", keepdims=False, *, weights=None, interpolation=None):  # fmt: skip
    return _jvp_quantile_q(t, a, q, axis, keepdims, method, weights, interpolation)


@tangent(np.percentile, argnum=1)
def jvp_percentile_q(t, ans, a, q, axis=None, out=None, overwrite_input=False,
                     method="linear", keepdims=False, *, weights=None, interpolation=None):  # fmt: skip
    q = np.true_divide(q, 100)
    return _jvp_quantile_q(
        t / 100, a, q, axis, keepdims, method, weights, interpolation
    )


@tangent(np.percentile)
def jvp_percentile(t, ans, a, q, axis=None, out=None, overwrite_input=False,
                   method="linear", keepdims=False, *, weights=None, interpolation=None):  # fmt: skip
    q = np.true_divide(q, 100)
    return _jvp_quantile(t, a, q, axis, keepdims, method, weights, interpolation)


linear(d_quantile, d_percentile, container=True)
