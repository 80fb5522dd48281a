"""A callee's residuals bound only on some paths: after an early return, the
names its skipped code would have bound (a hoisted loop's stepped product
among them) still exist when the residual tuple is built.

Found by the fuzzer (seed 9200): ``UnboundLocalError: xs_at_W`` in the
callee's forward function when the early ``return`` ran.
"""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad


def recur(x, W, U, early):
    if early > 0.0:
        return np.sum(np.tanh(x[:, :2] @ W[:2]))
    xs = x.reshape(x.shape[0], 3, 2)
    h = np.zeros((x.shape[0], U.shape[0]))
    for t in range(3):
        h = np.tanh(xs[:, t, :] @ W + h @ U)
    return np.sum(h * h)


def loss(x, W, U, early):
    return recur(x, W, U, early) * 2.0 + np.sum(W)


class Model:
    def __init__(self, U):
        self.U = U

    def score(self, x, W, early):
        if early > 0.0:
            return np.mean(x[:, :2] @ W)
        xs = x.reshape(x.shape[0], 3, 2)
        h = np.zeros((x.shape[0], self.U.shape[0]))
        for t in range(3):
            h = np.tanh(xs[:, t, :] @ W + h @ self.U)
        return np.mean(h)


MODEL = Model(np.random.default_rng(7).normal(size=(4, 4)) * 0.3)


def method_loss(x, W, early):
    return MODEL.score(x, W, early) ** 2


@pytest.mark.parametrize("early", [1.0, -1.0], ids=["early return", "loop"])
@pytest.mark.parametrize("n", [1, 3])
def test_callee_with_early_return(early, n):
    rng = np.random.default_rng(n)
    x, W, U = rng.normal(size=(n, 6)), rng.normal(size=(2, 4)), rng.normal(size=(4, 4))
    vg = s2sad.value_and_grad(loss, argnums=(0, 1, 2))
    for _ in range(3):  # the workspace's buffers on later calls
        value, grads = vg(x, W, U, early)
        assert value == pytest.approx(loss(x, W, U, early), rel=1e-12)
        for i, g in enumerate(grads):
            want = numerical_grad(loss, (x, W, U, early), i)
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("early", [1.0, -1.0], ids=["early return", "loop"])
def test_method_with_early_return(early):
    rng = np.random.default_rng(5)
    x, W = rng.normal(size=(3, 6)), rng.normal(size=(2, 4))
    g = s2sad.grad(method_loss, argnums=(0, 1))(x, W, early)
    for i in (0, 1):
        want = numerical_grad(method_loss, (x, W, early), i)
        np.testing.assert_allclose(g[i], want, rtol=1e-6, atol=1e-8)
