"""Adjoint rules for functions that move entries around without arithmetic.

Reshapes and transposes, flips and rolls, triangles and diagonals, and the
array constructors (``np.array`` of a list of active values: its cotangent is a
list).  Joining, splitting, tiling and padding are in
:mod:`s2sad.runtime.joining`.  Each rule accepts the function form and the
method form, whose arguments follow the receiver: ``x.reshape(2, 3)`` reaches
:func:`d_reshape` as ``(x, 2, 3)`` and ``np.reshape(x, (2, 3))`` as
``(x, (2, 3))``.

Constructors that only read shapes (``zeros``, ``arange``, ``eye``, random
draws, ...) are declared nondifferentiable here.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from s2sad.runtime import backend
from s2sad.runtime.reductions import cast_away, into_buffer, like, zero_cotangent
from s2sad.runtime.registry import (
    adjoint,
    attribute_alias,
    method_alias,
    nondifferentiable,
)
from s2sad.runtime.support import unbroadcast
from s2sad.runtime.tangents import constant, linear, tangent

# ---------------------------------------------------------------- helpers


def _order(rest: Sequence, kwargs: dict, x: Any) -> str:
    """The memory order of a reshape/ravel of ``x`` from its trailing args or
    keyword, 'A' and 'K' resolved by x's layout (:func:`memory_order`)."""
    strings = [r for r in rest if isinstance(r, str)]
    return memory_order(x, kwargs.get("order", strings[0] if strings else "C"))


def memory_order(x: Any, order: str) -> str:
    """``order`` of a reshape/ravel of ``x`` as 'C' or 'F': 'A' is 'F' for an x
    laid out in Fortran order (only), and so is 'K' (memory order), which is
    'C' for a C-ordered x.  The cotangent, and the tangent, which may be laid
    out otherwise, are read in the order x was."""
    if order not in ("A", "K"):
        return order
    x = np.asarray(x)
    if order == "K" and not (x.flags.c_contiguous or x.flags.f_contiguous):
        raise NotImplementedError(
            "np.ravel(order='K') of an array laid out in neither C nor Fortran "
            "order has no rule: pass order='C' or 'F'"
        )
    return "F" if np.isfortran(x) else "C"


def _axes_arg(axes: Sequence) -> Any:
    """``transpose``'s axes from ``(None,)``, ``((1, 0),)`` or ``(1, 0)``."""
    if not axes or axes[0] is None:
        return None
    if len(axes) == 1 and isinstance(axes[0], (tuple, list, np.ndarray)):
        return tuple(axes[0])
    return tuple(axes)


def unstack_like(g: Any, x: Any) -> Any:
    """Cotangent ``g`` (an array) in the structure of ``x`` (nested lists allowed)."""
    if isinstance(x, (list, tuple)):
        return [unstack_like(g[i], xi) for i, xi in enumerate(x)]
    return like(np.reshape(g, np.shape(x)), x)


# ---------------------------------------------------------------- reshaping


@adjoint(np.reshape)
def d_reshape(g, ans, x, *shape, into=None, **kwargs):
    """g read in x's shape: a view of g when possible.

    ``into[0]`` (protocol: :mod:`s2sad.runtime.contractions`) is used only where
    the bufferless rule would allocate: a C-order reshape that must copy ``g``
    (a transposed or broadcast g) or that casts it to x's dtype.
    """
    if (
        type(g) is np.ndarray
        and type(x) is np.ndarray
        and g.dtype == x.dtype
        and g.flags.c_contiguous
        and not kwargs
        and not any(type(r) is str for r in shape)
    ):  # C order, no cast: always a view of g (about 0.4 us, not 2)
        return (g.reshape(x.shape),)
    order = _order(shape[1:], kwargs, x)
    buf = _reshape_buffer(g, x, order, into)
    if buf is not None:
        np.copyto(buf.reshape(np.shape(g)), g, casting="same_kind")
        return (buf,)
    return (like(np.reshape(g, np.shape(x), order=order), x),)


def _reshape_buffer(g: Any, x: Any, order: str, into: Any) -> np.ndarray | None:
    """``into[0]`` when reshaping g to x's float ndarray would copy or cast, else None."""
    if into is None or order != "C" or type(x) is not np.ndarray:
        return None
    if x.dtype.kind != "f" or type(g) is not np.ndarray or g.dtype.kind != "f":
        return None
    if g.dtype == x.dtype:
        try:
            np.reshape(g, x.shape, copy=False)
            return None  # a view of g costs nothing
        except ValueError:
            pass
    return into_buffer(into, 0, x.shape, x.dtype)


