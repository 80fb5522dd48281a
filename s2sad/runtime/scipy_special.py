"""Adjoint and tangent rules for ``scipy.special`` (optional: needs SciPy).

This module is one of :data:`s2sad.runtime.OPTIONAL_RULE_MODULES`: it is loaded
only when SciPy is importable, and a gradient module that calls these rules
needs SciPy at run time (it imports only NumPy and ``s2sad.runtime``).

``logsumexp`` has a rule for ``axis``, ``keepdims`` and the weights ``b=``
(differentiable too, broadcast against ``a``): with ``w = b exp(a - ans)``,
``a`` gets ``g w`` and ``b`` gets ``g exp(a - ans)``.  ``return_sign=True``
raises a ``NotImplementedError`` naming a rewrite (where ``sum(b exp(a))`` is
negative the value without it is NaN, and so is the gradient).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from s2sad.runtime.reductions import expand, like
from s2sad.runtime.registry import adjoint
from s2sad.runtime.support import unbroadcast
from s2sad.runtime.tangents import tangent

_SQRT_2_PI = math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

# ---------------------------------------------------------------- logistic


@adjoint(special.expit, broadcasts=True)
def d_expit(g, ans, x):
    return (g * ans * (1.0 - ans),)


@adjoint(special.logit, broadcasts=True)
def d_logit(g, ans, x):
    return (g / (x * (1.0 - x)),)


@adjoint(special.log_expit, broadcasts=True)
def d_log_expit(g, ans, x):
    """g * expit(-x) (stable for large |x|)."""
    return (g * special.expit(-x),)


# ---------------------------------------------------------------- gamma family


@adjoint(special.gammaln, broadcasts=True)
def d_gammaln(g, ans, x):
    return (g * special.digamma(x),)


@adjoint(special.digamma, broadcasts=True)
def d_digamma(g, ans, x):
    """g * polygamma(1, x) (the trigamma function)."""
    return (g * special.polygamma(1, x),)


@adjoint(special.betaln, broadcasts=True)
def d_betaln(g, ans, a, b):
    """digamma(a) - digamma(a + b), digamma(b) - digamma(a + b)."""
    both = special.digamma(a + b)
    return (g * (special.digamma(a) - both), g * (special.digamma(b) - both))


# ---------------------------------------------------------------- error functions


@adjoint(special.erf, broadcasts=True)
def d_erf(g, ans, x):
    return (g * _TWO_OVER_SQRT_PI * np.exp(-x * x),)


@adjoint(special.erfc, broadcasts=True)
def d_erfc(g, ans, x):
    return (-g * _TWO_OVER_SQRT_PI * np.exp(-x * x),)


@adjoint(special.ndtr, broadcasts=True)
def d_ndtr(g, ans, x):
    """g * the standard normal density."""
    return (g * np.exp(-0.5 * x * x) / _SQRT_2_PI,)


@adjoint(special.log_ndtr, broadcasts=True)
def d_log_ndtr(g, ans, x):
    """g * pdf(x) / cdf(x), as exp(log pdf - log cdf) (stable far in the left tail)."""
    return (g * np.exp(-0.5 * x * x - ans) / _SQRT_2_PI,)


# ---------------------------------------------------------------- x log y


@adjoint(special.xlogy, broadcasts=True)
def d_xlogy(g, ans, x, y):
    """xlogy(g, y), g * x / y (no nan where g is zero)."""
    return (special.xlogy(g, y), g * x / y)


@adjoint(special.xlog1py, broadcasts=True)
def d_xlog1py(g, ans, x, y):
    return (special.xlog1py(g, y), g * x / (1.0 + y))


@adjoint(special.entr, broadcasts=True)
def d_entr(g, ans, x):
    """-g (log x + 1) for x > 0."""
    return (-g * (np.log(x) + 1.0),)


# ---------------------------------------------------------------- reductions


def _refuse_logsumexp(return_sign: bool) -> None:
    if return_sign:
        raise NotImplementedError(
            "scipy.special.logsumexp: s2sad has a rule for axis=, b= and keepdims=, "
            "not for return_sign=True; write m + np.log(np.abs(s)) and np.sign(s) "
            "with s = np.sum(b * np.exp(a - m), axis) and m = np.max(a) instead"
        )


def _lse_shares(ans, a, axis, b, keepdims):
    """``(exp(a - ans), the ones the reduction read)``: each term's share of
    the sum, broadcast against ``b`` (``ans`` with the reduced axes back)."""
    read = a if b is None else np.broadcast_to(a, np.broadcast_shapes(
        np.shape(a), np.shape(b)))  # fmt: skip
    return np.exp(a - expand(ans, read, axis, keepdims)), read


@adjoint(special.logsumexp)
def d_logsumexp(g, ans, a, axis=None, b=None, keepdims=False, return_sign=False):
    """softmax(a) * g, as exp(a - logsumexp) (stable); with weights ``b``,
    ``a`` gets ``g b exp(a - ans)`` and ``b`` gets ``g exp(a - ans)``."""
    _refuse_logsumexp(return_sign)
    share, read = _lse_shares(ans, a, axis, b, keepdims)
    ge = expand(g, read, axis, keepdims)
    if b is None:
        return (like(ge * share, a),)
    g_b = ge * share
    return (unbroadcast(_weighted(g_b, b), a), None, unbroadcast(g_b, b))


def _weighted(share, b):
    """``share * b``, zero where ``b`` is (a term of weight zero moves nothing,
    even where its share overflowed: ``b``'s cotangent is that share)."""
    with np.errstate(invalid="ignore"):
        w = share * b
    return np.where(np.asarray(b) == 0, 0.0, w).astype(w.dtype, copy=False)


@adjoint(special.softmax)
def d_softmax(g, ans, x, axis=None):
    """ans * (g - sum(g * ans, axis))."""
    return (like(ans * (g - np.sum(g * ans, axis=axis, keepdims=True)), x),)


@adjoint(special.log_softmax)
def d_log_softmax(g, ans, x, axis=None):
    """g - exp(ans) * sum(g, axis)."""
    return (like(g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True), x),)


# ================================================================ tangents
# The ufuncs above are elementwise: their adjoint rules with g := t are their
# tangent rules.  The reductions need written ones.


@tangent(special.logsumexp)
def jvp_logsumexp(t, ans, a, axis=None, b=None, keepdims=False, return_sign=False):
    _refuse_logsumexp(return_sign)
    share, _ = _lse_shares(ans, a, axis, b, keepdims)
    w = share if b is None else _weighted(share, b)
    return np.sum(w * t, axis=axis, keepdims=keepdims)


@tangent(special.logsumexp, argnum=2)
def jvp_logsumexp_b(t, ans, a, axis=None, b=None, keepdims=False, return_sign=False):
    _refuse_logsumexp(return_sign)
    share, _ = _lse_shares(ans, a, axis, b, keepdims)
    return np.sum(share * t, axis=axis, keepdims=keepdims)


@tangent(special.softmax)
def jvp_softmax(t, ans, x, axis=None):
    return ans * (t - np.sum(t * ans, axis=axis, keepdims=True))


@tangent(special.log_softmax)
def jvp_log_softmax(t, ans, x, axis=None):
    return t - np.sum(np.exp(ans) * t, axis=axis, keepdims=True)
