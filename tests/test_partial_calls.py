"""Calls to a global ``functools.partial`` of a function (``act = partial(leaky,
alpha=0.2)``; ``act(z)``) are the call Python makes, ``leaky(z, alpha=...)``.
Before: refused ("no adjoint rule for functools.partial.__call__")."""

import functools

import numpy as np
import pytest

import s2sad
from tests.repeated import buffer_everything, check_repeated_calls  # noqa: F401


@pytest.fixture(autouse=True)
def _buffers(buffer_everything):  # noqa: F811
    pass


def power_sum(x, e, scale=1.0):
    return np.sum(x**e) * scale


def leaky(x, alpha=0.01):
    return np.where(x > 0, x, alpha * x)


cube_sum = functools.partial(power_sum, e=3.0)
act = functools.partial(leaky, alpha=0.2)
doubled = functools.partial(power_sum, scale=2.0)
two_to_the = functools.partial(np.power, 2.0)  # a function with a rule
W = np.random.default_rng(8).normal(size=(3, 3))


def layer(x):
    return np.sum(act(W @ x) ** 2)


def mixed(x):
    return doubled(x, 2.0) + cube_sum(x, scale=0.5)


def overridden(x):
    return cube_sum(x, e=2.0)  # a keyword of the call wins over the partial's


def with_a_rule(x):
    return np.sum(two_to_the(x) * x)


@pytest.mark.parametrize("f", [layer, mixed, overridden, with_a_rule])
@pytest.mark.parametrize("n", [3])
def test_partials_against_central_differences(f, n):
    x = np.random.default_rng(n).normal(size=n)
    check_repeated_calls(f, (x,))
    s2sad.check_grads(f, (x,), modes=("rev", "fwd"))


def test_a_rebound_partial_compiles_again(monkeypatch):
    x = np.array([0.5, 1.0, 2.0])
    g = s2sad.grad(overridden)
    np.testing.assert_allclose(g(x), 2 * x)
    monkeypatch.setitem(globals(), "cube_sum", functools.partial(power_sum, scale=3.0))
    np.testing.assert_allclose(g(x), 6 * x)  # e=2.0 from the call, scale 3.0


def test_stored_arguments_are_read_when_the_code_runs():
    x = np.array([0.5, -1.0, 2.0])
    g = s2sad.grad(layer)
    before = g(x)
    act.keywords["alpha"] = 0.5  # the partial's own dict, changed in place
    try:
        np.testing.assert_allclose(
            g(x),
            [(layer(x + 1e-6 * e) - layer(x - 1e-6 * e)) / 2e-6 for e in np.eye(3)],
            rtol=1e-6,
        )
        assert not np.allclose(g(x), before)
    finally:
        act.keywords["alpha"] = 0.2


def test_the_cache_key_tells_partials_of_other_shapes_apart():
    """The compiled code reads the stored arguments at their places: a partial
    with other keywords (or another function) needs other code, so another
    cache entry (before: one key for every partial, and the cached code of the
    old partial ran with the new one, silently wrong)."""
    from s2sad import cache

    a = cache._identity(functools.partial(power_sum, e=3.0))
    assert a == cache._identity(functools.partial(power_sum, e=2.0))  # data
    assert a != cache._identity(functools.partial(power_sum, scale=3.0))
    assert a != cache._identity(functools.partial(leaky, e=3.0))
    assert a != cache._identity(functools.partial(power_sum, 1.0, e=3.0))


class Layer:
    def __init__(self, w):
        self.w = w

    def apply(self, x, scale=1.0):
        return np.sum(np.tanh(self.w * x)) * scale


bound_layer = functools.partial(Layer(np.array([0.5, -1.0, 2.0])).apply, scale=2.0)


def through_a_partial_method(x):
    return bound_layer(x)


def test_a_partial_of_a_bound_method_stays_refused():
    """Unwrapped, it would pass the partial object as the method's self (an
    AttributeError while the gradient ran): refused with its line instead."""
    from s2sad.errors import MissingRuleError

    with pytest.raises(MissingRuleError, match="functools.partial"):
        s2sad.grad(through_a_partial_method)(np.array([0.3, 0.1, -0.2]))
