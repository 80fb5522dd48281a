"""Forward-mode rules for the built-in primals, by family (see :mod:`tangents`).

Every ufunc and ``math`` function with an adjoint rule gets its JVP from that
rule (a diagonal Jacobian is its own transpose), so it is not listed here.
Written rules are named ``jvp_<primal>`` and take ``(t, ans, *args)`` like
adjoint rules take ``(g, ans, *args)``; ``t`` is the tangent of the argument
the rule is registered for.  Rules at the bottom cover the adjoint rules and
support helpers that emitted gradient modules call, so that a gradient can be
differentiated again in forward mode (Hessian-vector products).
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import Any

import numpy as np

from s2sad.runtime import (
    contractions,
    indexing,
    linalg,
    nn,
    pyfuncs,
    reductions,
    shapes,
    support,
)
from s2sad.runtime.reductions import expand, logsumexp
from s2sad.runtime.tangents import (
    _FIXED_AXES,
    additive,
    adjoint_of_multilinear,
    broadcast_like,
    constant,
    elementwise,
    filled,
    finish,
    linear,
    or_zeros,
    reduction,
    scalar,
    tangent,
    zero_entry,
)

_mT = linalg._mT

# ---------------------------------------------------------------- elementwise, non-ufunc

elementwise(np.where, np.clip, np.nan_to_num, np.sinc, nn.relu, nn.sigmoid,
            builtins.abs, builtins.pow)  # fmt: skip

# ---------------------------------------------------------------- reductions and scans

linear(np.sum, np.mean, np.cumsum, np.trace, np.linalg.trace)
reduction(np.max, np.amax, np.min, np.amin, np.nanmax, np.nanmin, np.ptp, np.prod,
          np.var, np.std, np.median, logsumexp, np.linalg.norm,
          np.linalg.vector_norm, np.linalg.matrix_norm)  # fmt: skip
_FIXED_AXES[reductions.d_matrix_norm] = (-2, -1)
if hasattr(np, "cumulative_sum"):
    linear(np.cumulative_sum)


@tangent(np.nansum)
def jvp_nansum(t, ans, x, *args, **kwargs):
    return np.nansum(np.where(np.isnan(x), 0, t), *args, **kwargs)


@tangent(np.nanmean)
def jvp_nanmean(t, ans, x, *args, **kwargs):
    return np.nanmean(np.where(np.isnan(x), np.nan, t), *args, **kwargs)


@tangent(np.average)
def jvp_average_a(
    t, ans, a, axis=None, weights=None, returned=False, *, keepdims=False
):
    return np.average(t, axis, weights, keepdims=keepdims)


@tangent(np.average, argnum=2)
def jvp_average_weights(
    t, ans, a, axis=None, weights=None, returned=False, *, keepdims=False
):
    """(sum(t a) - ans sum(t)) / sum(w), with 1-d weights laid along ``axis``."""
    a, w, t = np.asarray(a), np.asarray(weights), np.asarray(t)
    if w.shape != a.shape:
        w, t = (np.reshape(v, reductions._along(a.ndim, axis)) for v in (w, t))
    w, t = np.broadcast_to(w, a.shape), np.broadcast_to(t, a.shape)
    total = np.sum(w, axis=axis, keepdims=True)
    centered = a - expand(ans, a, axis, keepdims)
    return np.sum(t * centered / total, axis=axis, keepdims=keepdims)


def _cumprod_last(t: np.ndarray, x: np.ndarray) -> np.ndarray:
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
        return _cumprod_last(t.ravel(), x.ravel())
    moved = _cumprod_last(np.moveaxis(t, axis, -1), np.moveaxis(x, axis, -1))
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


@tangent(np.sort)
def jvp_sort(t, ans, a, axis=-1, kind=None, order=None, **kwargs):
    """t in the order that sorting a (stably) puts a in."""
    if axis is None:
        return np.ravel(t)[np.argsort(a, axis=None, kind="stable")]
    return np.take_along_axis(t, np.argsort(a, axis=axis, kind="stable"), axis=axis)


# ---------------------------------------------------------------- shapes

linear(np.reshape, np.ravel, np.squeeze, np.expand_dims, np.transpose, np.swapaxes,
       np.moveaxis, np.broadcast_to, np.matrix_transpose, np.linalg.matrix_transpose,
       np.flip, np.fliplr, np.flipud, np.roll, np.rot90, np.tile, np.repeat,
       np.triu, np.tril, np.diag, np.diagonal, np.linalg.diagonal, np.array,
       np.asarray, np.asanyarray, np.ascontiguousarray, np.asfortranarray,
       np.asarray_chkfinite, np.copy, np.float64, np.float32, np.float16,
       np.concatenate, np.stack, np.vstack, np.hstack, np.dstack, np.column_stack,
       operator.getitem, np.take, np.take_along_axis, indexing.item, nn.embedding,
       builtins.float, builtins.list, builtins.tuple)  # fmt: skip
linear(np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit)
linear(np.full, np.full_like, np.compress, np.extract, slots=(1,))
if hasattr(np, "unstack"):
    linear(np.unstack)


@tangent(np.astype)
def jvp_astype(t, ans, x, dtype, *rest, **kwargs):
    """Float results carry t (in their dtype); integer results carry nothing."""
    if ans.dtype.kind in "fc":
        return np.asarray(t).astype(ans.dtype)
    return np.zeros(ans.shape)


@tangent(np.pad)
def jvp_pad(t, ans, array, pad_width, mode="constant", **kwargs):
    """Padding is linear in the array once constant fill values are read as zero."""
    if "constant_values" in kwargs:
        kwargs = dict(kwargs, constant_values=0)
    return np.pad(t, pad_width, mode, **kwargs)


@tangent(np.append)
def jvp_append_arr(t, ans, arr, values, axis=None):
    return np.append(t, np.zeros_like(values, dtype=np.result_type(t, float)), axis)


@tangent(np.append, argnum=1)
def jvp_append_values(t, ans, arr, values, axis=None):
    return np.append(np.zeros_like(arr, dtype=np.result_type(t, float)), t, axis)


@tangent(np.atleast_1d, np.atleast_2d, np.atleast_3d, np.broadcast_arrays, argnum=-1,
         container=True)  # fmt: skip
def jvp_each_input(t, ans, *args, argnum, **kwargs):
    """Output k is input k reshaped or broadcast: t shaped like output i, zeros elsewhere."""
    if isinstance(ans, np.ndarray):
        return _shaped_like(t, ans)
    outs = [np.zeros(np.shape(a), dtype=np.result_type(a, float)) for a in ans]
    outs[argnum] = _shaped_like(t, ans[argnum])
    return outs


def _shaped_like(t: Any, a: Any) -> Any:
    if np.size(t) == np.size(a):
        return np.reshape(t, np.shape(a))
    return np.broadcast_to(t, np.shape(a))


@tangent(np.meshgrid, argnum=-1, container=True)
def jvp_meshgrid(t, ans, *xi, argnum, indexing="xy", **kwargs):
    """Grid i spreads input i along one axis; the other grids do not read it."""
    axis = (
        {0: 1, 1: 0}.get(argnum, argnum) if indexing == "xy" and len(xi) > 1 else argnum
    )
    outs = [np.zeros(np.shape(a), dtype=np.result_type(a, float)) for a in ans]
    along = [1] * np.ndim(ans[argnum])
    along[axis] = -1
    outs[argnum] = np.broadcast_to(np.reshape(t, along), np.shape(ans[argnum]))
    return outs


@tangent(np.linspace)
def jvp_linspace_start(
    t, ans, start, stop, num=50, endpoint=True, retstep=False, **kwargs
):
    return np.linspace(t, np.zeros_like(stop, dtype=float), num, endpoint, **kwargs)


@tangent(np.linspace, argnum=1)
def jvp_linspace_stop(
    t, ans, start, stop, num=50, endpoint=True, retstep=False, **kwargs
):
    return np.linspace(np.zeros_like(start, dtype=float), t, num, endpoint, **kwargs)


@tangent(np.arange)
def jvp_arange_start(t, ans, *args, **kwargs):
    return (
        np.full(np.shape(ans), t, dtype=float)
        if len(args) >= 2
        else np.zeros(np.shape(ans))
    )


@tangent(np.arange, argnum=2)
def jvp_arange_step(t, ans, *args, **kwargs):
    return t * np.arange(np.size(ans), dtype=float)


# ---------------------------------------------------------------- contractions

linear(np.matmul, np.linalg.matmul, np.dot, np.vecdot, np.linalg.vecdot, np.inner,
       np.vdot, np.outer, np.linalg.outer, np.tensordot, np.linalg.tensordot, np.kron,
       np.cross, np.linalg.cross, slots=(0, 1))  # fmt: skip
linear(np.einsum, slots=None)
if hasattr(np, "matvec"):
    linear(np.matvec, np.vecmat, slots=(0, 1))


@tangent(np.linalg.multi_dot)
def jvp_multi_dot(t, ans, arrays, *, out=None):
    """Product rule over the factors whose tangent is not None."""
    total = np.zeros(np.shape(ans), dtype=np.result_type(ans, float))
    for k, tk in enumerate(t):
        if tk is not None:
            total = total + np.linalg.multi_dot([*arrays[:k], tk, *arrays[k + 1 :]])
    return total


# ---------------------------------------------------------------- linalg


@tangent(np.linalg.inv)
def jvp_inv(t, ans, a):
    return -(ans @ t @ ans)


@tangent(np.linalg.det)
def jvp_det(t, ans, a):
    """det(a) tr(a^-1 t)."""
    return ans * np.trace(np.linalg.solve(a, t), axis1=-2, axis2=-1)


@tangent(np.linalg.slogdet, container=True)
def jvp_slogdet(t, ans, a):
    logdet = np.trace(np.linalg.solve(a, t), axis1=-2, axis2=-1)
    return (np.zeros_like(ans[0], dtype=float), logdet)


@tangent(np.linalg.solve)
def jvp_solve_a(t, ans, a, b):
    if np.ndim(b) == 1:
        return -np.linalg.solve(a, (t @ ans[..., None])[..., 0][..., None])[..., 0]
    return -np.linalg.solve(a, t @ ans)


@tangent(np.linalg.solve, argnum=1)
def jvp_solve_b(t, ans, a, b):
    return np.linalg.solve(a, t)


@tangent(np.linalg.matrix_power)
def jvp_matrix_power(t, ans, a, n):
    """Product rule over the n factors (through the inverse for negative n)."""
    if n < 0:
        inv = np.linalg.inv(a)
        return jvp_matrix_power(-(inv @ t @ inv), None, inv, -n)
    eye = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
    powers = [eye]
    for _ in range(n - 1):
        powers.append(powers[-1] @ a)
    total = np.zeros(
        np.broadcast_shapes(np.shape(t), a.shape), dtype=np.result_type(t, a)
    )
    for k in range(n):
        total = total + powers[k] @ t @ powers[n - 1 - k]
    return total


def _symmetric_read(t: Any, lower: bool) -> Any:
    """The symmetric matrix a function reading one triangle of ``t`` sees."""
    tri = np.tril(t, -1) if lower else np.triu(t, 1)
    diag = np.eye(np.shape(t)[-1], dtype=bool)
    return tri + _mT(tri) + np.where(diag, t, 0)


@tangent(np.linalg.cholesky)
def jvp_cholesky(t, ans, a, *, upper=False):
    """dL = L Phi(L^-1 dA L^-T), Phi: lower triangle with half the diagonal."""
    low = _mT(ans) if upper else ans
    sym = _symmetric_read(t, lower=not upper)
    inner = np.linalg.solve(low, _mT(np.linalg.solve(low, sym)))
    phi = np.tril(inner) - 0.5 * np.where(np.eye(inner.shape[-1], dtype=bool), inner, 0)
    out = low @ phi
    return _mT(out) if upper else out


def _eigh_tangent(t: Any, w: Any, v: Any, uplo: str) -> tuple:
    """(dw, dv) of eigh: dw = diag(V^T dA V), dv = V (F o V^T dA V)."""
    sym = _symmetric_read(t, lower=uplo.upper() == "L")
    inner = _mT(v) @ sym @ v
    gaps = w[..., None, :] - w[..., :, None]
    off = ~np.eye(w.shape[-1], dtype=bool)
    f = np.where(off, 1.0 / np.where(off, gaps, 1.0), 0.0)
    return np.diagonal(inner, axis1=-2, axis2=-1), v @ (f * inner)


@tangent(np.linalg.eigh, container=True)
def jvp_eigh(t, ans, a, UPLO="L"):
    return _eigh_tangent(t, ans[0], ans[1], UPLO)


@tangent(np.linalg.eigvalsh)
def jvp_eigvalsh(t, ans, a, UPLO="L"):
    w, v = np.linalg.eigh(a, UPLO)
    return _eigh_tangent(t, w, v, UPLO)[0]


@tangent(np.linalg.svdvals)
def jvp_svdvals(t, ans, x):
    """ds_k = u_k^T dA v_k."""
    u, _, vh = np.linalg.svd(x, full_matrices=False)
    return np.einsum("...ik,...ij,...kj->...k", u, t, vh)


@tangent(np.linalg.svd, container=True)
def jvp_svd(t, ans, a, full_matrices=True, compute_uv=True, hermitian=False):
    """Singular values only, like the adjoint rule (U and Vh raise)."""
    if compute_uv:
        raise NotImplementedError("np.linalg.svd: no tangent rule for U and Vh")
    return jvp_svdvals(t, ans, a)


# ---------------------------------------------------------------- builtins and math

scalar(builtins.max, builtins.min, math.dist, math.prod)


linear(builtins.reversed)
constant(builtins.slice)


@tangent(builtins.sum, math.fsum)
def jvp_builtin_sum(t, ans, iterable, start=0):
    """The sum of the entries' tangents (an array's rows, or a list's entries)."""
    if isinstance(t, np.ndarray):
        return broadcast_like(np.sum(t, axis=0), ans)
    return broadcast_like(builtins.sum(filled(t, iterable)), ans)


