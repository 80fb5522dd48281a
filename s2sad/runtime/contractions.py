"""Adjoint rules for products that sum over shared axes.

``matmul`` and ``dot`` take the fast 2-d path (``g @ y.T``, ``x.T @ g``) when
they can; every other case (1-d operands, batches with broadcasting, N-d
``dot``, ``tensordot``, ``inner``, ``einsum``) goes through one general
helper, :func:`einsum_grads`, which differentiates an einsum by contracting the
output cotangent with the other operands.  ``einsum`` rules support explicit and
implicit outputs, ellipses (with broadcasting), repeated indices (diagonals)
and indices summed within one operand.

Output buffers (``into``)
-------------------------
The hottest rules (here ``matmul``; in other modules ``getitem``, ``mean``,
``max``, ``reshape``, ``softmax_cross_entropy``, ``maxpool1d``) take a
keyword-only ``into=None``, so that generated code can hand them preallocated
cotangent buffers and a training step allocates nothing activation-sized:

* ``into=None`` (the default) changes nothing: the results are the usual ones.
* Otherwise ``into`` is a tuple, possibly shorter than the rule's result (a
  missing entry is None).  Entry i is None or an array with exactly the shape
  and dtype of cotangent i for these inputs, writeable, C-contiguous, and
  sharing memory neither with ``g`` nor with any argument (the caller recorded
  the shapes from an earlier call on same-shaped inputs).
* The rule then writes cotangent i into that buffer and returns the buffer
  object itself as element i.  Where it cannot (other dtypes, broadcast
  batches, sparse or container cotangents), it ignores the buffer and returns
  what it returns without one; it never writes into a buffer it does not return.
* A buffer that does not fit (shape, dtype, layout) is ignored
  (:func:`~s2sad.runtime.reductions.into_buffer`).
* Results may differ from the bufferless ones in the last bits only where the
  buffer lets a product be summed in a different order (one matrix product
  instead of a batch of products summed afterwards).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from s2sad.runtime import backend
from s2sad.runtime.einsums import d_einsum, einsum_grads
from s2sad.runtime.reductions import into_buffer, like
from s2sad.runtime.registry import adjoint, method_alias
from s2sad.runtime.support import unbroadcast
from s2sad.runtime.tangents import adjoint_of_multilinear, linear

# ---------------------------------------------------------------- matmul and dot


def _as_matrices(g: Any, x: np.ndarray, y: np.ndarray) -> tuple:
    """``(g, x, y)`` with 1-d operands read as a row (x) or a column (y) matrix."""
    g2 = np.asarray(g)
    if y.ndim == 1:
        g2 = g2[..., None]
    if x.ndim == 1:
        g2 = g2[..., None, :]
    return g2, (x[None, :] if x.ndim == 1 else x), (y[:, None] if y.ndim == 1 else y)


def _matmul_general(g: Any, x: np.ndarray, y: np.ndarray, into: Any = None) -> tuple:
    """matmul cotangents for 1-d operands and broadcast batches (into buffers if given)."""
    g2, x2, y2 = _as_matrices(g, x, y)
    return (
        _product(g2, _mT(y2), x, x2, _matmul_buffer(into, 0, x, y, g2)),
        _product(_mT(x2), g2, y, y2, _matmul_buffer(into, 1, y, x, g2)),
    )


def _product(a: Any, b: Any, x: np.ndarray, x2: np.ndarray, buf: Any) -> Any:
    """``a @ b`` summed down to the operand ``x`` (seen as the matrix ``x2``).

    With a buffer (already checked to have x's shape and the common dtype) the
    result is written into it, where that needs no temporary of its size.
    """
    if buf is not None:
        out = buf.reshape(x2.shape)  # a view: buf is C-contiguous
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        if batch == x2.shape[:-2]:
            np.matmul(a, b, out=out)  # no batch to sum over
            return buf
        if x2.ndim == 2:
            if not _merged_product(a, b, out):
                # a batch of small products (batch x operand size), summed into buf
                np.sum(a @ b, axis=tuple(range(len(batch))), out=out)
            return buf
    return like(np.reshape(unbroadcast(a @ b, x2), x.shape), x)


def _merged_product(a: Any, b: Any, out: np.ndarray) -> bool:
    """Sum over the batch of ``a[i] @ b[i]`` as one 2-d product, if no copy is needed.

    The batch is folded into the contracted axis (the rows of all ``b[i]``
    stacked, and likewise the columns of all ``a[i]``).  False when a reshape
    would copy: a strided slice, a broadcast batch, a 2-d operand.
    """
    if a.ndim < 3 or a.shape[:-2] != b.shape[:-2]:
        return False
    try:
        a_cols = np.reshape(_mT(a), (-1, a.shape[-2]), copy=False)
        b_rows = np.reshape(b, (-1, b.shape[-1]), copy=False)
    except ValueError:
        return False
    np.matmul(a_cols.T, b_rows, out=out)
    return True


def _matmul_buffer(into: Any, i: int, x: np.ndarray, other: Any, g: Any) -> Any:
    """``into[i]`` when the operands and g share x's float dtype (no casts needed)."""
    dtype = x.dtype
    if into is None or dtype.kind != "f" or other.dtype != dtype:
        return None
    if g.dtype != dtype:
        return None
    return into_buffer(into, i, x.shape, dtype)


def _vector_case(g: Any, x: np.ndarray, y: np.ndarray) -> bool:
    """An operand is 1-d, and g, x and y share one float dtype (no casts)."""
    if x.ndim != 1 and y.ndim != 1:
        return False
    dtype = x.dtype
    if dtype.kind != "f" or y.dtype != dtype:
        return False
    if x.ndim == 1 and y.ndim == 1:
        return np.result_type(g) == dtype
    return type(g) is np.ndarray and g.dtype == dtype


def _vector_x(g: Any, x: np.ndarray, y: np.ndarray, buf: Any) -> np.ndarray:
    """x's cotangent when x or y is a vector: an outer product (``g[..., None] *
    y``) or a matrix-vector product, never a matmul with an inner size of 1."""
    if y.ndim == 1:
        if x.ndim == 1:
            return np.multiply(y, g, out=buf)
        return np.multiply(g[..., None], y, out=buf)
    if y.ndim == 2:  # x 1-d: (k, n) @ (n,)
        return np.matmul(y, g, out=buf)
    prod = np.matmul(y, g[..., None])[..., 0]  # batch + (k,), summed over the batch
    return np.sum(prod, axis=tuple(range(prod.ndim - 1)), out=buf)


def _vector_y(g: Any, x: np.ndarray, y: np.ndarray, buf: Any) -> np.ndarray:
    """y's cotangent when x or y is a vector (see :func:`_vector_x`)."""
    if x.ndim == 1:
        if y.ndim == 1:
            return np.multiply(x, g, out=buf)
        return np.multiply(x[:, None], g[..., None, :], out=buf)
    k = x.shape[-1]  # y 1-d: sum over every row of x, weighted by g
    if x.ndim == 2:
        return np.matmul(g, x, out=buf)
    return np.matmul(g.reshape(-1), x.reshape(-1, k), out=buf)


def _buf(into: Any, i: int, x: np.ndarray) -> Any:
    return None if into is None else into_buffer(into, i, x.shape, x.dtype)


def _no_buffers(into: Any) -> bool:
    """No ``into`` tuple, or one holding only None."""
    if into is not None:
        for b in into:
            if b is not None:
                return False
    return True


def _fast(g: Any, x: np.ndarray, y: np.ndarray, into: Any) -> bool:
    """True for the bufferless 2-d x 2-d case of a single dtype."""
    return (
        _no_buffers(into)
        and x.ndim == 2
        and y.ndim == 2
        and x.dtype == y.dtype == np.result_type(g)
    )


def _fast_into(g: Any, x: np.ndarray, y: np.ndarray, into: Any, i: int) -> Any:
    """The 2-d x 2-d single-dtype case with buffers: cotangent ``i`` (0: x, 1: y)
    written into ``into[i]``; None when the case or the buffer does not fit."""
    if into is None or x.ndim != 2 or y.ndim != 2 or type(g) is not np.ndarray:
        return None
    if not (x.dtype == y.dtype == g.dtype) or x.dtype.kind != "f":
        return None
    target = x if i == 0 else y
    buf = into_buffer(into, i, target.shape, target.dtype)
    if buf is None:
        return None
    return np.matmul(g, y.T, out=buf) if i == 0 else np.matmul(x.T, g, out=buf)


def _out_2d(into: Any, i: int, like: np.ndarray) -> np.ndarray | None:
    """``into[i]`` where it can hold a cotangent of the float matrix ``like``."""
    buf = into[i] if into else None
    if (
        type(buf) is np.ndarray
        and buf.shape == like.shape
        and buf.dtype is like.dtype
        and buf.flags.c_contiguous
        and buf.flags.writeable
    ):
        return buf
    return None


def _matrices(g: Any, x: Any, y: Any) -> bool:
    """Three NumPy float matrices of one dtype (the commonest case, checked first)."""
    return (
        type(g) is np.ndarray
        and type(x) is np.ndarray
        and type(y) is np.ndarray
        and x.ndim == 2
        and y.ndim == 2
        and g.ndim == 2
        and x.dtype is y.dtype
        and g.dtype is x.dtype
        and x.dtype.kind == "f"
    )


@adjoint(np.matmul, np.linalg.matmul)
def d_matmul(g, ans, x, y, *, into=None):
    """g @ y.T and x.T @ g; 1-d operands and broadcast batches are handled too."""
    if _matrices(g, x, y) and (into is None or len(into) == 2):
        # float matrices: straight to the two products, into the buffers that fit
        # (no None written in the returns: the compiler reads them as never None)
        bx, by = _out_2d(into, 0, x), _out_2d(into, 1, y)
        return (np.matmul(g, y.T, out=bx), np.matmul(x.T, g, out=by))
    if backend.any_foreign(g, x, y):  # Dask: cotangents built lazily, in Dask
        gx, gy = backend.matmul_grads(g, x, y)
        return (gx, gy)
    x, y = np.asarray(x), np.asarray(y)
    if _fast(g, x, y, into):
        return (g @ y.T, x.T @ g)
    if _vector_case(g, x, y):
        return (
            _vector_x(g, x, y, _buf(into, 0, x)),
            _vector_y(g, x, y, _buf(into, 1, y)),
        )
    gx, gy = _fast_into(g, x, y, into, 0), _fast_into(g, x, y, into, 1)
    if gx is not None and gy is not None:
        return (gx, gy)
    return _matmul_general(g, x, y, into)


@adjoint(np.matmul, np.linalg.matmul, argnum=0)
def d_matmul_lhs(g, ans, x, y, *, into=None):
    """Only the left operand's cotangent: g @ y.T (no work for the right one)."""
    if _matrices(g, x, y) and (into is None or len(into) == 1):
        # float matrices: straight to the product (into the buffer that fits)
        return (np.matmul(g, y.T, out=_out_2d(into, 0, x)),)
    if backend.any_foreign(g, x, y):
        return (backend.matmul_grads(g, x, y)[0],)
    x, y = np.asarray(x), np.asarray(y)
    if _fast(g, x, y, into):
        return (g @ y.T,)
    if _vector_case(g, x, y):
        return (_vector_x(g, x, y, _buf(into, 0, x)),)
    gx = _fast_into(g, x, y, into, 0)
    if gx is not None:
        return (gx,)
    g2, x2, y2 = _as_matrices(g, x, y)
    return (_product(g2, _mT(y2), x, x2, _matmul_buffer(into, 0, x, y, g2)),)


@adjoint(np.matmul, np.linalg.matmul, argnum=1)
def d_matmul_rhs(g, ans, x, y, *, into=None):
    """Only the right operand's cotangent: x.T @ g."""
    if _matrices(g, x, y) and (into is None or len(into) == 1):
        # float matrices: straight to the product (into the buffer that fits)
        return (np.matmul(x.T, g, out=_out_2d(into, 0, y)),)
    if (  # matrix @ vector of one float dtype: _vector_y's g @ x, checks first
        into is None
        and type(x) is np.ndarray
        and type(y) is np.ndarray
        and type(g) is np.ndarray
        and x.ndim == 2
        and y.ndim == 1
        and x.dtype.kind == "f"
        and y.dtype == x.dtype
        and g.dtype == x.dtype
    ):
        return (np.matmul(g, x),)
    if backend.any_foreign(g, x, y):
        return (backend.matmul_grads(g, x, y)[1],)
    x, y = np.asarray(x), np.asarray(y)
    if _fast(g, x, y, into):
        return (x.T @ g,)
    if _vector_case(g, x, y):
        return (_vector_y(g, x, y, _buf(into, 0, y)),)
    gy = _fast_into(g, x, y, (None,) + tuple(into), 1) if into else None
    if gy is not None:
        return (gy,)
    g2, x2, y2 = _as_matrices(g, x, y)
    return (_product(_mT(x2), g2, y, y2, _matmul_buffer(into, 0, y, x, g2)),)


@adjoint(np.dot)
def d_dot(g, ans, a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return (like(unbroadcast(g * b, a), a), like(unbroadcast(g * a, b), b))
    if a.ndim <= 2 and b.ndim <= 2:
        if _vector_case(g, a, b):
            return (_vector_x(g, a, b, None), _vector_y(g, a, b, None))
        return _matmul_general(g, a, b)
    return _tensordot_grads(g, a, b, [a.ndim - 1], [max(b.ndim - 2, 0)])


method_alias("dot", np.dot)


@adjoint(np.vecdot, np.linalg.vecdot, broadcasts=True)
def d_vecdot(g, ans, x1, x2, *rest, axis=-1, **kwargs):
    """sum(x1 * x2, axis): each factor gets g (given back its axis) times the other."""
    ge = np.expand_dims(g, axis)
    return (ge * x2, ge * x1)


if hasattr(np, "matvec"):  # NumPy >= 2.2

    @adjoint(np.matvec, broadcasts=True)
    def d_matvec(g, ans, x1, x2, *rest, **kwargs):
        """(..., m, n) @ (..., n): an outer product and a transposed product."""
        g = np.asarray(g)
        return (g[..., :, None] * x2[..., None, :], np.matvec(_mT(x1), g))

    @adjoint(np.vecmat, broadcasts=True)
    def d_vecmat(g, ans, x1, x2, *rest, **kwargs):
        """(..., n) @ (..., n, m): a product and an outer product."""
        g = np.asarray(g)
        return (np.matvec(x2, g), x1[..., :, None] * g[..., None, :])


def _mT(a: Any) -> Any:
    return np.swapaxes(a, -1, -2)


@adjoint(np.inner)
def d_inner(g, ans, a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return (like(unbroadcast(g * b, a), a), like(unbroadcast(g * a, b), b))
    return _tensordot_grads(g, a, b, [a.ndim - 1], [b.ndim - 1])


@adjoint(np.vdot)
def d_vdot(g, ans, a, b):
    return (
        like(np.reshape(g * np.ravel(b), np.shape(a)), a),
        like(np.reshape(g * np.ravel(a), np.shape(b)), b),
    )


@adjoint(np.outer, np.linalg.outer)
def d_outer(g, ans, a, b, out=None):
    return (
        like(np.reshape(g @ np.ravel(b), np.shape(a)), a),
        like(np.reshape(np.ravel(a) @ g, np.shape(b)), b),
    )


# ---------------------------------------------------------------- tensordot


def _tensordot_axes(ndim_a: int, ndim_b: int, axes: Any) -> tuple[list, list]:
    """tensordot's ``axes`` argument as two lists of non-negative axes."""
    if isinstance(axes, (int, np.integer)):
        return list(range(ndim_a - axes, ndim_a)), list(range(axes))
    axes_a, axes_b = axes
    axes_a = [axes_a] if isinstance(axes_a, (int, np.integer)) else list(axes_a)
    axes_b = [axes_b] if isinstance(axes_b, (int, np.integer)) else list(axes_b)
    return [i % ndim_a for i in axes_a], [i % ndim_b for i in axes_b]


def _tensordot_grads(g: Any, a: np.ndarray, b: np.ndarray, axes_a, axes_b) -> tuple:
    """Cotangents of tensordot(a, b, (axes_a, axes_b)), as einsums."""
    sub_a = list(range(a.ndim))
    sub_b = list(range(a.ndim, a.ndim + b.ndim))
    for i, j in zip(axes_a, axes_b):
        sub_b[j] = sub_a[i]
    out = [s for i, s in enumerate(sub_a) if i not in axes_a]
    out += [s for j, s in enumerate(sub_b) if j not in axes_b]
    grads = einsum_grads(g, [a, b], [sub_a, sub_b], out)
    return tuple(like(c, x) for c, x in zip(grads, (a, b)))


@adjoint(np.tensordot, np.linalg.tensordot)
def d_tensordot(g, ans, a, b, axes=2):
    a, b = np.asarray(a), np.asarray(b)
    return _tensordot_grads(g, a, b, *_tensordot_axes(a.ndim, b.ndim, axes))


# ---------------------------------------------------------------- kron and cross


@adjoint(np.kron)
def d_kron(g, ans, a, b):
    """Read g as blocks: g[(i, k), (j, l)] = a[i, j] * b[k, l], then contract."""
    a, b = np.asarray(a), np.asarray(b)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + a.shape
    sb = (1,) * (nd - b.ndim) + b.shape
    blocks = np.reshape(g, [n for pair in zip(sa, sb) for n in pair])
    ia, ib = list(range(0, 2 * nd, 2)), list(range(1, 2 * nd, 2))
    ga = np.einsum(blocks, list(range(2 * nd)), np.reshape(b, sb), ib, ia)
    gb = np.einsum(blocks, list(range(2 * nd)), np.reshape(a, sa), ia, ib)
    return (like(ga.reshape(a.shape), a), like(gb.reshape(b.shape), b))


@adjoint(np.cross, np.linalg.cross, broadcasts=True)
def d_cross(g, ans, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """<g, a x b> = <a, b x g> = <b, g x a>; 2-vectors give scalar (z) outputs."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = np.moveaxis(a, axisa, -1), np.moveaxis(b, axisb, -1)
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        ga = np.stack([g * b[..., 1], -g * b[..., 0]], axis=-1)
        gb = np.stack([-g * a[..., 1], g * a[..., 0]], axis=-1)
    elif a.shape[-1] == 3 and b.shape[-1] == 3:
        g = np.moveaxis(g, axisc, -1)
        ga, gb = np.cross(b, g), np.cross(g, a)
    else:
        raise NotImplementedError("np.cross of a 2-vector with a 3-vector has no rule")
    return (np.moveaxis(ga, -1, axisa), np.moveaxis(gb, -1, axisb))


# ================================================================ tangents
# Forward mode (see s2sad.runtime.tangents): how each primal above pushes a
# tangent forward, then the tangents of this module's adjoint rules and helpers,
# which emitted gradient code calls (forward-over-reverse: Hessian-vector products).

linear(np.matmul, np.linalg.matmul, np.dot, np.vecdot, np.linalg.vecdot, np.inner,
       np.vdot, np.outer, np.linalg.outer, np.tensordot, np.linalg.tensordot, np.kron,
       np.cross, np.linalg.cross, slots=(0, 1))  # fmt: skip
linear(np.einsum, slots=None)
if hasattr(np, "matvec"):
    linear(np.matvec, np.vecmat, slots=(0, 1))

# partial rules: linear in g and in the one other factor they read
linear(d_matmul_lhs, slots=(0, 3), container=True)
linear(d_matmul_rhs, slots=(0, 2), container=True)
adjoint_of_multilinear(d_matmul, d_dot, d_inner, d_vdot, d_outer,
                       d_einsum, d_kron, d_cross, d_vecdot)  # fmt: skip
adjoint_of_multilinear(d_tensordot, slots=(0, 2, 3))  # axes: no tangent
