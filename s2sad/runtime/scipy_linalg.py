"""Adjoint and tangent rules for ``scipy.linalg`` and ``scipy.optimize.rosen``
(optional: needs SciPy).

One of :data:`s2sad.runtime.OPTIONAL_RULE_MODULES`, loaded only when SciPy is
importable.  Matrices are 2-D here, as SciPy's functions take them (``expm``
also accepts a stack).

Triangles read, as in :mod:`s2sad.runtime.linalg`: ``cholesky`` reads the upper
triangle of its input by default (``lower=False``: it returns ``U`` with
``a = U.T @ U``) and the lower one with ``lower=True``; ``cho_factor`` the
same, returning ``(c, lower)`` with the input's own entries in the other
triangle of ``c``; ``cho_solve`` reads the triangle of ``c`` its flag names; ``solve_triangular`` reads the triangle
``lower`` names, without the diagonal when ``unit_diagonal=True``.  Their
cotangents are zero on what is not read, which is what finite differences of
the SciPy function see.

``expm``'s derivative is the Frechet derivative ``L(A, E)``, the upper right
block of ``expm([[A, E], [0, A]])``; the adjoint is ``L(A.T, g)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg
import scipy.optimize

from s2sad.runtime.linalg import d_cholesky, jvp_cholesky
from s2sad.runtime.reductions import like
from s2sad.runtime.registry import adjoint
from s2sad.runtime.support import unbroadcast
from s2sad.runtime.tangents import tangent

# ---------------------------------------------------------------- cholesky


@adjoint(scipy.linalg.cholesky)
def d_scipy_cholesky(g, ans, a, lower=False, overwrite_a=False, check_finite=True):
    """NumPy's rule for the factor returned (``upper`` unless ``lower``)."""
    return d_cholesky(g, ans, a, upper=not lower)


@tangent(scipy.linalg.cholesky)
def jvp_scipy_cholesky(t, ans, a, lower=False, overwrite_a=False, check_finite=True):
    return jvp_cholesky(t, ans, a, upper=not lower)


def _triangle(a: Any, lower: bool, unit: bool = False) -> Any:
    """The part of ``a`` a triangular routine reads."""
    return np.tril(a, -1 if unit else 0) if lower else np.triu(a, 1 if unit else 0)


def _as_matrix(x: Any) -> Any:
    return x[:, None] if np.ndim(x) == 1 else x


# ---------------------------------------------------------------- cho_solve


def _cho_matrix(c: Any, lower: bool) -> Any:
    """``A`` of the factor ``c``: L L^T or U^T U, from the triangle read."""
    f = _triangle(c, lower)
    return f @ f.T if lower else f.T @ f


@adjoint(scipy.linalg.cho_solve)
def d_cho_solve(g, ans, c_and_lower, b, overwrite_b=False, check_finite=True):
    """x = A^-1 b: b_bar = A^-1 g, A_bar = -b_bar x^T, through A = L L^T
    (c_bar = tril((A_bar + A_bar^T) L)) or A = U^T U (c_bar = triu(U (...)))."""
    c, lower = c_and_lower
    gb = scipy.linalg.cho_solve((c, lower), g)
    ga = -_as_matrix(gb) @ _as_matrix(ans).T
    s = ga + ga.T
    f = _triangle(c, lower)
    gc = _triangle(s @ f if lower else f @ s, lower)
    return ((like(gc, c), None), unbroadcast(gb, b))


