"""Generator functions: what is refused and why (the working forms are corpus cases in
tests/corpus/cases_generators.py, checked in reverse, forward and second order)."""

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError
from tests.fixtures import generator_funcs as gf

X = np.array([0.5, -1.0, 2.0])


def test_the_differentiated_function_itself_may_not_be_a_generator():
    with pytest.raises(UnsupportedSyntaxError, match="is a generator") as info:
        s2sad.grad(gf.top_level_generator)(X)
    assert "generator_funcs.py:8:" in str(info.value)


def test_yield_used_as_a_value_is_refused_at_its_line():
    with pytest.raises(UnsupportedSyntaxError, match="'yield' used as a value") as info:
        s2sad.grad(gf.uses_sends)(X)
    assert "generator_funcs.py:14:" in str(info.value)
    assert "pass the value" in str(info.value)


def test_an_endless_generator_is_refused_not_run_forever():
    with pytest.raises(UnsupportedSyntaxError, match="endless generator") as info:
        s2sad.grad(gf.uses_endless)(X)
    assert "generator_funcs.py:25:" in str(info.value)


def test_a_generator_nested_in_the_function_is_not_rewritten():
    np.testing.assert_allclose(s2sad.grad(gf.nested_generator_is_left_alone)(X), 2 * X)


def test_a_nested_generator_function_is_compiled_when_called():
    np.testing.assert_allclose(s2sad.grad(gf.nested_generator_called)(X), X)
    _, tangent = s2sad.jvp(gf.nested_generator_called)(X, np.ones(3))
    assert tangent == pytest.approx(np.sum(X))
