"""Cotangent states at the head of array loops (reverse/control.py).

The backward body of a loop is generated for the states its head really has (the
states before the loop joined with those after the body, to a fixed point): a
cotangent reset at the end of every iteration is None at the head, so its first
contribution is bound rather than added to None.  These tests check that form,
and that the gradients stay right against central finite differences in float64,
with workspace buffers reused over repeated calls and changing shapes, in forward
mode and second order too.
"""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import workspace
from tests.corpus.fd import assert_close_tree, numerical_grad


@pytest.fixture(autouse=True)
def buffers_for_small_arrays(monkeypatch):
    """Small test arrays get workspace buffers too (see tests/test_workspace.py)."""
    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)


def rnn(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)  # b broadcasts over the rows
    return np.sum(h * h)


def two_loops(W, b, x):
    h = x
    for t in range(3):
        h = np.tanh(h @ W + b)
    for t in range(2):
        h = h * np.sin(h) + b
    return np.sum(h)


def nested(W, c, x):
    h = x
    for i in range(2):
        for j in range(3):
            h = np.tanh(h @ W) * c  # c: a column, broadcast over the columns
        h = h + 0.5 * x
    return np.sum(h * h)


def cell(W, b, h):
    return np.tanh(h @ W + b)


def callee_in_loop(W, b, x):
    h = x
    for t in range(3):
        h = cell(W, b, h)
    return np.sum(h)


def accumulating(W, x):
    s = np.zeros_like(x)
    for t in range(4):
        s = s + np.tanh(x * t) @ W  # s carries from one iteration to the next
    return np.sum(s * s)


def _data(rng, f, n, m):
    """Arguments of ``f`` for a batch of n rows of width m (float64)."""
    r = lambda *shape: 0.5 * rng.normal(size=shape)
    if f is rnn:
        return (r(m, m), r(m, m), r(m), r(4, n, m))
    if f is nested:
        return (r(m, m), r(n, 1), r(n, m))
    if f is accumulating:
        return (r(m, m), r(n, m))
    return (r(m, m), r(m), r(n, m))


CASES = [rnn, two_loops, nested, callee_in_loop, accumulating]


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_gradients_over_repeated_calls_and_shapes(f):
    # calls 1-3: no buffers, recording, buffers; then other shapes (which record
    # again) and the first shape again: every gradient against finite differences
    rng = np.random.default_rng(0)
    argnums = tuple(range(len(_data(rng, f, 2, 3)) - 1))
    vg = s2sad.value_and_grad(f, argnums=argnums)
    for n, m in [(3, 4), (3, 4), (3, 4), (5, 2), (5, 2), (5, 2), (3, 4), (1, 1)]:
        args = _data(rng, f, n, m)
        value, grads = vg(*args)
        assert np.isclose(value, f(*args), rtol=1e-12)
        for k, i in enumerate(argnums):
            want = numerical_grad(f, args, i)
            assert_close_tree(grads[k], want, rtol=1e-5, atol=1e-7)


def test_returned_gradients_survive_later_calls():
    rng = np.random.default_rng(1)
    vg = s2sad.grad(rnn, argnums=(0, 1, 2))
    first_args = _data(rng, rnn, 3, 4)
    kept = [vg(*first_args) for _ in range(3)]
    for _ in range(3):
        vg(*_data(rng, rnn, 3, 4))  # other data, same shapes: the same buffers
    want = [numerical_grad(rnn, first_args, i) for i in range(3)]
    for got in kept:
        for g, w in zip(got, want):
            assert_close_tree(g, w, rtol=1e-5, atol=1e-7)


def test_a_cotangent_reset_each_iteration_is_bound_not_accumulated():
    rng = np.random.default_rng(2)
    vg = s2sad.value_and_grad(rnn, argnums=(0, 1, 2))
    vg(*_data(rng, rnn, 3, 4))
    src = vg.source
    loop = src[src.index("for t in reversed(") :]
    # the step's own cotangents (pre-activations, products) start afresh each
    # iteration: bound, never accumulated
    assert "accumulate(g_add" not in loop
    assert "accumulate(g_matmul" not in loop
    # parameters' cotangents still sum over the iterations
    assert "accumulate(g_Wh" in loop
    assert "accumulate(g_b," in loop
    # the bias broadcasts: the steps' cotangents are summed (loopsums), then
    # summed down once after the loop (after both loops of the peeled loop)
    assert "sum_steps(g_b_steps, g_add_1, b" in loop
    assert loop.count("unbroadcast(g_b_steps") == 1


def test_a_cotangent_set_on_every_path_needs_no_test():
    vg = s2sad.value_and_grad(accumulating, argnums=(0, 1))
    rng = np.random.default_rng(3)
    vg(*_data(rng, accumulating, 3, 4))
    loop = vg.source[vg.source.index("for t in reversed(") :]
    # g_s is set before the loop and by every iteration: never tested for None
    assert "if g_s is not None" not in loop


@pytest.mark.parametrize("f", [rnn, two_loops, nested], ids=lambda f: f.__name__)
def test_forward_mode_and_second_order(f):
    rng = np.random.default_rng(4)
    args = _data(rng, f, 3, 2)
    v = 0.5 * rng.normal(size=args[0].shape)
    eps = 1e-6

    def shifted(s):
        return (args[0] + s * v,) + args[1:]

    # forward mode: the directional derivative along v
    _, t_out = s2sad.jvp(f, argnums=0)(*args, v)
    fd = (f(*shifted(eps)) - f(*shifted(-eps))) / (2 * eps)
    assert np.isclose(t_out, fd, rtol=1e-5, atol=1e-7)
    # second order: H v against differences of the gradient
    g = s2sad.grad(f, argnums=0)
    hv = s2sad.hvp(f, argnums=0)(*args, v)
    fd_hv = (g(*shifted(eps)) - g(*shifted(-eps))) / (2 * eps)
    np.testing.assert_allclose(hv, fd_hv, rtol=1e-4, atol=1e-6)
