"""Rules for 1-d sequence operations: ``np.convolve``, ``np.correlate``,
``np.polyval``, ``np.trapezoid`` and ``np.interp``.

A convolution is bilinear in its two sequences: each one's cotangent is the
valid correlation of the output's cotangent, padded out to the full
convolution, with the other sequence.  A ``"same"`` or ``"valid"`` result is
a slice of the full one; where it starts is read once per lengths and mode
from NumPy itself, on two probe sequences, and cached (NumPy swaps the
operands when the second is longer, and its ``"same"`` correlation is not
the reversed convolution's slice then: asking NumPy is the one safe way).
Real sequences only: complex ones raise ``NotImplementedError``.

``np.interp`` is differentiable in ``x``, the breakpoints ``xp``, ``fp`` and
``left``/``right`` (comments above its rule); ``period=`` is refused.  At a
breakpoint it follows NumPy's segment (the one to its right).
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


# ---------------------------------------------------------------- interp
# np.interp(x, xp, fp, left, right): on the segment j with xp[j] <= x <
# xp[j + 1] (NumPy's choice at a breakpoint: the segment to its right; x equal
# to the last breakpoint: the last segment, t = 1), the value is
# fp[j] + t (fp[j+1] - fp[j]) with t = (x - xp[j]) / h, h = xp[j+1] - xp[j].
# So x moves it at the slope s, fp[j] and fp[j+1] at 1 - t and t, and xp[j]
# and xp[j+1] at -s (1 - t) and -s t.  Outside the breakpoints the value is
# left (default fp[0]) or right (default fp[-1]).


def _interp_pieces(x: Any, xp: Any, fp: Any) -> tuple:
    """``(j, t, h, s, inside, below, above)`` per entry of ``x``."""
    if any(np.iscomplexobj(v) for v in (x, xp, fp)):
        xq = fq = np.zeros((0, 0))  # refused below
    else:
        xs, xq, fq = (np.asarray(v, dtype=float) for v in (x, xp, fp))
    if xq.ndim != 1 or fq.shape != xq.shape:
        raise NotImplementedError(
            "np.interp has a rule for real 1-d xp and fp of one length only"
        )
    if np.any(xq[1:] < xq[:-1]):
        raise NotImplementedError(
            "np.interp: xp is not increasing (NumPy does not check, and its "
            "result means nothing then); sort xp and fp by xp first"
        )
    n = len(xq)
    below, above = xs < xq[0], xs > xq[-1]
    inside = ~(below | above)
    if n == 1:  # no segment: x on the one breakpoint takes fp[0]
        zero = np.zeros(xs.shape, dtype=np.intp)
        return zero, np.zeros(xs.shape), np.ones(xs.shape), np.zeros(xs.shape), \
            inside, below, above  # fmt: skip
    j = np.clip(np.searchsorted(xq, xs, side="right") - 1, 0, n - 2)
    h = xq[j + 1] - xq[j]
    flat = h == 0  # a repeated last breakpoint: x is on it
    h = np.where(flat, 1.0, h)
    t = np.where(flat, 1.0, (xs - xq[j]) / h)
    s = np.where(inside, (fq[j + 1] - fq[j]) / h, 0.0)
    return j, np.where(inside, t, 0.0), h, s, inside, below, above


def _spread(n: int, j: Any, lo: Any, hi: Any) -> np.ndarray:
    """A length-n vector with ``lo`` summed at ``j`` and ``hi`` at ``j + 1``."""
    out = np.bincount(np.ravel(j), np.ravel(lo), minlength=n)
    if n > 1:
        out = out + np.bincount(np.ravel(j) + 1, np.ravel(hi), minlength=n)
    return out[:n]


def _next(tq: np.ndarray, j: Any) -> Any:
    """``tq[j + 1]`` (``tq[j]`` past the end: one breakpoint, no segment)."""
    return tq[np.minimum(j + 1, len(tq) - 1)]


def _interp_refuse(period: Any) -> None:
    if period is not None:
        raise NotImplementedError(
            "np.interp: no rule for period=; wrap x with np.mod(x - xp[0], "
            "period) + xp[0] and extend xp and fp by one period instead"
        )


@adjoint(np.interp)
def d_interp(g, ans, x, xp, fp, left=None, right=None, period=None):
    """``x``: ``g`` times the slope; ``fp``: ``g`` split between the two
    breakpoints (``1 - t``, ``t``), and the ends beyond them; ``xp``: ``-g s``
    split the same way; ``left``/``right``: ``g`` summed where they apply."""
    _interp_refuse(period)
    j, t, _, s, inside, below, above = _interp_pieces(x, xp, fp)
    ge = np.broadcast_to(np.asarray(g, dtype=float), np.shape(j))
    n = np.shape(xp)[0]
    gi = np.where(inside, ge, 0.0)
    g_fp = _spread(n, j, gi * (1.0 - t), gi * t)
    if left is None:
        g_fp[0] += np.sum(ge[below])
    if right is None:
        g_fp[-1] += np.sum(ge[above])
    g_xp = _spread(n, j, -gi * s * (1.0 - t), -gi * s * t)
    g_left = None if left is None else like(np.sum(ge[below]), left)
    g_right = None if right is None else like(np.sum(ge[above]), right)
    g_x = ge * s
    g_x = float(g_x) if np.ndim(x) == 0 and not isinstance(x, np.ndarray) else g_x
    return like(g_x, x), like(g_xp, xp), like(g_fp, fp), g_left, g_right


@tangent(np.interp)
def jvp_interp_x(t, ans, x, xp, fp, left=None, right=None, period=None):
    _interp_refuse(period)
    return _interp_pieces(x, xp, fp)[3] * t


@tangent(np.interp, argnum=1)
def jvp_interp_xp(t, ans, x, xp, fp, left=None, right=None, period=None):
    _interp_refuse(period)
    j, w, _, s, _, _, _ = _interp_pieces(x, xp, fp)
    tq = np.asarray(t, dtype=float)
    return -s * ((1.0 - w) * tq[j] + w * _next(tq, j))


@tangent(np.interp, argnum=2)
def jvp_interp_fp(t, ans, x, xp, fp, left=None, right=None, period=None):
    _interp_refuse(period)
    j, w, _, _, inside, below, above = _interp_pieces(x, xp, fp)
    tf = np.asarray(t, dtype=float)
    out = np.where(inside, (1.0 - w) * tf[j] + w * _next(tf, j), 0.0)
    if left is None:
        out = out + np.where(below, tf[0], 0.0)
    if right is None:
        out = out + np.where(above, tf[-1], 0.0)
    return out


@tangent(np.interp, argnum=3)
def jvp_interp_left(t, ans, x, xp, fp, left=None, right=None, period=None):
    return np.where(np.asarray(x) < np.asarray(xp)[0], t, 0.0)


@tangent(np.interp, argnum=4)
def jvp_interp_right(t, ans, x, xp, fp, left=None, right=None, period=None):
    return np.where(np.asarray(x) > np.asarray(xp)[-1], t, 0.0)


# second order: how d_interp's cotangents move with x, xp and fp (the masks
# are piecewise constant): through dt, how t moves, and ds, how the slope does


def _d_interp_dot(g, x, xp, fp, dt_ds) -> tuple:
    j, t, h, s, inside, _, _ = _interp_pieces(x, xp, fp)
    dt, ds = dt_ds(j, t, h, s)
    gi = np.where(inside, np.broadcast_to(np.asarray(g, dtype=float), np.shape(j)), 0.0)
    n = np.shape(xp)[0]
    d_x = like(gi * ds, x) if np.ndim(x) else float(np.sum(gi * ds))
    d_fp = _spread(n, j, -gi * dt, gi * dt)
    d_xp = _spread(n, j, -gi * (ds * (1.0 - t) - s * dt), -gi * (ds * t + s * dt))
    return d_x, like(d_xp, xp), like(d_fp, fp), None, None


@tangent(d_interp, container=True)
def jvp_d_interp_g(t, ans, g, out, x, xp, fp, left=None, right=None, period=None):
    return d_interp(t, out, x, xp, fp, left, right, period)


@tangent(d_interp, argnum=2, container=True)
def jvp_d_interp_x(t, ans, g, out, x, xp, fp, left=None, right=None, period=None):
    tx = np.asarray(t, dtype=float)
    return _d_interp_dot(g, x, xp, fp, lambda j, w, h, s: (tx / h, 0.0))


@tangent(d_interp, argnum=3, container=True)
def jvp_d_interp_xp(t, ans, g, out, x, xp, fp, left=None, right=None, period=None):
    tq = np.asarray(t, dtype=float)

    def moves(j, w, h, s):
        dh = _next(tq, j) - tq[j]
        return (-tq[j] - w * dh) / h, -s * dh / h

    return _d_interp_dot(g, x, xp, fp, moves)


@tangent(d_interp, argnum=4, container=True)
def jvp_d_interp_fp(t, ans, g, out, x, xp, fp, left=None, right=None, period=None):
    tf = np.asarray(t, dtype=float)
    return _d_interp_dot(
        g, x, xp, fp, lambda j, w, h, s: (0.0, (_next(tf, j) - tf[j]) / h)
    )
