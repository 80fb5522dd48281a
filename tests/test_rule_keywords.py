"""Differentiated values passed by keyword to functions with rules
(``stats.t.logpdf(r, 4.0, loc=0.0, scale=np.exp(s))``, ``np.outer(x, b=y)``):
bound to their positions by the rule's signature (front/rulekeywords.py).

Checked against central differences in reverse mode (plain and buffered),
forward mode and, where the rules have tangents, at second order.
"""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError
from tests.corpus.fd import assert_close_tree, numerical_grad
from tests.test_forward import directional

RNG = np.random.default_rng(21)


def outer_keyword(x, y):
    return np.sum(np.outer(x, b=y) ** 2)


def dot_keyword_expression(A, y):
    return np.sum(np.dot(A, b=y * 2.0) ** 2)


def clip_lower_bound_keyword(x, lo):
    return np.sum(np.clip(x, a_min=lo, a_max=None) ** 2)


def keyword_in_loop(x, y):
    total = 0.0
    for i in range(3):
        total = total + np.sum(np.outer(x * i, b=y) ** 2)
    return total


def _callee(x, y):
    return np.dot(x, b=np.sin(y))


def keyword_in_callee(x, y):
    return np.sum(_callee(x, y) ** 2) + np.sum(_callee(y, x))


CASES = [
    (outer_keyword, lambda: (RNG.normal(size=3), RNG.normal(size=2))),
    (dot_keyword_expression, lambda: (RNG.normal(size=(2, 3)), RNG.normal(size=3))),
    (clip_lower_bound_keyword, lambda: (RNG.normal(size=5), np.array(0.1))),
    (keyword_in_loop, lambda: (RNG.normal(size=3), RNG.normal(size=2))),
    (keyword_in_callee, lambda: (RNG.normal(size=3), RNG.normal(size=3))),
]


def _check_reverse(fn, args, nums=(0, 1)):
    grads = s2sad.grad(fn, argnums=nums)(*args)
    for i, g in zip(nums, grads):
        want = numerical_grad(fn, list(args), i)
        assert_close_tree(g, want, where=f"{fn.__name__} d/darg{i}")
    return grads


def _check_forward(fn, args, nums=(0, 1)):
    ts = tuple(RNG.normal(size=np.shape(args[i])) for i in nums)
    every = [np.zeros_like(np.asarray(a, dtype=float)) for a in args]
    for i, t in zip(nums, ts):
        every[i] = t
    _, jv = s2sad.jvp(fn, tuple(args), tuple(every))
    want = directional(fn, list(args), nums, ts)
    np.testing.assert_allclose(jv, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fn,make", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_numpy_keyword_reverse_forward_buffered(fn, make, monkeypatch):
    args = make()
    _check_reverse(fn, args)
    _check_forward(fn, args)
    from s2sad.runtime import workspace

    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    dfn = s2sad.grad(fn, argnums=(0, 1))
    for _ in range(3):
        got = dfn(*args)
    for i, g in enumerate(got):
        assert_close_tree(g, numerical_grad(fn, list(args), i), where=fn.__name__)


@pytest.mark.parametrize("fn", [outer_keyword, keyword_in_loop, keyword_in_callee])
def test_numpy_keyword_second_order(fn):
    args = (RNG.normal(size=3), RNG.normal(size=3 if fn is keyword_in_callee else 2))
    v = (RNG.normal(size=args[0].shape), RNG.normal(size=args[1].shape))
    hv = s2sad.hvp(fn, argnums=(0, 1))(*args, v)
    want = directional(s2sad.grad(fn, argnums=(0, 1)), list(args), (0, 1), v, h=1e-5)
    for a, b in zip(hv, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def method_keyword(x, lo):
    return np.sum(x.clip(min=lo) ** 2)


def test_a_method_keyword_stays_refused_at_its_line():
    with pytest.raises(UnsupportedSyntaxError, match="test_rule_keywords.py:") as info:
        s2sad.grad(method_keyword, argnums=(0, 1))(RNG.normal(size=3), np.array(0.1))
    assert "keyword argument 'min'" in str(info.value)


# ---------------------------------------------------------------- SciPy (optional)


def student_t_nll(w, log_scale, X, y):
    resid = y - X @ w
    return -np.sum(stats.t.logpdf(resid, 4.0, loc=0.0, scale=np.exp(log_scale)))


def normal_scale_only(mu, s, x):
    return -np.sum(stats.norm.logpdf(x, loc=mu, scale=s * s + 0.5))


def normal_keywords_in_loop(mu, s, x):
    total = 0.0
    for k in range(2):
        total = total + np.sum(stats.norm.logpdf(x, scale=s * s + 0.5 + k, loc=mu))
    return -total


@pytest.mark.parametrize(
    "fn", [student_t_nll, normal_scale_only, normal_keywords_in_loop]
)
def test_scipy_distribution_keywords(fn):
    global stats
    pytest.importorskip("scipy")
    from scipy import stats

    if fn is student_t_nll:
        args = (RNG.normal(size=3), 0.2, RNG.normal(size=(6, 3)), RNG.normal(size=6))
    else:
        args = (RNG.normal(size=4), RNG.normal(size=4), RNG.normal(size=4))
    _check_reverse(fn, args)
    _check_forward(fn, args)


def keywords_by_numpy_names(x, y):
    # np.copy's rule calls its operand obj; NumPy calls it a
    return np.sum(np.copy(a=y * 2.0) * x) + np.sum(
        np.broadcast_to(array=x, shape=(2, 3))
    )


def test_keywords_bind_by_the_primals_names():
    args = (RNG.normal(size=3), RNG.normal(size=3))
    _check_reverse(keywords_by_numpy_names, args)
    _check_forward(keywords_by_numpy_names, args)
