"""Adjoint and tangent rules for ``scipy.stats`` densities (optional: needs SciPy).

The rules are registered for the bound methods of SciPy's distribution
objects (``scipy.stats.norm.logpdf``...), so ``norm.logpdf(x, mu, sigma)`` in
user code finds them.  Parameters given by keyword (``scale=sigma``) are
moved to their positions by the names of the rules' parameters, so each rule
names them as SciPy does (``x, df, loc=0.0, scale=1.0``).

``multivariate_normal.logpdf(x, mean, cov)`` takes ``cov`` as a 2-D matrix and,
like SciPy (which calls ``eigh`` on its lower triangle), reads only its lower
triangle: the entry below the diagonal carries both symmetric positions.
``poisson.logpmf(k, mu)`` is differentiable in ``mu`` only (``k`` counts).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special, stats

from s2sad.runtime.reductions import like
from s2sad.runtime.registry import adjoint
from s2sad.runtime.tangents import elementwise, tangent

_SQRT_2_PI = math.sqrt(2.0 * math.pi)

# ---------------------------------------------------------------- normal


@adjoint(stats.norm.logpdf, broadcasts=True)
def d_norm_logpdf(g, ans, x, loc=0.0, scale=1.0):
    """z = (x - loc) / scale: -z / scale, z / scale, (z^2 - 1) / scale."""
    z = (x - loc) / scale
    gz = g * z / scale
    return (-gz, gz, g * (z * z - 1.0) / scale)


@adjoint(stats.norm.pdf, broadcasts=True)
def d_norm_pdf(g, ans, x, loc=0.0, scale=1.0):
    z = (x - loc) / scale
    gz = g * ans * z / scale
    return (-gz, gz, g * ans * (z * z - 1.0) / scale)


@adjoint(stats.norm.cdf, broadcasts=True)
def d_norm_cdf(g, ans, x, loc=0.0, scale=1.0):
    """The density at z over scale: g pdf / scale, -g pdf / scale, -g pdf z / scale."""
    z = (x - loc) / scale
    gp = g * np.exp(-0.5 * z * z) / (_SQRT_2_PI * scale)
    return (gp, -gp, -gp * z)


@adjoint(stats.norm.logcdf, broadcasts=True)
def d_norm_logcdf(g, ans, x, loc=0.0, scale=1.0):
    """pdf / cdf as exp(log pdf - log cdf) (stable far in the left tail)."""
    z = (x - loc) / scale
    gr = g * np.exp(-0.5 * z * z - ans) / (_SQRT_2_PI * scale)
    return (gr, -gr, -gr * z)


# ---------------------------------------------------------------- Student t, gamma, beta


@adjoint(stats.t.logpdf, broadcasts=True)
def d_t_logpdf(g, ans, x, df, loc=0.0, scale=1.0):
    """Cotangents of x, df, loc and scale."""
    z = (x - loc) / scale
    zz = z * z
    dz = -(df + 1.0) * z / (df + zz)  # d logpdf / dz
    gdf = 0.5 * (
        special.digamma(0.5 * (df + 1.0))
        - special.digamma(0.5 * df)
        - 1.0 / df
        - np.log1p(zz / df)
        + (df + 1.0) * zz / (df * (df + zz))
    )
    return (g * dz / scale, g * gdf, -g * dz / scale, -g * (1.0 + dz * z) / scale)


@adjoint(stats.gamma.logpdf, broadcasts=True)
def d_gamma_logpdf(g, ans, x, a, loc=0.0, scale=1.0):
    """Cotangents of x, a (log y - digamma(a)), loc and scale; y = (x - loc) / scale."""
    y = (x - loc) / scale
    dy = (a - 1.0) / y - 1.0
    ga = g * (np.log(y) - special.digamma(a))
    return (g * dy / scale, ga, -g * dy / scale, -g * (1.0 + dy * y) / scale)


@adjoint(stats.beta.logpdf, broadcasts=True)
def d_beta_logpdf(g, ans, x, a, b, loc=0.0, scale=1.0):
    """Cotangents of x, a, b, loc and scale; y = (x - loc) / scale in (0, 1)."""
    y = (x - loc) / scale
    dy = (a - 1.0) / y - (b - 1.0) / (1.0 - y)
    both = special.digamma(a + b)
    ga = g * (np.log(y) - special.digamma(a) + both)
    gb = g * (np.log1p(-y) - special.digamma(b) + both)
    return (g * dy / scale, ga, gb, -g * dy / scale, -g * (1.0 + dy * y) / scale)


# ---------------------------------------------------------------- Poisson


@adjoint(stats.poisson.logpmf, broadcasts=True)
def d_poisson_logpmf(g, ans, k, mu, loc=0):
    """g ((k - loc) / mu - 1) for mu; the counts k and loc get none."""
    return (None, g * ((k - loc) / mu - 1.0), None)


# ---------------------------------------------------------------- multivariate normal


def _lower_sym(a: Any) -> Any:
    """The symmetric matrix whose lower triangle is that of ``a`` (what SciPy reads)."""
    low = np.tril(a, -1)
    return low + low.T + np.diag(np.diagonal(a))


def _mvn_parts(x: Any, mean: Any, cov: Any) -> tuple:
    """(residuals r of shape (..., d), inv(cov) r, the covariance SciPy reads)."""
    cov = np.asarray(cov)
    if cov.ndim != 2:
        raise NotImplementedError(
            "scipy.stats.multivariate_normal.logpdf: s2sad's rule needs cov as a "
            "2-D matrix (write np.diag(v) for a diagonal, s * np.eye(d) for a scalar)"
        )
    cov = _lower_sym(cov)
    r = np.asarray(x) - (0.0 if mean is None else np.asarray(mean))
    s = np.linalg.solve(cov, r.T).T if r.ndim == 2 else np.linalg.solve(cov, r)
    return r, s, cov


@adjoint(stats.multivariate_normal.logpdf)
def d_mvn_logpdf(g, ans, x, mean=None, cov=1, allow_singular=False):
    """-inv(cov) r g, its sum over points, and (inv(cov) r r^T inv(cov) - inv(cov)) g / 2."""
    r, s, sym = _mvn_parts(x, mean, cov)
    g = np.asarray(g)
    gs = g[..., None] * s  # (..., d)
    gx = -gs
    lead = tuple(range(gs.ndim - 1))
    gmean = None if mean is None else np.reshape(np.sum(gs, axis=lead), np.shape(mean))
    inv = np.linalg.inv(sym)
    outer = np.reshape(gs, (-1, gs.shape[-1])).T @ np.reshape(s, (-1, s.shape[-1]))
    gcov = 0.5 * (outer - np.sum(g) * inv)
    sym_g = 0.5 * (gcov + gcov.T)  # read from the lower triangle only:
    gcov = 2.0 * np.tril(sym_g, -1) + np.diag(np.diagonal(sym_g))
    gmean = None if gmean is None else like(gmean, mean)
    return (like(np.reshape(gx, np.shape(x)), x), gmean, like(gcov, cov))


# ================================================================ tangents
# The univariate densities broadcast elementwise over their arguments: their
# adjoint rules with g := t are their tangent rules.

elementwise(
    stats.norm.logpdf, stats.norm.pdf, stats.norm.cdf, stats.norm.logcdf,
    stats.t.logpdf, stats.gamma.logpdf, stats.beta.logpdf, stats.poisson.logpmf,
)  # fmt: skip


@tangent(stats.multivariate_normal.logpdf, argnum=0)
def jvp_mvn_logpdf_x(t, ans, x, mean=None, cov=1, allow_singular=False):
    r, s, _ = _mvn_parts(x, mean, cov)
    return -np.sum(s * t, axis=-1)


@tangent(stats.multivariate_normal.logpdf, argnum=1)
def jvp_mvn_logpdf_mean(t, ans, x, mean=None, cov=1, allow_singular=False):
    r, s, _ = _mvn_parts(x, mean, cov)
    return np.sum(s * t, axis=-1)


@tangent(stats.multivariate_normal.logpdf, argnum=2)
def jvp_mvn_logpdf_cov(t, ans, x, mean=None, cov=1, allow_singular=False):
    """(s^T T s - tr(inv(cov) T)) / 2 with T the symmetric matrix read from t."""
    r, s, read = _mvn_parts(x, mean, cov)
    sym = _lower_sym(t)
    quad = np.einsum("...i,ij,...j->...", s, sym, s)
    return -0.5 * (np.trace(np.linalg.solve(read, sym)) - quad)