@tangent(builtins.sum, math.fsum, argnum=1)
def jvp_builtin_sum_start(t, ans, iterable, start=0):
    return broadcast_like(t, ans)


@tangent(builtins.divmod, container=True)
def jvp_divmod_x(t, ans, x, y):
    return (0.0 * t, t)


@tangent(builtins.divmod, argnum=1, container=True)
def jvp_divmod_y(t, ans, x, y):
    return (0.0 * t, -t * ans[0])


@tangent(builtins.sorted)
def jvp_sorted(t, ans, iterable, *, key=None, reverse=False):
    values = list(iterable)
    keyed = values if key is None else [key(v) for v in values]
    order = sorted(range(len(values)), key=keyed.__getitem__, reverse=reverse)
    return [t[i] for i in order]


# ---------------------------------------------------------------- nn

scalar(nn.softmax_cross_entropy, nn.binary_cross_entropy_with_logits)


@tangent(nn.softmax)
def jvp_softmax(t, ans, x, axis=-1):
    return ans * (t - np.sum(t * ans, axis=axis, keepdims=True))


@tangent(nn.log_softmax)
def jvp_log_softmax(t, ans, x, axis=-1):
    return t - np.sum(t * np.exp(ans), axis=axis, keepdims=True)


@tangent(nn.dense)
def jvp_dense_x(t, ans, x, W, b=None):
    return t @ W


