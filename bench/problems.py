"""The benchmark problems: plain NumPy loss functions and seeded data makers.

Each loss is written the way a user would write it for s2sad: ``import numpy as
np``, no helper libraries, no hand-made gradients.  The same source is reused
for autograd and JAX by rebinding ``np`` (see ``rebind``), so those columns run
exactly the code shown here.  PyTorch needs its own spelling (bench/peers.py).

A ``Problem`` couples a loss with its data maker, the argument positions to
differentiate and what one timed call means: ``"grad"`` is one value-and-grad,
``"sgd"`` is one training step (value-and-grad + in-place parameter update).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# ----------------------------------------------------------------------------
# Loss functions (plain NumPy)
# ----------------------------------------------------------------------------


def sincos(x):
    """A scalar composition of sin and cos on a Python float."""
    a = np.sin(x)
    b = np.cos(a * x)
    return np.sin(b) * a + np.cos(x * b)


def loop(x):
    """A 100-step scalar recurrence through a Python for-loop."""
    s = x
    for i in range(100):
        s = 0.9 * np.sin(s) + 0.1 * x
    return s


def logsumexp(x):
    """log(sum(exp(x))) of a vector, shifted by the max for stability."""
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def logreg(w, b, X, y):
    """Mean log-loss of logistic regression."""
    p = 1.0 / (1.0 + np.exp(-(X @ w + b)))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def mlp2(W1, b1, W2, b2, x, y):
    """784-100-10 tanh MLP, softmax cross-entropy with integer labels."""
    h = np.tanh(x @ W1 + b1)
    z = h @ W2 + b2
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(x.shape[0]), y])


def mlp_big(W1, b1, W2, b2, x, y):
    """256-512-10 ReLU MLP, softmax cross-entropy with integer labels."""
    h = np.maximum(x @ W1 + b1, 0.0)
    z = h @ W2 + b2
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(x.shape[0]), y])


def rnn_mnist(Wx, Wh, bh, Wo, bo, x, y):
    """Vanilla tanh RNN reading each image as 4 chunks of 196 pixels."""
    xs = x.reshape(x.shape[0], 4, 196)
    h = np.zeros((x.shape[0], Wh.shape[0]), dtype=x.dtype)
    for t in range(4):
        h = np.tanh(xs[:, t, :] @ Wx + h @ Wh + bh)
    z = h @ Wo + bo
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(x.shape[0]), y])


def cnn_imdb(E, K, c, w, b, ids, y):
    """Text CNN: embedding, conv1d (width 3) + ReLU, max-pool 8, dense, BCE.

    ``K`` has shape (3, embed, filters): the convolution is the sum over the
    three taps of a shifted slice times that tap's weight matrix.
    """
    x = E[ids]
    n = ids.shape[0]
    L = ids.shape[1] - 2
    conv = x[:, 0:L, :] @ K[0] + x[:, 1 : L + 1, :] @ K[1] + x[:, 2 : L + 2, :] @ K[2]
    h = np.maximum(conv + c, 0.0)
    pooled = h.reshape(n, L // 8, 8, K.shape[2]).max(axis=2)
    z = pooled.reshape(n, -1) @ w + b
    p = 1.0 / (1.0 + np.exp(-z))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


# ----------------------------------------------------------------------------
# Data makers (fixed seeds)
# ----------------------------------------------------------------------------


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(sum(map(ord, name)) + 2024)


def _glorot(rng, shape, dtype):
    fan_in, fan_out = shape[-2], shape[-1]
    scale = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-scale, scale, size=shape).astype(dtype)


def data_sincos() -> tuple:
    return (0.7,)


def data_loop() -> tuple:
    return (0.4,)


def data_logsumexp() -> tuple:
    return (_rng("logsumexp").normal(size=10),)


def data_logreg() -> tuple:
    rng = _rng("logreg")
    X = rng.normal(size=(100, 10))
    w_true = rng.normal(size=10)
    y = (X @ w_true + 0.5 * rng.normal(size=100) > 0).astype(np.float64)
    return (0.1 * rng.normal(size=10), 0.05, X, y)


def _mlp_data(name, sizes, batch) -> tuple:
    rng = _rng(name)
    f32 = np.float32
    W1 = _glorot(rng, (sizes[0], sizes[1]), f32)
    b1 = (0.01 * rng.normal(size=sizes[1])).astype(f32)
    W2 = _glorot(rng, (sizes[1], sizes[2]), f32)
    b2 = (0.01 * rng.normal(size=sizes[2])).astype(f32)
    x = rng.normal(size=(batch, sizes[0])).astype(f32)
    y = rng.integers(0, sizes[2], size=batch)
    return (W1, b1, W2, b2, x, y)


def data_mlp2() -> tuple:
    args = _mlp_data("mlp2", (784, 100, 10), 100)
    return args[:4] + (np.abs(args[4]) / 4.0, args[5])  # pixel-like inputs


def data_mlp_big() -> tuple:
    return _mlp_data("mlp_big", (256, 512, 10), 1024)


def data_rnn_mnist() -> tuple:
    rng = _rng("rnn_mnist")
    f32 = np.float32
    Wx = _glorot(rng, (196, 64), f32)
    Wh = _glorot(rng, (64, 64), f32)
    bh = np.zeros(64, f32)
    Wo = _glorot(rng, (64, 10), f32)
    bo = np.zeros(10, f32)
    x = rng.uniform(0.0, 1.0, size=(100, 784)).astype(f32)
    y = rng.integers(0, 10, size=100)
    return (Wx, Wh, bh, Wo, bo, x, y)


def data_cnn_imdb() -> tuple:
    rng = _rng("cnn_imdb")
    f32 = np.float32
    E = (0.4 * rng.normal(size=(10000, 50))).astype(f32)
    K = _glorot(rng, (3, 50, 8), f32)
    c = (0.01 * rng.normal(size=8)).astype(f32)
    w = _glorot(rng, (128, 1), f32)[:, 0].copy()
    b = np.zeros(1, f32)
    ids = rng.integers(0, 10000, size=(64, 130)).astype(np.int32)
    y = rng.integers(0, 2, size=64).astype(f32)
    return (E, K, c, w, b, ids, y)


# ----------------------------------------------------------------------------
# The table of problems
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One benchmark: loss, data, what to differentiate, what one call means."""

    name: str
    loss: Callable
    make_data: Callable[[], tuple]
    argnums: tuple[int, ...]
    kind: str = "grad"  # "grad": value-and-grad; "sgd": one training step
    lr: float = 0.0
    description: str = ""


