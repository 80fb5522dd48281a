#!/usr/bin/env python
"""Train a vanilla RNN on MNIST with gradients from s2sad.

    python examples/rnn_mnist.py                      # 5 epochs, full data
    python examples/rnn_mnist.py --epochs 1 --limit 6000 --json rnn.json

The model of the seed papers: each 28x28 image is read as 4 steps of 196
pixels by a tanh RNN with 64 hidden units (zero initial state), then a dense
64 -> 10 layer and softmax cross-entropy.  Plain SGD, learning rate 0.015,
batch 100, Xavier (Glorot) uniform weights, zero biases, float32.

The model is the NumPy function ``loss`` below; s2sad turns it into a
gradient function and the script prints where that generated file lives.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402  (sets BLAS threads before NumPy is imported)
import numpy as np  # noqa: E402

from s2sad import optim  # noqa: E402
from s2sad.runtime import nn  # noqa: E402

STEPS, CHUNK, HIDDEN, CLASSES = 4, 196, 64, 10

# The losses `s2sad compile examples/rnn_mnist.py` compiles when no --function is given.
__s2sad__ = ["loss"]


def logits(params: dict, x: np.ndarray) -> np.ndarray:
    """Class scores (n, 10) of images x (n, 784): 4 RNN steps, then dense."""
    h = np.zeros((x.shape[0], params["Wh"].shape[0]), dtype=x.dtype)
    for t in range(STEPS):
        xt = x[:, t * CHUNK : (t + 1) * CHUNK]
        h = np.tanh(xt @ params["Wx"] + h @ params["Wh"] + params["bh"])
    return h @ params["Wo"] + params["bo"]


def loss(params: dict, x: np.ndarray, y: np.ndarray) -> np.floating:
    """Mean softmax cross-entropy of the RNN's scores against labels y."""
    return nn.softmax_cross_entropy(logits(params, x), y)


def predict(params: dict, x: np.ndarray) -> np.ndarray:
    return np.argmax(logits(params, x), axis=1)


def init_params(rng: np.random.Generator) -> dict:
    """Xavier-uniform weights, zero biases, float32 (the seeds' initialisation)."""
    return {
        "Wx": optim.xavier_uniform(rng, CHUNK, HIDDEN),
        "Wh": optim.xavier_uniform(rng, HIDDEN, HIDDEN),
        "bh": np.zeros(HIDDEN, np.float32),
        "Wo": optim.xavier_uniform(rng, HIDDEN, CLASSES),
        "bo": np.zeros(CLASSES, np.float32),
    }


def main(argv: list[str] | None = None) -> int:
    parser = _common.make_parser(
        __doc__.splitlines()[0], epochs=5, batch_size=100, lr=0.015
    )
    args = parser.parse_args(argv)
    _common.apply_threads(args.threads)
    data = _common.limit_train(_common.mnist_data(args), args.limit)
    model = _common.Model(
        name="rnn_mnist",
        loss=loss,
        predict=predict,
        params=init_params(np.random.default_rng(args.seed)),
        optimizer=optim.SGD(args.lr),
        config={"steps": STEPS, "hidden": HIDDEN, "optimizer": "SGD", "dtype": "f4"},
    )
    _common.finish(_common.fit(model, data, args), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