@tangent(nn.dense, argnum=1)
def jvp_dense_w(t, ans, x, W, b=None):
    return x @ t


@tangent(nn.dense, argnum=2)
def jvp_dense_b(t, ans, x, W, b=None):
    return broadcast_like(t, ans)


@tangent(nn.conv1d)
def jvp_conv1d_x(t, ans, x, w, b=None):
    return nn.conv1d(t, w)


@tangent(nn.conv1d, argnum=1)
def jvp_conv1d_w(t, ans, x, w, b=None):
    return nn.conv1d(x, t)


@tangent(nn.conv1d, argnum=2)
def jvp_conv1d_b(t, ans, x, w, b=None):
    return broadcast_like(np.asarray(t)[:, None], ans)


@tangent(nn.maxpool1d)
def jvp_maxpool1d(t, ans, x, k):
    """t at the first maximal element of each window."""
    share = nn.maxpool1d_grad(np.ones_like(ans), x, k, ans)
    n = np.shape(ans)[-1]
    picked = (share * t)[..., : n * k]
    return picked.reshape(*np.shape(ans), k).sum(axis=-1)


# ================================================================ second order
# Helpers and adjoint rules that emitted gradient modules call.

additive(support.add, support.accumulate)
# (none_ok: they read None as zero; container: the result may hold None entries even
# when the tangent passed in holds none)
linear(support.unbroadcast, support.finalize, support.without_item, or_zeros, filled,
       finish, none_ok=True)  # fmt: skip
