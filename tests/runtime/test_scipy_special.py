"""scipy.special and scipy.stats rules (adjoint and tangent) against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

special = pytest.importorskip("scipy.special", reason="the SciPy rules need SciPy")
stats = pytest.importorskip("scipy.stats", reason="the SciPy rules need SciPy")

import s2sad  # noqa: E402
from s2sad.runtime import registry, tangents  # noqa: E402
from s2sad.testing import check_rule  # noqa: E402
from tests.runtime.through import check_through  # noqa: E402
from tests.test_forward_rules import check_jvp  # noqa: E402

RNG = np.random.default_rng(23)
SHAPES = [(), (4,), (2, 3)]
PAIRS = [((2, 3), (3,)), ((4,), ()), ((2, 1), (1, 3))]


def u(*shape, lo=-1.5, hi=1.5):
    return RNG.uniform(lo, hi, shape)


def both(fn, *args, **kwargs):
    """The adjoint rule and the tangent rule of ``fn`` at ``args``."""
    check_rule(fn, *args, kwargs=kwargs)
    check_jvp(fn, *args, **kwargs)


UNARY = [
    (special.expit, {}), (special.log_expit, {}), (special.erf, {}),
    (special.erfc, {}), (special.ndtr, {}), (special.log_ndtr, {}),
    (special.logit, {"lo": 0.1, "hi": 0.9}), (special.entr, {"lo": 0.1, "hi": 2.0}),
    (special.gammaln, {"lo": 0.5, "hi": 3.0}), (special.digamma, {"lo": 0.5, "hi": 3.0}),
]  # fmt: skip
BINARY = [special.betaln, special.xlogy, special.xlog1py]


@pytest.mark.parametrize("fn,domain", UNARY, ids=lambda v: getattr(v, "__name__", ""))
def test_unary(fn, domain):
    for shape in SHAPES:
        both(fn, u(*shape, **domain))


def test_log_ndtr_and_log_expit_far_in_the_tail():
    both(special.log_ndtr, np.array([-30.0, -8.0, 5.0]))
    both(special.log_expit, np.array([-40.0, 40.0]))


@pytest.mark.parametrize("fn", BINARY, ids=lambda v: v.__name__)
def test_binary_with_broadcasting(fn):
    for sa, sb in PAIRS:
        both(fn, u(*sa, lo=0.5, hi=3.0), u(*sb, lo=0.5, hi=3.0))


def test_xlogy_at_zero_has_a_finite_gradient_in_y():
    both(special.xlogy, np.array([0.0, 1.0]), np.array([0.5, 2.0]))


AXES = [{}, {"axis": 1}, {"axis": 0, "keepdims": True}, {"axis": (0, 1)}, {"axis": -1}]


@pytest.mark.parametrize("kwargs", AXES, ids=str)
def test_logsumexp(kwargs):
    both(special.logsumexp, u(2, 3), **kwargs)
    both(special.logsumexp, u(2, 3) * 300.0, **kwargs)  # no overflow


WEIGHTS = [
    ((2, 3), (2, 3), {}), ((2, 3), (3,), {"axis": 1}),
    ((2, 3), (2, 1), {"axis": 0, "keepdims": True}), ((4,), (), {}),
    ((2, 3, 2), (3, 1), {"axis": (0, 2)}), ((3,), (2, 3), {"axis": -1}),
]  # fmt: skip


@pytest.mark.parametrize("sa, sb, kwargs", WEIGHTS, ids=str)
def test_logsumexp_with_weights_b_in_a_and_b(sa, sb, kwargs):
    # b broadcasts against a both ways; positive, so the sum is positive
    a, b = u(*sa), u(*sb, lo=0.2, hi=2.0)
    check_rule(special.logsumexp, a, kwargs.get("axis"), b,
               kwargs.get("keepdims", False))  # fmt: skip
    check_jvp(special.logsumexp, a, b=b, **kwargs, argnums=[0])
    check_jvp(special.logsumexp, a, kwargs.get("axis"), b,
              kwargs.get("keepdims", False), argnums=[2])  # fmt: skip


def test_logsumexp_with_a_zero_and_a_negative_weight():
    a, b = u(2, 4), np.array([1.0, 0.0, -0.2, 2.0])
    both(special.logsumexp, a, 1, b)
    both(special.logsumexp, a * 200.0, 1, np.abs(b) + 0.5)  # no overflow either
    # a dominant term of weight zero: its share exp(1000) overflows, yet the
    # cotangent of a is 0 there (not 0 * inf), and 1 on the other term
    rule = registry.lookup(special.logsumexp).adjoint
    a, b = np.array([1000.0, 0.0]), np.array([0.0, 1.0])
    with np.errstate(over="ignore"):
        g_a = rule(1.0, special.logsumexp(a, b=b), a, None, b)[0]
        t_a = tangents.pushforward(special.logsumexp, 0, np.ones(2), a, b=b)
    assert np.array_equal(g_a, [0.0, 1.0]) and t_a == 1.0


def weighted_mixture(a, b):
    """A mixture's log likelihood, as published: log sum_k w_k exp(l_k)."""
    return np.sum(special.logsumexp(a, axis=1, b=b) ** 2)


