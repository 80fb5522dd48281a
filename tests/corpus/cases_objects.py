"""Corpus: objects in the style of small NumPy frameworks (ML-From-Scratch, CS231n):
layers caching their input on ``self``, callable activation objects, models
holding sub-layers, namedtuple and dataclass fields."""

from collections import namedtuple
from dataclasses import dataclass

import numpy as np

from tests.corpus.registry import case, const, mat, vec


class Sigmoid:
    def __call__(self, x):
        return 1 / (1 + np.exp(-x))


class TanH:
    def __call__(self, x):
        return 2 / (1 + np.exp(-2 * x)) - 1


class Dense:
    """ML-From-Scratch's Dense layer: forward_pass caches its input."""

    def __init__(self, W, w0):
        self.W, self.w0 = W, w0
        self.layer_input = None

    def forward_pass(self, X, training=True):
        self.layer_input = X
        return X.dot(self.W) + self.w0


class Activation:
    def __init__(self, activation_func):
        self.activation_func = activation_func
        self.layer_input = None

    def forward_pass(self, X, training=True):
        self.layer_input = X
        return self.activation_func(X)


class TwoLayer:
    """A model holding its layers in attributes: self.l2(act(self.l1(x)))."""

    def __init__(self, l1, act, l2):
        self.l1, self.act, self.l2 = l1, act, l2
        self.n_calls = 0

    def __call__(self, X):
        self.n_calls = self.n_calls + 1
        return self.l2.forward_pass(self.act(self.l1.forward_pass(X)))


def _rng():
    return np.random.default_rng(7)


def _dense(n_in, n_out):
    r = _rng()
    return Dense(r.normal(size=(n_in, n_out)) * 0.5, r.normal(size=n_out) * 0.1)


SIGMOID = Sigmoid()


@case(mat(4, 3), const(_dense(3, 2)))
def dense_caches_input(X, layer):
    out = layer.forward_pass(X)
    return np.sum(out**2)


@case(mat(4, 3), const(Activation(TanH())))
def activation_layer_object(X, layer):
    return np.sum(layer.forward_pass(X) * X)


@case(mat(3, 3))
def callable_global_object(x):
    return np.sum(SIGMOID(x) * x)


@case(mat(2, 3))
def callable_made_inline(x):
    return np.sum(Sigmoid()(x) + TanH()(x) ** 2)


@case(mat(5, 3), const(TwoLayer(_dense(3, 4), Sigmoid(), _dense(4, 2))))
def model_of_sub_layers(X, model):
    return np.mean(model(X) ** 2)


@case(mat(5, 3), const(TwoLayer(_dense(3, 4), TanH(), _dense(4, 3))))
def model_in_a_loop(X, model):
    h = X
    for _ in range(3):
        h = model(h) + h
    return np.sum(h**2)


@case(vec(3), const(Activation(SIGMOID)))
def write_constant_on_object(x, layer):
    layer.note = 2.0
    return np.sum(layer.forward_pass(x)) * layer.note


Params = namedtuple("Params", ["W", "b"])


@dataclass
class Config:
    scale: float
    W: np.ndarray


@case(mat(3, 2), const(Params(np.ones((2, 2)) * 0.3, np.arange(2.0))))
def namedtuple_fields(X, p):
    return np.sum(np.tanh(X @ p.W + p.b))


@case(mat(3, 2), const(Config(0.5, np.eye(2) + 0.1)))
def dataclass_fields(X, cfg):
    return cfg.scale * np.sum(np.sin(X @ cfg.W))


class ReLU:
    def forward_pass(self, X, training=True):
        self.layer_input = X
        return np.maximum(X, 0.0)


class Softplus:
    def __call__(self, x):
        return np.logaddexp(0.0, x)


class Sequential:
    """ML-From-Scratch's NeuralNetwork: layers of different classes in a list."""

    def __init__(self, layers):
        self.layers = layers

    def _forward_pass(self, X, training=True):
        layer_output = X
        for layer in self.layers:
            layer_output = layer.forward_pass(layer_output, training)
        return layer_output

    def loss(self, X, y):
        return 0.5 * np.mean((self._forward_pass(X) - y) ** 2)


def _mlp():
    return Sequential(
        [_dense(3, 4), ReLU(), _dense(4, 4), Activation(Softplus()), _dense(4, 2)]
    )


@case(mat(5, 3), const(_mlp()))
def sequential_of_mixed_layers(X, model):
    return np.mean(model._forward_pass(X) ** 2)


@case(mat(4, 3), const([_dense(3, 3), Activation(TanH()), _dense(3, 3), ReLU()]))
def layer_list_argument(X, layers):
    h = X
    for layer in layers:
        h = layer.forward_pass(h) + 0.1 * h
    return np.sum(h**2)


@case(mat(4, 3), const(_mlp()), mat(4, 2))
def sequential_trained_for_two_steps(X, model, y):
    total = 0.0
    for step in range(2):
        err = model._forward_pass(X * (step + 1)) - y
        total = total + np.mean(err**2)
    return total


@case(mat(4, 3), const([Activation(TanH()), _dense(3, 3), Activation(Softplus())]))
def same_layer_class_different_functions(X, layers):
    for layer in layers:
        X = layer.forward_pass(X)
    return np.sum(X * X)


def _mse_of(model, X, y):
    return np.mean((model(X) - y) ** 2)


@case(mat(5, 3), const(TwoLayer(_dense(3, 4), Sigmoid(), _dense(4, 1))), mat(5, 1))
def model_through_a_callee(X, model, y):
    return _mse_of(model, X, y)


@case(mat(5, 3), const(_mlp()), mat(5, 2))
def sequential_through_a_callee(X, model, y):
    return _seq_mse(model, X, y)


def _seq_mse(model, X, y):
    return np.mean((model._forward_pass(X) - y) ** 2)
