"""In-place changes of array arguments: at the top level, on a copy taken at entry
and written back (front/inplace.py ``entry_copies``); elsewhere (``out=``, a
callee) refused in both modes, at the user's line; rebinding an immutable
argument keeps working."""

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.errors import UnsupportedSyntaxError
from s2sad.testing import numerical_grad
from tests.corpus.fd import numerical_grad as copying_fd


def aug_array(x):
    x += 1.0
    return np.sum(x * x)


def out_array(x):
    np.add(x, 1.0, out=x)
    return np.sum(x * x)


def aug_other_array(x, y):
    y *= 2.0  # y is not differentiated: the caller's y would change all the same
    return np.sum(x * y)


def aug_float(s, x):
    s += 1.0
    s *= x[0]
    return np.sum(x * s)


def rebound_first(x):
    x = x * 2.0
    x += 1.0
    return np.sum(x * x)


def callee_aug(y):
    y += 1.0
    return y


def calls_aug(x):  # x * 2.0 (a new array) works: tests/test_callee_inplace.py
    return np.sum(callee_aug(x))


def differentiate(f, mode, args):
    if mode == "grad":
        return s2sad.value_and_grad(f)(*args)
    return s2sad.jvp(f)(*args, np.ones_like(args[0]))


@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_out_into_the_argument_is_its_item_assignment(mode):
    x = np.arange(3.0)  # more forms: tests/test_outarg.py
    value, d = differentiate(out_array, mode, (x,))
    np.testing.assert_allclose(x, [1.0, 2.0, 3.0])  # as Python leaves it
    assert value == pytest.approx(14.0)
    want = 2.0 * np.arange(1.0, 4.0)  # at the value x had on entry
    np.testing.assert_allclose(d, want if mode == "grad" else np.sum(want))


@pytest.mark.parametrize("mode", ["grad", "jvp"])
@pytest.mark.parametrize(
    "f, line, hint",
    [
        (calls_aug, 44, "copy it first: y = y + 1.0"),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_in_place_changes_of_array_arguments_are_refused(f, line, hint, mode):
    x = np.arange(3.0)
    args = (x,)
    with pytest.raises(UnsupportedSyntaxError) as err:
        differentiate(f, mode, args)
    text = str(err.value)
    assert f"test_inplace.py:{line}:" in text and "in-place change" in text
    assert hint in text
    np.testing.assert_array_equal(x, np.arange(3.0))  # the caller's array untouched


@pytest.mark.parametrize("mode", ["grad", "jvp"])
@pytest.mark.parametrize("f", [aug_array, aug_other_array], ids=lambda f: f.__name__)
def test_top_level_in_place_changes_work_on_a_copy(f, mode):
    def fresh():
        return (np.arange(3.0), np.ones(3))[: 2 if f is aug_other_array else 1]

    args, plain = fresh(), fresh()
    want = f(*plain)
    value = differentiate(f, mode, args)[0]
    assert value == want
    for a, p in zip(args, plain):  # the caller's arrays, as Python leaves them
        np.testing.assert_array_equal(a, p)
    g = s2sad.grad(f)(*fresh())
    # finite differences on a fresh copy of every argument per evaluation
    np.testing.assert_allclose(g, copying_fd(f, list(fresh()), 0), rtol=1e-6)


@pytest.mark.parametrize("f", [aug_float, rebound_first], ids=lambda f: f.__name__)
def test_rebinding_keeps_pythons_semantics(f):
    args = [0.7, np.array([1.5, -0.5])] if f is aug_float else [np.array([1.5, -0.5])]
    nums = (0, 1) if f is aug_float else (0,)
    value, grads = s2sad.value_and_grad(f, argnums=nums)(*args)
    assert value == f(*args)
    for i, g in zip(nums, grads):
        np.testing.assert_allclose(g, numerical_grad(f, args, i), rtol=1e-6)
    t = 0.3
    value, tangent = s2sad.jvp(f)(*args, t if f is aug_float else np.array([t, t]))
    want = np.sum(numerical_grad(f, args, 0) * t)
    np.testing.assert_allclose(tangent, want, rtol=1e-6)


def test_without_example_arguments_any_argument_may_be_an_array():
    with pytest.raises(UnsupportedSyntaxError, match="'s', which may be an array"):
        pipeline.compile_function(aug_float, (1,))
    pipeline.compile_function(aug_float, (1,), example_args=(0.5, np.ones(2)))


# ---------------------------------------------------------------- aliasing of scalars


def scalar_element(b, t):
    s = b[1, 0]  # 2-d b: a NumPy scalar, immutable
    s *= t
    return s + np.sum(b * b)


def scalar_arithmetic(b, t):
    i = 1
    s = float(b[i, -1]) * 2.0
    u = s
    u += t
    s *= t
    return s * u + np.sum(b * b)


def row_view(b, t):
    s = b[1]  # a view: s *= t changes b
    s *= t
    return np.sum(s) + np.sum(b * b)


def element_of_3d(b, t):
    s = b[1, 0]  # 3-d b: a view of a row
    s *= t
    return np.sum(s) + np.sum(b * b)


@pytest.mark.parametrize(
    "f", [scalar_element, scalar_arithmetic], ids=lambda f: f.__name__
)
def test_augmented_assignment_of_a_scalar_aliases_nothing(f):
    args = [np.random.default_rng(0).normal(size=(2, 3)), 1.7]
    value, grads = s2sad.value_and_grad(f, argnums=(0, 1))(*args)
    np.testing.assert_allclose(
        value, f(*[a.copy() if hasattr(a, "copy") else a for a in args])
    )
    for i in (0, 1):
        np.testing.assert_allclose(grads[i], numerical_grad(f, args, i), rtol=1e-6)


@pytest.mark.parametrize("f, shape", [(row_view, (2, 3)), (element_of_3d, (2, 3, 2))])
def test_augmented_assignment_of_a_view_is_still_refused(f, shape):
    from s2sad.errors import AliasingError

    with pytest.raises(AliasingError, match="'b' shares memory"):
        s2sad.value_and_grad(f, argnums=(0, 1))(np.ones(shape), 2.0)
