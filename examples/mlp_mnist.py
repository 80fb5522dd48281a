#!/usr/bin/env python
"""Train a two-layer perceptron on MNIST with gradients from s2sad.

    python examples/mlp_mnist.py                      # 784-100-10, tanh, 5 epochs
    python examples/mlp_mnist.py --activation relu --lr 0.05

784 pixels -> 100 hidden units (tanh, or ReLU with ``--activation relu``) ->
10 class scores, softmax cross-entropy.  Plain SGD (learning rate 0.1), batch
100, Xavier (Glorot) uniform weights (He uniform for ReLU), zero biases,
float32.  The simplest of the three examples: start reading here.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402  (sets BLAS threads before NumPy is imported)
import numpy as np  # noqa: E402

from s2sad import optim  # noqa: E402
from s2sad.runtime import nn  # noqa: E402

PIXELS, HIDDEN, CLASSES = 784, 100, 10

# The losses `s2sad compile examples/mlp_mnist.py` compiles when no --function is given.
__s2sad__ = ["loss_tanh", "loss_relu"]


def logits_tanh(params: dict, x: np.ndarray) -> np.ndarray:
    """Class scores (n, 10) of images x (n, 784), tanh hidden layer."""
    h = np.tanh(x @ params["W1"] + params["b1"])
    return h @ params["W2"] + params["b2"]


def logits_relu(params: dict, x: np.ndarray) -> np.ndarray:
    """Class scores (n, 10) of images x (n, 784), ReLU hidden layer."""
    h = nn.relu(x @ params["W1"] + params["b1"])
    return h @ params["W2"] + params["b2"]


def loss_tanh(params: dict, x: np.ndarray, y: np.ndarray) -> np.floating:
    return nn.softmax_cross_entropy(logits_tanh(params, x), y)


def loss_relu(params: dict, x: np.ndarray, y: np.ndarray) -> np.floating:
    return nn.softmax_cross_entropy(logits_relu(params, x), y)


def predict_tanh(params: dict, x: np.ndarray) -> np.ndarray:
    return np.argmax(logits_tanh(params, x), axis=1)


def predict_relu(params: dict, x: np.ndarray) -> np.ndarray:
    return np.argmax(logits_relu(params, x), axis=1)


MODELS = {"tanh": (loss_tanh, predict_tanh), "relu": (loss_relu, predict_relu)}


def init_params(rng: np.random.Generator, activation: str) -> dict:
    """Glorot uniform (He uniform before a ReLU) weights, zero biases, float32."""
    first = optim.he_uniform if activation == "relu" else optim.xavier_uniform
    return {
        "W1": first(rng, PIXELS, HIDDEN),
        "b1": np.zeros(HIDDEN, np.float32),
        "W2": optim.xavier_uniform(rng, HIDDEN, CLASSES),
        "b2": np.zeros(CLASSES, np.float32),
    }


def main(argv: list[str] | None = None) -> int:
    parser = _common.make_parser(
        __doc__.splitlines()[0], epochs=5, batch_size=100, lr=0.1
    )
    parser.add_argument(
        "--activation", choices=sorted(MODELS), default="tanh", help="hidden layer"
    )
    args = parser.parse_args(argv)
    _common.apply_threads(args.threads)
    data = _common.limit_train(_common.mnist_data(args), args.limit)
    loss, predict = MODELS[args.activation]
    model = _common.Model(
        name="mlp_mnist",
        loss=loss,
        predict=predict,
        params=init_params(np.random.default_rng(args.seed), args.activation),
        optimizer=optim.SGD(args.lr),
        config={"hidden": HIDDEN, "activation": args.activation, "optimizer": "SGD"},
    )
    _common.finish(_common.fit(model, data, args), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
