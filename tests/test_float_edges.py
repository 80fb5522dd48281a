"""Python floats at 0, inf and nan: gradients keep NumPy's results (inf, nan and
warnings), as the user's function does, where derivative code on Python floats
would raise (``g / x`` at ``x = 0.0`` is a ZeroDivisionError)."""

import warnings

import numpy as np
import pytest

import s2sad


def log(x):
    return np.log(x)


def arctanh(x):
    return np.arctanh(x) * 2.0


def reciprocal(x):
    return 1.0 / x


def numpy_derivative(f, d, x):
    """f(x) and f'(x) computed by NumPy on np.float64 (inf and nan included)."""
    with np.errstate(all="ignore"):
        return f(np.float64(x)), d(np.float64(x))


CASES = [
    (log, lambda x: 1.0 / x, (0.0, -0.0, np.inf, np.nan, -1.0, 2.0)),
    (arctanh, lambda x: 2.0 / (1.0 - x * x), (1.0, -1.0, 0.5, np.nan)),
]


def same(a, b):
    """Equal, nan to nan, inf to inf (math and NumPy may differ in the last bit)."""
    return (np.isnan(a) and np.isnan(b)) or a == b or abs(a - b) <= 1e-15 * abs(b)


@pytest.mark.parametrize(
    "f, d, points", CASES, ids=lambda c: getattr(c, "__name__", "")
)
def test_value_and_grad_keep_numpys_results_at_edges(f, d, points):
    vg = s2sad.value_and_grad(f)
    for x in points:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            value, g = vg(x)
        want_value, want_g = numpy_derivative(f, d, x)
        assert same(value, want_value) and same(g, want_g), (x, value, g)
        assert type(g) is float  # a float argument's gradient stays a float


@pytest.mark.parametrize(
    "f, d, points", CASES, ids=lambda c: getattr(c, "__name__", "")
)
def test_jvp_keeps_numpys_results_at_edges(f, d, points):
    for x in points:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            value, t = s2sad.jvp(f)(x, 1.0)
        want_value, want_t = numpy_derivative(f, d, x)
        assert same(value, want_value) and same(t, want_t), (x, value, t)


def test_numpy_warns_as_it_does_on_the_users_function():
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        value, g = s2sad.value_and_grad(log)(0.0)
    assert value == -np.inf and g == np.inf


def test_second_derivatives_at_zero():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert s2sad.hvp(log)(0.0, 1.0) == -np.inf
        assert s2sad.grad(s2sad.grad(log))(0.0) == -np.inf


def test_a_float_next_to_arrays_keeps_numpys_results():
    def f(W, s):
        return np.sum(W * W) + np.log(s) * 2.0

    W = np.arange(3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value, (gW, gs) = s2sad.value_and_grad(f, argnums=(0, 1))(W, 0.0)
    assert value == -np.inf and gs == np.inf and type(gs) is float
    np.testing.assert_array_equal(gW, 2.0 * W)


def test_the_users_own_float_errors_stay_python_errors():
    """1.0 / x at 0.0 raises in the user's function: the gradient raises too."""
    with pytest.raises(ZeroDivisionError):
        s2sad.value_and_grad(reciprocal)(0.0)
    with pytest.raises(ZeroDivisionError):
        s2sad.jvp(reciprocal)(0.0, 1.0)
    with pytest.raises(OverflowError):
        s2sad.grad(lambda x: x**3.0)(1e200)
    assert s2sad.grad(reciprocal)(2.0) == -0.25
