"""Adjoint rules for statistics, scans and norms (var, std, median, cumsum, ...).

Weighted ``average``, ``var`` and ``std``; ``sort`` and ``median``; the scans
``cumsum``/``cumprod`` (and NumPy 2.1's ``cumulative_*``) and ``diff``; and the
vector and matrix norms of ``np.linalg``.  Axes follow the conventions of
:mod:`s2sad.runtime.reductions`, whose axis helpers these rules use.

Conventions:

* ``median``: the cotangent goes to the middle element of the sorted slice, or
  half to each of the two middle elements for an even count.
* ``sort``: ties keep the stable order, so each output position sends its
  cotangent to the input it was copied from.
* the ``inf`` norms: tied extreme entries (or row/column sums) split the
  cotangent equally; the gradient of a norm at 0 is taken as 0.
* ``cumprod`` is exact with zeros (no division by the input).
* ``std`` at a constant slice (std = 0) gets a zero cotangent.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from s2sad.runtime.reductions import (
    axes_of,
    cast_away,
    count,
    expand,
    float_dtype,
    from_last,
    like,
    mask_share,
    no_where,
    to_last,
    zero_cotangent,
)
from s2sad.runtime.registry import adjoint, method_alias
from s2sad.runtime.support import unbroadcast
from s2sad.runtime.tangents import constant, linear, reduction, tangent

# ---------------------------------------------------------------- averages and moments


@adjoint(np.average)
def d_average(g, ans, a, axis=None, weights=None, returned=False, *, keepdims=False):
    """Cotangents of ``a`` and (when passed positionally) of ``weights``.

    With ``returned=True`` the sum of the weights adds to the weights' cotangent."""
    if returned:
        return _average_returned(g, ans, a, axis, weights, keepdims)
    a = np.asarray(a)
    ge = expand(g, a, axis, keepdims)
    if weights is None:
        return (like(np.broadcast_to(ge / count(a, axis), a.shape), a),)
    w = np.asarray(weights)
    wb = w if w.shape == a.shape else np.reshape(w, _along(a.ndim, axis))
    total = np.sum(np.broadcast_to(wb, a.shape), axis=axis, keepdims=True)
    g_wb = ge * (a - expand(ans, a, axis, keepdims)) / total
    return (
        like(ge * wb / total, a),
        None,
        like(unbroadcast(g_wb, wb).reshape(w.shape), w),
    )


def _average_returned(g, ans, a, axis, weights, keepdims) -> tuple:
    """d_average of ``(average, sum of weights)`` = ``np.average(..., returned=True)``."""
    g_avg, g_total = g
    cts = [None, None, None]
    if g_avg is not None:
        part = d_average(g_avg, ans[0], a, axis, weights, keepdims=keepdims)
        cts[: len(part)] = part
    if g_total is not None and weights is not None:
        a, w = np.asarray(a), np.asarray(weights)
        wb = w if w.shape == a.shape else np.reshape(w, _along(a.ndim, axis))
        spread_total = np.broadcast_to(expand(g_total, a, axis, keepdims), a.shape)
        ct_w = like(unbroadcast(spread_total, wb).reshape(w.shape), w)
        cts[2] = ct_w if cts[2] is None else cts[2] + ct_w
    return (cts[0], None, cts[2], None)


def _along(ndim: int, axis: int) -> tuple[int, ...]:
    """Shape (1, .., -1, .., 1) that lays a 1-d array along ``axis``."""
    shape = [1] * ndim
    shape[axis] = -1
    return tuple(shape)


