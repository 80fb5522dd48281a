"""hoist: per-step products of a loop-invariant array become one product (reverse mode).

Each hoistable loop must read ``stepwise_matmul`` after the pass and keep
gradients equal to central finite differences (float64, several shapes, the
buffered path too); each near miss must keep its per-step product (the pass
leaves it alone) and its gradients right.  Forward mode and second order
(forward over the hoisted reverse code) are checked on the hoisted forms.
"""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad
from tests.transforms.dumps import after

# ----------------------------------------------------------------------------
# Loops the pass hoists
# ----------------------------------------------------------------------------


def rnn(Wx, Wh, b, x):
    xs = x.reshape(x.shape[0], 3, -1)
    h = np.zeros((x.shape[0], Wh.shape[0]))
    for t in range(3):
        h = np.tanh(xs[:, t, :] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def time_major(W, xs):
    xs = np.asarray(xs)  # assigned by a NumPy function: surely an array
    s = 0.0
    for t in range(xs.shape[0]):
        s = s + np.sum(np.sin(xs[t] @ W))
    return s


def first_axis_tuple(W, X):
    s = 0.0
    for t in range(1, X.shape[0], 2):  # odd steps only
        s = s + np.sum(np.matmul(X[t, :, :], W) ** 2)
    return s


def vector_weight(w, X):
    # X[:, t, :] @ w is a vector per step: stacked, not one matrix product
    s = 0.0
    for t in range(X.shape[1]):
        s = s + np.sum(np.cos(X[:, t, :] @ w))
    return s


def batched_weight(W, X):
    # W is a stack of matrices: the per-step products broadcast over it
    s = 0.0
    for t in range(X.shape[1]):
        s = s + np.sum(np.tanh(X[:, t, :] @ W))
    return s


def read_twice(W, X):
    s = 0.0
    for t in range(X.shape[1]):
        xt = X[:, t, :]
        s = s + np.sum((xt @ W) * xt[:, :1])  # the slice is read again: kept
    return s


def nested(W, X):
    s = 0.0
    for k in range(2):
        for t in range(X.shape[1]):
            s = s + np.sum(np.sin(X[:, t, :] @ W) * (k + 1))
    return s


def negative_steps(W, X):
    s = 0.0
    for t in range(-X.shape[1], 0):
        s = s + np.sum(np.sin(X[:, t, :] @ W))
    return s


def empty_loop(W, X):
    s = np.sum(W)
    for t in range(0):
        s = s + np.sum(X[:, t, :] @ W)
    return s


HOISTED = [
    (rnn, lambda r: (r.normal(size=(4, 5)), r.normal(size=(5, 5)) * 0.5,
                     r.normal(size=5), r.normal(size=(6, 12))), (0, 1, 2, 3)),
    (time_major, lambda r: (r.normal(size=(3, 2)), r.normal(size=(4, 5, 3))), (0, 1)),
    (first_axis_tuple, lambda r: (r.normal(size=(3, 2)), r.normal(size=(5, 4, 3))),
     (0, 1)),
    (vector_weight, lambda r: (r.normal(size=3), r.normal(size=(2, 4, 3))), (0, 1)),
    (batched_weight, lambda r: (r.normal(size=(2, 3, 2)), r.normal(size=(5, 4, 3))),
     (0, 1)),
    (read_twice, lambda r: (r.normal(size=(3, 2)), r.normal(size=(2, 4, 3))), (0, 1)),
    (nested, lambda r: (r.normal(size=(3, 2)), r.normal(size=(2, 4, 3))), (0, 1)),
    (negative_steps, lambda r: (r.normal(size=(3, 2)), r.normal(size=(2, 4, 3))),
     (0, 1)),
    (empty_loop, lambda r: (r.normal(size=(3, 2)), r.normal(size=(2, 4, 3))), (0, 1)),
]  # fmt: skip


def _check_fd(fn, args, argnums):
    value, grads = s2sad.value_and_grad(fn, argnums=argnums)(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    for i, g in zip(argnums, grads):
        want = numerical_grad(fn, args, i)
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8, err_msg=f"arg {i}")


@pytest.mark.parametrize(
    "fn,make,argnums", HOISTED, ids=lambda v: getattr(v, "__name__", "")
)
def test_hoisted_and_right(fn, make, argnums):
    text = after("hoist", fn, argnums)
    assert "stepwise_matmul(" in text or "stepwise_ahead(" in text
    for seed in (0, 1):
        _check_fd(fn, make(np.random.default_rng(seed)), argnums)


@pytest.mark.parametrize(
    "fn,make,argnums", HOISTED, ids=lambda v: getattr(v, "__name__", "")
)
def test_hoisted_buffered(fn, make, argnums, monkeypatch):
    """Through the workspace, third call of a shape (plain, recording, recorded)."""
    from s2sad.runtime import workspace

    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    dfn = s2sad.value_and_grad(fn, argnums=argnums)
    args = make(np.random.default_rng(2))
    for _ in range(3):
        _, grads = dfn(*args)
    for i, g in zip(argnums, grads):
        np.testing.assert_allclose(g, numerical_grad(fn, args, i), rtol=1e-6, atol=1e-8)


def test_rnn_equals_per_step_form():
    """The hoisted RNN gives the per-step code's gradient to rounding (rtol 1e-12)."""

    def per_step(Wx, Wh, b, x):  # the same loop; xs written in it: not hoisted
        xs = x.reshape(x.shape[0], 3, -1) * 1.0
        h = np.zeros((x.shape[0], Wh.shape[0]))
        for t in range(3):
            xs[0, 0, 0] = xs[0, 0, 0]
            h = np.tanh(xs[:, t, :] @ Wx + h @ Wh + b)
        return np.sum(h * h)

    assert "stepwise_" not in after("hoist", per_step, (0, 1, 2, 3))
    args = HOISTED[0][1](np.random.default_rng(3))
    v1, g1 = s2sad.value_and_grad(rnn, argnums=(0, 1, 2, 3))(*args)
    v2, g2 = s2sad.value_and_grad(per_step, argnums=(0, 1, 2, 3))(*args)
    np.testing.assert_allclose(v1, v2, rtol=1e-12)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_rnn_float32_stays_float32():
    args = [a.astype(np.float32) for a in HOISTED[0][1](np.random.default_rng(4))]
    _, grads = s2sad.value_and_grad(rnn, argnums=(0, 1, 2, 3))(*args)
    assert all(g.dtype == np.float32 for g in grads)


def test_forward_mode_and_second_order():
    rng = np.random.default_rng(5)
    Wx, Wh, b, x = HOISTED[0][1](rng)
    v = rng.normal(size=Wx.shape)
    # forward mode (its own code) agrees with the reverse gradient
    _, tangent = s2sad.jvp(rnn, argnums=0)(Wx, Wh, b, x, v)
    g = s2sad.grad(rnn)(Wx, Wh, b, x)
    np.testing.assert_allclose(tangent, np.sum(g * v), rtol=1e-10)
    # Hessian-vector product: forward over the hoisted reverse code
    hv = s2sad.hvp(rnn)(Wx, Wh, b, x, v)
    eps = 1e-5
    gp = s2sad.grad(rnn)(Wx + eps * v, Wh, b, x)
    gm = s2sad.grad(rnn)(Wx - eps * v, Wh, b, x)
    np.testing.assert_allclose(hv, (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-7)
    # and with respect to the sliced array (the lhs rule's tangent)
    u = rng.normal(size=x.shape)
    hx = s2sad.hvp(rnn, argnums=3)(Wx, Wh, b, x, u)
    gp = s2sad.grad(rnn, argnums=3)(Wx, Wh, b, x + eps * u)
    gm = s2sad.grad(rnn, argnums=3)(Wx, Wh, b, x - eps * u)
    np.testing.assert_allclose(hx, (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-7)


# ----------------------------------------------------------------------------
# Near misses: left as they were
# ----------------------------------------------------------------------------


def weight_reassigned(W, X):
    s = 0.0
    for t in range(X.shape[1]):
        s = s + np.sum(np.sin(X[:, t, :] @ W))
        W = W * 0.9
    return s


def other_index(W, X):
    s = 0.0
    for t in range(X.shape[1]):
        k = X.shape[1] - 1 - t
        s = s + np.sum(np.sin(X[:, k, :] @ W))
    return s


def array_written(W, X):
    X = X * 1.0
    s = 0.0
    for t in range(X.shape[1]):
        s = s + np.sum(np.sin(X[:, t, :] @ W))
        X[:, (t + 1) % X.shape[1], :] = X[:, t, :] * 0.5
    return s


def with_break(W, X):
    s = 0.0
    for t in range(X.shape[1]):
        if t == 2:
            break
        s = s + np.sum(np.sin(X[:, t, :] @ W))
    return s


def with_continue(W, X):
    s = 0.0
    for t in range(X.shape[1]):
        if t == 1:
            continue
        s = s + np.sum(np.sin(X[:, t, :] @ W))
    return s


def while_loop(W, X):
    s = 0.0
    t = 0
    while t < X.shape[1]:
        s = s + np.sum(np.sin(X[:, t, :] @ W))
        t = t + 1
    return s


def not_a_range(W, X):
    s = 0.0
    for t in [0, 2]:
        s = s + np.sum(np.sin(X[:, t, :] @ W))
    return s


def weight_on_left(W, X):
    s = 0.0
    for t in range(X.shape[0]):
        s = s + np.sum(np.sin(W @ X[t, :, :]))
    return s


def maybe_not_array(W, X):
    # X[t] on a parameter: a list or dict would accept it too
    s = 0.0
    for t in range(2):
        s = s + np.sum(np.sin(X[t] @ W))
    return s


def inner_loop_writes(W, X):
    Y = X * 1.0
    s = 0.0
    for k in range(2):
        for t in range(Y.shape[1]):
            s = s + np.sum(np.sin(Y[:, t, :] @ W))
            Y[:, t, :] = Y[:, t, :] * 0.5
    return s


NEAR = [
    weight_reassigned,
    other_index,
    array_written,
    with_break,
    with_continue,
    while_loop,
    not_a_range,
    weight_on_left,
    maybe_not_array,
    inner_loop_writes,
]


@pytest.mark.parametrize("fn", NEAR, ids=lambda f: f.__name__)
def test_near_miss_not_hoisted(fn):
    assert "stepwise_" not in after("hoist", fn, (0, 1))
    rng = np.random.default_rng(6)
    if fn is weight_on_left:
        args = (rng.normal(size=(2, 3)), rng.normal(size=(3, 3, 2)))
    else:
        args = (rng.normal(size=(3, 2)), rng.normal(size=(2, 4, 3)))
    _check_fd(fn, args, (0, 1))


def test_emitted_code_reads_one_product():
    src = s2sad.value_and_grad(rnn, argnums=(0, 1, 2, 3))
    src(*HOISTED[0][1](np.random.default_rng(7)))
    text = src.source
    assert "xs_at_Wx = stepwise_matmul(xs, Wx, 1, r)" in text
    assert "d_stepwise_matmul" in text
    assert "d_matmul_rhs" not in text  # no per-step Wx cotangent any more
