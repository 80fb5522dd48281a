"""peel: a loop's first iteration runs apart when it multiplies a zero initial state.

Each peeled loop must call ``matmul_zeros`` after the pass and keep gradients
equal to central finite differences (float64, several shapes, the buffered path
too); each near miss must stay one loop and keep its gradients right.
"""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad
from tests.transforms.dumps import after


def rnn(Wx, Wh, b, x):
    xs = x.reshape(x.shape[0], 3, -1)
    h = np.zeros((x.shape[0], Wh.shape[0]))
    for t in range(3):
        h = np.tanh(xs[:, t, :] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def state_on_right(W, x):
    h = np.zeros((W.shape[1], x.shape[1]))
    for t in range(1, 4):
        h = np.sin(W @ h + x * t)
    return np.sum(h)


def matmul_call_and_other_reads(W, x):
    h = np.zeros((x.shape[0], W.shape[0]))
    s = 0.0
    for t in range(3):
        s = s + np.sum(h * x[:, :1])  # reads the zero state too: kept as written
        h = np.cos(np.matmul(h, W) + x * (t + 1))
    return s + np.sum(h)


def single_step(W, x):
    h = np.zeros((x.shape[0], W.shape[0]))
    for t in range(1):
        h = np.tanh(h @ W + x)
    return np.sum(h)


def no_step(W, x):
    h = np.zeros((x.shape[0], W.shape[0]))
    for t in range(0):
        h = np.tanh(h @ W + x)
    return np.sum(h + x) + np.sum(W)


def _args(r):
    return (r.normal(size=(3, 3)) * 0.5, r.normal(size=(4, 3)))


PEELED = [
    (rnn, lambda r: (r.normal(size=(4, 5)), r.normal(size=(5, 5)) * 0.5,
                     r.normal(size=5), r.normal(size=(6, 12))), (0, 1, 2, 3)),
    (state_on_right, lambda r: (r.normal(size=(3, 3)) * 0.5, r.normal(size=(3, 2))),
     (0, 1)),
    (matmul_call_and_other_reads, _args, (0, 1)),
    (single_step, _args, (0, 1)),
    (no_step, _args, (0, 1)),
]  # fmt: skip


def _check_fd(fn, args, argnums):
    value, grads = s2sad.value_and_grad(fn, argnums=argnums)(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    for i, g in zip(argnums, grads):
        want = numerical_grad(fn, args, i)
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8, err_msg=f"arg {i}")


def _name(v):
    return getattr(v, "__name__", "")


@pytest.mark.parametrize("fn,make,argnums", PEELED, ids=_name)
def test_peeled_and_right(fn, make, argnums):
    assert "matmul_zeros" in after("peel", fn, argnums)
    for seed in (0, 1):
        _check_fd(fn, make(np.random.default_rng(seed)), argnums)


@pytest.mark.parametrize("fn,make,argnums", PEELED, ids=_name)
def test_peeled_buffered(fn, make, argnums, monkeypatch):
    from s2sad.runtime import workspace

    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    dfn = s2sad.value_and_grad(fn, argnums=argnums)
    args = make(np.random.default_rng(2))
    for _ in range(3):
        _, grads = dfn(*args)
    for i, g in zip(argnums, grads):
        np.testing.assert_allclose(g, numerical_grad(fn, args, i), rtol=1e-6, atol=1e-8)


def test_non_finite_weight_keeps_the_product():
    """0 * inf is nan: with an inf in W the first step's product is computed."""
    W, x = _args(np.random.default_rng(3))
    W[0, 0] = np.inf
    with np.errstate(invalid="ignore"):
        value, _ = s2sad.value_and_grad(single_step, argnums=(0, 1))(W, x)
        np.testing.assert_equal(value, single_step(W, x))
    assert np.isnan(value)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_non_finite_weight_on_either_side_keeps_the_product(bad):
    """matmul_zeros checks only the operand that is not the zero state: an inf or
    a nan there (zeros on the left or on the right) still gives the product."""
    W, x = _args(np.random.default_rng(6))
    W[1, 2] = bad
    x2 = np.random.default_rng(7).normal(size=(3, 2))
    with np.errstate(invalid="ignore"):
        for fn, args in ((single_step, (W, x)), (state_on_right, (W, x2))):
            assert "matmul_zeros" in after("peel", fn, (0, 1))
            value, _ = s2sad.value_and_grad(fn, argnums=(0, 1))(*args)
            np.testing.assert_equal(value, fn(*args))
            assert np.isnan(value)


def test_matmul_zeros_checks_the_other_operand():
    from s2sad.runtime.steps import matmul_zeros

    z = np.zeros((4, 3), np.float32)
    w = np.ones((3, 2), np.float32)
    for zero in (None, 0):
        r = matmul_zeros(z, w, zero)
        assert r.dtype == np.float32 and r.shape == (4, 2) and not r.any()
    w[0, 0] = np.inf
    for zero in (None, 0):  # 0 * inf is nan: the product itself
        with np.errstate(invalid="ignore"):
            np.testing.assert_equal(matmul_zeros(z, w, zero), z @ w)
    # zeros on the right: only the left operand is checked
    zr = np.zeros((3, 2))
    a = np.ones((4, 3))
    np.testing.assert_equal(matmul_zeros(a, zr, 1), np.zeros((4, 2)))
    a[2, 1] = np.nan
    np.testing.assert_equal(matmul_zeros(a, zr, 1), a @ zr)
    out = np.full((4, 2), 7.0)
    assert matmul_zeros(np.ones((4, 3)), zr, 1, out=out) is out and not out.any()


def test_second_order_through_the_peeled_loop():
    rng = np.random.default_rng(4)
    Wx, Wh, b, x = PEELED[0][1](rng)
    v = rng.normal(size=Wh.shape)
    hv = s2sad.hvp(rnn, argnums=1)(Wx, Wh, b, x, v)
    eps = 1e-5
    gp = s2sad.grad(rnn, argnums=1)(Wx, Wh + eps * v, b, x)
    gm = s2sad.grad(rnn, argnums=1)(Wx, Wh - eps * v, b, x)
    np.testing.assert_allclose(hv, (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-7)


def test_emitted_code_skips_the_first_product():
    dfn = s2sad.value_and_grad(rnn, argnums=(0, 1, 2, 3))
    dfn(*PEELED[0][1](np.random.default_rng(5)))
    text = dfn.source
    assert "matmul_zeros(h, Wh, 0)" in text
    assert text.count("d_matmul(") == 1  # the steps after the first only


# ----------------------------------------------------------------------------
# Near misses: one loop, as written
# ----------------------------------------------------------------------------


def state_changed_before(W, x):
    h = np.zeros((x.shape[0], W.shape[0]))
    h = h + 1.0
    for t in range(3):
        h = np.tanh(h @ W + x)
    return np.sum(h)


def ones_state(W, x):
    h = np.ones((x.shape[0], W.shape[0]))
    for t in range(3):
        h = np.tanh(h @ W + x)
    return np.sum(h)


def reassigned_first(W, x):
    h = np.zeros((x.shape[0], W.shape[0]))
    for t in range(3):
        h = h + x
        h = np.tanh(h @ W)
    return np.sum(h)


def while_state(W, x):
    h = np.zeros((x.shape[0], W.shape[0]))
    t = 0
    while t < 3:
        h = np.tanh(h @ W + x)
        t = t + 1
    return np.sum(h)


def break_state(W, x):
    h = np.zeros((x.shape[0], W.shape[0]))
    for t in range(4):
        if t == 2:
            break
        h = np.tanh(h @ W + x)
    return np.sum(h)


def item_written_in_loop(W, x):
    h = np.zeros((x.shape[0], W.shape[0]))
    y = x * 1.0
    for t in range(3):
        h = np.tanh(h @ W + y)
        y[0, 0] = 0.5
    return np.sum(h)


NEAR = [
    state_changed_before,
    ones_state,
    reassigned_first,
    while_state,
    break_state,
    item_written_in_loop,
]


@pytest.mark.parametrize("fn", NEAR, ids=_name)
def test_near_miss_not_peeled(fn):
    assert "matmul_zeros" not in after("peel", fn, (0, 1))
    _check_fd(fn, _args(np.random.default_rng(6)), (0, 1))
