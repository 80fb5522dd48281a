"""Loops and reductions that NumPy's reverse passes rewrite (hoisted per-step
products, a peeled zero first step, ``np.sum(e)`` as ``e.sum()``) run as
written on the foreign path (``Options.buffers == "foreign"``), and give
NumPy's gradients on every library."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.runtime import nn
from tests.backends.libraries import check_against_numpy, convert
from tests.corpus.fd import assert_close_tree, numerical_grad


def rnn(Wx, Wh, xs):
    h = np.zeros((xs.shape[0], Wh.shape[0]))
    for t in range(xs.shape[1]):
        h = np.tanh(xs[:, t, :] @ Wx + h @ Wh)
    return np.sum(h * h)


def exp_sum(x):
    return np.sum(np.exp(x))


def exp_mean_rows(x, w):
    return np.sum(np.mean(np.exp(x * w), axis=0))


def _rnn_args(rng, rows, steps_, d, h):
    return [
        rng.normal(size=(d, h)) * 0.4,
        rng.normal(size=(h, h)) * 0.4,
        rng.normal(size=(rows, steps_, d)),
    ]


@pytest.mark.parametrize("shape", [(5, 3, 4, 6), (2, 4, 1, 3)])
def test_rnn_loop_matches_numpy(lib, shape):
    rng = np.random.default_rng(sum(shape))
    args = _rnn_args(rng, *shape)
    check_against_numpy(lib, rnn, args, argnums=(0, 1, 2), rtol=1e-11)


def test_rnn_numpy_gradient_matches_finite_differences():
    rng = np.random.default_rng(4)
    args = _rnn_args(rng, 3, 3, 2, 3)
    got = s2sad.grad(rnn, argnums=(0, 1))(*args)
    for i in (0, 1):
        assert_close_tree(got[i], numerical_grad(rnn, args, i), where=f"rnn {i}")


def test_foreign_rnn_runs_the_loop_as_written(lib):
    """NumPy's code hoists the per-step products and peels the zero first step;
    the foreign call's code keeps the loop as written (no such helpers)."""
    rng = np.random.default_rng(5)
    args = _rnn_args(rng, 4, 3, 2, 3)
    f = s2sad.grad(rnn, argnums=(0, 1))
    f(*args)
    assert "stepwise_matmul" in f.source and "matmul_zeros" in f.source
    f(*convert(args, lib))
    assert "stepwise_matmul" not in f.source and "matmul_zeros" not in f.source


@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 3, 4)])
def test_exp_sum_matches_numpy(lib, shape):
    x = np.random.default_rng(6).normal(size=shape)
    np.testing.assert_allclose(s2sad.grad(exp_sum)(x), np.exp(x), rtol=1e-14)
    check_against_numpy(lib, exp_sum, [x])


@pytest.mark.parametrize("wshape", [(3,), (1, 3), (4, 3)])
def test_broadcast_mean_reduction_matches_numpy(lib, wshape):
    rng = np.random.default_rng(7)
    args = [rng.normal(size=(4, 3)), rng.normal(size=wshape)]
    got = s2sad.grad(exp_mean_rows, argnums=1)(*args)
    assert_close_tree(got, numerical_grad(exp_mean_rows, args, 1), where="w")
    check_against_numpy(lib, exp_mean_rows, args, argnums=(0, 1))


def relu_loss(W, b, X):
    h = nn.relu(X @ W + b)
    return np.sum(h * h)


@pytest.mark.parametrize("bshape", [(4,), (1, 4), (5, 4)])
def test_relu_matches_numpy_and_finite_differences(lib, bshape):
    """relu's rule ``g * (ans > 0)`` is inlined for NumPy; the foreign path
    calls it by name (the Array API multiplies no booleans)."""
    rng = np.random.default_rng(8)
    args = [rng.normal(size=(3, 4)), rng.normal(size=bshape), rng.normal(size=(5, 3))]
    got = s2sad.grad(relu_loss, argnums=(0, 1))(*args)
    for i in (0, 1):
        assert_close_tree(got[i], numerical_grad(relu_loss, args, i), where=str(i))
    check_against_numpy(lib, relu_loss, args, argnums=(0, 1, 2))


def test_relu_mask_inlined_for_numpy_called_by_name_on_the_foreign_path(lib):
    rng = np.random.default_rng(9)
    args = [rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(5, 3))]
    f = s2sad.grad(relu_loss)
    f(*args)
    assert "> 0" in f.source and "d_relu" not in f.source
    f(*convert(args, lib))
    assert "d_relu(" in f.source