@adjoint(np.ravel)
def d_ravel(g, ans, x, *rest, **kwargs):
    return (like(np.reshape(g, np.shape(x), order=_order(rest, kwargs, x)), x),)


@adjoint(np.squeeze, np.expand_dims)
def d_squeeze(g, ans, x, *rest, **kwargs):
    return (like(np.reshape(g, np.shape(x)), x),)


@adjoint(np.atleast_1d, np.atleast_2d, np.atleast_3d)
def d_atleast_nd(g, ans, *arrays):
    """One array in, one out; several in, a tuple out (cotangent: a list)."""
    if len(arrays) == 1:
        return (like(np.reshape(g, np.shape(arrays[0])), arrays[0]),)
    return tuple(None if c is None else unstack_like(c, a) for c, a in zip(g, arrays))


@adjoint(np.transpose)
def d_transpose(g, ans, x, *axes, **kwargs):
    axes = _axes_arg(axes) if axes else kwargs.get("axes")
    return (np.transpose(g, None if axes is None else np.argsort(axes)),)


@adjoint(np.swapaxes)
def d_swapaxes(g, ans, x, axis1, axis2):
    return (np.swapaxes(g, axis1, axis2),)


@adjoint(np.moveaxis)
def d_moveaxis(g, ans, x, source, destination):
    return (np.moveaxis(g, destination, source),)


@adjoint(np.broadcast_to)
def d_broadcast_to(g, ans, x, shape, **kwargs):
    return (unbroadcast(g, x),)


@adjoint(np.broadcast_arrays)
def d_broadcast_arrays(g, ans, *args, **kwargs):
    return tuple(unbroadcast(gi, a) for gi, a in zip(g, args))


@adjoint(np.matrix_transpose, np.linalg.matrix_transpose)
def d_matrix_transpose(g, ans, x):
    return (np.swapaxes(g, -1, -2),)


# ---------------------------------------------------------------- reordering


@adjoint(np.flip)
def d_flip(g, ans, m, axis=None):
    return (np.flip(g, axis),)


@adjoint(np.fliplr)
def d_fliplr(g, ans, m):
    return (np.fliplr(g),)


@adjoint(np.flipud)
def d_flipud(g, ans, m):
    return (np.flipud(g),)


@adjoint(np.roll)
def d_roll(g, ans, a, shift, axis=None):
    return (
        like(np.reshape(np.roll(g, np.negative(shift), axis), np.shape(a)), a),
        None,
    )


@adjoint(np.rot90)
def d_rot90(g, ans, m, k=1, axes=(0, 1)):
    return (np.rot90(g, -k, axes),)


# ---------------------------------------------------------------- triangles and diagonals


@adjoint(np.triu)
def d_triu(g, ans, m, k=0):
    return (np.triu(g, k),)


@adjoint(np.tril)
def d_tril(g, ans, m, k=0):
    return (np.tril(g, k),)


def _place_diagonal(g: Any, shape: tuple, offset: int, axis1: int, axis2: int) -> Any:
    """Zeros of ``shape`` with ``g`` (diagonal last, as np.diagonal gives it) placed."""
    if backend.is_foreign(g):  # Dask: a mask, lazily
        return backend.place_diagonal(g, shape, offset, axis1, axis2)
    g = np.asarray(g)
    dtype = g.dtype if g.dtype.kind == "f" else np.float64
    ct = np.zeros(shape, dtype=dtype)
    view = np.moveaxis(ct, (axis1, axis2), (-2, -1))
    i = np.arange(g.shape[-1] if g.ndim else 0)
    view[..., i + max(-offset, 0), i + max(offset, 0)] = g
    return ct


def _diagonal_length(shape: tuple, offset: int, axis1: int, axis2: int) -> int:
    rows, cols = shape[axis1], shape[axis2]
    return max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))


@adjoint(np.diag)
def d_diag(g, ans, v, k=0):
    """1-d in: read the k-th diagonal of g; 2-d in: place g on it."""
    if np.ndim(v) == 1:
        return (like(np.diagonal(g, k), v),)
    return (like(_place_diagonal(g, np.shape(v), k, 0, 1), v),)


