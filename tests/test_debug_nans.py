"""debug_nans (issue 13, item 10): raise at the first non-finite cotangent,
naming the user's file, line, source line and operand."""

import inspect

import numpy as np
import pytest

import s2sad
from s2sad.errors import NonFiniteCotangentError, S2SADError
from s2sad.options import Options


def model(x):
    a = x - 1.0
    h = np.log(a)
    return np.sum(np.tanh(h))


def looped(x):
    s = 0.0
    for i in range(3):
        s = s + np.sum(np.sqrt(x - i))
    return s


def healthy(x, w):
    h = np.tanh(x @ w)
    return np.sum(h * h)


def _line(fn, text):
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(src) if text in s)


def test_log_of_zero_raises_at_its_line_naming_the_operand():
    g = s2sad.grad(model, debug_nans=True)
    with np.errstate(all="ignore"), pytest.raises(NonFiniteCotangentError) as e:
        g(np.array([1.0, 2.0, 3.0]))
    err = e.value
    assert isinstance(err, S2SADError) and isinstance(err, FloatingPointError)
    assert err.filename == __file__
    assert err.line == _line(model, "h = np.log(a)")
    assert err.source_line == "h = np.log(a)"
    assert err.operand == "a"
    assert f"{__file__}:{err.line}: the cotangent of 'a' is not finite" in str(err)
    assert "at index (0,)" in str(err)


def test_in_a_loop_the_temporary_is_called_an_intermediate():
    g = s2sad.grad(looped, debug_nans=True)
    with np.errstate(all="ignore"), pytest.raises(NonFiniteCotangentError) as e:
        g(np.array([2.0, 3.0]))  # sqrt(x - 2) at x = 2, in the last iteration
    assert e.value.line == _line(looped, "np.sqrt(x - i)")
    assert e.value.operand == "sub"
    assert "(an intermediate value of this line)" in str(e.value)


def test_off_by_default_and_no_checks_emitted(monkeypatch):
    monkeypatch.delenv("S2SAD_DEBUG_NANS", raising=False)
    g = s2sad.grad(model)
    with np.errstate(all="ignore"):
        r = g(np.array([1.0, 2.0, 3.0]))
    assert np.isnan(r[0])  # the gradient is NaN there, silently as in NumPy
    assert "check_finite" not in g.source
    assert g.options.key() == Options().key()  # the cache key is unchanged


def test_finite_gradients_pass_and_match(monkeypatch):
    x, w = np.random.default_rng(0).normal(size=(4, 3)), np.ones((3, 2)) * 0.1
    checked = s2sad.grad(healthy, argnums=(0, 1), debug_nans=True)
    plain = s2sad.grad(healthy, argnums=(0, 1), debug_nans=False)
    for a, b in zip(checked(x, w), plain(x, w)):
        np.testing.assert_array_equal(a, b)
    assert "check_finite" in checked.source


def test_with_buffers_and_value_and_grad():
    # large arrays: the buffered (out=) code path
    x = np.full((300, 300), 2.0)
    x[5, 7] = 1.0
    g = s2sad.value_and_grad(model, debug_nans=True)
    with np.errstate(all="ignore"), pytest.raises(NonFiniteCotangentError) as e:
        g(x)
    assert e.value.operand == "a" and "at index (5, 7)" in str(e.value)
    value, grad = g(np.full((300, 300), 3.0))  # fine values: no error
    assert np.isfinite(grad).all()


def test_environment_variable_switches_it_on(monkeypatch):
    monkeypatch.setenv("S2SAD_DEBUG_NANS", "1")
    g = s2sad.grad(model)
    assert g.options.debug_nans
    with np.errstate(all="ignore"), pytest.raises(NonFiniteCotangentError):
        g(np.array([1.0, 2.0]))
    assert s2sad.grad(model, debug_nans=False).options.debug_nans is False
    monkeypatch.setenv("S2SAD_DEBUG_NANS", "0")
    assert not s2sad.grad(model).options.debug_nans


def test_part_of_the_cache_key():
    assert Options(debug_nans=True).key() != Options().key()
