"""Corpus: objects built inside the differentiated function (taken apart by
front/instances.py) and attributes written then read back in the same call,
items included (front/attributes.py)."""

import numpy as np

from tests.corpus.registry import case, const, mat, vec


class Linear:
    def __init__(self, W, b=None):
        self.W = W
        self.b = b if b is not None else np.zeros(W.shape[1])

    def forward(self, x):
        return x @ self.W + self.b


class Tanh:
    def __call__(self, x):
        return np.tanh(x)


class Block:
    """A layer holding a layer and an activation built in its __init__."""

    scale = 0.5

    def __init__(self, W, act=None):
        self.inner = Linear(W)
        self.act = Tanh() if act is None else act
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        self.out = self.act(self.inner.forward(x))
        return self.scale * self.out + x @ self.inner.W


class Residual(Block):
    def __call__(self, x):
        h = super().__call__(x)
        return h + self.skip(x)

    def skip(self, x):
        if self.calls > 1:
            return 0.0 * x[:, :1]
        return 0.1 * x[:, :1]

    @property
    def weight_norm(self):
        return np.sum(self.inner.W**2)


class GRUCell:
    """A recurrent cell keeping its state on ``self`` between steps."""

    def __init__(self, Wx, Wh):
        self.Wx, self.Wh = Wx, Wh
        self.h = np.zeros(Wh.shape[0])

    def step(self, x):
        z = 1 / (1 + np.exp(-(x @ self.Wx + self.h @ self.Wh)))
        self.h = (1 - z) * self.h + z * np.tanh(x @ self.Wx)
        return self.h


@case(mat(4, 3), mat(5, 4))
def linear_built_inside(W, X):
    return np.sum(Linear(W).forward(X) ** 2)


@case(mat(4, 4), mat(3, 4))
def nested_objects_built_in_init(W, X):
    block = Block(W)
    y = block(X)
    return np.sum(y * block.out) + block.calls


@case(mat(4, 4), mat(3, 4))
def subclass_with_super_and_property(W, X):
    layer = Residual(W, Tanh())
    h = X
    for _ in range(2):
        h = layer(h)
    return np.sum(h**2) + layer.weight_norm


@case(mat(3, 2), mat(2, 2), mat(5, 3))
def recurrent_cell_state_on_self(Wx, Wh, xs):
    cell = GRUCell(Wx, Wh)
    total = 0.0
    for t in range(xs.shape[0]):
        total = total + np.sum(cell.step(xs[t]) ** 2)
    return total + np.sum(cell.h)


def _through_callee(W, X):
    layer = Linear(W, np.ones(W.shape[1]))
    return layer.forward(X)


@case(mat(3, 3), mat(4, 3))
def object_built_in_a_callee(W, X):
    return np.sum(np.sin(_through_callee(W, X)))


class Cache:
    """CS231n style: the forward pass keeps what the backward pass needs."""

    def __init__(self, W):
        self.W = W

    def forward(self, x):
        self.cache = x @ self.W
        self.relu = np.maximum(self.cache, 0.0)
        return np.sum(self.relu**2) + np.sum(np.tanh(self.cache))


@case(mat(4, 3), const(Cache(np.random.default_rng(3).normal(size=(3, 2)))))
def attribute_written_then_read(X, layer):
    return layer.forward(X)


class RNNStates:
    """ML-From-Scratch RNN: the states of every step in an attribute."""

    def __init__(self, U, W):
        self.U, self.W = U, W

    def forward_pass(self, X):
        n, T, _ = X.shape
        self.states = np.zeros((n, T + 1, self.W.shape[0]))
        for t in range(T):
            pre = X[:, t] @ self.U + self.states[:, t - 1] @ self.W
            self.states[:, t] = np.tanh(pre)
        return self.states[:, :-1]


def _rnn():
    rng = np.random.default_rng(4)
    return RNNStates(rng.normal(size=(3, 4)) * 0.5, rng.normal(size=(4, 4)) * 0.5)


@case(mat(2, 3, 3), const(_rnn()))
def item_assignment_into_an_attribute(X, rnn):
    return np.sum(rnn.forward_pass(X) ** 2)


@case(mat(3, 4), mat(4, 4), mat(2, 3, 3))
def rnn_built_inside_with_states(U, W, X):
    rnn = RNNStates(U * 0.5, W * 0.5)
    out = rnn.forward_pass(X)
    return np.sum(out[:, -1] ** 2) + np.sum(rnn.states)


class Counter:
    def __init__(self):
        self.total = 0.0

    def add(self, v):
        self.total += v


@case(vec(4), const(Counter()))
def running_total_on_an_argument(x, acc):
    acc.total = 0.0
    for i in range(4):
        acc.total += x[i] ** 2
    return acc.total * 2.0


class StatefulCell:
    """A cell whose caller sets its weights and resets its state on ``self``."""

    def __init__(self, n):
        self.Wh = np.eye(n)
        self.h = np.zeros(n)

    def step(self, x):
        self.h = np.tanh(self.h @ self.Wh + x)
        return self.h


@case(mat(3, 3), mat(4, 3), const(StatefulCell(3)))
def weights_set_on_an_argument_then_stepped(Wh, xs, cell):
    cell.Wh = Wh * 0.5
    cell.h = np.zeros(3)
    total = 0.0
    for t in range(xs.shape[0]):
        total = total + np.sum(cell.step(xs[t]) ** 2)
    return total


def _set_and_run(W, X, layer):
    layer.W = W
    return layer.forward(X)


@case(mat(3, 3), mat(4, 3), const(Linear(np.eye(3))))
def weights_set_on_an_argument_in_a_callee(W, X, layer):
    return np.sum(np.tanh(_set_and_run(W, X, layer)) ** 2)


class LeakySlots:
    """``__slots__``, a class attribute as a default, a static method."""

    __slots__ = ("W", "alpha")
    leak = 0.1

    def __init__(self, W):
        self.W = W
        self.alpha = 2.0

    @staticmethod
    def act(z, leak):
        return np.where(z > 0, z, leak * z)

    def __call__(self, x):
        return self.alpha * self.act(x @ self.W, self.leak)


@case(mat(3, 3), mat(4, 3))
def slotted_class_with_static_method(W, x):
    return np.sum(LeakySlots(W)(x) ** 2)
