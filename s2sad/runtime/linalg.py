"""Adjoint rules for ``numpy.linalg`` (all batched over leading axes).

Triangles read: ``cholesky`` reads only the lower triangle of its input (the
upper one with ``upper=True``), and ``eigh``/``eigvalsh`` read the triangle
named by ``UPLO`` (lower by default).  Their cotangents are therefore
triangular: the entry below the diagonal carries the gradient of both
symmetric positions, and the unread triangle gets zero, exactly matching what
finite differences of the NumPy function see.

Singular or degenerate inputs: ``det`` uses the inverse (its rule fails for a
singular matrix); ``eigh`` eigenvector cotangents divide by eigenvalue gaps and
are infinite for repeated eigenvalues (eigenvalue cotangents are always fine).
``svd`` has a rule for singular values only (``compute_uv=False``, ``svdvals``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from s2sad.runtime import backend
from s2sad.runtime.reductions import like
from s2sad.runtime.registry import adjoint
from s2sad.runtime.support import unbroadcast
from s2sad.runtime.tangents import tangent

# ---------------------------------------------------------------- helpers


def _mT(a: Any) -> Any:
    """Matrix transpose of the last two axes."""
    return np.swapaxes(a, -1, -2)


def _sym(a: Any) -> Any:
    return 0.5 * (a + _mT(a))


def read_triangle(sym: Any, lower: bool) -> Any:
    """Cotangent of a function of a symmetric matrix that reads one triangle.

    The off-diagonal entry that is read stands for both symmetric positions,
    so it gets twice the symmetric gradient; the unread triangle gets zero.
    """
    diag = backend.eye(sym.shape[-1], bool, sym)
    tri = np.tril(sym, -1) if lower else np.triu(sym, 1)
    return 2.0 * tri + np.where(diag, sym, 0)


def _diag_embed(v: Any) -> Any:
    """Batched diagonal matrices from vectors (last axis)."""
    return v[..., :, None] * np.eye(v.shape[-1], dtype=v.dtype)


# ---------------------------------------------------------------- inverse and determinants


@adjoint(np.linalg.inv)
def d_inv(g, ans, a):
    return (-_mT(ans) @ g @ _mT(ans),)


@adjoint(np.linalg.det)
def d_det(g, ans, a):
    """g * det(a) * inv(a).T (a must be invertible)."""
    return (like(np.asarray(g * ans)[..., None, None] * _mT(np.linalg.inv(a)), a),)


@adjoint(np.linalg.slogdet)
def d_slogdet(g, ans, a):
    """Only log|det| has a gradient, inv(a).T; the sign is piecewise constant."""
    if g[1] is None:
        return (None,)
    return (like(np.asarray(g[1])[..., None, None] * _mT(np.linalg.inv(a)), a),)


@adjoint(np.linalg.solve)
def d_solve(g, ans, a, b):
    """b_bar = solve(a.T, g) and a_bar = -b_bar x.T, batched and broadcast."""
    if np.ndim(b) == 1:
        gb = np.linalg.solve(_mT(a), backend.as_array(g)[..., None])[..., 0]
        ga = -gb[..., :, None] * ans[..., None, :]
    else:
        gb = np.linalg.solve(_mT(a), g)
        ga = -gb @ _mT(ans)
    return (unbroadcast(ga, a), unbroadcast(gb, b))


@adjoint(np.linalg.matrix_power)
def d_matrix_power(g, ans, a, n):
    """sum over k of (a.T)^k g (a.T)^(n-1-k); negative n goes through the inverse."""
    if n < 0:
        inv = np.linalg.inv(a)
        g_inv = d_matrix_power(g, ans, inv, -n)[0]
        return (-_mT(inv) @ g_inv @ _mT(inv), None)
    powers = [np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)]
    for _ in range(n - 1):
        powers.append(powers[-1] @ a)
    ct = sum(_mT(powers[k]) @ g @ _mT(powers[n - 1 - k]) for k in range(n))
    return (like(np.zeros_like(a) + ct, a), None)


@adjoint(np.linalg.multi_dot)
def d_multi_dot(g, ans, arrays, *, out=None):
    """Each factor gets (product before).T @ g @ (product after).T."""
    mats = [np.asarray(m) for m in arrays]
    first_vec, last_vec = mats[0].ndim == 1, mats[-1].ndim == 1
    mats[0] = mats[0][None, :] if first_vec else mats[0]
    mats[-1] = mats[-1][:, None] if last_vec else mats[-1]
    g2 = np.asarray(g).reshape(mats[0].shape[0], mats[-1].shape[1])
    before = [np.eye(mats[0].shape[0])]
    for m in mats[:-1]:
        before.append(before[-1] @ m)
    after = [np.eye(mats[-1].shape[1])]
    for m in mats[:0:-1]:
        after.append(m @ after[-1])
    after = after[::-1]
    cts = [before[i].T @ g2 @ after[i].T for i in range(len(mats))]
    return ([like(np.reshape(c, np.shape(a)), a) for c, a in zip(cts, arrays)],)


# ---------------------------------------------------------------- factorizations


@adjoint(np.linalg.cholesky)
def d_cholesky(g, ans, a, *, upper=False):
    """Murray (2016): L^-T Phi(L^T g) L^-1, symmetrized, on the triangle read."""
    low, g_low = (_mT(ans), _mT(g)) if upper else (ans, g)
    phi = np.tril(_mT(low) @ g_low)
    phi = phi - 0.5 * np.where(backend.eye(phi.shape[-1], bool, phi), phi, 0)
    left = np.linalg.solve(_mT(low), phi)  # L^-T phi
    s = _mT(np.linalg.solve(_mT(low), _mT(left)))  # L^-T phi L^-1
    return (like(read_triangle(_sym(s), lower=not upper), a),)


def _eigh_sym_grad(gw: Any, gv: Any, w: Any, v: Any) -> Any:
    """Symmetric gradient of eigh: V (diag(gw) + F o V^T gv) V^T, symmetrized."""
    inner = np.zeros(np.shape(v), dtype=v.dtype)
    if gw is not None:
        inner = inner + _diag_embed(np.asarray(gw))
    if gv is not None:
        gaps = w[..., None, :] - w[..., :, None]
        off = ~np.eye(w.shape[-1], dtype=bool)
        f = np.where(off, 1.0 / np.where(off, gaps, 1.0), 0.0)
        inner = inner + f * (_mT(v) @ gv)
    return _sym(v @ inner @ _mT(v))


@adjoint(np.linalg.eigh)
def d_eigh(g, ans, a, UPLO="L"):
    """Eigenvalue and eigenvector cotangents; reads the UPLO triangle."""
    w, v = ans
    sym = _eigh_sym_grad(g[0], g[1], w, v)
    return (like(read_triangle(sym, lower=UPLO.upper() == "L"), a),)


@adjoint(np.linalg.eigvalsh)
def d_eigvalsh(g, ans, a, UPLO="L"):
    w, v = np.linalg.eigh(a, UPLO)
    sym = _eigh_sym_grad(g, None, w, v)
    return (like(read_triangle(sym, lower=UPLO.upper() == "L"), a),)


def singular_value_grad(g: Any, a: Any) -> Any:
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    return like((u * np.asarray(g)[..., None, :]) @ vh, a)


@adjoint(np.linalg.svd)
def d_svd(g, ans, a, full_matrices=True, compute_uv=True, hermitian=False):
    """Singular values only: U diag(g) V^T."""
    if not compute_uv:
        return (singular_value_grad(g, a),)
    if g[0] is not None or g[2] is not None:
        raise NotImplementedError("np.linalg.svd: no rule for U and Vh cotangents")
    return (singular_value_grad(g[1], a),)


@adjoint(np.linalg.svdvals)
def d_svdvals(g, ans, x):
    return (singular_value_grad(g, x),)


# ================================================================ tangents
# Forward mode (see s2sad.runtime.tangents): how each primal above pushes a
# tangent forward, then the tangents of this module's adjoint rules and helpers,
# which emitted gradient code calls (forward-over-reverse: Hessian-vector products).


@tangent(np.linalg.multi_dot)
def jvp_multi_dot(t, ans, arrays, *, out=None):
    """Product rule over the factors whose tangent is not None."""
    total = np.zeros(np.shape(ans), dtype=np.result_type(ans, float))
    for k, tk in enumerate(t):
        if tk is not None:
            total = total + np.linalg.multi_dot([*arrays[:k], tk, *arrays[k + 1 :]])
    return total


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


def symmetric_read(t: Any, lower: bool) -> Any:
    """The symmetric matrix a function reading one triangle of ``t`` sees."""
    tri = np.tril(t, -1) if lower else np.triu(t, 1)
    diag = np.eye(np.shape(t)[-1], dtype=bool)
    return tri + _mT(tri) + np.where(diag, t, 0)


@tangent(np.linalg.cholesky)
def jvp_cholesky(t, ans, a, *, upper=False):
    """dL = L Phi(L^-1 dA L^-T), Phi: lower triangle with half the diagonal."""
    low = _mT(ans) if upper else ans
    sym = symmetric_read(t, lower=not upper)
    inner = np.linalg.solve(low, _mT(np.linalg.solve(low, sym)))
    phi = np.tril(inner) - 0.5 * np.where(np.eye(inner.shape[-1], dtype=bool), inner, 0)
    out = low @ phi
    return _mT(out) if upper else out


def _eigh_tangent(t: Any, w: Any, v: Any, uplo: str) -> tuple:
    """(dw, dv) of eigh: dw = diag(V^T dA V), dv = V (F o V^T dA V)."""
    sym = symmetric_read(t, lower=uplo.upper() == "L")
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
