"""Adjoint rules for joining, splitting, tiling, repeating and padding arrays.

Rules of functions that build one array from several (``concatenate``,
``stack`` and the ``*stack`` family, ``append``), cut one into a list of
pieces (``split`` and friends, ``unstack``), copy entries (``tile``,
``repeat``) or surround them with padding (``pad``).  Each joined input gets
its piece of ``g`` back; a list output (``split``) comes with a list cotangent
whose None entries stand for zeros; copies of an entry sum their cotangents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from s2sad.runtime.reductions import float_dtype, like
from s2sad.runtime.registry import adjoint, method_alias
from s2sad.runtime.support import unbroadcast
from s2sad.runtime.tangents import linear, tangent

# ---------------------------------------------------------------- helpers


def _split_along(g: Any, sizes: Sequence[int], axis: int) -> list:
    """``g`` cut into consecutive pieces of the given sizes along ``axis``."""
    return np.split(g, np.cumsum(sizes)[:-1], axis=axis)


def _joined(g: Any, arrays: Sequence, views: Sequence, axis: int) -> list:
    """Cotangents of inputs joined along ``axis`` after reshaping to ``views``."""
    pieces = _split_along(g, [np.shape(v)[axis] for v in views], axis)
    return [like(np.reshape(p, np.shape(a)), a) for p, a in zip(pieces, arrays)]


# ---------------------------------------------------------------- joining


@adjoint(np.concatenate)
def d_concatenate(g, ans, arrays, axis=0, *rest, **kwargs):
    """A list with one piece of ``g`` per joined array."""
    if axis is None:
        return (_joined(g, arrays, [np.ravel(a) for a in arrays], 0),)
    return (_joined(g, arrays, arrays, axis),)


@adjoint(np.stack)
def d_stack(g, ans, arrays, axis=0, *rest, **kwargs):
    return (_joined(g, arrays, [np.expand_dims(a, axis) for a in arrays], axis),)


@adjoint(np.vstack)
def d_vstack(g, ans, tup, *rest, **kwargs):
    return (_joined(g, tup, [np.atleast_2d(a) for a in tup], 0),)


@adjoint(np.hstack)
def d_hstack(g, ans, tup, *rest, **kwargs):
    views = [np.atleast_1d(a) for a in tup]
    return (_joined(g, tup, views, 0 if views[0].ndim == 1 else 1),)


@adjoint(np.dstack)
def d_dstack(g, ans, tup):
    return (_joined(g, tup, [np.atleast_3d(a) for a in tup], 2),)


@adjoint(np.column_stack)
def d_column_stack(g, ans, tup):
    views = [np.reshape(a, (-1, 1)) if np.ndim(a) < 2 else a for a in tup]
    return (_joined(g, tup, views, 1),)


@adjoint(np.append)
def d_append(g, ans, arr, values, axis=None):
    if axis is None:
        return tuple(_joined(g, [arr, values], [np.ravel(arr), np.ravel(values)], 0))
    return tuple(_joined(g, [arr, values], [arr, values], axis))


# ---------------------------------------------------------------- splitting


def _filled(g: list, pieces: Sequence) -> list:
    """Cotangents of a list output with zeros in place of None."""
    return [np.zeros_like(p) if c is None else c for c, p in zip(g, pieces)]


@adjoint(np.split, np.array_split)
def d_split(g, ans, ary, indices_or_sections, axis=0):
    return (like(np.concatenate(_filled(g, ans), axis=axis), ary), None)


@adjoint(np.hsplit)
def d_hsplit(g, ans, ary, indices_or_sections):
    axis = 1 if np.ndim(ary) > 1 else 0
    return (like(np.concatenate(_filled(g, ans), axis=axis), ary), None)


@adjoint(np.vsplit)
def d_vsplit(g, ans, ary, indices_or_sections):
    return (like(np.concatenate(_filled(g, ans), axis=0), ary), None)


@adjoint(np.dsplit)
def d_dsplit(g, ans, ary, indices_or_sections):
    return (like(np.concatenate(_filled(g, ans), axis=2), ary), None)


if hasattr(np, "unstack"):  # NumPy >= 2.1

    @adjoint(np.unstack)
    def d_unstack(g, ans, x, *, axis=0):
        return (like(np.stack(_filled(g, ans), axis=axis), x),)


# ---------------------------------------------------------------- repeating


@adjoint(np.tile)
def d_tile(g, ans, A, reps):
    """Read g as (reps, shape) blocks interleaved per axis; sum over the reps."""
    shape = np.shape(A)
    reps = tuple(np.atleast_1d(reps))
    d = max(len(shape), len(reps))
    s = (1,) * (d - len(shape)) + shape
    r = (1,) * (d - len(reps)) + reps
    blocks = np.reshape(g, [n for pair in zip(r, s) for n in pair])
    return (like(blocks.sum(axis=tuple(range(0, 2 * d, 2))).reshape(shape), A), None)


@adjoint(np.repeat)
def d_repeat(g, ans, a, repeats, axis=None):
    """Sum each run of copies; a scalar count is a reshape, counts per entry add.at."""
    base = np.ravel(a) if axis is None else np.asarray(a)
    axis = 0 if axis is None else axis % base.ndim
    n = base.shape[axis]
    moved = np.moveaxis(np.asarray(g), axis, 0)
    if np.size(repeats) == 1:
        r = int(np.ravel(repeats)[0])
        sums = moved.reshape((n, r) + moved.shape[1:]).sum(axis=1)
    else:
        sums = np.zeros((n,) + moved.shape[1:], dtype=moved.dtype)
        np.add.at(sums, np.repeat(np.arange(n), repeats), moved)
    return (like(np.moveaxis(sums, 0, axis).reshape(np.shape(a)), a), None)


# ---------------------------------------------------------------- padding

_COPYING_PAD_MODES = ("edge", "reflect", "symmetric", "wrap")


@adjoint(np.pad)
def d_pad(g, ans, array, pad_width, mode="constant", **kwargs):
    """Constant/empty padding: the inner slice; copying modes: sum every copy."""
    shape = np.shape(array)
    if mode in ("constant", "empty"):
        widths = np.broadcast_to(np.asarray(pad_width, dtype=int), (len(shape), 2))
        inner = tuple(slice(b, b + n) for (b, _), n in zip(widths, shape))
        return (like(g[inner], array), None)
    if mode not in _COPYING_PAD_MODES or kwargs.get("reflect_type") == "odd":
        raise NotImplementedError(f"np.pad(mode={mode!r}, {kwargs}) has no rule")
    size = int(np.prod(shape))
    source = np.pad(np.arange(size).reshape(shape), pad_width, mode=mode, **kwargs)
    sums = np.bincount(source.ravel(), weights=np.ravel(g), minlength=size)
    return (like(sums.reshape(shape).astype(np.asarray(g).dtype), array), None)


# ---------------------------------------------------------------- deleting, resizing, choosing


@adjoint(np.delete)
def d_delete(g, ans, arr, obj, axis=None):
    """The kept entries get ``g`` back at their places; deleted ones zero."""
    a = np.asarray(arr)
    if axis is None:
        ct = np.zeros(a.size, dtype=float_dtype(g))
        ct[np.delete(np.arange(a.size), obj)] = g
        return (like(ct.reshape(a.shape), arr), None)
    kept = np.delete(np.arange(a.shape[axis]), obj)
    ct = np.zeros(a.shape, dtype=float_dtype(g))
    at = (slice(None),) * (axis % a.ndim) + (kept,)
    ct[at] = g
    return (like(ct, arr), None)


@adjoint(np.resize)
def d_resize(g, ans, a, new_shape):
    """``np.resize`` repeats ``a``'s entries cyclically: each sums its copies."""
    x = np.asarray(a)
    if x.size == 0:
        return (like(np.zeros(x.shape), a), None)
    flat = np.ravel(g)
    source = np.arange(flat.size) % x.size
    sums = np.bincount(source, weights=flat, minlength=x.size)
    return (like(sums.reshape(x.shape).astype(float_dtype(g)), a), None)


