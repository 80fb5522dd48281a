"""Rules for ``np.linalg.pinv`` and ``np.linalg.lstsq`` (real matrices).

Both differentiate the pseudo-inverse formula of a matrix of constant rank
(Golub and Pereyra 1973; JAX's convention): with ``P = pinv(A)``,

    dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P.

For a matrix of full rank (either full column rank, the least-squares case,
or full row rank, the minimum-norm case) this is the derivative.  At rank
deficiency the pseudo-inverse jumps: the rule is then the derivative along
changes that keep the rank, the one finite differences see where the
singular values the cutoff (``rcond``/``rtol``) drops are exactly zero and
small changes keep them under it.  Where the cutoff drops a nonzero singular
value the result is not that truncated pseudo-inverse's derivative (rotations
into the dropped directions are left out).  The cutoff is the primal's:
``lstsq`` keeps its ``rcond`` (``None``: machine epsilon times the larger
dimension; negative: machine epsilon).

``lstsq`` returns ``(x, residuals, rank, s)``: ``x = pinv(a) @ b``; the
residuals ``|b - a x|^2`` per column (empty unless the matrix has full column
rank and more rows than columns) move with ``2 r^T (db - dA x)`` (``a^T r`` is
zero at the least-squares solution); ``s`` are the singular values
(``np.linalg.svdvals``'s rule); ``rank`` is an integer.  Complex matrices
raise ``NotImplementedError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from s2sad.runtime.linalg import (
    jvp_svdvals,
    read_triangle,
    singular_value_grad,
    symmetric_read,
)
from s2sad.runtime.reductions import like
from s2sad.runtime.registry import adjoint
from s2sad.runtime.tangents import constant, tangent


def _mT(a: Any) -> Any:
    return np.swapaxes(a, -1, -2)


def _real(*xs: Any) -> None:
    if any(np.iscomplexobj(x) for x in xs):
        raise NotImplementedError(
            "np.linalg.pinv/np.linalg.lstsq have rules for real matrices only"
        )


def _eye(n: int, like_: Any) -> np.ndarray:
    return np.eye(n, dtype=np.result_type(like_, np.float32))


# the rules' own sources are differentiated for second order: these read
# only dtypes and shapes
constant(_real, _eye)


def _pinv_adjoint(g: Any, a: Any, p: Any) -> Any:
    """The transpose of ``dA -> dP`` (the module docstring's formula) at ``g``."""
    pt = _mT(p)
    m, n = a.shape[-2], a.shape[-1]
    left = _eye(m, a) - a @ p  # I - A P, m x m
    right = _eye(n, a) - p @ a  # I - P A, n x n
    return -pt @ g @ pt + left @ _mT(g) @ (p @ pt) + (pt @ p) @ _mT(g) @ right


def _pinv_tangent(t: Any, a: Any, p: Any) -> Any:
    """``dP`` of the module docstring's formula for ``dA = t``."""
    pt, tt = _mT(p), _mT(t)
    m, n = a.shape[-2], a.shape[-1]
    left = _eye(m, a) - a @ p
    right = _eye(n, a) - p @ a
    return -p @ t @ p + (p @ pt) @ tt @ left + right @ tt @ (pt @ p)


# ---------------------------------------------------------------- pinv


def _hermitian_read(ct: Any, hermitian: bool) -> Any:
    """The cotangent of the lower triangle ``eigh`` reads (both positions)."""
    return read_triangle(0.5 * (ct + _mT(ct)), lower=True) if hermitian else ct


@adjoint(np.linalg.pinv)
def d_pinv(g, ans, a, rcond=None, hermitian=False, **kwargs):
    """The pseudo-inverse formula's transpose (full rank; see the module
    docstring for rank deficiency).  ``hermitian=True`` reads the lower
    triangle (``eigh``'s), which gets the cotangent of both positions."""
    _real(a, g)
    x = symmetric_read(a, lower=True) if hermitian else np.asarray(a)
    ct = _pinv_adjoint(np.asarray(g), x, ans)
    return (like(_hermitian_read(ct, hermitian), a),)


@tangent(np.linalg.pinv)
def jvp_pinv(t, ans, a, rcond=None, hermitian=False, **kwargs):
    _real(a, t)
    t = symmetric_read(t, lower=True) if hermitian else t
    return _pinv_tangent(t, np.asarray(a), ans)


# ---------------------------------------------------------------- lstsq


def _lstsq_pinv(a: np.ndarray, rcond: Any) -> np.ndarray:
    """``pinv(a)`` with ``lstsq``'s cutoff, so ``x = pinv(a) @ b`` exactly
    where ``lstsq`` drops singular values."""
    if a.ndim != 2:
        raise NotImplementedError("np.linalg.lstsq has a rule for a 2-D matrix only")
    return np.linalg.pinv(a, rtol=_cutoff(a, rcond))


def _cutoff(a: np.ndarray, rcond: Any) -> float:
    """``lstsq``'s relative cutoff: ``None`` is machine epsilon times the
    larger dimension, a negative ``rcond`` machine epsilon (LAPACK's)."""
    eps = float(np.finfo(np.result_type(a, np.float32)).eps)
    if rcond is None:
        return eps * max(a.shape)
    return eps if rcond < 0 else rcond


@adjoint(np.linalg.lstsq)
def d_lstsq(g, ans, a, b, rcond=None):
    """``x = pinv(a) @ b``: ``b`` gets ``pinv(a)^T g_x``, ``a`` the pinv
    rule's cotangent of ``g_x b^T``; residuals and singular values add theirs
    (module docstring); ``rank`` has none."""
    _real(a, b)
    x, res, _, _ = ans
    g_x, g_res, _, g_s = g
    ma, mb = np.asarray(a), np.asarray(b)
    p = _lstsq_pinv(ma, rcond)
    b2 = mb[:, None] if mb.ndim == 1 else mb
    x2 = x[:, None] if mb.ndim == 1 else x
    g_a = np.zeros(ma.shape, dtype=np.result_type(ma, np.float32))
    g_b = np.zeros(b2.shape, dtype=g_a.dtype)
    if g_x is not None:
        gx2 = np.reshape(g_x, x2.shape)
        g_a = g_a + _pinv_adjoint(gx2 @ b2.T, ma, p)
        g_b = g_b + p.T @ gx2
    if g_res is not None and np.size(res):
        r = (b2 - ma @ x2) * (2.0 * np.reshape(g_res, (1, -1)))
        g_a, g_b = g_a - r @ x2.T, g_b + r
    if g_s is not None:
        g_a = g_a + singular_value_grad(g_s, ma)
    return like(g_a, a), like(np.reshape(g_b, mb.shape), b)


def _jvp_lstsq(ta: Any, tb: Any, ans: Any, a: Any, b: Any, rcond: Any) -> tuple:
    """``(dx, dres, None, ds)`` for the tangents ``ta`` of ``a`` and ``tb`` of
    ``b`` (either None)."""
    _real(a, b)
    x, res, _, _ = ans
    ma, mb = np.asarray(a), np.asarray(b)
    p = _lstsq_pinv(ma, rcond)
    b2 = mb[:, None] if mb.ndim == 1 else mb
    x2 = x[:, None] if mb.ndim == 1 else x
    change = np.zeros(b2.shape)  # how b - a x moves, x held: db - dA x
    dx = np.zeros(x2.shape)
    ds = np.zeros(min(ma.shape))
    if ta is not None:
        dx = dx + _pinv_tangent(ta, ma, p) @ b2
        change = change - ta @ x2
        ds = jvp_svdvals(ta, None, ma)
    if tb is not None:
        tb2 = np.reshape(tb, b2.shape)
        dx, change = dx + p @ tb2, change + tb2
    dres = np.zeros(np.shape(res))
    if np.size(res):
        dres = 2.0 * np.sum((b2 - ma @ x2) * change, axis=0)
    return (np.reshape(dx, x.shape), dres, None, ds)


@tangent(np.linalg.lstsq, container=True)
def jvp_lstsq_a(t, ans, a, b, rcond=None):
    return _jvp_lstsq(t, None, ans, a, b, rcond)


@tangent(np.linalg.lstsq, argnum=1, container=True)
def jvp_lstsq_b(t, ans, a, b, rcond=None):
    return _jvp_lstsq(None, t, ans, a, b, rcond)


# ================================================================ second order
# Tangents of the adjoint rules (forward over reverse: Hessian-vector products)


def _pinv_adjoint_dot(g: Any, a: Any, p: Any, tg=None, ta=None, tp=None) -> Any:
    """How ``_pinv_adjoint(g, a, p)`` moves with ``g``, ``a`` and ``p``
    along ``tg``, ``ta``, ``tp`` (None: held)."""
    out = 0.0 if tg is None else _pinv_adjoint(tg, a, p)
    if ta is None and tp is None:
        return out
    ta = np.zeros(np.shape(a)) if ta is None else ta
    tp = np.zeros(np.shape(p)) if tp is None else tp
    pt, tpt, gt = _mT(p), _mT(tp), _mT(g)
    m, n = a.shape[-2], a.shape[-1]
    left, right = _eye(m, a) - a @ p, _eye(n, a) - p @ a
    d_left, d_right = -(ta @ p + a @ tp), -(tp @ a + p @ ta)
    return (
        out
        - (tpt @ g @ pt + pt @ g @ tpt)
        + d_left @ gt @ (p @ pt)
        + left @ gt @ (tp @ pt + p @ tpt)
        + (tpt @ p + pt @ tp) @ gt @ right
        + (pt @ p) @ gt @ d_right
    )


@tangent(d_pinv, container=True)
def jvp_d_pinv_g(t, ans, g, out, a, rcond=None, hermitian=False, **kwargs):
    return d_pinv(t, out, a, rcond, hermitian, **kwargs)


@tangent(d_pinv, argnum=1, container=True)
def jvp_d_pinv_out(t, ans, g, out, a, rcond=None, hermitian=False, **kwargs):
    x = symmetric_read(a, lower=True) if hermitian else np.asarray(a)
    ct = _pinv_adjoint_dot(np.asarray(g), x, out, tp=t)
    return (like(_hermitian_read(ct, hermitian), a),)


@tangent(d_pinv, argnum=2, container=True)
def jvp_d_pinv_a(t, ans, g, out, a, rcond=None, hermitian=False, **kwargs):
    ta = symmetric_read(t, lower=True) if hermitian else t
    x = symmetric_read(a, lower=True) if hermitian else np.asarray(a)
    ct = _pinv_adjoint_dot(np.asarray(g), x, out, ta=ta)
    return (like(_hermitian_read(ct, hermitian), a),)


def _d_lstsq_dot(g, out, a, b, rcond, tx=None, ta=None, tb=None) -> tuple:
    """How ``d_lstsq(g, out, a, b, rcond)`` moves with the solution ``x``, ``a``
    and ``b`` along ``tx``, ``ta``, ``tb`` (None: held)."""
    x = out[0]
    g_x, g_res, _, g_s = g
    if g_s is not None and ta is not None:
        raise NotImplementedError(
            "np.linalg.lstsq: no second-order rule for its singular values "
            "(the 4th output); np.linalg.svd's U and Vh have no tangent rule"
        )
    ma, mb = np.asarray(a), np.asarray(b)
    p = _lstsq_pinv(ma, rcond)
    col = mb.ndim == 1
    b2, x2 = (mb[:, None], x[:, None]) if col else (mb, x)
    tb2 = None if tb is None else np.reshape(tb, b2.shape)
    tx2 = None if tx is None else np.reshape(tx, x2.shape)
    g_a = np.zeros(ma.shape)
    g_b = np.zeros(b2.shape)
    if g_x is not None:
        gx2 = np.reshape(g_x, x2.shape)
        if ta is not None:
            tp = _pinv_tangent(ta, ma, p)
            g_a = g_a + _pinv_adjoint_dot(gx2 @ b2.T, ma, p, ta=ta, tp=tp)
            g_b = g_b + tp.T @ gx2
        if tb2 is not None:
            g_a = g_a + _pinv_adjoint(gx2 @ tb2.T, ma, p)
    if g_res is not None and np.size(out[1]):
        w = 2.0 * np.reshape(g_res, (1, -1))
        r = b2 - ma @ x2
        dr = np.zeros(b2.shape)  # how b - a x moves
        dr = dr if tx2 is None else dr - ma @ tx2
        dr = dr if ta is None else dr - ta @ x2
        dr = dr if tb2 is None else dr + tb2
        g_a = g_a - (dr * w) @ x2.T
        g_a = g_a if tx2 is None else g_a - (r * w) @ tx2.T
        g_b = g_b + dr * w
    return like(g_a, a), like(np.reshape(g_b, mb.shape), b)


@tangent(d_lstsq, container=True)
def jvp_d_lstsq_g(t, ans, g, out, a, b, rcond=None):
    return d_lstsq(tuple(t), out, a, b, rcond)


@tangent(d_lstsq, argnum=1, container=True)
def jvp_d_lstsq_out(t, ans, g, out, a, b, rcond=None):
    return _d_lstsq_dot(g, out, a, b, rcond, tx=None if t is None else t[0])


@tangent(d_lstsq, argnum=2, container=True)
def jvp_d_lstsq_a(t, ans, g, out, a, b, rcond=None):
    return _d_lstsq_dot(g, out, a, b, rcond, ta=t)


@tangent(d_lstsq, argnum=3, container=True)
def jvp_d_lstsq_b(t, ans, g, out, a, b, rcond=None):
    return _d_lstsq_dot(g, out, a, b, rcond, tb=t)
