"""loopsums: a loop-invariant operand's cotangent summed down once after the loop.

Each rewritten loop calls ``sum_steps`` after the pass and keeps gradients equal
to central finite differences (float64, several shapes, broadcasting, a callee,
through the workspace called more than once); near misses keep the per-step
sum; forward mode and second order are unaffected.
"""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import stepreads as steps
from s2sad.runtime.support import unbroadcast
from s2sad.testing import numerical_grad
from tests.transforms.dumps import after


def rnn(Wx, Wh, b, x):
    xs = x.reshape(x.shape[0], 3, -1)
    h = np.zeros((x.shape[0], Wh.shape[0]))
    for t in range(3):
        h = np.tanh(xs[:, t, :] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def row_bias(W, b, x):  # b of shape (1, k): summed over rows only
    s = 0.0
    for t in range(x.shape[1]):
        s = s + np.sum(np.sin(x[:, t, :] @ W + b))
    return s


def three_d(b, x):  # b broadcast over two axes of each step's term
    s = 0.0
    for t in range(3):
        s = s + np.sum(np.cos(x * (t + 1.0) + b) ** 2)
    return s


def inner(z, b):
    return np.tanh(z + b)


def in_callee(b, x):
    h = x[:, 0, :]
    for t in range(1, x.shape[1]):
        h = inner(h * x[:, t, :], b)
    return np.sum(h)


def growing(b, x):  # each step's term has another shape: summed down per step
    s = 0.0
    for t in range(3):
        s = s + np.sum(np.sin(x[: 2 * (t + 1)] + b))
    return s


def rebound(b, x):  # b changes in the loop: left as it was
    s = 0.0
    for t in range(3):
        s = s + np.sum(np.sin(x * t + b))
        b = b * 0.5
    return s


def _rng_args(shapes):
    def make(r):
        return tuple(r.normal(size=s) * 0.5 for s in shapes)

    return make


REWRITTEN = [
    (rnn, _rng_args([(4, 5), (5, 5), (5,), (6, 12)]), (0, 1, 2, 3)),
    (row_bias, _rng_args([(3, 4), (1, 4), (5, 2, 3)]), (0, 1, 2)),
    (three_d, _rng_args([(3,), (2, 4, 3)]), (0, 1)),
    (growing, _rng_args([(3,), (6, 3)]), (0, 1)),
]
KEPT = [(rebound, _rng_args([(3,), (4, 3)]), (0, 1))]


def _check(dfn, fn, args, argnums, times=1):
    for _ in range(times):
        value, grads = dfn(*args)
        np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
        for i, g in zip(argnums, grads):
            want = numerical_grad(fn, args, i)
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8, err_msg=str(i))


def _name(v):
    return getattr(v, "__name__", "")


@pytest.mark.parametrize("fn,make,argnums", REWRITTEN, ids=_name)
def test_rewritten_and_right(fn, make, argnums):
    assert "sum_steps(" in after("loopsums", fn, argnums)
    for seed in (0, 1):
        args = make(np.random.default_rng(seed))
        _check(s2sad.value_and_grad(fn, argnums=argnums), fn, args, argnums)


@pytest.mark.parametrize("fn,make,argnums", REWRITTEN + KEPT, ids=_name)
def test_buffered_called_again(fn, make, argnums, monkeypatch):
    """Through the workspace: plain, recording and recorded calls, all right."""
    from s2sad.runtime import workspace

    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    dfn = s2sad.value_and_grad(fn, argnums=argnums)
    _check(dfn, fn, make(np.random.default_rng(2)), argnums, times=3)
    assert "sum_steps(" in dfn.source or fn in [k[0] for k in KEPT]


def test_in_callee(monkeypatch):
    from s2sad.runtime import workspace

    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    args = _rng_args([(3,), (4, 3, 3)])(np.random.default_rng(3))
    _check(s2sad.value_and_grad(in_callee, argnums=(0, 1)), in_callee, args, (0, 1), 2)


def test_rebound_operand_kept():
    assert "sum_steps(" not in after("loopsums", rebound, (0, 1))
    args = KEPT[0][1](np.random.default_rng(4))
    _check(s2sad.value_and_grad(rebound, argnums=(0, 1)), rebound, args, (0, 1))


def test_emitted_form():
    code = after("loopsums", rnn, (0, 1, 2, 3))
    assert "g_b_steps = None" in code
    assert "g_b_steps = sum_steps(g_b_steps, " in code
    # the peeled loop's second backward loop goes on with the first one's sum,
    # summed down once after both
    assert "g_b_steps_1 = g_b_steps\n" in code
    assert "g_b = accumulate(g_b, unbroadcast(g_b_steps_1, b))" in code
    assert code.count("unbroadcast(g_b_steps") == 1


def test_plain_module_keeps_per_step_sums():
    """The code hvp differentiates (no workspace) has no sum_steps."""
    from s2sad.options import Options

    plain = Options(workspace=False)
    assert "sum_steps(" not in after("loopsums", rnn, (0, 1, 2, 3), options=plain)


def test_forward_mode_and_second_order():
    rng = np.random.default_rng(5)
    Wx, Wh, b, x = REWRITTEN[0][1](rng)
    v = rng.normal(size=b.shape)
    _, tangent = s2sad.jvp(rnn, argnums=2)(Wx, Wh, b, x, v)
    g = s2sad.grad(rnn, argnums=2)(Wx, Wh, b, x)
    np.testing.assert_allclose(tangent, np.sum(g * v), rtol=1e-10)
    hv = s2sad.hvp(rnn, argnums=2)(Wx, Wh, b, x, v)
    eps = 1e-5
    gp = s2sad.grad(rnn, argnums=2)(Wx, Wh, b + eps * v, x)
    gm = s2sad.grad(rnn, argnums=2)(Wx, Wh, b - eps * v, x)
    np.testing.assert_allclose(hv, (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-7)


def test_sum_steps_runtime():
    like = np.zeros(3)
    a, b = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    acc = steps.sum_steps(None, a, like)
    assert acc is a  # held: a is never written into
    acc = steps.sum_steps(acc, b, like)
    assert acc is not a
    acc = steps.sum_steps(acc, b, like)  # its own sum now: added in place
    acc = steps.sum_steps(acc, None, like)
    acc = steps.sum_steps(acc, np.ones((4, 3)), like)  # another shape: summed down
    acc = steps.sum_steps(acc, np.ones(3), like)  # like's shape
    acc = steps.sum_steps(acc, np.ones((2, 3), np.float32), like)  # another dtype
    want = a.sum(0) + 2 * b.sum(0) + 4 + 1 + 2
    np.testing.assert_allclose(unbroadcast(acc, like), want)
    np.testing.assert_allclose(a, np.arange(6.0).reshape(2, 3))  # untouched
    # a number as like: every step summed whole
    assert steps.sum_steps(steps.sum_steps(None, a, 0.0), b, 0.0) == 21.0