linear(support.item_of, support.split_last, none_ok=True, container=True)
linear(support.pad, support.copy_item, zero_entry, container=True)
linear(broadcast_like)
# helpers of the adjoint rules (linear in their first argument), for rules whose
# own source is differentiated
linear(reductions.like, reductions.expand, reductions.spread, reductions.to_last,
       reductions.from_last, shapes.unstack_like)  # fmt: skip
# ... and helpers whose results are integers, axes or piecewise-constant weights
constant(reductions.axes_of, reductions.count, reductions._norm_kind,
         reductions._mask_share, reductions._along)  # fmt: skip
constant(support.zeros_like, support.ones_like_output)

# adjoint rules that read their other arguments only for shapes, indices or
# piecewise-constant masks (ties, sorting orders): linear in g
linear(reductions.d_sum, reductions.d_mean, reductions.d_nansum, reductions.d_nanmean,
       reductions.d_max, reductions.d_ptp, reductions.d_cumsum, reductions.d_diff,
       reductions.d_sort, reductions.d_median, indexing.d_getitem, indexing.d_take,
       indexing.d_take_along_axis, indexing.d_compress, indexing.d_extract,
       indexing.d_item, shapes.d_reshape, shapes.d_ravel, shapes.d_squeeze,
       shapes.d_atleast_nd, shapes.d_transpose, shapes.d_swapaxes, shapes.d_moveaxis,
       shapes.d_broadcast_to, shapes.d_broadcast_arrays, shapes.d_matrix_transpose,
       shapes.d_concatenate, shapes.d_stack, shapes.d_vstack, shapes.d_hstack,
       shapes.d_dstack, shapes.d_column_stack, shapes.d_append, shapes.d_split,
       shapes.d_hsplit, shapes.d_vsplit, shapes.d_dsplit, shapes.d_tile,
       shapes.d_repeat, shapes.d_flip, shapes.d_fliplr, shapes.d_flipud, shapes.d_roll,
       shapes.d_rot90, shapes.d_pad, shapes.d_triu, shapes.d_tril, shapes.d_diag,
       shapes.d_diagonal, shapes.d_trace, shapes.d_linalg_diagonal,
       shapes.d_linalg_trace, shapes.d_array, shapes.d_astype, shapes.d_full,
       shapes.d_full_like, pyfuncs.d_builtin_sum, pyfuncs.d_builtin_max,
       pyfuncs.d_list, pyfuncs.d_sorted, pyfuncs.d_builtin_float, nn.d_relu, nn.d_maxpool1d, nn.d_embedding,
       container=True)  # fmt: skip
