"""scipy.linalg and scipy.optimize.rosen rules (adjoint and tangent) against
finite differences; cho_factor and cho_solve (whose first argument is a
(factor, flag) tuple) end to end, in a Gaussian-process likelihood."""

from __future__ import annotations

import numpy as np
import pytest

scipy_linalg = pytest.importorskip("scipy.linalg", reason="the SciPy rules need SciPy")
from scipy.linalg import cho_factor, cho_solve, cholesky, expm, solve_triangular
from scipy.optimize import rosen

import s2sad
from s2sad.testing import check_rule
from tests.corpus.fd import assert_close_tree, numerical_grad
from tests.runtime.through import check_through
from tests.test_forward_rules import check_jvp

RNG = np.random.default_rng(31)


def spd(n):
    a = RNG.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


def tri(n, lower):
    a = RNG.normal(size=(n, n)) + 3.0 * np.eye(n)
    return np.tril(a) if lower else np.triu(a)


def both(fn, *args, **kwargs):
    check_rule(fn, *args, kwargs=kwargs)
    check_jvp(fn, *args, **kwargs)


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("lower", [None, False, True])
def test_cholesky_upper_by_default_and_lower(n, lower):
    kwargs = {} if lower is None else {"lower": lower}
    both(cholesky, spd(n), **kwargs)


def test_cholesky_default_is_the_upper_factor():
    a = spd(3)
    u = cholesky(a)
    np.testing.assert_allclose(u.T @ u, a)
    # the rule reads the upper triangle: the lower one gets zero cotangent
    g = s2sad.grad(lambda a: np.sum(cholesky(a) ** 2))(a)
    assert np.all(np.tril(g, -1) == 0.0)


@pytest.mark.parametrize("n, rhs", [(3, (3,)), (3, (3, 2)), (1, (1, 4))])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("trans", [0, 1, "T"])
def test_solve_triangular(n, rhs, lower, trans):
    both(
        solve_triangular, tri(n, lower), RNG.normal(size=rhs), lower=lower, trans=trans
    )


def test_solve_triangular_unit_diagonal_reads_no_diagonal():
    both(
        solve_triangular,
        tri(3, True),
        RNG.normal(size=3),
        lower=True,
        unit_diagonal=True,
    )


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (2, 3, 3)])
def test_expm(shape):
    both(expm, RNG.normal(size=shape) * 0.7)


@pytest.mark.parametrize("shape", [(2,), (5,), (4, 3)])
def test_rosen(shape):
    both(rosen, RNG.normal(size=shape))


def chol_solve_quad(K, y, lower):
    c = cholesky(K, lower=lower)
    alpha = cho_solve((c, lower), y)
    return np.sum(alpha * y) + np.sum(alpha**2)


@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("rhs", [(4,), (4, 2)])
def test_cho_solve_end_to_end(lower, rhs):
    K, y = spd(4), RNG.normal(size=rhs)
    for argnum in (0, 1):
        got = s2sad.grad(chol_solve_quad, argnum)(K, y, lower)
        assert_close_tree(got, numerical_grad(chol_solve_quad, [K, y, lower], argnum))
    tK, ty = RNG.normal(size=K.shape), RNG.normal(size=y.shape)
    _, t_out = s2sad.jvp(chol_solve_quad, argnums=(0, 1))(K, y, lower, (tK, ty))
    want = np.sum(numerical_grad(chol_solve_quad, [K, y, lower], 0) * tK) + np.sum(
        numerical_grad(chol_solve_quad, [K, y, lower], 1) * ty
    )
    assert_close_tree(t_out, want, where="jvp")


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("lower", [None, False, True])
def test_cho_factor_upper_by_default_and_lower(n, lower):
    # every entry of c gets a cotangent: the factor's triangle goes through
    # cholesky's rule, the other one (the input's own entries) straight back
    kwargs = {} if lower is None else {"lower": lower}
    a = spd(n) + np.triu(RNG.normal(size=(n, n)), 1)  # not symmetric
    both(cho_factor, a, **kwargs)


