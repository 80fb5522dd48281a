"""Small SciPy programs: s2sad's gradients against finite differences.

SciPy is optional: without it this module is skipped.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy", reason="SciPy is optional; its rules need it installed")

import scipy.special  # noqa: E402
from scipy.special import expit, log_expit, logsumexp  # noqa: E402
from scipy.stats import norm, poisson  # noqa: E402

import s2sad  # noqa: E402
from s2sad.errors import MissingRuleError  # noqa: E402

RNG = np.random.default_rng(5)


def logistic_loss(w, X, y):
    z = X @ w
    return -np.mean(y * log_expit(z) + (1.0 - y) * log_expit(-z)) + 0.01 * np.sum(w * w)


def logistic_loss_expit(w, X, y):
    p = expit(X @ w)
    return -np.sum(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def mixture_nll(mu, sigma, logits, x):
    logw = logits - logsumexp(logits)
    lp = norm.logpdf(x[:, None], mu, sigma) + logw
    return -np.sum(logsumexp(lp, axis=1))


def poisson_glm(beta, X, k):
    mu = np.exp(X @ beta)
    return -np.sum(poisson.logpmf(k, mu))


def uses_zeta(x):
    return np.sum(scipy.special.zeta(x, 1.0))


def fd_grad(f, args, i, h=1e-6):
    x = np.array(args[i], dtype=float)
    out = np.zeros_like(x)
    for j in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[j] += h
        lo[j] -= h
        a_hi, a_lo = list(args), list(args)
        a_hi[i], a_lo[i] = hi, lo
        out[j] = (f(*a_hi) - f(*a_lo)) / (2 * h)
    return out


def check(f, args, argnums):
    got = s2sad.grad(f, argnums=argnums)(*args)
    got = got if isinstance(got, tuple) else (got,)
    for g, i in zip(got, argnums):
        np.testing.assert_allclose(g, fd_grad(f, args, i), rtol=1e-5, atol=1e-7)


def test_logistic_regression():
    X = RNG.normal(size=(20, 3))
    y = (RNG.uniform(size=20) > 0.5).astype(float)
    w = RNG.normal(size=3)
    check(logistic_loss, (w, X, y), (0,))
    check(logistic_loss_expit, (w, X, y), (0, 1))


def test_gaussian_mixture():
    args = (RNG.normal(size=2), np.array([0.6, 1.4]), RNG.normal(size=2), RNG.normal(size=15))
    check(mixture_nll, args, (0, 1, 2, 3))


def test_poisson_glm():
    X = RNG.normal(size=(12, 3)) * 0.5
    k = RNG.poisson(2.0, size=12)
    check(poisson_glm, (RNG.normal(size=3) * 0.3, X, k), (0,))


def test_forward_mode_agrees():
    args = (RNG.normal(size=2), np.array([0.6, 1.4]), RNG.normal(size=2), RNG.normal(size=9))
    tangent = tuple(RNG.normal(size=np.shape(a)) for a in args)
    _, jv = s2sad.jvp(mixture_nll, args, tangent)
    grads = s2sad.grad(mixture_nll, argnums=(0, 1, 2, 3))(*args)
    assert np.isclose(jv, sum(np.sum(g * t) for g, t in zip(grads, tangent)))


def test_a_library_function_without_rule_is_named_at_the_users_call():
    with pytest.raises(MissingRuleError) as info:
        s2sad.grad(uses_zeta)(np.array([2.0, 3.0]))
    text = str(info.value)
    assert "test_scipy.py" in text and "scipy.special.zeta(x, 1.0)" in text
    assert "site-packages" not in text.splitlines()[0].split(":")[0]
    assert "@s2sad.adjoint(scipy.special.zeta)" in text
    assert "library code" in text
    with pytest.raises(MissingRuleError, match="test_scipy.py"):
        s2sad.jvp(uses_zeta, (np.array([2.0, 3.0]),), (np.ones(2),))