linear(contractions.d_matmul_lhs, slots=(0, 3), container=True)
linear(contractions.d_matmul_rhs, slots=(0, 2), container=True)
linear(reductions.d_var, slots=(0, 2), container=True)
adjoint_of_multilinear(contractions.d_matmul, contractions.d_dot, contractions.d_inner,
                       contractions.d_vdot, contractions.d_outer,
                       contractions.d_tensordot, contractions.d_einsum,
                       contractions.d_kron, contractions.d_cross,
                       contractions.d_vecdot)  # fmt: skip


@tangent(reductions.d_logsumexp, container=True)
def jvp_d_logsumexp_g(t, ans, g, out, x, axis=None, keepdims=False):
    return reductions.d_logsumexp(t, out, x, axis, keepdims)


@tangent(reductions.d_logsumexp, argnum=2, container=True)
def jvp_d_logsumexp_x(t, ans, g, out, x, axis=None, keepdims=False):
    """g exp(x - out) with out held fixed."""
    p = np.exp(x - expand(out, x, axis, keepdims))
    return (expand(g, x, axis, keepdims) * p * t,)


@tangent(reductions.d_logsumexp, argnum=1, container=True)
def jvp_d_logsumexp_out(t, ans, g, out, x, axis=None, keepdims=False):
    """g exp(x - out) with x held fixed."""
    p = np.exp(x - expand(out, x, axis, keepdims))
    return (-expand(g, x, axis, keepdims) * p * expand(t, x, axis, keepdims),)


@tangent(nn.d_softmax_cross_entropy, container=True)
def jvp_d_softmax_cross_entropy_g(t, ans, g, out, logits, labels):
    return nn.d_softmax_cross_entropy(t, out, logits, labels)


@tangent(nn.d_softmax_cross_entropy, argnum=2, container=True)
def jvp_d_softmax_cross_entropy_logits(t, ans, g, out, logits, labels):
    """(softmax - onehot) g / n moves by g / n * softmax * (t - <softmax, t>)."""
    p = nn.softmax(logits)
    moved = p * (t - np.sum(p * t, axis=-1, keepdims=True))
    return (moved * (np.asarray(g, p.dtype) / max(np.size(labels), 1)), None)


@tangent(nn.d_log_softmax, container=True)
def jvp_d_log_softmax_g(t, ans, g, out, x, axis=-1):
    return nn.d_log_softmax(t, out, x, axis)


