"""hoist: where the stepped array is no differentiated value, the loop reads
``step_product`` of ``stepwise_ahead`` (steps computed ahead when small, each
step's own product otherwise) and the backward sweep differentiates one step at
a time (no cotangent of the stacked product, no ``add_at_index``).

Both run-time choices (``stepreads.AHEAD_ENTRIES`` forced low and high) keep
gradients equal to central finite differences in float64: index steps, slice
steps (tiling, overlapping, ragged, offset, nested loops), workspaces called
again, weights rebound in the loop (not hoisted), forward mode and hvp.
"""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import stepreads, steps
from s2sad.testing import numerical_grad
from tests.transforms import test_hoist_invariants as inv
from tests.transforms.dumps import after


def rnn(Wx, Wh, b, x):
    xs = x.reshape(x.shape[0], 3, -1)
    h = np.zeros((x.shape[0], Wh.shape[0]))
    for t in range(3):
        h = np.tanh(xs[:, t, :] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def rebound(W, x):  # W changes in the loop: not hoisted
    s = 0.0
    for t in range(x.shape[1]):
        s = s + np.sum(np.sin(x[:, t, :] @ W))
        W = W * 0.9
    return s


def _rnn_args(r, n=6):
    return (
        r.normal(size=(4, 5)) * 0.5,
        r.normal(size=(5, 5)) * 0.5,
        r.normal(size=5),
        r.normal(size=(n, 12)),
    )


@pytest.fixture(params=["each step", "ahead", "time-major"])
def ahead(request, monkeypatch):
    """Each step's own product (AHEAD_ENTRIES and TIME_MAJOR_ENTRIES below any
    size, OWN_LAYOUT off), all ahead in x's layout, or all ahead time-major
    (StepProducts)."""
    monkeypatch.setattr(
        stepreads, "AHEAD_ENTRIES", -1 if request.param == "each step" else 1 << 40
    )
    monkeypatch.setattr(stepreads, "OWN_LAYOUT", request.param != "each step")
    monkeypatch.setattr(
        stepreads,
        "TIME_MAJOR_ENTRIES",
        1 << 40 if request.param == "time-major" else -1,
    )
    return request.param


def _check(fn, args, argnums, times=1, dfn=None):
    dfn = dfn or s2sad.value_and_grad(fn, argnums=argnums)
    for _ in range(times):
        value, grads = dfn(*args)
        np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
        for i, g in zip(argnums, grads):
            want = numerical_grad(fn, args, i)
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8, err_msg=str(i))


def test_emitted_form():
    text = after("hoist", rnn, (0, 1, 2))
    assert "xs_at_Wx = stepwise_ahead(xs, Wx, 1, r)" in text
    assert "step_product(xs_at_Wx, xs, Wx, 1, t)" in text
    vg = s2sad.value_and_grad(rnn, argnums=(0, 1, 2))
    vg(*_rnn_args(np.random.default_rng(0)))
    assert "d_step_product_rhs(" in vg.source  # small arrays: plain code
    assert "add_at_index" not in vg.source and "d_stepwise_matmul" not in vg.source
    # x differentiated: the stacked product's cotangent, one product for x
    text = after("hoist", rnn, (0, 1, 2, 3))
    assert "stepwise_matmul(" in text and "step_product" not in text


def test_rnn_right(ahead):
    for seed, n in ((0, 1), (1, 6)):
        _check(rnn, _rnn_args(np.random.default_rng(seed), n), (0, 1, 2))


def test_rnn_buffered_called_again(ahead, monkeypatch):
    from s2sad.runtime import workspace

    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    dfn = s2sad.value_and_grad(rnn, argnums=(0, 1, 2))
    for seed in (2, 2, 2, 3):
        _check(rnn, _rnn_args(np.random.default_rng(seed)), (0, 1, 2), dfn=dfn)