def solve_with_the_pair(K, y):
    """``cho_solve(cho_factor(K), y)``: the factor tuple passed as it is."""
    return np.sum(cho_solve(cho_factor(K), y) * y)


def lower_pair_and_log_det(K, y):
    """The GP idiom: the pair unpacked, the log determinant from c's diagonal."""
    c, low = cho_factor(K, lower=True)
    alpha = cho_solve((c, low), y)
    return 0.5 * np.sum(alpha**2) + 2.0 * np.sum(np.log(np.diag(c)))


def reads_the_other_triangle(K, y):
    c, _ = cho_factor(K)
    return np.sum(np.tanh(c) * 0.3) + np.sum(cho_solve((c, False), y))


@pytest.mark.parametrize(
    "fn", [solve_with_the_pair, lower_pair_and_log_det, reads_the_other_triangle]
)
@pytest.mark.parametrize("rhs", [(4,), (4, 2)])
def test_cho_factor_with_cho_solve_through_grad_jvp_and_hvp(fn, rhs):
    check_through(fn, spd(4), RNG.normal(size=rhs), argnums=(0, 1))


def test_cho_factor_gradient_is_triangular_where_only_the_factor_is_read():
    g = s2sad.grad(solve_with_the_pair)(spd(3), RNG.normal(size=3))
    assert np.all(np.tril(g, -1) == 0.0)  # upper factor: the lower part unread


def gp_negative_log_likelihood(log_params, X, y):
    """The GP marginal likelihood as published (GPML algorithm 2.1), SciPy style."""
    amplitude, lengthscale, noise = np.exp(log_params)
    sq = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    K = amplitude * np.exp(-0.5 * sq / lengthscale**2) + noise * np.eye(len(X))
    L = cholesky(K, lower=True)
    alpha = cho_solve((L, True), y)
    return (
        0.5 * y @ alpha + np.sum(np.log(np.diag(L))) + 0.5 * len(X) * np.log(2 * np.pi)
    )


def test_gp_negative_log_likelihood():
    X, y = RNG.normal(size=(6, 2)), RNG.normal(size=6)
    p = np.array([0.1, -0.2, -1.0])
    got = s2sad.grad(gp_negative_log_likelihood)(p, X, y)
    assert_close_tree(got, numerical_grad(gp_negative_log_likelihood, [p, X, y], 0))
    hv = s2sad.hvp(gp_negative_log_likelihood)(p, X, y, np.array([1.0, 0.5, -0.3]))
    g = s2sad.grad(gp_negative_log_likelihood)
    v, eps = np.array([1.0, 0.5, -0.3]), 1e-5
    want = (g(p + eps * v, X, y) - g(p - eps * v, X, y)) / (2 * eps)
    assert_close_tree(hv, want, rtol=1e-4, where="hvp")


def whitened_residual(W, x, y):
    """solve_triangular in a loop over data (a whitening transform, upper factor)."""
    U = cholesky(W @ W.T + np.eye(3))
    total = 0.0
    for i in range(2):
        z = solve_triangular(U, x[i] - y, trans="T")
        total = total + np.sum(z**2) + np.sum(expm(0.1 * W) @ z)
    return total + rosen(x[0])


def test_linalg_rules_inside_a_loop():
    W, x, y = RNG.normal(size=(3, 3)), RNG.normal(size=(2, 3)), RNG.normal(size=3)
    for argnum in (0, 1):
        got = s2sad.grad(whitened_residual, argnum)(W, x, y)
        assert_close_tree(got, numerical_grad(whitened_residual, [W, x, y], argnum))


def test_every_rule_is_tested(family_coverage):
    family_coverage(
        "scipy_linalg",
        {cholesky, cho_factor, cho_solve, solve_triangular, expm, rosen},
    )
