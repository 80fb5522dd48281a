"""``s2sad demo``: compile a small MNIST classifier's gradient and train it briefly.

The model is :func:`loss` below, a one-hidden-layer tanh network written in
plain NumPy.  ``s2sad.value_and_grad(loss)`` compiles its gradient into a
Python module on the first call (or loads it from the cache); the demo prints
where that module is, then trains with Adam on real MNIST digits and reports
the test accuracy after each epoch.  When MNIST cannot be fetched, it says so
and trains on synthetic digit-like data instead, so the run still shows the
compiler at work.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import numpy as np

import s2sad
from s2sad.runtime.nn import softmax_cross_entropy
from s2sad.optim import Adam, xavier_uniform

PIXELS, HIDDEN, CLASSES = 784, 128, 10
BATCH = 64


def loss(params, x, y):
    """Mean cross-entropy of a 784-128-10 tanh network on images ``x``, labels ``y``."""
    h = np.tanh(x @ params["W1"] + params["b1"])
    logits = h @ params["W2"] + params["b2"]
    return softmax_cross_entropy(logits, y)


loss_and_grad = s2sad.value_and_grad(loss)


def predict(params: dict, x: np.ndarray) -> np.ndarray:
    """Most likely class of each image."""
    h = np.tanh(x @ params["W1"] + params["b1"])
    return np.argmax(h @ params["W2"] + params["b2"], axis=1)


def init_params(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "W1": xavier_uniform(rng, PIXELS, HIDDEN),
        "b1": np.zeros(HIDDEN, np.float32),
        "W2": xavier_uniform(rng, HIDDEN, CLASSES),
        "b2": np.zeros(CLASSES, np.float32),
    }


def load_data(limit: int, rng: np.random.Generator, say: Callable[[str], None]):
    """(x_train, y_train, x_test, y_test, name): MNIST, else labelled synthetic data."""
    from s2sad.datasets import DataUnavailableError, load_mnist

    try:  # the first time, the download says its size and shows its progress
        x_train, y_train, x_test, y_test = load_mnist()
    except DataUnavailableError as exc:
        reason = str(exc).strip().splitlines()[0]
        print(
            f"note: MNIST is unavailable ({reason}).\nTraining on SYNTHETIC digit-like "
            "data instead: the accuracy below says nothing about MNIST.",
            file=sys.stderr,
        )
        return (*synthetic(min(limit, 10000), 2000, rng), "synthetic")
    say(
        f"data: MNIST, {min(limit, len(x_train))} training and {len(x_test)} test "
        "images"
    )
    return x_train[:limit], y_train[:limit], x_test, y_test, "MNIST"


def synthetic(n_train: int, n_test: int, rng: np.random.Generator):
    """Noisy copies of ten random 'digit' templates: learnable, but not MNIST."""
    templates = rng.random((CLASSES, PIXELS), dtype=np.float32)

    def draw(n: int):
        y = rng.integers(0, CLASSES, n)
        x = templates[y] + rng.normal(0, 0.6, (n, PIXELS)).astype(np.float32)
        return np.clip(x, 0, 1).astype(np.float32), y

    return (*draw(n_train), *draw(n_test))


def train_epoch(params, optimizer, x, y, rng) -> float:
    """One pass over (x, y) in shuffled mini-batches; returns the mean batch loss."""
    order = rng.permutation(len(x))
    total, batches = 0.0, 0
    for start in range(0, len(x), BATCH):
        idx = order[start : start + BATCH]
        value, grads = loss_and_grad(params, x[idx], y[idx])
        optimizer.step(params, grads)
        total, batches = total + float(value), batches + 1
    return total / max(batches, 1)


def compile_gradient(params, x, y, say: Callable[[str], None]) -> None:
    from s2sad import pipeline

    start, runs = time.perf_counter(), pipeline.RUN_COUNT
    loss_and_grad.compile(params, x, y)
    how = "compiled" if pipeline.RUN_COUNT > runs else "loaded (cached)"
    say(
        f"{how} the gradient of s2sad/demo.py:loss in "
        f"{time.perf_counter() - start:.2f} s"
    )
    say(f"gradient module: {loss_and_grad.path}")
    say(f"read it with:    s2sad show {_shown(__file__)}:loss")


def _shown(path: str) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def main(
    epochs: int = 1,
    limit: int = 60000,
    seed: int = 0,
    say: Callable[[str], None] = print,
) -> int:
    """Run the demo; returns the exit status."""
    rng = np.random.default_rng(seed)
    say(
        f"s2sad demo: a {PIXELS}-{HIDDEN}-{CLASSES} tanh network learns to read digits "
        "(Adam)"
    )
    params = init_params(rng)
    x_train, y_train, x_test, y_test, data = load_data(limit, rng, say)
    scored = "test accuracy" if data == "MNIST" else "accuracy on synthetic test data"
    compile_gradient(params, x_train[:BATCH], y_train[:BATCH], say)
    optimizer = Adam(1e-3)
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        mean_loss = train_epoch(params, optimizer, x_train, y_train, rng)
        accuracy = float(np.mean(predict(params, x_test) == y_test))
        say(
            f"epoch {epoch}: training loss {mean_loss:.3f}, {scored} "
            f"{100 * accuracy:.1f}% ({time.perf_counter() - start:.1f} s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