PROBLEMS: dict[str, Problem] = {
    p.name: p
    for p in [
        Problem("sincos", sincos, data_sincos, (0,), description="scalar sin/cos"),
        Problem("loop", loop, data_loop, (0,), description="100-step for-loop"),
        Problem("logsumexp", logsumexp, data_logsumexp, (0,), description="10-vec"),
        Problem("logreg", logreg, data_logreg, (0, 1), description="X 100x10"),
        Problem("mlp2", mlp2, data_mlp2, (0, 1, 2, 3), description="784-100-10"),
        Problem(
            "mlp_big",
            mlp_big,
            data_mlp_big,
            (0, 1, 2, 3),
            kind="sgd",
            lr=0.05,
            description="SGD step 256-512-10 b1024",
        ),
        Problem(
            "rnn_mnist",
            rnn_mnist,
            data_rnn_mnist,
            (0, 1, 2, 3, 4),
            description="tanh RNN 4x196, h 64, b100",
        ),
        Problem(
            "cnn_imdb",
            cnn_imdb,
            data_cnn_imdb,
            (0, 1, 2, 3, 4),
            description="text CNN b64 x 130 tokens",
        ),
    ]
}


# ----------------------------------------------------------------------------
# Helpers shared by the runner and the peers
# ----------------------------------------------------------------------------


def to_float64(args: tuple) -> tuple:
    """The same arguments with every floating array (and float) in float64."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray) and np.issubdtype(a.dtype, np.floating):
            out.append(a.astype(np.float64))
        elif isinstance(a, float):
            out.append(float(a))
        else:
            out.append(a)
    return tuple(out)


def copy_args(args: tuple) -> tuple:
    """Fresh copies of array arguments (training steps update them in place)."""
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def rebind(fn: Callable, numpy_like: Any) -> Callable:
    """``fn`` with the global name ``np`` bound to another NumPy (autograd, jnp)."""
    glb = dict(fn.__globals__)
    glb["np"] = numpy_like
    new = types.FunctionType(
        fn.__code__, glb, fn.__name__, fn.__defaults__, fn.__closure__
    )
    new.__qualname__ = fn.__qualname__
    return new
