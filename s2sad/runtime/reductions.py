"""Adjoint rules for reductions (sum, mean, max/min, prod, logsumexp, ...).

Every rule accepts ``axis`` as None, an int, a negative int or a tuple, and
``keepdims``; the method forms (``x.sum(1)``) pass the same positional
arguments after the receiver.  A reduced cotangent is first given back its
reduced axes (:func:`expand`) and then broadcast against the input.  The axis
helpers here (:func:`expand`, :func:`like`, :func:`count`, ...) are shared with
:mod:`s2sad.runtime.statistics` (averages, moments, scans, sorting and norms)
and :func:`into_buffer` with every rule that takes an ``into`` buffer.

Conventions:

* ``max``/``min``/``amax``/``amin``/``nanmax``/``nanmin`` and ``ptp``: when
  several entries tie for the extremum, the cotangent is split equally among
  them (two tied maxima get ``g / 2`` each).
* ``prod`` is exact with zeros (no division by the input).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from s2sad.runtime import backend
from s2sad.runtime.extrema import max_along, min_along
from s2sad.runtime.registry import adjoint, method_alias, nondifferentiable
from s2sad.runtime.tangents import constant, linear, reduction, tangent

# ---------------------------------------------------------------- axis helpers


def axes_of(ndim: int, axis: Any) -> tuple[int, ...]:
    """``axis`` (None, int, negative int or tuple) as a sorted tuple of axes >= 0."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(sorted(a % ndim for a in axis))
    return (axis % ndim,) if ndim else ()


