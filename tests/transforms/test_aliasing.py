"""aliasing: refuse reading a view after its base was changed in place."""

import math

import numpy as np
import pytest

import s2sad
from s2sad.errors import AliasingError, UnsupportedSyntaxError
from s2sad.testing import numerical_grad
from tests.transforms.dumps import after, code


def reads_a_stale_view(x):
    y = np.zeros(3)
    z = y[0:2]
    y[0] = x[0]
    return np.sum(z * x[:2])


def reads_a_copy(x):
    y = np.zeros(3)
    z = y[0:2].copy()
    y[0] = x[0]
    return np.sum(z * x[:2])


def test_aliasing_refuses_a_view_read_after_its_base_changed():
    first = reads_a_stale_view.__code__.co_firstlineno
    with pytest.raises(AliasingError) as info:
        after("aliasing", reads_a_stale_view)
    err = info.value
    assert (err.filename, err.line) == (__file__, first + 4)
    assert str(err) == (
        f"{__file__}:{first + 4}:19: 'z' shares memory with an array that was "
        f"modified in place at line {first + 3}, so its gradient would be wrong\n"
        "    return np.sum(z * x[:2])\n"
        "                  ^\n"
        "hint: take a copy where 'z' is created (e.g. '.copy()'), "
        "or modify a copy of the array"
    )


def test_aliasing_accepts_a_copy_and_leaves_the_code_alone():
    assert after("aliasing", reads_a_copy) == after("activity", reads_a_copy)
    assert after("aliasing", reads_a_copy) == code("""
        # reads_a_copy_value_and_grad
        def reads_a_copy(x):
            y = np.zeros(3)
            y_item = y[0:2]
            z = y_item.copy()
            x_item = x[0]
            y[0] = x_item
            x_item_1 = x[:2]
            mul = z * x_item_1
            out = np.sum(mul)
            return out
    """)


# -- scalars are immutable: augmented assignments to them rebind, share nothing


def unpacks_a_float_from_a_tuple(x, s):
    t = (np.tanh(x), s)
    a, b = t
    for i in range(2):
        b -= np.tanh(t[1]) * b
    return np.sum(a * b) + t[1]


def changes_a_float_argument_in_a_while_loop(x, w, s):
    k = 0
    while k < 3 and np.mean(w) > -5.0:
        k += 1
        s += np.tanh(s * s)
    t = (w, x)
    a, b = t
    return np.sum(a) * s + np.sum(np.sin(t[1])) + np.sum(b)


def mixed_tuple(x, s):
    t = (x * 2.0, s + s)
    a, b = t
    a *= np.tanh(s)  # changes the array inside t in place
    return np.sum(a) + (s if t[1] < -5.0 else t[1])  # t[1] is the float


def scales_its_argument(a, b, c=0.5):
    b *= np.tanh(np.sum(a))
    c += 1.0
    return b * c


def calls_with_scalars(x):
    return scales_its_argument(x, np.mean(x)) + scales_its_argument(x, float(x[0]), 2.0)


def calls_with_reductions_and_math(x, w):
    m = np.max(w)
    n = math.sin(m) + w.sum()
    return scales_its_argument(x, np.tanh(m) * n) + np.sum(w)


@pytest.mark.parametrize(
    "fn, args",
    [
        (unpacks_a_float_from_a_tuple, (np.array([0.3, -0.2]), 0.7)),
        (
            changes_a_float_argument_in_a_while_loop,
            (np.array([0.3, -0.2]), np.array([[0.1, 0.5], [-0.4, 0.2]]), 0.4),
        ),
        (mixed_tuple, (np.array([0.3, -0.2, 0.9]), 0.6)),
        (calls_with_scalars, (np.array([0.3, -0.2, 0.9]),)),
        (calls_with_reductions_and_math, (np.array([0.3, -0.2]), np.array([0.5, 0.1]))),
    ],
)
def test_aliasing_accepts_changes_of_scalars_and_gets_the_gradient(fn, args):
    nums = tuple(range(len(args)))
    fresh = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    value, grads = s2sad.value_and_grad(fn, argnums=nums)(*fresh())
    assert np.allclose(value, fn(*fresh()))
    expected = numerical_grad(fn, fresh(), nums)
    for g, e in zip(grads, expected):
        assert np.allclose(g, e, atol=1e-5)


# -- what must stay refused


def changes_a_row_view(x, t):
    b = np.outer(x, x)
    s = b[1]  # a row: a view of b
    s *= t
    return np.sum(b * x)


def changes_a_row_view_of_an_argument(b, x):
    s = b[1]
    s *= np.sum(x)
    return np.sum(b * x)


def becomes_a_view_after_two_iterations(x):
    y = np.outer(x, x)
    s = 1.0
    r = 1.0
    for i in range(3):
        r *= x[0]  # third iteration: r is y[1], changed in place
        r = s
        s = y[1]
    return np.sum(y * x)


def test_aliasing_refuses_changes_through_row_views():
    with pytest.raises(AliasingError, match="'b' shares memory"):
        s2sad.grad(changes_a_row_view, argnums=(0, 1))(np.array([0.3, -0.2, 0.5]), 0.7)
    args = (np.ones((3, 3)), np.array([0.3, -0.2, 0.5]))
    with pytest.raises(AliasingError, match="'b' shares memory"):
        s2sad.grad(changes_a_row_view_of_an_argument, argnums=(0, 1))(*args)


def test_aliasing_iterates_loops_to_a_fixpoint():
    with pytest.raises(AliasingError, match="'y' shares memory"):
        s2sad.grad(becomes_a_view_after_two_iterations)(np.array([0.3, -0.2, 0.5]))


def calls_with_an_array_too(x, w):
    # the first call passes a scalar, the second the caller's array w (read after)
    return scales_its_argument(x, np.mean(x)) + np.sum(scales_its_argument(x, w)) + np.sum(w)


def test_a_callee_compiled_for_a_scalar_is_not_reused_for_an_array():
    x, w = np.array([0.3, -0.2]), np.array([0.5, 0.1])
    with pytest.raises(UnsupportedSyntaxError, match="argument 'b', which may be an array"):
        s2sad.grad(calls_with_an_array_too, argnums=(0, 1))(x, w)


def changes_a_view_of_a_view(x):
    y = np.outer(x, x)
    s = y[1]
    r = s
    r *= x[0]  # changes y through s
    return np.sum(y * x)


def test_aliasing_follows_a_change_through_every_view():
    with pytest.raises(AliasingError, match="'y' shares memory"):
        s2sad.grad(changes_a_view_of_a_view)(np.array([0.3, -0.2, 0.5]))