def _chosen(condlist, shape) -> tuple[list, np.ndarray]:
    """Per choice of ``np.select``, where it is taken (the first true
    condition), and where none is (the default), broadcast to ``shape``."""
    free = np.ones(shape, dtype=bool)
    taken = []
    for c in condlist:
        c = np.broadcast_to(np.asarray(c, dtype=bool), shape)
        taken.append(c & free)
        free = free & ~c
    return taken, free


@adjoint(np.select)
def d_select(g, ans, condlist, choicelist, default=0):
    """Each choice (and the default) gets ``g`` where np.select took it."""
    g = np.asarray(g)
    taken, rest = _chosen(condlist, np.shape(ans))
    cts = [unbroadcast(g * m, c) for m, c in zip(taken, choicelist)]
    return (None, cts, unbroadcast(g * rest, default))


# ---------------------------------------------------------------- methods

method_alias("repeat", np.repeat)


# ================================================================ tangents
# Forward mode (see s2sad.runtime.tangents): how each primal above pushes a
# tangent forward, then the tangents of this module's adjoint rules and helpers,
# which emitted gradient code calls (forward-over-reverse: Hessian-vector products).

linear(np.concatenate, np.stack, np.vstack, np.hstack, np.dstack, np.column_stack,
       np.tile, np.repeat)  # fmt: skip
linear(np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit)
linear(np.delete, np.resize)


@tangent(np.select, argnum=1, container=True)
def jvp_select_choices(t, ans, condlist, choicelist, default=0):
    taken, _ = _chosen(condlist, np.shape(ans))
    out = np.zeros(np.shape(ans), dtype=np.result_type(ans, float))
    for m, ti in zip(taken, t):
        if ti is not None:
            out = out + np.where(m, ti, 0.0)
    return out


@tangent(np.select, argnum=2)
def jvp_select_default(t, ans, condlist, choicelist, default=0):
    _, rest = _chosen(condlist, np.shape(ans))
    return np.where(rest, t, 0.0)


if hasattr(np, "unstack"):
    linear(np.unstack)


@tangent(np.pad)
def jvp_pad(t, ans, array, pad_width, mode="constant", **kwargs):
    """Padding is linear in the array once constant fill values (constant_values,
    linear_ramp's end_values) are read as zero; the statistic modes maximum,
    minimum and median copy one entry that the tangent alone cannot tell."""
    if mode in ("maximum", "minimum", "median") or callable(mode):
        raise NotImplementedError(f"np.pad(mode={mode!r}) has no tangent rule")
    for fill in ("constant_values", "end_values"):
        if fill in kwargs:
            kwargs = dict(kwargs, **{fill: 0})
    return np.pad(t, pad_width, mode, **kwargs)


@tangent(np.append)
def jvp_append_arr(t, ans, arr, values, axis=None):
    return np.append(t, np.zeros_like(values, dtype=np.result_type(t, float)), axis)


@tangent(np.append, argnum=1)
def jvp_append_values(t, ans, arr, values, axis=None):
    return np.append(np.zeros_like(arr, dtype=np.result_type(t, float)), t, axis)


# adjoint rules that read their other arguments only for shapes: linear in g
linear(d_concatenate, d_stack, d_vstack, d_hstack, d_dstack, d_column_stack,
       d_append, d_split, d_hsplit, d_vsplit, d_dsplit, d_tile, d_repeat, d_pad,
       d_delete, d_resize, d_select, container=True)  # fmt: skip
