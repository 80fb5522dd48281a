"""Adversarial loops for the session 7 passes (issue 16): ``loopsums``
(``sum_steps``) and ``step_product``/``stepwise_ahead`` (runtime/stepreads.py),
at and past their preconditions: operands rebound on some steps, loops of 0 and
1 steps, reversed and negative ranges, break/continue, nested loops, dtype
changes, workspaces reused over changing sequence lengths.  Checked against
central finite differences in float64 over repeated calls (see
test_integration_session7.py)."""

import numpy as np
import pytest

import s2sad
from tests.repeated import (  # noqa: F401 (a fixture)
    buffer_everything,
    check_repeated_calls,
    close_all,
    numeric_grad,
    seeded_rand,
)

pytestmark = pytest.mark.usefixtures("buffer_everything")


rand = seeded_rand(7)
_close = close_all


# -- loopsums, step_product: loops at and past the passes' preconditions ---------


def bias_rebound_on_odd_steps(Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        bb = b
        if t % 2:
            bb = b * 2.0  # the operand is rebound on some steps only
        h = np.tanh(xs[t] @ Wh + h @ Wh + bb)
    return np.sum(h * h)


def bias_changed_in_loop(Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wh + h @ Wh + b)
        if t == 1:
            b = b * 0.5  # the invariant stops being one
    return np.sum(h * h)


def steps_of_n(Wx, Wh, b, xs, n):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(n):  # 0, 1 or more steps
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.sum(h * h) + np.sum(b)


def backwards_by_two(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0] - 1, -1, -2):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def negative_indices(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(-3, 0):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def break_and_continue(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        if t == 1:
            continue
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
        if np.sum(h * h) > 2.0:
            break
    return np.sum(h * h)


def nested_sharing_the_bias(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for i in range(2):
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ Wx + h @ Wh + b)
        h = h + b
    return np.sum(h * h)


def bias_along_columns(Wx, Wh, c, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + c[:, None])  # one per row
    return np.sum(h * h)


def bias_and_scalar(Wx, Wh, b, xs, s):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b + s)  # a 0-d array broadcast too
    return np.sum(h * h)


def steps_along_axis_one(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[0], Wh.shape[0]))
    for t in range(xs.shape[1]):
        h = np.tanh(xs[:, t] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def dtype_changes_mid_loop(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]), dtype=np.float32)
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)  # float32 first, float64 after
    return np.sum(h * h)


def xs_rebound_conditionally(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        if t == 2:
            xs = xs * 2.0
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def invariant_cotangent(w, b, x):
    s = 0.0
    for k in range(3):
        s = s + np.sum(x + b)  # the same cotangent array every step
    return s + np.sum((x + b) * w)


def ragged_steps(b, xs):
    s = 0.0
    for t in range(1, xs.shape[0]):
        s = s + np.sum(np.tanh(xs[:t] + b) ** 2)  # the steps' shapes differ
    return s


def bias_read_twice_a_step(W, b, xs):
    h = np.zeros((xs.shape[1], W.shape[0]))
    for t in range(xs.shape[0]):
        z = xs[t] @ W + b
        h = np.tanh(z) + np.sin(h + b) * 0.5
    return np.sum(h * h)


def _rnn_args(T=4, n=3, d=5, m=4):
    return [rand(d, m), rand(m, m), rand(m), rand(T, n, d)]


LOOPS = [
    (bias_rebound_on_odd_steps, [rand(4, 4), rand(4), rand(4, 3, 4)], (0, 1)),
    (bias_changed_in_loop, [rand(4, 4), rand(4), rand(4, 3, 4)], (0, 1)),
    (backwards_by_two, _rnn_args(T=5), (0, 1, 2)),
    (negative_indices, _rnn_args(), (0, 1, 2)),
    (break_and_continue, _rnn_args(T=5), (0, 1, 2)),
    (nested_sharing_the_bias, _rnn_args(T=3), (0, 1, 2)),
    (bias_along_columns, [rand(5, 4), rand(4, 4), rand(3), rand(4, 3, 5)], (0, 1, 2)),
    (bias_and_scalar, _rnn_args() + [np.array(0.3)], (0, 1, 2, 4)),
    (steps_along_axis_one, [rand(5, 4), rand(4, 4), rand(4), rand(3, 6, 5)], (0, 1, 2)),
    (xs_rebound_conditionally, _rnn_args(), (0, 1, 2)),
    (invariant_cotangent, [rand(6, 4), rand(4), rand(6, 4)], (0, 1, 2)),
    (ragged_steps, [rand(4), rand(5, 3, 4)], (0, 1)),
    (bias_read_twice_a_step, [rand(4, 4), rand(4), rand(4, 3, 4)], (0, 1, 2)),
    (xs_rebound_conditionally, _rnn_args(), (0, 1, 2, 3)),
    (
        steps_along_axis_one,
        [rand(5, 4), rand(4, 4), rand(4), rand(3, 6, 5)],
        (0, 1, 2, 3),
    ),
]


@pytest.mark.parametrize(
    "f, args, argnums", LOOPS, ids=lambda v: getattr(v, "__name__", "")
)
def test_loops_against_finite_differences(f, args, argnums):
    check_repeated_calls(f, args, argnums, calls=3)


@pytest.mark.parametrize(
    "f, args, argnums", LOOPS[2:6], ids=lambda v: getattr(v, "__name__", "")
)
def test_loops_forward_and_second_order(f, args, argnums):
    s2sad.check_grads(f, args, order=2)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_loops_of_zero_one_and_more_steps(n):
    args = _rnn_args(T=3) + [n]
    check_repeated_calls(steps_of_n, args, (0, 1, 2), calls=3)


def test_workspaces_reused_with_changing_sequence_lengths():
    vg = s2sad.value_and_grad(backwards_by_two, argnums=(0, 1, 2))
    vs = s2sad.value_and_grad(steps_along_axis_one, argnums=(0, 1, 2))
    base = _rnn_args(T=6)
    for T in [3, 5, 1, 3, 6, 5, 1, 3]:
        args = base[:3] + [base[3][:T]]
        want = [numeric_grad(backwards_by_two, args, k) for k in range(3)]
        value, grads = vg(*args)
        np.testing.assert_allclose(value, backwards_by_two(*args), rtol=1e-10)
        _close(grads, want)
        xs = rand(3, T, 5)
        args = [base[0], base[1], base[2], xs]
        want = [numeric_grad(steps_along_axis_one, args, k) for k in range(3)]
        _close(vs(*args)[1], want)


def axis_one_with_break(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[0], Wh.shape[0]))
    for t in range(xs.shape[1]):
        if t == 1:
            continue
        h = np.tanh(xs[:, t] @ Wx + h @ Wh + b)
        if np.sum(h * h) > 0.8 * h.size:
            break
    return np.sum(h * h)


