"""Rules for np.linalg.pinv and np.linalg.lstsq: the pseudo-inverse formula,
against finite differences (the rules, and through grad, jvp and hvp)."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.runtime import solvers, tangents
from s2sad.testing import check_rule
from tests.runtime.through import check_through
from tests.test_forward_rules import check_jvp

RNG = np.random.default_rng(41)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


def with_singular_values(m: int, n: int, values) -> np.ndarray:
    """An m x n matrix with these singular values (zeros: rank deficient)."""
    u, _ = np.linalg.qr(rand(m, m))
    v, _ = np.linalg.qr(rand(n, n))
    s = np.zeros((m, n))
    s[np.arange(len(values)), np.arange(len(values))] = values
    return u @ s @ v.T


def both(fn, *args, **kwargs):
    check_rule(fn, *args, kwargs=kwargs)
    check_jvp(fn, *args, **kwargs)


# tall (full column rank), wide (full row rank), square, a stack, 1 x 1
@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4), (2, 3, 2), (1, 1), (5, 1)])
def test_pinv_of_full_rank_matrices(shape):
    both(np.linalg.pinv, rand(*shape))


def test_pinv_hermitian_reads_the_lower_triangle():
    s = rand(3, 3)
    both(np.linalg.pinv, s + s.T, hermitian=True)
    # the upper triangle is not read: its cotangent is zero
    g = s2sad.grad(lambda a: np.sum(np.linalg.pinv(a, hermitian=True) ** 2))(s + s.T)
    assert np.all(np.triu(g, 1) == 0.0)


def test_pinv_at_rank_deficiency_differentiates_the_constant_rank_formula():
    # rank 2 of 3, the cutoff well above what a small change adds: finite
    # differences keep the rank, and the rule is their derivative
    a = with_singular_values(4, 3, [3.0, 1.0, 0.0])
    both(np.linalg.pinv, a, 1e-3)


LSTSQ = [((5, 3), (5,)), ((5, 3), (5, 2)), ((3, 3), (3,)), ((2, 4), (2,)),
         ((2, 4), (2, 3)), ((6, 1), (6,))]  # fmt: skip


@pytest.mark.parametrize("sa, sb", LSTSQ)
def test_lstsq_in_a_and_b_every_output(sa, sb):
    # check_rule and check_jvp give every float output a cotangent/tangent:
    # x, the residuals (where there are some) and the singular values
    both(np.linalg.lstsq, rand(*sa), rand(*sb), None)


def solution_at_rcond(a, b):
    return np.sum(np.cos(np.linalg.lstsq(a, b, rcond=1e-3)[0]))


def test_lstsq_keeps_its_rcond():
    # singular values 3, 1 and 1e-9: rcond=1e-3 drops the last one, and the
    # rule's pseudo-inverse must drop it too (keeping it is a 1e9 factor); the
    # solution only: the singular value 1e-9 has a kink (|.|) within a step
    a, b = with_singular_values(5, 3, [3.0, 1.0, 1e-9]), rand(5)
    x, _, rank, _ = np.linalg.lstsq(a, b, rcond=1e-3)
    assert rank == 2 and np.allclose(x, solvers._lstsq_pinv(a, 1e-3) @ b)
    check_through(solution_at_rcond, a, b, argnums=(0, 1))
    # rcond=-1 is machine precision, None machine precision times max(m, n)
    eps = np.finfo(float).eps
    assert solvers._cutoff(a, -1) == eps and solvers._cutoff(a, None) == 5 * eps
    assert solvers._cutoff(a.astype(np.float32), None) == 5 * np.finfo(np.float32).eps
    assert solvers._cutoff(a, 1e-3) == 1e-3


def least_squares_fit(X, y):
    """Ordinary least squares as published: the fit, its residual and the
    conditioning (singular values) in one objective."""
    w, res, _, s = np.linalg.lstsq(X, y, rcond=None)
    return np.sum(w**2) + 0.5 * np.sum(res) + 0.1 * np.sum(np.log(s))


def fit_and_residual(X, y):
    w, res, _, _ = np.linalg.lstsq(X, y)
    return np.sum(np.tanh(X @ w - y)) + np.sum(w**2) * np.sum(res)


def ridge_by_pinv(A, y):
    return np.sum((np.linalg.pinv(A) @ y) ** 2) + np.sum(np.linalg.pinv(A.T @ A))


@pytest.mark.parametrize("sy", [(6,), (6, 2)])
def test_lstsq_through_grad_jvp_and_hvp(sy):
    X, y = rand(6, 3), rand(*sy)
    check_through(least_squares_fit, X, y, argnums=(0, 1), hvp=False)
    check_through(fit_and_residual, X, y, argnums=(0, 1))
    # the minimum-norm solution of a wide system: no residuals
    check_through(fit_and_residual, rand(2, 4), rand(2, *sy[1:]), argnums=(0, 1))


def test_second_order_of_lstsqs_singular_values_is_refused():
    X, y = rand(6, 3), rand(6)
    with pytest.raises(NotImplementedError, match="singular values") as info:
        s2sad.hvp(least_squares_fit)(X, y, rand(6, 3))
    assert "least_squares_fit" in " ".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("sa", [(5, 3), (3, 5)])
def test_pinv_through_grad_jvp_and_hvp(sa):
    check_through(ridge_by_pinv, rand(*sa), rand(sa[0]), argnums=(0, 1))


def _rule_args(primal, *args, **kwargs):
    """``(g, ans, *args)``: g random like every float output (None: rank)."""
    ans = primal(*args, **kwargs)
    if isinstance(ans, tuple):
        g = tuple(None if k == 2 else rand(*np.shape(v)) for k, v in enumerate(ans))
    else:
        g = rand(*ans.shape)
    return (g, ans, *args)


def test_tangents_of_the_adjoint_rules():
    """Forward over reverse: each rule's JVP in g, ans and its inputs."""
    for a in (rand(4, 3), rand(2, 4), rand(2, 3, 3)):
        check_jvp(solvers.d_pinv, *_rule_args(np.linalg.pinv, a), argnums=[0, 1, 2])
    s = rand(3, 3)
    full = _rule_args(np.linalg.pinv, s + s.T, hermitian=True)
    check_jvp(solvers.d_pinv, *full, argnums=[0, 1, 2], hermitian=True)
    for sa, sb in [((5, 3), (5,)), ((5, 3), (5, 2)), ((2, 4), (2,))]:
        g, ans, a, b = _rule_args(np.linalg.lstsq, rand(*sa), rand(*sb))
        g = (g[0], g[1], None, None)  # the singular values: first order only
        check_jvp(solvers.d_lstsq, g, ans, a, b, argnums=[0, 2, 3])
        # the residuals read the solution x (ans[0]) as well
        t = rand(*ans[0].shape)
        got = tangents.pushforward(solvers.d_lstsq, 1, (t, None, None, None),
                                   g, ans, a, b)  # fmt: skip
        h = 1e-6
        hi = solvers.d_lstsq(g, (ans[0] + h * t, *ans[1:]), a, b)
        lo = solvers.d_lstsq(g, (ans[0] - h * t, *ans[1:]), a, b)
        for k in range(2):
            np.testing.assert_allclose(got[k], (hi[k] - lo[k]) / (2 * h), atol=1e-6)


def test_complex_matrices_are_refused():
    a = rand(3, 3) + 1j * rand(3, 3)
    with pytest.raises(NotImplementedError, match="real matrices only"):
        solvers.d_pinv(np.ones((3, 3)), np.linalg.pinv(a), a)
    with pytest.raises(NotImplementedError, match="real matrices only"):
        tangents.pushforward(np.linalg.lstsq, 1, np.ones(3), a, np.ones(3))


def test_every_rule_is_tested(family_coverage):
    family_coverage("solvers", {np.linalg.pinv, np.linalg.lstsq})