@tangent(scipy.linalg.cho_solve)
def jvp_cho_solve_c(t, ans, c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower = c_and_lower
    tc = t[0] if isinstance(t, (tuple, list)) else t
    if tc is None:
        return np.zeros_like(ans)
    f, df = _triangle(c, lower), _triangle(tc, lower)
    da = df @ f.T + f @ df.T if lower else df.T @ f + f.T @ df
    return -scipy.linalg.cho_solve((c, lower), da @ ans)


@tangent(scipy.linalg.cho_solve, argnum=1)
def jvp_cho_solve_b(t, ans, c_and_lower, b, overwrite_b=False, check_finite=True):
    return scipy.linalg.cho_solve(c_and_lower, t)


# ---------------------------------------------------------------- cho_factor


def _off_triangle(x: Any, lower: bool) -> Any:
    """The triangle ``cho_factor`` leaves as its input's (strictly above the
    diagonal for a lower factor, below it for an upper one)."""
    return np.triu(x, 1) if lower else np.tril(x, -1)


@adjoint(scipy.linalg.cho_factor)
def d_cho_factor(g, ans, a, lower=False, overwrite_a=False, check_finite=True):
    """``(c, lower)``: ``c`` holds the factor in the triangle ``lower`` names
    (``cholesky``'s rule) and ``a``'s own entries in the other one (passed
    through: ``cho_solve`` never reads them, so their cotangent is zero)."""
    g_c = g[0] if isinstance(g, (tuple, list)) else g
    if g_c is None:
        return (None,)
    factor = _triangle(ans[0], lower)
    ct = d_cholesky(_triangle(g_c, lower), factor, a, upper=not lower)[0]
    return (like(ct + _off_triangle(g_c, lower), a),)


@tangent(scipy.linalg.cho_factor, container=True)
def jvp_cho_factor(t, ans, a, lower=False, overwrite_a=False, check_finite=True):
    factor = _triangle(ans[0], lower)
    dc = jvp_cholesky(t, factor, a, upper=not lower)
    return (dc + _off_triangle(t, lower), None)


# ---------------------------------------------------------------- solve_triangular


def _transposed(trans: Any) -> bool:
    """Whether ``trans`` solves with A^T (real matrices: 'C' is 'T')."""
    return trans in (1, 2, "T", "C")


@adjoint(scipy.linalg.solve_triangular)
def d_solve_triangular(
    g,
    ans,
    a,
    b,
    trans=0,
    lower=False,
    unit_diagonal=False,
    overwrite_b=False,
    check_finite=None,
    **_: Any,
):
    """x = op(A)^-1 b: b_bar = op(A)^-T g; op(A)_bar = -b_bar x^T, on the triangle."""
    back = 0 if _transposed(trans) else 1
    gb = scipy.linalg.solve_triangular(
        a, g, trans=back, lower=lower, unit_diagonal=unit_diagonal
    )
    gop = -_as_matrix(gb) @ _as_matrix(ans).T
    ga = gop.T if _transposed(trans) else gop
    return (like(_triangle(ga, lower, unit_diagonal), a), unbroadcast(gb, b))


@tangent(scipy.linalg.solve_triangular)
def jvp_solve_triangular_a(
    t,
    ans,
    a,
    b,
    trans=0,
    lower=False,
    unit_diagonal=False,
    overwrite_b=False,
    check_finite=None,
    **_: Any,
):
    da = _triangle(t, lower, unit_diagonal)
    dop = da.T if _transposed(trans) else da
    rhs = dop @ ans
    return -scipy.linalg.solve_triangular(
        a, rhs, trans=trans, lower=lower, unit_diagonal=unit_diagonal
    )


@tangent(scipy.linalg.solve_triangular, argnum=1)
def jvp_solve_triangular_b(
    t,
    ans,
    a,
    b,
    trans=0,
    lower=False,
    unit_diagonal=False,
    overwrite_b=False,
    check_finite=None,
    **_: Any,
):
    return scipy.linalg.solve_triangular(
        a, t, trans=trans, lower=lower, unit_diagonal=unit_diagonal
    )


# ---------------------------------------------------------------- expm


def _frechet(a: Any, e: Any) -> Any:
    """L(a, e), the upper right block of expm([[a, e], [0, a]]) (batched)."""
    n = a.shape[-1]
    e = np.broadcast_to(e, a.shape)
    top = np.concatenate([a, e], axis=-1)
    bottom = np.concatenate([np.zeros_like(a), a], axis=-1)
    return scipy.linalg.expm(np.concatenate([top, bottom], axis=-2))[..., :n, n:]


@adjoint(scipy.linalg.expm)
def d_expm(g, ans, A):
    a = np.asarray(A, dtype=np.result_type(A, g, np.float64))
    return (like(_frechet(np.swapaxes(a, -1, -2), g), A),)


@tangent(scipy.linalg.expm)
def jvp_expm(t, ans, A):
    a = np.asarray(A, dtype=np.result_type(A, t, np.float64))
    return _frechet(a, t)


# ---------------------------------------------------------------- rosen


@adjoint(scipy.optimize.rosen)
def d_rosen(g, ans, x):
    """g * rosen_der(x): rosen sums over the first axis."""
    der = scipy.optimize.rosen_der(np.asarray(x, dtype=float))
    return (like(g * der, x),)


@tangent(scipy.optimize.rosen)
def jvp_rosen(t, ans, x):
    return np.sum(scipy.optimize.rosen_der(np.asarray(x, dtype=float)) * t, axis=0)