def axis_one_twice(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[0], Wh.shape[0]))
    for t in range(xs.shape[1]):
        h = np.tanh(xs[:, t] @ Wx + h @ Wh + b)
    g = h
    for t in range(xs.shape[1]):  # the same product again, from another state
        g = np.tanh(xs[:, t] @ Wx + g @ Wh + b) * h
    return np.sum(g * g)


@pytest.mark.parametrize(
    "f", [steps_along_axis_one, axis_one_with_break, axis_one_twice]
)
@pytest.mark.parametrize("n, m, T", [(4, 6, 3), (40, 64, 3), (4, 6, 1), (4, 6, 0)])
def test_step_products_both_sides_of_the_ahead_threshold(f, n, m, T):
    """One step's product (n x m) under and over stepreads.AHEAD_ENTRIES, and
    sequences of one step and none."""
    args = [rand(3, m, scale=0.2), rand(m, m, scale=0.1), rand(m), rand(n, T, 3)]
    vg = check_repeated_calls(f, args, (0, 1, 2), calls=3)
    assert ("step_product" in vg.source) == (f is not axis_one_with_break)


def test_dtype_changing_mid_loop():
    args = _rnn_args()
    want_value = dtype_changes_mid_loop(*args)
    want = [numeric_grad(dtype_changes_mid_loop, args, k) for k in range(3)]
    vg = s2sad.value_and_grad(dtype_changes_mid_loop, argnums=(0, 1, 2))
    for _ in range(3):
        value, grads = vg(*args)
        np.testing.assert_allclose(value, want_value, rtol=1e-10)
        _close(grads, want)


def test_float32_weights_and_a_float64_bias():
    Wx, Wh, b, xs = _rnn_args()
    args = [Wx.astype(np.float32), Wh.astype(np.float32), b, xs.astype(np.float32)]
    ref = s2sad.value_and_grad(backwards_by_two, argnums=(0, 1, 2))
    args64 = [a.astype(np.float64) for a in args]
    want = [numeric_grad(backwards_by_two, args64, k) for k in range(3)]
    for _ in range(3):
        value, grads = ref(*args)
        np.testing.assert_allclose(value, backwards_by_two(*args), rtol=1e-6)
        assert [g.dtype for g in grads] == [a.dtype for a in args[:3]]
        _close(grads, want, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize(
    "f, args, argnums", LOOPS, ids=lambda v: getattr(v, "__name__", "")
)
def test_loops_with_out_arrays(f, args, argnums):
    want = [numeric_grad(f, args, k) for k in argnums]
    vg = s2sad.value_and_grad(f, argnums=argnums)
    outs = tuple(np.empty_like(args[k]) for k in argnums)
    for _ in range(4):
        value, grads = vg(*[np.array(a) for a in args], out=outs)
        np.testing.assert_allclose(value, f(*args), rtol=1e-10)
        _close(grads, want)
        assert all(g is o for g, o in zip(grads, outs))
