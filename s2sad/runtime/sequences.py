"""Rules for 1-d sequence operations: ``np.convolve``, ``np.correlate``,
``np.polyval`` and ``np.trapezoid``.

A convolution is bilinear in its two sequences: each one's cotangent is the
valid correlation of the output's cotangent, padded out to the full
convolution, with the other sequence.  A ``"same"`` or ``"valid"`` result is
a slice of the full one; where it starts is read once per lengths and mode
from NumPy itself, on two probe sequences, and cached (NumPy swaps the
operands when the second is longer, and its ``"same"`` correlation is not
the reversed convolution's slice then: asking NumPy is the one safe way).
Real sequences only: complex ones raise ``NotImplementedError``.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from s2sad.runtime.reductions import like
from s2sad.runtime.registry import adjoint
from s2sad.runtime.support import unbroadcast
from s2sad.runtime.tangents import adjoint_of_multilinear, linear, tangent


def _real_vectors(*xs: Any) -> tuple[np.ndarray, ...]:
    arrays = tuple(np.asarray(x) for x in xs)
    if any(a.ndim != 1 or a.dtype.kind == "c" for a in arrays):
        raise NotImplementedError(
            "np.convolve/np.correlate have a rule for real 1-d sequences only"
        )
    return arrays


@functools.lru_cache(maxsize=256)
def _start(fn: Any, n: int, m: int, mode: str) -> int:
    """Where ``fn(a, v, mode)`` starts in ``fn(a, v, "full")`` for lengths n, m."""
    a = 1.0 + np.arange(n) ** 1.5
    v = 2.0 + np.sqrt(np.arange(m) + 0.5)
    full, out = fn(a, v, "full"), fn(a, v, mode)
    for s in range(len(full) - len(out) + 1):
        if np.array_equal(full[s : s + len(out)], out):
            return s
    raise NotImplementedError(f"{fn.__name__}(mode={mode!r}) has no rule")


def _full(g: Any, fn: Any, n: int, m: int, mode: str) -> np.ndarray:
    """``g`` of a ``mode`` result placed in zeros of the full result's length."""
    g = np.asarray(g)
    if mode in ("full", 2):
        return g
    mode = {0: "valid", 1: "same"}.get(mode, mode)
    full = np.zeros(n + m - 1, dtype=np.result_type(g, float))
    s = _start(fn, n, m, mode)
    full[s : s + g.shape[0]] = g
    return full


@adjoint(np.convolve)
def d_convolve(g, ans, a, v, mode="full"):
    """``a``'s and ``v``'s cotangents: valid correlations of the full ``g``."""
    x, w = _real_vectors(a, v)
    gf = _full(g, np.convolve, len(x), len(w), mode)
    return (
        like(np.correlate(gf, w, "valid"), a),
        like(np.correlate(gf, x, "valid"), v),
    )


@adjoint(np.correlate)
def d_correlate(g, ans, a, v, mode="valid"):
    """The full correlation is the convolution with ``v`` reversed."""
    x, w = _real_vectors(a, v)
    gf = _full(g, np.correlate, len(x), len(w), mode)
    return (
        like(np.correlate(gf, w[::-1], "valid"), a),
        like(np.correlate(gf, x, "valid")[::-1], v),
    )


@adjoint(np.polyval)
def d_polyval(g, ans, p, x):
    """``x**(n-1-k)`` summed against ``g`` for ``p[k]``; the derivative
    polynomial at ``x`` times ``g`` for ``x``."""
    c = np.asarray(p)
    if c.ndim != 1:
        raise NotImplementedError("np.polyval has a rule for 1-d coefficients only")
    xs = np.asarray(x)
    powers = np.stack([xs ** (len(c) - 1 - k) for k in range(len(c))], axis=-1)
    g_p = np.sum(np.asarray(g)[..., None] * powers, axis=tuple(range(xs.ndim)))
    g_x = np.asarray(g) * np.polyval(np.polyder(c) if len(c) > 1 else [0.0], xs)
    return like(g_p, p), unbroadcast(g_x, x)


def _trapezoid_weights(n: int, x: Any, dx: Any) -> np.ndarray:
    """Each sample's weight in the trapezoid sum along one axis of length n."""
    if x is None:
        w = np.full(n, float(dx) if np.ndim(dx) == 0 else 1.0)
        if n:
            w[0] = w[-1] = w[0] / 2.0
        return w if n > 1 else np.zeros(n)
    h = np.diff(np.asarray(x, dtype=float))
    w = np.zeros(n)
    w[:-1] += h / 2.0
    w[1:] += h / 2.0
    return w