@tangent(nn.d_log_softmax, argnum=1, container=True)
def jvp_d_log_softmax_out(t, ans, g, out, x, axis=-1):
    return (-np.exp(out) * t * np.sum(g, axis=axis, keepdims=True),)


@tangent(nn.d_softmax, container=True)
def jvp_d_softmax_g(t, ans, g, out, x, axis=-1):
    return nn.d_softmax(t, out, x, axis)


@tangent(nn.d_softmax, argnum=1, container=True)
def jvp_d_softmax_out(t, ans, g, out, x, axis=-1):
    """out (g - <g, out>) moves by t (g - <g, out>) - out <g, t>."""
    inner = np.sum(g * out, axis=axis, keepdims=True)
    return (t * (g - inner) - out * np.sum(g * t, axis=axis, keepdims=True),)


@tangent(nn.d_binary_cross_entropy_with_logits, container=True)
def jvp_d_bce_g(t, ans, g, out, logits, targets):
    return nn.d_binary_cross_entropy_with_logits(t, out, logits, targets)


@tangent(nn.d_binary_cross_entropy_with_logits, argnum=2, container=True)
def jvp_d_bce_logits(t, ans, g, out, logits, targets):
    s = nn.sigmoid(logits)
    scale = np.asarray(g, np.asarray(logits).dtype) / np.size(logits)
    return (t * s * (1.0 - s) * scale, t * (np.asarray(-g) / np.size(logits)))


@tangent(nn.d_binary_cross_entropy_with_logits, argnum=3, container=True)
def jvp_d_bce_targets(t, ans, g, out, logits, targets):
    return (-t * (np.asarray(g, np.asarray(logits).dtype) / np.size(logits)), None)


@tangent(nn.d_dense, container=True)
def jvp_d_dense_g(t, ans, g, out, x, W, b=None):
    return nn.d_dense(t, out, x, W, b)


@tangent(nn.d_dense, argnum=2, container=True)
def jvp_d_dense_x(t, ans, g, out, x, W, b=None):
    return (None, nn.d_dense(g, out, t, W, b)[1], None)


@tangent(nn.d_dense, argnum=3, container=True)
def jvp_d_dense_w(t, ans, g, out, x, W, b=None):
    return (g @ _mT(t), None, None)


@tangent(nn.d_conv1d, container=True)
def jvp_d_conv1d_g(t, ans, g, out, x, w, b=None):
    return nn.d_conv1d(t, out, x, w, b)


@tangent(nn.d_conv1d, argnum=2, container=True)
def jvp_d_conv1d_x(t, ans, g, out, x, w, b=None):
    return (None, nn.conv1d_backward(g, t, w, None)[1], None)


@tangent(nn.d_conv1d, argnum=3, container=True)
def jvp_d_conv1d_w(t, ans, g, out, x, w, b=None):
    return (nn.conv1d_backward(g, x, t, None)[0], None, None)


@tangent(reductions.d_std, container=True)
def jvp_d_std_g(t, ans, g, out, x, *args, **kwargs):
    return reductions.d_std(t, out, x, *args, **kwargs)


@tangent(reductions.d_std, argnum=2, container=True)
def jvp_d_std_x(
    t, ans, g, out, x, axis=None, dtype=None, o=None, ddof=0, keepdims=False, **kw
):
    """g (x - mean) / (n s) with s held fixed: g (t - mean t) / (n s)."""
    n = reductions.count(x, axis) - kw.get("correction", ddof)
    s = expand(out, x, axis, keepdims)
    tc = t - np.mean(t, axis=axis, keepdims=True)
    scale = np.where(s == 0, 0, 1 / (n * np.where(s == 0, 1, s)))
    return (expand(g, x, axis, keepdims) * tc * scale,)


@tangent(reductions.d_std, argnum=1, container=True)
def jvp_d_std_out(
    t, ans, g, out, x, axis=None, dtype=None, o=None, ddof=0, keepdims=False, **kw
):
    """g (x - mean) / (n s) with x held fixed: - g (x - mean) ds / (n s^2)."""
    n = reductions.count(x, axis) - kw.get("correction", ddof)
    s = expand(out, x, axis, keepdims)
    centered = x - np.mean(x, axis=axis, keepdims=True)
    scale = np.where(s == 0, 0, 1 / (n * np.where(s == 0, 1, s) ** 2))
    ge = expand(g, x, axis, keepdims)
    return (-ge * centered * expand(t, x, axis, keepdims) * scale,)
