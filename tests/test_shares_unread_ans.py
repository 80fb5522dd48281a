"""A product's result passed only as the unread ``ans`` of its rule dies early.

``d_matmul(g, ans, x, y)`` (and its one-sided forms) never reads ``ans``, so
the sharing analysis (transforms/buffers/sharing.py) does not count it as a
read: the elementwise site after ``x @ W`` (adding the bias) writes over the
product's buffer, as one would write ``h = x @ W; h += b``.  A product whose
value is read again keeps its buffer.  Gradients against central finite
differences in float64, workspaces reused (several calls).
"""

import inspect

import numpy as np
import pytest

import s2sad
from s2sad.runtime import contractions
from s2sad.testing import numerical_grad
from s2sad.transforms.buffers.sharing import UNREAD_ANS


def mlp(W1, b1, W2, b2, x):
    h = np.maximum(x @ W1 + b1, 0.0)
    return np.mean((h @ W2 + b2) ** 2)


def reread(W, b, x):
    z = x @ W
    a = z + b
    return np.sum(np.tanh(a) * z)


def in_loop(W, b, x):
    total = 0.0
    for k in range(3):
        total = total + np.sum(np.tanh(x @ W + b * k) ** 2)
    return total


def _agree(got, fn, args, nums):
    """Right against central differences (norm-wise: the sums are large) and
    the same as the plain form's (no buffers)."""
    fd = numerical_grad(fn, args, nums)
    plain = s2sad.grad(fn, argnums=nums, optimize=False)(*args)
    for g, w, p in zip(got, fd, plain):
        assert np.linalg.norm(g - w) <= 1e-6 * np.linalg.norm(w)
        np.testing.assert_allclose(g, p, rtol=1e-10, atol=1e-12)


def _data(rng, n=300, d=40, m=16, k=3):  # x: 96 kB in float64: buffered
    return (
        0.3 * rng.normal(size=(d, m)),
        0.1 * rng.normal(size=m),
        0.3 * rng.normal(size=(m, k)),
        0.1 * rng.normal(size=(1, k)),  # broadcast over rows
        rng.normal(size=(n, d)),
    )


def test_the_rules_named_never_read_ans():
    assert set(UNREAD_ANS) == {
        contractions.d_matmul,
        contractions.d_matmul_lhs,
        contractions.d_matmul_rhs,
    }
    for rule in UNREAD_ANS:
        body = inspect.getsource(rule).split('"""')[-1]
        assert "ans" not in body


@pytest.mark.parametrize("n", [300, 257])
def test_the_bias_site_writes_over_the_product(n):
    rng = np.random.default_rng(n)
    args = _data(rng, n=n)
    want = numerical_grad(mlp, args, (0, 1, 2, 3))
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    for _ in range(4):  # first, recording, buffered calls
        value, got = vg(*args)
        assert value == pytest.approx(mlp(*args), rel=1e-12)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-8)
    shares = vg._last[0].buffer_shares
    assert shares["add"] == "matmul" and shares["add_1"] == "matmul_1"
    assert "h" not in shares  # the ReLU's rule reads its operand


def test_a_product_read_again_keeps_its_buffer():
    rng = np.random.default_rng(1)
    W, b, _, _, x = _data(rng)
    vg = s2sad.value_and_grad(reread, argnums=(0, 1))
    for _ in range(4):
        value, got = vg(W, b, x)
        assert value == pytest.approx(reread(W, b, x), rel=1e-12)
        _agree(got, reread, [W, b, x], (0, 1))
    assert "matmul" not in vg._last[0].buffer_shares.values()


def test_products_in_loops_and_higher_order():
    rng = np.random.default_rng(2)
    W, b, _, _, x = _data(rng)
    g = s2sad.grad(in_loop, argnums=(0, 1))
    for _ in range(4):
        _agree(g(W, b, x), in_loop, [W, b, x], (0, 1))
    small = _data(rng, n=6, d=4, m=3)
    W, b, W2, b2, xs = small
    v = rng.normal(size=W.shape)
    hv = s2sad.hvp(mlp, argnums=0)(W, b, W2, b2, xs, v)
    eps = 1e-5
    fd = (
        numerical_grad(mlp, [W + eps * v, b, W2, b2, xs], 0)
        - numerical_grad(mlp, [W - eps * v, b, W2, b2, xs], 0)
    ) / (2 * eps)
    np.testing.assert_allclose(hv, fd, rtol=1e-4, atol=1e-6)
    _, t = s2sad.jvp(mlp, argnums=0)(W, b, W2, b2, xs, v)
    gW = numerical_grad(mlp, [W, b, W2, b2, xs], 0)
    assert t == pytest.approx(np.sum(gW * v), rel=1e-6)