@adjoint(np.var)
def d_var(g, ans, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    """2 (x - mean) / (n - ddof); a given ``mean=`` is the true mean, so it adds nothing."""
    no_where(kw, "np.var")
    ddof = kw.get("correction", ddof)
    centered = x - np.mean(x, axis=axis, keepdims=True)
    n = count(x, axis) - ddof
    return (like(expand(g, x, axis, keepdims) * centered * (2.0 / n), x),)


@adjoint(np.std)
def d_std(g, ans, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    """(x - mean) / ((n - ddof) * std); 0 where std is 0."""
    no_where(kw, "np.std")
    ddof = kw.get("correction", ddof)
    centered = x - np.mean(x, axis=axis, keepdims=True)
    sd = expand(ans, x, axis, keepdims)
    n = count(x, axis) - ddof
    scale = np.where(sd == 0, 0, 1 / (n * np.where(sd == 0, 1, sd)))
    return (like(expand(g, x, axis, keepdims) * centered * scale, x),)


# ---------------------------------------------------------------- scans


def _reverse_cumsum(g: np.ndarray, axis: int) -> np.ndarray:
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)


@adjoint(np.cumsum)
def d_cumsum(g, ans, x, axis=None, dtype=None, out=None):
    if cast_away(dtype, ans):
        return (zero_cotangent(x),)
    if axis is None:
        return (like(np.reshape(_reverse_cumsum(g, 0), np.shape(x)), x),)
    return (like(_reverse_cumsum(g, axis), x),)


def _cumprod_last(g: np.ndarray, ans: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Cotangent of cumprod along the last axis, exact with zeros in x."""
    if np.all(x != 0):
        return _reverse_cumsum(g * ans, -1) / x
    # ct_i = prod_{k<i} x_k * r_i  with  r_i = g_i + x_{i+1} r_{i+1}
    left = np.cumprod(np.concatenate([np.ones_like(x[..., :1]), x[..., :-1]], -1), -1)
    r = np.zeros_like(g)
    r[..., -1] = g[..., -1]
    for i in range(x.shape[-1] - 2, -1, -1):
        r[..., i] = g[..., i] + x[..., i + 1] * r[..., i + 1]
    return left * r


@adjoint(np.cumprod)
def d_cumprod(g, ans, x, axis=None, dtype=None, out=None):
    if cast_away(dtype, ans):
        return (zero_cotangent(x),)
    x = np.asarray(x)
    if axis is None:
        flat = _cumprod_last(np.asarray(g), np.asarray(ans), x.ravel())
        return (like(flat.reshape(x.shape), x),)
    gm, am, xm = (np.moveaxis(np.asarray(v), axis, -1) for v in (g, ans, x))
    ct = _cumprod_last(gm, am, xm)
    return (like(np.moveaxis(ct, -1, axis), x),)


def _without_initial(g: Any, axis: Any, include_initial: bool) -> Any:
    """Drop the leading entry that ``include_initial=True`` adds along ``axis``."""
    if not include_initial:
        return g
    ax = -1 if axis is None else axis
    return np.take(g, range(1, np.shape(g)[ax]), axis=ax)


if hasattr(np, "cumulative_sum"):  # NumPy >= 2.1

    @adjoint(np.cumulative_sum)
    def d_cumulative_sum(g, ans, x, *, axis=None, dtype=None, out=None, **kw):
        if cast_away(dtype, ans):
            return (zero_cotangent(x),)
        g = _without_initial(g, axis, kw.get("include_initial", False))
        return (like(_reverse_cumsum(g, -1 if axis is None else axis), x),)

    @adjoint(np.cumulative_prod)
    def d_cumulative_prod(g, ans, x, *, axis=None, dtype=None, out=None, **kw):
        g = _without_initial(g, axis, kw.get("include_initial", False))
        ans = _without_initial(ans, axis, kw.get("include_initial", False))
        return d_cumprod(g, ans, x, -1 if axis is None else axis)


@adjoint(np.diff)
def d_diff(g, ans, a, n=1, axis=-1, prepend=None, append=None):
    """Each difference step is undone by a negated difference of the zero-padded g."""
    for _ in range(n):
        pad = [(0, 0)] * np.ndim(g)
        pad[axis] = (1, 1)
        g = -np.diff(np.pad(g, pad), axis=axis)
    start = _length_along(prepend, axis)
    stop = start + np.shape(a)[axis]
    ct = like(np.take(g, range(start, stop), axis=axis), a)
    if prepend is None and append is None:
        return (ct,)
    # differentiated prepend/append (a scalar one was spread along the other axes)
    ct_prepend = _extra_cotangent(g, range(start), axis, prepend)
    ct_append = _extra_cotangent(g, range(stop, np.shape(g)[axis]), axis, append)
    return (ct, None, None, ct_prepend, ct_append)


def _extra_cotangent(g: Any, span: range, axis: int, extra: Any) -> Any:
    """The cotangent of np.diff's prepend/append ``extra``, read from ``span`` of g."""
    if extra is None:
        return None
    return unbroadcast(np.take(g, span, axis=axis), extra)


def _length_along(extra: Any, axis: int) -> int:
    """How many entries ``prepend=extra`` adds along ``axis`` (scalars add one)."""
    if extra is None:
        return 0
    return 1 if np.ndim(extra) == 0 else np.shape(extra)[axis]


# ---------------------------------------------------------------- order statistics


@adjoint(np.sort)
def d_sort(g, ans, a, axis=-1, kind=None, order=None, **kwargs):
    a = np.asarray(a)
    if axis is None:
        ct = np.zeros(a.size, dtype=float_dtype(g))
        ct[np.argsort(a, axis=None, kind="stable")] = g
        return (like(ct.reshape(a.shape), a),)
    ct = np.zeros(a.shape, dtype=float_dtype(g))
    np.put_along_axis(ct, np.argsort(a, axis=axis, kind="stable"), g, axis=axis)
    return (like(ct, a),)


@adjoint(np.median)
def d_median(g, ans, a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The middle element (or half to each of the two middle ones) gets g."""
    a = np.asarray(a)
    axes = axes_of(a.ndim, axis)
    flat = to_last(a, axes)
    n = flat.shape[-1]
    middle = [n // 2] if n % 2 else [n // 2 - 1, n // 2]
    picked = np.argsort(flat, axis=-1, kind="stable")[..., middle]
    ge = np.reshape(expand(g, a, axis, keepdims), flat.shape[:-1] + (1,))
    ct = np.zeros(flat.shape, dtype=float_dtype(g))
    np.put_along_axis(ct, picked, np.broadcast_to(ge / len(middle), picked.shape), -1)
    return (like(from_last(ct, a.shape, axes), a),)


# ---------------------------------------------------------------- norms


def _vector_norm_grad(x: Any, n: Any, ord: Any, axis: Any) -> Any:
    """d ||x||_ord / dx along ``axis``, with ``n`` the norm broadcast against x."""
    safe = np.where(n == 0, 1, n)
    if ord is None or ord == 2:
        return x / safe
    if ord in (np.inf, -np.inf):
        return np.sign(x) * mask_share(np.abs(x), n, axis)
    if ord == 0:
        return np.zeros_like(x)
    if ord == 1:
        return np.sign(x)
    return np.sign(x) * (np.abs(x) / safe) ** (ord - 1)


def _matrix_norm_grad(x: Any, n: Any, ord: Any) -> Any:
    """d ||x||_ord / dx for matrices in the last two axes (n broadcast as (..., 1, 1))."""
    if ord in (None, "fro"):
        return x / np.where(n == 0, 1, n)
    if ord in ("nuc", 2, -2):
        u, s, vh = np.linalg.svd(x, full_matrices=False)
        if ord == "nuc":
            return u @ vh
        k = 0 if ord == 2 else -1
        return u[..., :, k : k + 1 or None] @ vh[..., k : k + 1 or None, :]
    if ord in (1, -1, np.inf, -np.inf):
        summed = -2 if ord in (1, -1) else -1  # 1: column sums, inf: row sums
        sums = np.sum(np.abs(x), axis=summed, keepdims=True)
        return np.sign(x) * mask_share(sums, n, axis=(-2, -1))
    raise NotImplementedError(f"np.linalg.norm(ord={ord!r}) of a matrix has no rule")


def _norm_kind(x: np.ndarray, ord: Any, axis: Any) -> tuple[str, Any]:
    """("vector", axes) or ("matrix", (row_axis, col_axis)) as np.linalg.norm decides."""
    if axis is None:
        if ord is None or x.ndim == 1:
            return "vector", None
        return "matrix", (0, 1)
    if isinstance(axis, (int, np.integer)) or len(axis) == 1:
        return "vector", axis
    return "matrix", tuple(axis)


def _matrix_grad_at(x: np.ndarray, n: Any, ord: Any, axes: tuple) -> Any:
    """_matrix_norm_grad for matrices spanning ``axes`` of x."""
    moved = np.moveaxis(x, axes, (-2, -1))
    n_moved = np.moveaxis(n, axes, (-2, -1))
    return np.moveaxis(_matrix_norm_grad(moved, n_moved, ord), (-2, -1), axes)


@adjoint(np.linalg.norm)
def d_norm(g, ans, x, ord=None, axis=None, keepdims=False):
    """Ties of the inf/1 norms split equally; the gradient at 0 is taken as 0."""
    x = np.asarray(x)
    kind, axes = _norm_kind(x, ord, axis)
    ge = expand(g, x, axes, keepdims)
    n = expand(ans, x, axes, keepdims)
    if kind == "vector":
        return (like(ge * _vector_norm_grad(x, n, ord, axes), x),)
    return (like(ge * _matrix_grad_at(x, n, ord, axes), x),)


@adjoint(np.linalg.vector_norm)
def d_vector_norm(g, ans, x, *, axis=None, keepdims=False, ord=2):
    n = expand(ans, x, axis, keepdims)
    return (like(expand(g, x, axis, keepdims) * _vector_norm_grad(x, n, ord, axis), x),)


@adjoint(np.linalg.matrix_norm)
def d_matrix_norm(g, ans, x, *, keepdims=False, ord="fro"):
    ge = expand(g, x, (-2, -1), keepdims)
    n = expand(ans, x, (-2, -1), keepdims)
    return (like(ge * _matrix_norm_grad(np.asarray(x), n, ord), x),)


# ---------------------------------------------------------------- methods

for _name, _function in [
    ("std", np.std), ("var", np.var), ("cumsum", np.cumsum), ("cumprod", np.cumprod),
]:  # fmt: skip
    method_alias(_name, _function)


# ================================================================ tangents
# Forward mode (see s2sad.runtime.tangents): how each primal above pushes a
# tangent forward, then the tangents of this module's adjoint rules and helpers,
# which emitted gradient code calls (forward-over-reverse: Hessian-vector products).

linear(np.cumsum)
reduction(np.var, np.std, np.median, np.linalg.norm, np.linalg.vector_norm)
reduction(np.linalg.matrix_norm, axes=(-2, -1))
if hasattr(np, "cumulative_sum"):
    linear(np.cumulative_sum)


@tangent(np.average, container=True)
def jvp_average_a(
    t, ans, a, axis=None, weights=None, returned=False, *, keepdims=False
):
    avg = np.average(t, axis, weights, keepdims=keepdims)
    return (avg, np.zeros_like(ans[1])) if returned else avg


@tangent(np.average, argnum=2, container=True)
def jvp_average_weights(
    t, ans, a, axis=None, weights=None, returned=False, *, keepdims=False
):
    """(sum(t a) - ans sum(t)) / sum(w), with 1-d weights laid along ``axis``
    (and sum(t), the sum of the weights' tangent, with ``returned=True``)."""
    avg = ans[0] if returned else ans
    a, w, t = np.asarray(a), np.asarray(weights), np.asarray(t)
    if w.shape != a.shape:
        w, t = (np.reshape(v, _along(a.ndim, axis)) for v in (w, t))
    w, t = np.broadcast_to(w, a.shape), np.broadcast_to(t, a.shape)
    total = np.sum(w, axis=axis, keepdims=True)
    centered = a - expand(avg, a, axis, keepdims)
    t_avg = np.sum(t * centered / total, axis=axis, keepdims=keepdims)
    if returned:
        return t_avg, np.broadcast_to(
            np.sum(t, axis=axis, keepdims=keepdims), np.shape(ans[1])
        )
    return t_avg


def _cumprod_last_tangent(t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Tangent of cumprod along the last axis: dy_k = dy_(k-1) x_k + y_(k-1) t_k."""
    y = np.cumprod(x, axis=-1)
    out = np.empty(np.broadcast_shapes(t.shape, x.shape), dtype=np.result_type(t, x))
    out[..., 0] = t[..., 0]
    for k in range(1, x.shape[-1]):
        out[..., k] = out[..., k - 1] * x[..., k] + y[..., k - 1] * t[..., k]
    return out


@tangent(np.cumprod)
def jvp_cumprod(t, ans, x, axis=None, dtype=None, out=None):
    x, t = np.asarray(x), np.asarray(t)
    if axis is None:
        return _cumprod_last_tangent(t.ravel(), x.ravel())
    moved = _cumprod_last_tangent(np.moveaxis(t, axis, -1), np.moveaxis(x, axis, -1))
    return np.moveaxis(moved, -1, axis)


if hasattr(np, "cumulative_prod"):

    @tangent(np.cumulative_prod)
    def jvp_cumulative_prod(t, ans, x, *, axis=None, dtype=None, out=None, **kw):
        body = jvp_cumprod(t, None, x, -1 if axis is None else axis)
        if not kw.get("include_initial", False):
            return body
        ax = -1 if axis is None else axis
        zero = np.zeros_like(np.take(body, [0], axis=ax))
        return np.concatenate([zero, body], axis=ax)


@tangent(np.diff)
def jvp_diff(t, ans, a, n=1, axis=-1, prepend=None, append=None):
    """The difference of t, with zeros standing in for prepend/append."""
    kw = {}
    if prepend is not None:
        kw["prepend"] = np.zeros_like(prepend, dtype=float)
    if append is not None:
        kw["append"] = np.zeros_like(append, dtype=float)
    return np.diff(t, n, axis, **kw)


@tangent(np.diff, argnum=3)
def jvp_diff_prepend(t, ans, a, n=1, axis=-1, prepend=None, append=None):
    """The difference with t in front of zeros (a differentiated prepend)."""
    kw = {} if append is None else {"append": np.zeros_like(append, dtype=float)}
    return np.diff(np.zeros(np.shape(a)), n, axis, prepend=t, **kw)


@tangent(np.diff, argnum=4)
def jvp_diff_append(t, ans, a, n=1, axis=-1, prepend=None, append=None):
    """The difference with t after zeros (a differentiated append)."""
    kw = {} if prepend is None else {"prepend": np.zeros_like(prepend, dtype=float)}
    return np.diff(np.zeros(np.shape(a)), n, axis, append=t, **kw)


@tangent(np.sort)
def jvp_sort(t, ans, a, axis=-1, kind=None, order=None, **kwargs):
    """t in the order that sorting a (stably) puts a in."""
    if axis is None:
        return np.ravel(t)[np.argsort(a, axis=None, kind="stable")]
    return np.take_along_axis(t, np.argsort(a, axis=axis, kind="stable"), axis=axis)


# helpers of the adjoint rules whose results are axes or shapes
constant(_norm_kind, _along)
# adjoint rules that read their other arguments only for shapes, indices or
# piecewise-constant masks (sorting orders): linear in g
linear(d_cumsum, d_diff, d_sort, d_median, container=True)
linear(d_var, slots=(0, 2), container=True)


@tangent(d_std, container=True)
def jvp_d_std_g(t, ans, g, out, x, *args, **kwargs):
    return d_std(t, out, x, *args, **kwargs)


@tangent(d_std, argnum=2, container=True)
def jvp_d_std_x(
    t, ans, g, out, x, axis=None, dtype=None, o=None, ddof=0, keepdims=False, **kw
):
    """g (x - mean) / (n s) with s held fixed: g (t - mean t) / (n s)."""
    n = count(x, axis) - kw.get("correction", ddof)
    s = expand(out, x, axis, keepdims)
    tc = t - np.mean(t, axis=axis, keepdims=True)
    scale = np.where(s == 0, 0, 1 / (n * np.where(s == 0, 1, s)))
    return (expand(g, x, axis, keepdims) * tc * scale,)


@tangent(d_std, argnum=1, container=True)
def jvp_d_std_out(
    t, ans, g, out, x, axis=None, dtype=None, o=None, ddof=0, keepdims=False, **kw
):
    """g (x - mean) / (n s) with x held fixed: - g (x - mean) ds / (n s^2)."""
    n = count(x, axis) - kw.get("correction", ddof)
    s = expand(out, x, axis, keepdims)
    centered = x - np.mean(x, axis=axis, keepdims=True)
    scale = np.where(s == 0, 0, 1 / (n * np.where(s == 0, 1, s) ** 2))
    ge = expand(g, x, axis, keepdims)
    return (-ge * centered * expand(t, x, axis, keepdims) * scale,)
