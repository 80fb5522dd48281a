"""comprehensions (run at the start of desugar): comprehensions and generator
expressions become loops into fresh names; the unsafe ones are refused."""

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError
from tests.transforms.dumps import after, code


def generator_in_sum(x):
    return sum(x[i] * x[i] for i in range(3) if i != 1)


def nested_with_outer_name(x):
    i = 2.0
    rows = [[x[i] * x[j] for j in range(3)] for i in range(3)]
    return np.sum(np.array(rows)) * i


def in_while_test(x):
    y = x * 1.0
    while sum(v for v in [np.sum(y)]) < 10.0:
        y = y * 2.0
    return np.sum(y)


def dict_comp(x):
    d = {"a": x, "b": x * 2}
    e = {k: v * 2 for k, v in d.items()}
    return np.sum(e["a"])


def in_untaken_branch(x):
    return np.sum(x) if len(x) == 0 else sum(v for v in x)


def after_or(x):
    ok = len(x) > 0 or all(v > 0 for v in x)
    return np.sum(x) * ok


def in_lambda(x):
    f = lambda y: sum(v * v for v in y)
    return f(x)


def set_comp(x):
    s = {float(v) for v in x}
    return np.sum(x) * len(s)


def test_generator_becomes_a_loop_into_a_fresh_list():
    assert after("desugar", generator_in_sum) == code("""
        # generator_in_sum_value_and_grad
        def generator_in_sum(x):
            items = []
            for i_1 in range(3):
                if i_1 != 1:
                    items.append(x[i_1] * x[i_1])
            return sum(items)
    """)


def test_nested_comprehension_and_scoping():
    text = after("desugar", nested_with_outer_name)
    assert "for i_1 in range(3):" in text and "for j_1 in range(3):" in text
    assert "return np.sum(np.array(rows)) * i" in text  # the outer i is untouched
    x = np.array([0.5, -1.0, 2.0])
    value, g = s2sad.value_and_grad(nested_with_outer_name)(x)
    assert value == nested_with_outer_name(x)
    np.testing.assert_allclose(g, 2.0 * 2 * np.sum(x) * np.ones(3))


def test_while_test_is_recomputed_each_iteration():
    text = after("desugar", in_while_test)
    assert "while True:" in text
    assert s2sad.grad(in_while_test)(np.ones(3)) == pytest.approx(4.0 * np.ones(3))


def test_dict_comprehension_fills_a_dict():
    text = after("desugar", dict_comp)
    assert "table = {}" in text and "table[k_1] = v_1 * 2" in text


@pytest.mark.parametrize(
    "fn, where",
    [
        (in_untaken_branch, "in a branch of 'a if c else b'"),
        (after_or, "after 'or'"),
        (in_lambda, "in a lambda body"),
    ],
)
def test_comprehensions_python_might_skip_are_refused(fn, where):
    with pytest.raises(UnsupportedSyntaxError) as info:
        s2sad.grad(fn)(np.ones(3))
    (problem,) = info.value.problems
    assert problem.message == f"unsupported construct: comprehension {where}"
    assert "on its own line" in problem.hint


def test_set_comprehension_is_refused():
    with pytest.raises(UnsupportedSyntaxError) as info:
        s2sad.grad(set_comp)(np.ones(3))
    assert "set comprehension" in str(info.value)
    assert "sets are unordered" in str(info.value)
