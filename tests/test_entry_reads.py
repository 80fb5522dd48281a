"""A method that reads an attribute as it is on entry and sets it from a
differentiated value (ML-From-Scratch's batch normalization updating its
running statistics): accepted when the method runs once per differentiated
call and nothing else sets the attribute, since then the value read is the
one the object held before the call, a constant; refused at the read when
the method may run twice (an earlier run would have left a value whose
gradient is lost)."""

import copy

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError
from tests.corpus.fd import assert_close_tree, numerical_grad


class BatchNorm:
    def __init__(self, n, momentum=0.9):
        self.momentum = momentum
        self.eps = 0.01
        self.running_mean = None
        self.running_var = None
        self.gamma = 1.0 + 0.1 * np.arange(n)
        self.beta = 0.05 * np.arange(n)

    def forward_pass(self, X, training=True):
        if self.running_mean is None:
            self.running_mean = np.mean(X, axis=0)
            self.running_var = np.var(X, axis=0)
        if training:
            mean = np.mean(X, axis=0)
            var = np.var(X, axis=0)
            self.running_mean = (
                self.momentum * self.running_mean + (1 - self.momentum) * mean
            )
            self.running_var = (
                self.momentum * self.running_var + (1 - self.momentum) * var
            )
        else:
            mean = self.running_mean
            var = self.running_var
        X_norm = (X - mean) / np.sqrt(var + self.eps)
        return self.gamma * X_norm + self.beta


def once(X, layer):
    return np.sum(np.tanh(layer.forward_pass(X)) ** 2)


def helper(X, layer):
    return np.exp(0.5 * layer.forward_pass(X * 2.0))


def once_in_a_callee(X, layer):
    return np.sum(helper(X, layer))


def twice(X, layer):
    h = layer.forward_pass(X)
    return np.sum(layer.forward_pass(h, training=False) ** 2)


def in_a_loop(X, layer):
    total = 0.0
    for _ in range(2):
        total = total + np.sum(layer.forward_pass(X) ** 2)
    return total


class Net:
    def __init__(self, n):
        self.layers = [BatchNorm(n), BatchNorm(n)]

    def forward(self, X):
        for layer in self.layers:
            X = np.tanh(layer.forward_pass(X))
        return X


def two_layers_of_the_class(X, net):
    # two objects, but one compiled method run twice: refused (conservative)
    return np.sum(net.forward(X) ** 2)


SHAPES = [(6, 4), (3, 2), (5, 1)]
FUNCTIONS = [once, once_in_a_callee]


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=shape), BatchNorm(shape[1])


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_running_statistics_read_on_entry_give_the_batch_gradient(fn, shape):
    X, layer = _data(shape)
    want = numerical_grad(fn, [X, copy.deepcopy(layer)], 0)
    for optimize in (True, False):  # with buffers, and the plain form
        for state in (copy.deepcopy(layer), _warm(layer, X)):
            got = s2sad.grad(fn, optimize=optimize)(X, state)
            assert_close_tree(got, want, where=f"{fn.__name__} {optimize}")


def _warm(layer, X):
    """A layer whose running statistics were set by an earlier call."""
    layer = copy.deepcopy(layer)
    layer.forward_pass(X + 1.0)
    return layer


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_the_layer_holds_what_python_leaves_there(fn):
    X, layer = _data((6, 4))
    plain = _warm(layer, X)
    mine = _warm(layer, X)
    fn(X, plain)
    s2sad.value_and_grad(fn)(X, mine)
    np.testing.assert_allclose(mine.running_mean, plain.running_mean, rtol=1e-13)
    np.testing.assert_allclose(mine.running_var, plain.running_var, rtol=1e-13)


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_forward_mode_and_second_order(fn):
    X, layer = _data((5, 3))
    v = np.random.default_rng(1).normal(size=X.shape)
    _, t_out = s2sad.jvp(fn)(X, layer, v)
    want = np.sum(numerical_grad(fn, [X, layer], 0) * v)
    assert_close_tree(t_out, want, where="jvp")
    hv = s2sad.hvp(fn)(X, layer, v)
    eps = 1e-5
    g = s2sad.grad(fn)
    fd = (g(X + eps * v, layer) - g(X - eps * v, layer)) / (2 * eps)
    assert_close_tree(hv, fd, rtol=1e-4, atol=1e-6, where="hvp")


@pytest.mark.parametrize(
    "fn", [twice, in_a_loop, two_layers_of_the_class], ids=lambda f: f.__name__
)
def test_a_method_that_may_run_twice_is_refused_at_the_read(fn):
    X, layer = _data((6, 4))
    if fn is two_layers_of_the_class:
        layer = Net(4)
    with pytest.raises(UnsupportedSyntaxError) as e:
        s2sad.grad(fn)(X, layer)
    msg = str(e.value)
    line = BatchNorm.forward_pass.__code__.co_firstlineno + 1
    assert f"test_entry_reads.py:{line}:" in msg, msg
    assert "may run more than once" in msg, msg
    with pytest.raises(UnsupportedSyntaxError):
        s2sad.jvp(fn)(X, layer, np.ones_like(X))


class Recorder:
    def __init__(self):
        self.states = np.zeros((3, 4))

    def step(self, x):
        self.states[:, 1] = np.sin(x)
        return np.sum(x * self.states[:, 1])


def record_once(x, layer):
    return layer.step(x)


def record_twice(x, layer):
    return layer.step(x) + layer.step(2.0 * x)


def test_items_written_into_an_attribute_by_a_method_run_once():
    x = np.array([0.3, -1.2, 0.7])
    got = s2sad.grad(record_once)(x, Recorder())
    assert_close_tree(got, numerical_grad(record_once, [x, Recorder()], 0))
    plain, mine = Recorder(), Recorder()
    held = mine.states  # Python changes the array the object holds, in place
    record_once(x, plain)
    s2sad.grad(record_once)(x, mine)
    assert mine.states is held
    np.testing.assert_allclose(mine.states, plain.states, rtol=1e-15)


def test_items_written_into_an_attribute_by_a_method_run_twice_are_refused():
    with pytest.raises(UnsupportedSyntaxError) as e:
        s2sad.grad(record_twice)(np.ones(3), Recorder())
    msg = str(e.value)
    assert f"test_entry_reads.py:{Recorder.step.__code__.co_firstlineno + 1}:" in msg
    assert "item assignment into the attribute 'self.states'" in msg
    assert "self.states = states" in msg