@pytest.mark.parametrize(
    "fn,make", inv.HOISTED, ids=lambda v: getattr(v, "__name__", "")
)
def test_slice_steps_right(fn, make, ahead, monkeypatch):
    """Tiling, overlapping, ragged and offset slices, nested loops, lists; the
    workspace on repeated calls."""
    from s2sad.runtime import workspace

    for seed, n in ((0, 1), (1, 3)):
        inv._check(fn, make(np.random.default_rng(seed), n))
    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    dfn = s2sad.value_and_grad(fn, argnums=0)
    for _ in range(3):
        args = make(np.random.default_rng(4), 2)
        got, want = dfn(*args)[1], numerical_grad(fn, args, 0)
        for k in want if isinstance(want, dict) else range(len(want)):
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-8)


def test_rebound_weights_not_hoisted(ahead):
    assert "step_product" not in after("hoist", rebound, (0,))
    r = np.random.default_rng(5)
    _check(rebound, (r.normal(size=(3, 2)), r.normal(size=(2, 4, 3))), (0, 1))


def test_forward_mode_and_second_order(ahead):
    r = np.random.default_rng(6)
    Wx, Wh, b, x = _rnn_args(r)
    v = r.normal(size=Wx.shape)
    _, tangent = s2sad.jvp(rnn, argnums=0)(Wx, Wh, b, x, v)
    g = s2sad.grad(rnn)(Wx, Wh, b, x)
    np.testing.assert_allclose(tangent, np.sum(g * v), rtol=1e-10)
    hv = s2sad.hvp(rnn)(Wx, Wh, b, x, v)  # forward over the per-step backward
    eps = 1e-5
    gp = s2sad.grad(rnn)(Wx + eps * v, Wh, b, x)
    gm = s2sad.grad(rnn)(Wx - eps * v, Wh, b, x)
    np.testing.assert_allclose(hv, (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-7)


def test_step_product_runtime(monkeypatch):
    r = np.random.default_rng(7)
    x, w = r.normal(size=(3, 4, 2)), r.normal(size=(2, 5))
    prod = steps.stepwise_matmul(x, w, 1, range(4))
    for t in range(4):
        np.testing.assert_allclose(
            stepreads.step_product(prod, x, w, 1, t), x[:, t] @ w
        )
        np.testing.assert_allclose(
            stepreads.step_product(None, x, w, 1, t), x[:, t] @ w
        )
    out = np.empty((3, 5))
    assert stepreads.step_product(None, x, w, 1, 2, out=out) is out
    # a buffer of another dtype is not used (no silent cast)
    small = np.empty((3, 5), np.float32)
    assert stepreads.step_product(None, x, w, 1, 2, out=small).dtype == np.float64
    g = r.normal(size=(3, 5))
    buf = np.empty((2, 5))
    got = stepreads.d_step_product_rhs(g, None, None, x, w, 1, 1, into=(buf,))[0]
    assert got is buf
    np.testing.assert_allclose(got, x[:, 1].T @ g)
    # ahead only when a step's product is small
    assert type(stepreads.stepwise_ahead(x, w, 1, range(4))) is stepreads.StepProducts
    # a large step: in x's own layout where that needs no copy (x contiguous,
    # the steps reaching its axis' end), else each step's own product
    big = np.zeros((1000, 4, 2))
    own = stepreads.stepwise_ahead(big, w, 1, range(4))
    assert type(own) is np.ndarray and own.shape == (1000, 4, 5)
    np.testing.assert_array_equal(stepreads.step_product(own, big, w, 1, 2), 0.0)
    assert stepreads.stepwise_ahead(big, w, 1, range(3)) is None  # not reached
    strided = np.zeros((2000, 4, 2))[::2]
    assert stepreads.stepwise_ahead(strided, w, 1, range(4)) is None
    monkeypatch.setattr(stepreads, "OWN_LAYOUT", False)
    assert stepreads.stepwise_ahead(big, w, 1, range(4)) is None
