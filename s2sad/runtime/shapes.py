"""Adjoint rules for functions that move entries around without arithmetic.

Reshapes and transposes, joining and splitting, tiling, flips, padding,
triangles and diagonals, and the array constructors (``np.array`` of a list of
active values: its cotangent is a list).  Each rule accepts the function form
and the method form, whose arguments follow the receiver: ``x.reshape(2, 3)``
reaches :func:`d_reshape` as ``(x, 2, 3)`` and ``np.reshape(x, (2, 3))`` as
``(x, (2, 3))``.

Constructors that only read shapes (``zeros``, ``arange``, ``eye``, random
draws, ...) are declared nondifferentiable here.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from s2sad.runtime.reductions import like
from s2sad.runtime.registry import (
    adjoint,
    attribute_alias,
    method_alias,
    nondifferentiable,
)
from s2sad.runtime.support import unbroadcast

# ---------------------------------------------------------------- helpers


def _order(rest: Sequence, kwargs: dict) -> str:
    """The memory order of a reshape/ravel from its trailing args or keyword."""
    strings = [r for r in rest if isinstance(r, str)]
    return kwargs.get("order", strings[0] if strings else "C")


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


def _split_along(g: Any, sizes: Sequence[int], axis: int) -> list:
    """``g`` cut into consecutive pieces of the given sizes along ``axis``."""
    return np.split(g, np.cumsum(sizes)[:-1], axis=axis)


def _joined(g: Any, arrays: Sequence, views: Sequence, axis: int) -> list:
    """Cotangents of inputs joined along ``axis`` after reshaping to ``views``."""
    pieces = _split_along(g, [np.shape(v)[axis] for v in views], axis)
    return [like(np.reshape(p, np.shape(a)), a) for p, a in zip(pieces, arrays)]


# ---------------------------------------------------------------- reshaping


@adjoint(np.reshape)
def d_reshape(g, ans, x, *shape, **kwargs):
    return (like(np.reshape(g, np.shape(x), order=_order(shape[1:], kwargs)), x),)


@adjoint(np.ravel)
def d_ravel(g, ans, x, *rest, **kwargs):
    return (like(np.reshape(g, np.shape(x), order=_order(rest, kwargs)), x),)


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


@adjoint(np.matrix_transpose)
def d_matrix_transpose(g, ans, x):
    return (np.swapaxes(g, -1, -2),)


attribute_alias("T", np.transpose)
attribute_alias("mT", np.matrix_transpose)

for _name, _function in [
    ("reshape", np.reshape), ("transpose", np.transpose), ("ravel", np.ravel),
    ("flatten", np.ravel), ("squeeze", np.squeeze), ("swapaxes", np.swapaxes),
]:  # fmt: skip
    method_alias(_name, _function)