def expand(g: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    """Reinsert the reduced axes into ``g`` so that it broadcasts against ``x``."""
    if keepdims or axis is None:
        return g
    axes = axes_of(np.ndim(x), axis)
    if type(g) is np.ndarray and g.ndim + len(axes) == np.ndim(x):
        shape = list(g.shape)
        for a in axes:  # sorted: each 1 lands where np.expand_dims puts it
            shape.insert(a, 1)
        return g.reshape(shape)  # a view, like np.expand_dims's (1.4 us there)
    return np.expand_dims(g, axes)


def float_dtype(x: Any) -> np.dtype:
    """``x``'s dtype if it is a float dtype, else float64 (a cotangent's dtype)."""
    dtype = getattr(x, "dtype", None)
    return dtype if dtype is not None and dtype.kind == "f" else np.dtype(np.float64)


def like(ct: Any, x: Any) -> Any:
    """Cast ``ct`` to ``x``'s float dtype; split it into a list if ``x`` is a list."""
    if isinstance(x, (list, tuple)):
        return [like(c, xi) for c, xi in zip(ct, x)]
    dtype = getattr(x, "dtype", None)
    if dtype is not None and dtype.kind == "f" and getattr(ct, "dtype", dtype) != dtype:
        return backend.as_array(ct).astype(dtype)
    return ct


#: up to this many entries, a scalar spread over a whole array is written out
#: (``np.empty`` and ``fill``, about 0.25 us at 10 entries) rather than broadcast
#: (``np.broadcast_to`` costs about 2 us whatever the size)
SMALL_FILL = 4096

#: cotangent types that ``filled`` spreads: one number of a floating type
_FILL_SCALARS = (float, np.float64, np.float32)


def filled(g: Any, x: Any) -> np.ndarray | None:
    """A writable array of ``x``'s shape and float dtype holding the number ``g``
    everywhere: what ``like(spread(g, x, None, False), x)`` gives (same values,
    same dtype), for small float arrays; None otherwise (then spread)."""
    if (
        type(x) is np.ndarray
        and type(g) in _FILL_SCALARS
        and x.size <= SMALL_FILL
        and x.dtype.kind == "f"
    ):
        buf = np.empty(x.shape, x.dtype)
        buf.fill(g)
        return buf
    return None


def spread(g: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    """``g`` broadcast to ``x``'s shape (the cotangent of a sum): a read-only view,
    or a new array when ``x`` is a small NumPy array."""
    if backend.is_foreign(x):  # Dask: broadcast lazily, chunked like x
        return backend.broadcast_like(expand(g, x, axis, keepdims), x)
    e = expand(g, x, axis, keepdims)
    if type(x) is np.ndarray and x.size <= SMALL_FILL:
        # written out: np.broadcast_to alone costs about 2 us; same values and dtype
        buf = np.empty(x.shape, e.dtype if type(e) is np.ndarray else np.result_type(e))
        buf[...] = e
        return buf
    return np.broadcast_to(e, np.shape(x))


def count(x: Any, axis: Any) -> int:
    """How many entries of ``x`` each reduced output combines."""
    shape = np.shape(x)
    return math.prod(shape[a] for a in axes_of(len(shape), axis))


def to_last(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Move ``axes`` to the end and flatten them into one: shape (..., n)."""
    k = len(axes)
    moved = np.moveaxis(x, axes, tuple(range(x.ndim - k, x.ndim)))
    return moved.reshape(moved.shape[: x.ndim - k] + (-1,))


def from_last(y: np.ndarray, shape: tuple, axes: tuple[int, ...]) -> np.ndarray:
    """Inverse of :func:`to_last` for an array ``y`` of shape (..., n)."""
    k = len(axes)
    kept = [n for i, n in enumerate(shape) if i not in axes]
    moved = y.reshape(tuple(kept) + tuple(shape[a] for a in axes))
    return np.moveaxis(moved, tuple(range(len(shape) - k, len(shape))), axes)


def into_buffer(into: Any, i: int, shape: tuple, dtype: Any) -> np.ndarray | None:
    """Entry ``i`` of a rule's ``into`` tuple when it can hold the result, else None.

    See :mod:`s2sad.runtime.contractions` for the ``into`` protocol.  A buffer
    whose shape, dtype or layout does not fit (a None entry, a short tuple, a
    stale buffer) is treated as absent, so it can never cause a wrong value.
    """
    if into is None or i >= len(into):
        return None
    buf = into[i]
    if (
        type(buf) is np.ndarray
        and buf.shape == tuple(shape)
        and buf.dtype == dtype
        and buf.flags.c_contiguous
        and buf.flags.writeable
    ):
        return buf
    return None


def _float_out(x: Any, into: Any) -> np.ndarray | None:
    """``into[0]`` for a float ndarray ``x`` whose cotangent has x's shape and dtype."""
    if into is None or type(x) is not np.ndarray or x.dtype.kind != "f":
        return None
    return into_buffer(into, 0, x.shape, x.dtype)


def cast_away(dtype: Any, ans: Any) -> bool:
    """Whether ``dtype=`` made a reduction's result no float (np.sum(x,
    dtype=int) adds x cast to integers): piecewise constant, zero derivative."""
    return dtype is not None and getattr(ans, "dtype", np.dtype(float)).kind not in "fc"


def zero_cotangent(x: Any) -> Any:
    """Zeros in the place of x's cotangent (an array, never None)."""
    return like(np.zeros(np.shape(x)), x)


def no_where(kwargs: dict, name: str) -> None:
    """Be loud about ``where=`` masks that a rule does not implement."""
    if "where" in kwargs:
        raise NotImplementedError(f"{name}(..., where=...) has no rule")


#: np.einsum adds float32 0/1 entries exactly up to this many a sum
_EXACT_COUNT = 1 << 24


def count_ones(mask: np.ndarray, axis: Any) -> np.ndarray:
    """``np.sum(mask, axis, keepdims=True)`` for a float array of 0s and 1s: the
    same exact counts, by ``np.einsum``, whose loops beat the reduction's when
    the reduced axes are not the innermost (4 to 5x at (64, 16, 8, 8), axis=2:
    one short inner loop an output there) and are no slower elsewhere but on
    small arrays."""
    if mask.size >= 2048 and (mask.dtype == np.float32 or mask.dtype == np.float64):
        axes = axes_of(mask.ndim, axis)
        # axis=(): einsum would give back a view of mask
        if axes and count(mask, axis) <= _EXACT_COUNT:
            kept = [a for a in range(mask.ndim) if a not in axes]
            counts = np.einsum(mask, list(range(mask.ndim)), kept)
            shape = [1 if a in axes else n for a, n in enumerate(mask.shape)]
            return np.reshape(counts, shape)
    return np.sum(mask, axis=axis, keepdims=True)


def mask_share(x: Any, full: Any, axis: Any, where: Any = True) -> Any:
    """Indicator of ``x == full`` divided by the number of ties along ``axis``."""
    mask = (x == full) & where
    return mask / np.maximum(np.sum(mask, axis=axis, keepdims=True), 1)


# ---------------------------------------------------------------- sums and means


@adjoint(np.sum)
def d_sum(
    g, ans, x, axis=None, dtype=None, out=None, keepdims=False, initial=None,
    where=None,
):  # fmt: skip
    """g broadcast back over the summed axes (a read-only view, or a filled array
    for a full sum of a small array; zero off ``where``; ``initial`` is a constant)."""
    if cast_away(dtype, ans):
        return (zero_cotangent(x),)
    if (  # filled(g, x), written out: a full sum of a small float array
        axis is None
        and where is None
        and initial is None
        and not keepdims
        and type(x) is np.ndarray
        and type(g) in _FILL_SCALARS
        and x.size <= SMALL_FILL
        and x.dtype.kind == "f"
    ):
        buf = np.empty(x.shape, x.dtype)
        buf.fill(g)
        return (buf,)
    ct = spread(g, x, axis, keepdims)
    if where is not None:
        ct = np.where(where, ct, 0)
    if initial is not None:  # added to every output entry
        return (like(ct, x), None, None, None, None, np.sum(g))
    return (like(ct, x),)


@adjoint(np.mean)
def d_mean(
    g, ans, x, axis=None, dtype=None, out=None, keepdims=False, *, into=None, **kwargs
):
    """g / n broadcast back (a read-only view, or written into ``into[0]``)."""
    if cast_away(dtype, ans):
        return (zero_cotangent(x),)
    if (  # the common full mean of a small float array, written out
        into is None
        and axis is None
        and not kwargs
        and not keepdims
        and type(x) is np.ndarray
        and type(g) in _FILL_SCALARS
        and 0 < x.size <= SMALL_FILL
        and x.dtype.kind == "f"
    ):
        buf = np.empty(x.shape, x.dtype)
        buf.fill(g / x.size)
        return (buf,)
    buf = _float_out(x, into)
    if buf is not None and axis is None and not kwargs and np.ndim(g) == 0:
        buf.fill(g / x.size)  # the common full mean: one value everywhere
        return (buf,)
    if buf is not None:
        return (_mean_into(buf, g, x, axis, keepdims, kwargs.get("where")),)
    if (
        axis is None
        and not kwargs
        and not keepdims
        and type(x) is np.ndarray
        and x.size
    ):
        # (no None literal here: the compiler reads this rule's returns, and a
        # name that may hold None would make it guard every cotangent after it)
        ct = filled(g / x.size, x)
        if ct is not None:
            return (ct,)
    if "where" in kwargs:
        where = np.broadcast_to(kwargs["where"], np.shape(x))
        n = np.sum(where, axis=axis, keepdims=True)
        return (like(np.where(where, expand(g, x, axis, keepdims) / n, 0), x),)
    return (like(spread(g / count(x, axis), x, axis, keepdims), x),)


def _mean_into(buf: np.ndarray, g: Any, x: Any, axis: Any, keepdims: bool, where: Any):
    """d_mean's cotangent written into ``buf`` (same values as without a buffer)."""
    if where is None:
        np.copyto(buf, spread(g / count(x, axis), x, axis, keepdims), "same_kind")
        return buf
    where = np.broadcast_to(where, np.shape(x))
    n = np.sum(where, axis=axis, keepdims=True)
    buf.fill(0)
    np.copyto(buf, expand(g, x, axis, keepdims) / n, "same_kind", where=where)
    return buf


@adjoint(np.nansum)
def d_nansum(
    g, ans, x, axis=None, dtype=None, out=None, keepdims=False, initial=None, **kwargs
):
    no_where(kwargs, "np.nansum")
    if cast_away(dtype, ans):
        return (zero_cotangent(x),)
    ct = like(np.where(np.isnan(x), 0, spread(g, x, axis, keepdims)), x)
    if initial is not None:  # added to every output entry
        return (ct, None, None, None, None, np.sum(g))
    return (ct,)


@adjoint(np.nanmean)
def d_nanmean(g, ans, x, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
    no_where(kwargs, "np.nanmean")
    if cast_away(dtype, ans):
        return (zero_cotangent(x),)
    valid = ~np.isnan(x)
    n = np.sum(valid, axis=axis, keepdims=True)
    return (like(np.where(valid, expand(g, x, axis, keepdims) / n, 0), x),)


# ---------------------------------------------------------------- extrema


@adjoint(np.max, np.amax, np.min, np.amin, np.nanmax, np.nanmin, max_along, min_along)
def d_max(
    g, ans, x, axis=None, out=None, keepdims=False, initial=None, *, into=None,
    **kwargs,
):  # fmt: skip
    """Ties split the cotangent equally among the tied entries.

    A (differentiated) ``initial`` gets the cotangent of the outputs it is."""
    full = expand(ans, x, axis, keepdims)
    buf = _float_out(x, into)
    if buf is not None:
        ct = _max_into(buf, g, x, full, axis, keepdims, kwargs.get("where"))
    elif axis is None and not kwargs and type(x) is np.ndarray and np.ndim(g) == 0:
        mask = x == full  # the whole-array extremum: ties share g equally
        ct = like(mask * (g / max(np.count_nonzero(mask), 1)), x)
    else:
        share = mask_share(x, full, axis, kwargs.get("where", True))
        ct = like(expand(g, x, axis, keepdims) * share, x)
    if initial is not None:
        return (ct, None, None, None, np.sum(g * (ans == initial)))
    return (ct,)


def _max_into(buf, g, x, full, axis, keepdims, where) -> np.ndarray:
    """d_max's cotangent built in ``buf``: the tie mask, then times g / ties.

    Only reduced-size arrays are allocated; the values equal the bufferless ones
    (the per-output factor is formed in the same dtype before the one cast).
    """
    np.equal(x, full, out=buf)
    if where is not None:
        np.multiply(buf, where, out=buf)
    # counts of ties are small integers, exact in buf's float dtype; the
    # per-output factor g / ties is formed in that one reduced-size array
    ties = count_ones(buf, axis)
    np.maximum(ties, 1, out=ties)
    gx = expand(g, x, axis, keepdims)
    if np.shape(gx) == ties.shape:
        np.divide(gx, ties, out=ties)
    else:
        ties = gx / ties
    np.multiply(buf, ties, out=buf)
    return buf


@adjoint(np.ptp)
def d_ptp(g, ans, x, axis=None, out=None, keepdims=False):
    ge = expand(g, x, axis, keepdims)
    hi = expand(np.max(x, axis=axis, keepdims=keepdims), x, axis, keepdims)
    lo = expand(np.min(x, axis=axis, keepdims=keepdims), x, axis, keepdims)
    return (like(ge * (mask_share(x, hi, axis) - mask_share(x, lo, axis)), x),)


# ---------------------------------------------------------------- products


def _exclusive_products(flat: np.ndarray) -> np.ndarray:
    """For each entry of the last axis, the product of all the others (no division)."""
    ones = np.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)
    return left * right[..., ::-1]


@adjoint(np.prod)
def d_prod(g, ans, x, axis=None, dtype=None, out=None, keepdims=False, initial=None):
    """Product of the other entries of each slice: exact when entries are 0."""
    if cast_away(dtype, ans):
        return (zero_cotangent(x),)
    x = np.asarray(x)
    axes = axes_of(x.ndim, axis)
    others = from_last(_exclusive_products(to_last(x, axes)), x.shape, axes)
    scale = 1 if initial is None else initial
    ct = like(expand(g, x, axis, keepdims) * others * scale, x)
    if initial is not None:  # a differentiated initial multiplies the product
        plain = np.prod(x, axis=axis, keepdims=keepdims)
        return (ct, None, None, None, None, np.sum(g * plain))
    return (ct,)


# ---------------------------------------------------------------- logsumexp


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """log(sum(exp(x))) along ``axis``, computed without overflow."""
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


@adjoint(logsumexp)
def d_logsumexp(g, ans, x, axis=None, keepdims=False):
    """softmax(x) * g, evaluated as exp(x - logsumexp) (stable)."""
    ge = expand(g, x, axis, keepdims)
    return (like(ge * np.exp(x - expand(ans, x, axis, keepdims)), x),)


# ---------------------------------------------------------------- zero gradient

NONDIFFERENTIABLE = (
    np.argmax, np.argmin, np.nanargmax, np.nanargmin, np.argsort, np.argpartition,
    np.argwhere, np.nonzero, np.flatnonzero, np.count_nonzero, np.any, np.all,
    np.searchsorted, np.digitize, np.lexsort,
)  # fmt: skip
nondifferentiable(*NONDIFFERENTIABLE)

# ---------------------------------------------------------------- methods

for _name, _function in [
    ("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min),
    ("prod", np.prod), ("argmax", np.argmax), ("argmin", np.argmin),
    ("argsort", np.argsort), ("any", np.any), ("all", np.all),
    ("nonzero", np.nonzero),
]:  # fmt: skip
    method_alias(_name, _function)


# ================================================================ tangents
# Forward mode (see s2sad.runtime.tangents): how each primal above pushes a
# tangent forward, then the tangents of this module's adjoint rules and helpers,
# which emitted gradient code calls (forward-over-reverse: Hessian-vector products).

linear(np.mean)
# np.sum(x, ..., initial): linear in x plus initial (transforms/forward/exprs.py OFFSETS)
linear(np.sum, slots=(0, 5))
reduction(np.max, np.amax, np.min, np.amin, np.nanmax, np.nanmin, np.ptp, np.prod,
          logsumexp, max_along, min_along)  # fmt: skip


@tangent(np.nansum)
def jvp_nansum(t, ans, x, *args, **kwargs):
    # initial= (keyword or 6th argument) adds a constant: no tangent
    if "initial" in kwargs:
        kwargs = dict(kwargs, initial=0)
    if len(args) > 4:
        args = (*args[:4], 0, *args[5:])
    return np.nansum(np.where(np.isnan(x), 0, t), *args, **kwargs)


@tangent(np.nansum, argnum=5)
def jvp_nansum_initial(t, ans, x, *args, **kwargs):
    return np.zeros_like(ans) + t


@tangent(np.nanmean)
def jvp_nanmean(t, ans, x, *args, **kwargs):
    return np.nanmean(np.where(np.isnan(x), np.nan, t), *args, **kwargs)


# helpers of the adjoint rules (linear in their first argument), for rules whose
# own source is differentiated
linear(like, expand, spread, to_last, from_last)
# ... and helpers whose results are integers, axes or piecewise-constant weights
constant(axes_of, count, mask_share, cast_away, zero_cotangent)
# adjoint rules that read their other arguments only for shapes, indices or
# piecewise-constant masks (ties): linear in g
linear(d_sum, d_mean, d_nansum, d_nanmean, d_max, d_ptp, container=True)


@tangent(d_logsumexp, container=True)
def jvp_d_logsumexp_g(t, ans, g, out, x, axis=None, keepdims=False):
    return d_logsumexp(t, out, x, axis, keepdims)


@tangent(d_logsumexp, argnum=2, container=True)
def jvp_d_logsumexp_x(t, ans, g, out, x, axis=None, keepdims=False):
    """g exp(x - out) with out held fixed."""
    p = np.exp(x - expand(out, x, axis, keepdims))
    return (expand(g, x, axis, keepdims) * p * t,)


@tangent(d_logsumexp, argnum=1, container=True)
def jvp_d_logsumexp_out(t, ans, g, out, x, axis=None, keepdims=False):
    """g exp(x - out) with x held fixed."""
    p = np.exp(x - expand(out, x, axis, keepdims))
    return (-expand(g, x, axis, keepdims) * p * expand(t, x, axis, keepdims),)