@adjoint(np.diagonal)
def d_diagonal(g, ans, a, offset=0, axis1=0, axis2=1):
    return (like(_place_diagonal(g, np.shape(a), offset, axis1, axis2), a),)


@adjoint(np.trace)
def d_trace(g, ans, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if cast_away(dtype, ans):
        return (zero_cotangent(a),)
    n = _diagonal_length(np.shape(a), offset, axis1, axis2)
    diagonal = np.broadcast_to(np.expand_dims(g, -1), np.shape(g) + (n,))
    return (like(_place_diagonal(diagonal, np.shape(a), offset, axis1, axis2), a),)


@adjoint(np.linalg.diagonal)
def d_linalg_diagonal(g, ans, x, *, offset=0):
    return (like(_place_diagonal(g, np.shape(x), offset, -2, -1), x),)


@adjoint(np.linalg.trace)
def d_linalg_trace(g, ans, x, *, offset=0, dtype=None):
    return d_trace(g, ans, x, offset, -2, -1)


# ---------------------------------------------------------------- building arrays


@adjoint(
    np.array, np.asarray, np.asanyarray, np.ascontiguousarray, np.asfortranarray,
    np.asarray_chkfinite, np.copy, np.float64, np.float32, np.float16,
)  # fmt: skip
def d_array(g, ans, obj, *rest, **kwargs):
    """An array built from ``obj``; a (nested) list gets a (nested) list cotangent.

    ``xs.copy()`` of a list or dict (the method stands for np.copy) keeps its type:
    its cotangent is a list or dict, passed through."""
    if isinstance(g, dict):
        return (dict(g),)
    if isinstance(g, (list, tuple)) and isinstance(obj, (list, tuple)):
        return (list(g),)
    if not _float_result(ans):  # np.asarray(x, dtype=int): piecewise constant
        return (None,)
    return (unstack_like(np.reshape(g, np.shape(obj)), obj),)


def _float_result(ans: Any) -> bool:
    """Whether an array result has a float (or complex) dtype: a cast to integers
    or booleans is piecewise constant, with zero derivative."""
    return not isinstance(ans, (np.ndarray, np.generic)) or ans.dtype.kind in "fc"


def float_part(t: Any, ans: Any) -> Any:
    """The tangent ``t`` of an array construction ``ans`` with a dtype: zeros where
    the dtype is no float (``np.asarray(x, dtype=int)``), else t itself."""
    return t if _float_result(ans) else np.zeros(np.shape(ans))


@adjoint(np.astype)
def d_astype(g, ans, x, dtype, *rest, **kwargs):
    """g back for a cast between floats, zero for one to integers or booleans."""
    float_cast = np.asarray(x).dtype.kind == "f" and _float_result(ans)
    return (like(g, x) if float_cast else None,)


@adjoint(np.full)
def d_full(g, ans, shape, fill_value, *rest, **kwargs):
    """The sum of g back to the fill value (zero for an integer dtype)."""
    if not _float_result(ans):  # dtype=int: piecewise constant
        return (None, zero_cotangent(fill_value))
    return (None, unbroadcast(g, fill_value))


@adjoint(np.full_like)
def d_full_like(g, ans, a, fill_value, *rest, **kwargs):
    return d_full(g, ans, None, fill_value)


@adjoint(np.arange)
def d_arange(g, ans, *args, **kwargs):
    """arange(start, stop, step) = start + i * step: start and step get gradient."""
    if len(args) < 2 or not _float_result(ans):
        return (None,)
    i = np.arange(np.size(g))
    return (np.sum(g), None, np.sum(g * i)) if len(args) > 2 else (np.sum(g), None)


@adjoint(np.linspace)
def d_linspace(g, ans, start, stop, num=50, endpoint=True, retstep=False, **kwargs):
    """start + t * (stop - start) with t = i / (num - 1) (or / num)."""
    if retstep:
        raise NotImplementedError("np.linspace(..., retstep=True) has no rule")
    if not _float_result(ans):  # dtype=int: piecewise constant
        return (zero_cotangent(start), zero_cotangent(stop))
    g = np.moveaxis(np.asarray(g), kwargs.get("axis", 0), 0)
    steps = max(num - 1, 1) if endpoint else num
    t = np.reshape(np.arange(num) / steps, (-1,) + (1,) * (g.ndim - 1))
    return (
        unbroadcast(np.sum(g * (1.0 - t), axis=0), start),
        unbroadcast(np.sum(g * t, axis=0), stop),
    )


@adjoint(np.meshgrid)
def d_meshgrid(g, ans, *xi, indexing="xy", **kwargs):
    """Each input is spread along one axis of every output: sum over the others."""
    cts = []
    for k, (gk, x) in enumerate(zip(g, xi)):
        axis = {0: 1, 1: 0}.get(k, k) if indexing == "xy" and len(xi) > 1 else k
        if gk is None:
            cts.append(None)
            continue
        others = tuple(d for d in range(np.ndim(gk)) if d != axis)
        cts.append(like(np.reshape(np.sum(gk, axis=others), np.shape(x)), x))
    return tuple(cts)


# ---------------------------------------------------------------- zero gradient

NONDIFFERENTIABLE = (
    np.zeros, np.ones, np.empty, np.zeros_like, np.ones_like, np.empty_like,
    np.eye, np.identity, np.tri, np.indices, np.diag_indices, np.tril_indices,
    np.triu_indices, np.unravel_index, np.ravel_multi_index, np.shape, np.ndim,
    np.size, np.result_type, np.promote_types, np.can_cast,
    np.random.seed, np.random.rand, np.random.randn, np.random.random,
    np.random.random_sample, np.random.uniform, np.random.normal,
    np.random.standard_normal, np.random.randint, np.random.choice,
    np.random.permutation, np.random.shuffle, np.random.default_rng,
    np.random.binomial, np.random.poisson, np.random.exponential, np.random.beta,
    np.random.gamma, np.random.multivariate_normal,
)  # fmt: skip
nondifferentiable(*NONDIFFERENTIABLE)


# ---------------------------------------------------------------- methods and attributes

attribute_alias("T", np.transpose)
attribute_alias("mT", np.matrix_transpose)
attribute_alias("real", np.real)  # (of real values: the values; runtime/elementwise.py)
attribute_alias("imag", np.imag)

for _name, _function in [
    ("reshape", np.reshape), ("transpose", np.transpose), ("ravel", np.ravel),
    ("flatten", np.ravel), ("squeeze", np.squeeze), ("swapaxes", np.swapaxes),
    ("astype", np.astype), ("copy", np.copy), ("trace", np.trace),
    ("diagonal", np.diagonal),
]:  # fmt: skip
    method_alias(_name, _function)


# ================================================================ tangents
# Forward mode (see s2sad.runtime.tangents): how each primal above pushes a
# tangent forward, then the tangents of this module's adjoint rules and helpers,
# which emitted gradient code calls (forward-over-reverse: Hessian-vector products).

linear(np.reshape, np.ravel, np.squeeze, np.expand_dims, np.transpose, np.swapaxes,
       np.moveaxis, np.broadcast_to, np.matrix_transpose, np.linalg.matrix_transpose,
       np.flip, np.fliplr, np.flipud, np.roll, np.rot90, np.triu, np.tril, np.diag,
       np.diagonal, np.linalg.diagonal, np.trace, np.linalg.trace, np.array,
       np.asarray, np.asanyarray, np.ascontiguousarray, np.asfortranarray,
       np.asarray_chkfinite, np.copy, np.float64, np.float32,
       np.float16)  # fmt: skip
linear(np.full, np.full_like, slots=(1,))
constant(memory_order)  # a string read off x's layout
linear(float_part)


@tangent(np.astype)
def jvp_astype(t, ans, x, dtype, *rest, **kwargs):
    """Float results carry t (in their dtype); integer results carry nothing."""
    if ans.dtype.kind in "fc":
        return np.asarray(t).astype(ans.dtype)
    return np.zeros(ans.shape)


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


linear(unstack_like)  # a helper of the adjoint rules, linear in its first argument
# adjoint rules that read their other arguments only for shapes: linear in g
linear(d_reshape, d_ravel, d_squeeze, d_atleast_nd, d_transpose, d_swapaxes,
       d_moveaxis, d_broadcast_to, d_broadcast_arrays, d_matrix_transpose, d_flip,
       d_fliplr, d_flipud, d_roll, d_rot90, d_triu, d_tril, d_diag, d_diagonal,
       d_trace, d_linalg_diagonal, d_linalg_trace, d_array, d_astype, d_full,
       d_full_like, container=True)  # fmt: skip