@adjoint(np.trapezoid)
def d_trapezoid(g, ans, y, x=None, dx=1.0, axis=-1):
    """``y``: ``g`` times each sample's weight; ``x``: the change of each
    interval's width, ``(y[i-1] - y[i+1]) / 2`` (ends: half their interval's
    sum, signed); ``dx``: the sum over intervals of the mean heights."""
    ys = np.asarray(y)
    if (x is not None and np.ndim(x) != 1) or np.ndim(dx) != 0:
        raise NotImplementedError(
            "np.trapezoid has a rule for a 1-d x or a number dx only"
        )
    ax = axis % ys.ndim
    moved = np.moveaxis(ys, ax, -1)
    ge = np.expand_dims(np.asarray(g), -1)
    n = moved.shape[-1]
    g_y = np.moveaxis(ge * _trapezoid_weights(n, x, dx), -1, ax)
    mids = (moved[..., 1:] + moved[..., :-1]) / 2.0  # each interval's mean height
    g_x = g_dx = None
    if x is not None:
        rate = np.zeros(moved.shape)
        rate[..., 1:] += mids
        rate[..., :-1] -= mids
        g_x = np.sum(ge * rate, axis=tuple(range(moved.ndim - 1)))
        g_x = like(g_x, x)
    else:
        g_dx = np.sum(np.asarray(g) * np.sum(mids, axis=-1))
        g_dx = like(g_dx, dx) if isinstance(dx, np.ndarray) else float(g_dx)
    return like(g_y, y), g_x, g_dx


# ================================================================ tangents

linear(np.convolve, np.correlate, slots=(0, 1))
adjoint_of_multilinear(d_convolve, d_correlate, slots=(0, 2, 3))


@tangent(np.polyval)
def jvp_polyval_p(t, ans, p, x):
    return np.polyval(t, x)


@tangent(np.polyval, argnum=1)
def jvp_polyval_x(t, ans, p, x):
    c = np.asarray(p)
    return t * np.polyval(np.polyder(c) if len(c) > 1 else [0.0], x)


@tangent(np.trapezoid)
def jvp_trapezoid_y(t, ans, y, x=None, dx=1.0, axis=-1):
    return np.trapezoid(t, x, dx, axis)


@tangent(np.trapezoid, argnum=1)
def jvp_trapezoid_x(t, ans, y, x=None, dx=1.0, axis=-1):
    ys = np.moveaxis(np.asarray(y), axis, -1)
    mids = (ys[..., 1:] + ys[..., :-1]) / 2.0
    return np.sum(mids * np.diff(np.asarray(t)), axis=-1)


@tangent(np.trapezoid, argnum=2)
def jvp_trapezoid_dx(t, ans, y, x=None, dx=1.0, axis=-1):
    ys = np.moveaxis(np.asarray(y), axis, -1)
    return t * np.sum((ys[..., 1:] + ys[..., :-1]) / 2.0, axis=-1)


# second order: d_polyval is linear in g and in p, not in x
def _derivative(c: np.ndarray) -> Any:
    return np.polyder(c) if len(c) > 1 else np.zeros(1)


@tangent(d_polyval, container=True)
def jvp_d_polyval_g(t, ans, g, out, p, x):
    return d_polyval(t, out, p, x)


@tangent(d_polyval, argnum=2, container=True)
def jvp_d_polyval_p(t, ans, g, out, p, x):
    g_x = np.asarray(g) * np.polyval(_derivative(np.asarray(t)), x)
    return (np.zeros(np.shape(p)), unbroadcast(g_x, x))


@tangent(d_polyval, argnum=3, container=True)
def jvp_d_polyval_x(t, ans, g, out, p, x):
    c, xs, ge = np.asarray(p), np.asarray(x), np.asarray(g)
    n = len(c)
    rates = [
        (n - 1 - k) * xs ** max(n - 2 - k, 0) if n - 1 - k > 0 else np.zeros(xs.shape)
        for k in range(n)
    ]
    g_p = np.sum(
        (ge * t)[..., None] * np.stack(rates, axis=-1), axis=tuple(range(xs.ndim))
    )
    g_x = ge * t * np.polyval(_derivative(_derivative(c)), xs)
    return (g_p, unbroadcast(g_x, x))


# d_trapezoid's cotangents are each bilinear in g and one of y, x, dx
adjoint_of_multilinear(d_trapezoid, slots=(0, 2, 3, 4))
