"""Compiled gradients through the runtime's faster kernels (issue 16): ReLU as
``np.maximum`` (partial rules, ties), matmul with a vector operand.  Each is
checked in plain and buffered calls against finite differences in float64, and
against the tie convention at exact ties."""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import workspace
from tests.corpus.fd import assert_close_tree, numerical_grad


@pytest.fixture(autouse=True)
def buffers_for_small_arrays(monkeypatch):
    """Small arrays, buffered anyway (see tests/test_workspace.py)."""
    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)


def relu_mlp(W, b, x):
    h = np.maximum(x @ W + b, 0.0)
    return np.sum(h * h) + np.sum(np.minimum(h, 0.5))


def relu_left(W, x):
    return np.sum(np.maximum(0.0, x @ W) ** 2)


def both_sides(a, b):
    return np.sum(np.maximum(a, b) * np.minimum(a, b[0]))


def matvec(W, v, u):
    return np.sum(np.tanh(W @ v) * u) + np.sum((u @ W) ** 2) + (v @ v) * (u @ u)


def _calls(dfn, args, n=4):
    """n calls: plain, recording, then buffered ones; the gradients of each."""
    return [dfn(*args) for _ in range(n)]


@pytest.mark.parametrize(
    "f,argnums,shapes",
    [
        (relu_mlp, (0, 1), [(3, 4), (4,), (5, 3)]),
        (relu_left, (0,), [(3, 4), (6, 3)]),
        (both_sides, (0, 1), [(4, 3), (3,)]),
        (matvec, (0, 1, 2), [(4, 3), (3,), (4,)]),
    ],
)
def test_kernels_against_finite_differences(f, argnums, shapes):
    rng = np.random.default_rng(0)
    dfn = s2sad.grad(f, argnums=argnums)
    for _ in range(2):
        args = tuple(rng.normal(size=s) for s in shapes)
        for got in _calls(dfn, args):
            for k, i in enumerate(argnums):
                want = numerical_grad(f, args, i)
                assert_close_tree(got[k], want, rtol=1e-5, atol=1e-7)


def test_relu_ties_split_in_plain_and_buffered_calls():
    """Pre-activations exactly 0 get half the cotangent, in every call."""
    W = np.array([[1.0, -1.0, 0.0], [2.0, 0.0, 1.0]])
    b = np.array([0.0, 1.0, 0.0])
    x = np.array([[1.0, 1.0], [0.0, 0.0], [-1.0, 0.5]])  # pre-activations with zeros
    a = x @ W + b
    h = np.maximum(a, 0.0)
    g_h = 2 * h + (h < 0.5)  # d/dh of sum(h*h) + sum(minimum(h, 0.5)), h != 0.5
    g_h = g_h + 0.5 * (h == 0.5)
    g_a = g_h * ((a > 0) + 0.5 * (a == 0))
    want = (x.T @ g_a, g_a.sum(axis=0))
    dfn = s2sad.grad(relu_mlp, argnums=(0, 1))
    for got in _calls(dfn, (W, b, x)):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    assert "d_maximum_lhs(" in dfn.source  # only the pre-activation's share


def test_relu_float32_with_out_arrays():
    rng = np.random.default_rng(1)
    W = rng.normal(size=(6, 5)).astype(np.float32)
    b = np.zeros(5, np.float32)
    x = rng.normal(size=(8, 6)).astype(np.float32)
    x[0] = 0.0  # a row of exact ties
    dfn = s2sad.value_and_grad(relu_mlp, argnums=(0, 1))
    ref = s2sad.grad(relu_mlp, argnums=(0, 1))(W.astype(float), b.astype(float), x)
    outs = (np.empty_like(W), np.empty_like(b))
    for _ in range(3):
        _, grads = dfn(W, b, x, out=outs)
        assert grads[0] is outs[0] and grads[0].dtype == np.float32
        np.testing.assert_allclose(grads[0], ref[0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(grads[1], ref[1], rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------- slice cotangents


def taps(x, K):
    L = x.shape[1] - 2
    y = x[:, 0:L] @ K[0] + x[:, 1 : L + 1] @ K[1] + x[:, 2 : L + 2] @ K[2]
    return np.sum(np.tanh(y)) + np.sum(x[:, 1] * x[:, 2])


def fancy_and_masks(x):
    ids = np.array([0, 2, 0, 1])  # repeats: these must add up, not overwrite
    return np.sum(np.sin(x[ids])) + np.sum(x[x > 0.0] ** 2) + np.sum(x[1:] * x[:-1])


def looped_rows(xs, W):
    h = np.zeros(W.shape[1])
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ W + h)
    return np.sum(h * h) + np.sum(xs[0] * xs[-1])


@pytest.mark.parametrize(
    "f,argnums,shapes",
    [
        (taps, (0, 1), [(3, 7, 4), (3, 4, 5)]),
        (fancy_and_masks, (0,), [(5, 3)]),
        (looped_rows, (0, 1), [(4, 3), (3, 3)]),
    ],
)
def test_indexed_reads_accumulate_right(f, argnums, shapes):
    rng = np.random.default_rng(2)
    dfn = s2sad.grad(f, argnums=argnums)
    for _ in range(2):
        args = tuple(0.5 * rng.normal(size=s) for s in shapes)
        for got in _calls(dfn, args):
            for k, i in enumerate(argnums):
                want = numerical_grad(f, args, i)
                assert_close_tree(got[k], want, rtol=1e-5, atol=1e-7)
    assert "add_at_index(" in dfn.source


def test_indexed_sums_do_not_reach_returned_gradients():
    """Gradients returned earlier stay as they were while later calls add into
    their workspace buffers."""
    rng = np.random.default_rng(3)
    dfn = s2sad.grad(taps, argnums=(0, 1))
    first = dfn(rng.normal(size=(3, 7, 4)), rng.normal(size=(3, 4, 5)))
    kept = [g.copy() for g in first]
    for _ in range(3):
        dfn(rng.normal(size=(3, 7, 4)), rng.normal(size=(3, 4, 5)))
    for g, k in zip(first, kept):
        np.testing.assert_array_equal(g, k)


def test_shape_keys_of_tapes():
    """The key of a tape (a list of arrays) tells every shape, dtype, mask and
    small integer apart, as the key of a lone array does."""
    key = workspace.shape_key
    a32, a64 = np.zeros((2, 3), np.float32), np.zeros((2, 3))
    tape = [a32, a32, (a64, 1.0)]
    assert key([tape]) == key([[a32.copy(), a32.copy(), (a64.copy(), 2.0)]])
    assert key([tape]) != key([[a32, a32.T.copy(), (a64, 1.0)]])
    assert key([tape]) != key([[a32, a32.astype(np.float64), (a64, 1.0)]])
    assert key([[a32, np.array([3])]]) != key([[a32, np.array([4])]])
    assert key([[a32, np.zeros(3, bool)]]) is None  # a mask: no buffers
    assert key([a32]) == key([np.ones((2, 3), np.float32)])
