"""``min``/``max``/``sorted`` with a ``key=`` function.

Before: ``key=lambda v: -v`` crashed the gradient with ``NameError: name
'lambda_fn' is not defined`` (the lambda was lifted as a local function the
emitted module never defined).  Now it is refused at its line; a module-level
key function works, and the gradient follows the item the key picks."""

import inspect

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def neg(v):
    return -v


def square(v):
    return v * v


def smallest_negated(x):
    return min(x, 2.0 * x, key=neg)


def largest_of_sums(x):
    return max(np.sum(x * 2.0), np.sum(x**2), key=neg)


def sorted_by_square(x):
    ys = sorted([x[0], x[1] * 3.0, x[2]], key=square)
    return ys[0] * 2.0 + ys[2]


def with_lambda_min(x):
    return min(x, 2.0 * x, key=lambda v: -v)


def with_lambda_sorted(x):
    ys = sorted([x[0], x[1] * 3.0, x[2]], key=lambda v: v * v)
    return ys[0] * 2.0 + ys[2]


def _fd(f, x, h=1e-6):
    if np.ndim(x) == 0:
        return (f(x + h) - f(x - h)) / (2 * h)
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


@pytest.mark.parametrize(
    "f, xs",
    [
        (smallest_negated, [0.7, -0.4, 2.5]),
        (largest_of_sums, [np.array([0.3, -0.8, 0.2]), np.array([1.5, 0.1, -0.2])]),
        (sorted_by_square, [np.array([0.3, -0.8, 0.2]), np.array([-1.0, 0.05, 0.4])]),
    ],
)
def test_a_module_level_key_function_picks_the_differentiated_item(f, xs):
    vg = s2sad.value_and_grad(f)
    for x in xs:
        for _ in range(2):
            value, g = vg(x)
            assert value == f(x)
            np.testing.assert_allclose(g, _fd(f, x), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    "f, x, callee",
    [
        (with_lambda_min, 0.7, "min"),
        (with_lambda_sorted, np.array([0.3, -0.8, 0.2]), "sorted"),
    ],
)
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_a_lambda_key_is_refused_at_its_line(f, x, callee, mode):
    with pytest.raises(UnsupportedSyntaxError) as info:
        if mode == "reverse":
            s2sad.grad(f)(x)
        else:
            s2sad.jvp(f, (x,), (np.ones_like(x),))
    err = info.value
    lines, first = inspect.getsourcelines(f)
    line = first + next(i for i, s in enumerate(lines) if "lambda v" in s)
    assert (err.filename, err.line) == (__file__, line)
    assert err.col == lines[line - first].index("lambda v") + 1
    assert f"lambda passed as a value to '{callee}'" in str(err)
    assert "module-level function" in str(err)
