"""Rules of the dense layer and the activations (s2sad.runtime.activations).

The kernels are reached as users reach them, through :mod:`s2sad.runtime.nn`.
"""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import activations, nn
from s2sad.runtime.registry import lookup
from tests.runtime.test_nn import check_fd, randn

# -- dense and activations -------------------------------------------------------


@pytest.mark.parametrize("xshape", [(4,), (5, 4), (2, 3, 4)])
def test_dense_rule(xshape):
    x, W, b = randn(*xshape), randn(4, 3), randn(3)
    np.testing.assert_allclose(nn.dense(x, W, b), x @ W + b)
    check_fd(nn.dense, [x, W, b], wrt=[0, 1, 2])
    check_fd(nn.dense, [x, W], wrt=[0, 1])


def test_dense_float32():
    x, W, b = randn(5, 4, dtype=np.float32), randn(4, 3, dtype=np.float32), None
    out = nn.dense(x, W, np.zeros(3, np.float32))
    cts = activations.d_dense(np.ones_like(out), out, x, W, np.zeros(3, np.float32))
    assert out.dtype == np.float32 and all(c.dtype == np.float32 for c in cts)
    assert activations.d_dense(np.ones_like(out), out, x, W, b)[2] is None


ELEMENTWISE_SHAPES = [(), (5,), (3, 4), (2, 3, 4)]


@pytest.mark.parametrize("shape", ELEMENTWISE_SHAPES)
@pytest.mark.parametrize("kernel", [nn.relu, nn.sigmoid])
def test_activation_rules(kernel, shape):
    check_fd(kernel, [randn(*shape)], wrt=[0])


@pytest.mark.parametrize("shape", ELEMENTWISE_SHAPES[1:])
@pytest.mark.parametrize(
    "kernel", [nn.softmax, nn.log_softmax, activations.log_softmax_as_written]
)
@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_rules(kernel, shape, axis):
    check_fd(kernel, [randn(*shape)], wrt=[0], kwargs={"axis": axis})


def test_activation_values_and_stability():
    x = np.array([-1000.0, -30.0, 0.0, 2.0, 1000.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        s = nn.sigmoid(x)
        ls = nn.log_softmax(x * 3)
        sm = nn.softmax(x * 3)
    np.testing.assert_allclose(
        s, [0.0, 1 / (1 + np.exp(30)), 0.5, 1 / (1 + np.exp(-2)), 1]
    )
    np.testing.assert_allclose(nn.relu(x), [0, 0, 0, 2, 1000])
    np.testing.assert_allclose(ls, [-6000, -3090, -3000, -2994, 0])
    np.testing.assert_allclose(sm, [0, 0, 0, 0, 1])
    small = randn(3, 4)
    np.testing.assert_allclose(
        nn.softmax(small, axis=0), np.exp(small) / np.exp(small).sum(0, keepdims=True)
    )


@pytest.mark.parametrize(
    "kernel",
    [
        nn.relu,
        nn.sigmoid,
        nn.softmax,
        nn.log_softmax,
        activations.log_softmax_as_written,
    ],
)
def test_activation_float32(kernel):
    x = randn(3, 4, dtype=np.float32)
    out = kernel(x)
    ct = lookup(kernel).adjoint(np.ones_like(out), out, x)[0]
    assert out.dtype == np.float32 and ct.dtype == np.float32


def _check_rule_cases():
    r = np.random.default_rng(5)
    return [
        (nn.dense, (r.standard_normal((5, 4)), r.standard_normal((4, 3))), {}),
        (nn.softmax, (r.standard_normal((3, 4)),), {"axis": 0}),
        (nn.log_softmax, (r.standard_normal((3, 4)),), {}),
        (activations.log_softmax_as_written, (r.standard_normal((3, 4)),), {}),
        (activations.log_softmax_as_written, (r.standard_normal(5),), {"axis": None}),
    ]


@pytest.mark.parametrize("kernel,args,kwargs", _check_rule_cases())
def test_rules_pass_check_rule(kernel, args, kwargs):
    """The shared checker (FD values, float32 structure and dtypes, no mutation)."""
    from s2sad.testing import check_rule

    check_rule(kernel, *args, kwargs=kwargs)


def test_every_rule_is_tested(family_coverage):
    tested = {
        nn.dense,
        nn.relu,
        nn.sigmoid,
        nn.softmax,
        nn.log_softmax,
        activations.log_softmax_as_written,
    }
    family_coverage("activations", tested)


def test_log_softmax_as_written_writes_into_out_and_its_adjoint_into_into():
    x, g = randn(4, 5), randn(4, 5)
    want = x - np.log(np.sum(np.exp(x), axis=1, keepdims=True))
    out = np.empty_like(x)
    assert activations.log_softmax_as_written(x, axis=1, out=out) is out
    assert np.array_equal(out, want)
    buf = np.empty_like(x)
    ct = activations.d_log_softmax(g, out, x, axis=1, into=(buf,))[0]
    assert ct is buf
    np.testing.assert_allclose(ct, g - np.exp(want) * g.sum(axis=1, keepdims=True))
    wrong = np.empty((5, 4))  # a buffer that does not fit is ignored
    assert activations.log_softmax_as_written(x, axis=1, out=wrong) is not wrong
    assert activations.d_log_softmax(g, out, x, axis=1, into=(wrong,))[0] is not wrong