def weighted_kept(a, b):
    return np.sum(np.sin(special.logsumexp(a * 2.0, 0, b, True)))


@pytest.mark.parametrize("fn", [weighted_mixture, weighted_kept])
@pytest.mark.parametrize("sb", [(3, 4), (4,), (1, 4)])
def test_logsumexp_with_weights_through_grad_jvp_and_hvp(fn, sb):
    check_through(fn, u(3, 4), u(*sb, lo=0.2, hi=2.0), argnums=(0, 1))


def test_logsumexp_refuses_return_sign():
    x = u(3)
    rule = registry.lookup(special.logsumexp).adjoint
    with pytest.raises(NotImplementedError, match="not for return_sign=True"):
        ans = special.logsumexp(x, return_sign=True)
        rule((1.0, None), ans, x, None, x, False, True)
    with pytest.raises(NotImplementedError, match="not for return_sign=True"):
        tangents.pushforward(special.logsumexp, 0, x, x, return_sign=True)


def signed(a, b):
    value, sign = special.logsumexp(a, b=b, return_sign=True)
    return value * sign


def test_logsumexp_return_sign_is_refused_at_the_users_line():
    with pytest.raises(NotImplementedError, match="return_sign") as info:
        s2sad.grad(signed)(u(3), u(3))
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "test_scipy_special.py" in notes and "return_sign=True" in notes


@pytest.mark.parametrize("fn", [special.softmax, special.log_softmax])
@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"axis": 0}, {"axis": -1}], ids=str)
def test_softmax(fn, kwargs):
    both(fn, u(2, 3), **kwargs)
    both(fn, u(5), **kwargs) if kwargs.get("axis") in (None, 0, -1) else None


# ---------------------------------------------------------------- scipy.stats

NORMAL = [stats.norm.logpdf, stats.norm.pdf, stats.norm.cdf, stats.norm.logcdf]


@pytest.mark.parametrize("fn", NORMAL, ids=registry.display_name)
def test_normal(fn):
    both(fn, u(4))
    both(fn, u(4), 0.3)
    both(fn, u(2, 3), u(3), u(2, 1, lo=0.5, hi=2.0))


def test_normal_logcdf_far_in_the_left_tail():
    both(stats.norm.logcdf, np.array([-30.0, -6.0]), 0.0, 1.0)


def test_student_t_gamma_beta():
    both(stats.t.logpdf, u(2, 3), u(3, lo=2.0, hi=5.0), u(3), u(2, 1, lo=0.5, hi=2.0))
    both(stats.t.logpdf, u(4), 3.0)
    check_rule(stats.t.logpdf, u(4), 4, argnums=0)  # an integer df
    x, a = u(2, 3, lo=0.5, hi=2.0), u(3, lo=1.0, hi=3.0)
    both(stats.gamma.logpdf, x, a, u(3, lo=-0.4, hi=0.0), u(2, 1, lo=0.5, hi=2.0))
    both(stats.gamma.logpdf, x, a)
    y, b = u(2, 3, lo=0.2, hi=0.8), u(2, 1, lo=1.0, hi=3.0)
    both(stats.beta.logpdf, y, a, b)
    both(stats.beta.logpdf, y * 2.0 - 0.5, a, b, -0.5, 2.0)


def test_poisson_logpmf_in_mu():
    k = np.array([[0, 1, 3], [2, 5, 1]])
    both(stats.poisson.logpmf, k, u(3, lo=0.5, hi=3.0))
    both(stats.poisson.logpmf, k, u(2, 3, lo=0.5, hi=3.0))


def spd(n):
    a = u(n, n)
    return a @ a.T + n * np.eye(n)


def test_multivariate_normal_in_x_mean_and_cov():
    mvn = stats.multivariate_normal.logpdf
    both(mvn, u(3), u(3), spd(3))
    both(mvn, u(5, 3), u(3), spd(3))
    nonsym = spd(3) + np.triu(u(3, 3), 1)  # only the lower triangle is read
    both(mvn, u(4, 3), u(3), nonsym)


def test_multivariate_normal_refuses_a_non_matrix_cov():
    rule = registry.lookup(stats.multivariate_normal.logpdf).adjoint
    with pytest.raises(NotImplementedError, match="2-D matrix"):
        rule(1.0, 0.0, u(3), u(3), 2.0)


def test_every_rule_is_tested(family_coverage):
    family_coverage(
        "scipy_special",
        {fn for fn, _ in UNARY} | set(BINARY)
        | {special.logsumexp, special.softmax, special.log_softmax},
    )  # fmt: skip
    family_coverage(
        "scipy_stats",
        set(NORMAL) | {stats.t.logpdf, stats.gamma.logpdf, stats.beta.logpdf,
                       stats.poisson.logpmf, stats.multivariate_normal.logpdf},
    )  # fmt: skip
