#!/usr/bin/env python
"""Train the RNN-MNIST or CNN-IMDB model with JAX (jit) and report speed and accuracy.

    python bench/train_jax.py rnn --epochs 3
    python bench/train_jax.py cnn --epochs 3 --threads 1
    python bench/train_jax.py rnn --limit 10000 --json rnn-jax.json
    python bench/train_jax.py cnn --synthetic --epochs 2

The JAX counterpart of bench/train_torch.py and of the s2sad examples
(examples/rnn_mnist.py, examples/cnn_imdb.py): the same models, data, batch
sizes, optimizers and learning rates, the same seeded Xavier-uniform
initialisation as the s2sad examples (``s2sad.optim.xavier_uniform`` with the
same generator), and the same shuffling (``rng.permutation`` per epoch, last
batch short).  Options and output follow train_torch.py: test accuracy after
every epoch, seconds per epoch (the first one and the average) and ``--json``.

* RNN: 4 steps of 196 pixels, tanh, 64 hidden units, dense 64 -> 10, softmax
  cross-entropy; SGD, lr 0.015, batch 100; float32.
* CNN: embedding 50-d (GloVe, or the ``--synthetic`` table), conv1d 8 filters
  of width 3 + ReLU, non-overlapping max-pool 8, dense -> 1, sigmoid binary
  cross-entropy; Adam (lr 1e-3, 0.9, 0.999, 1e-8), batch 64; float32.

One training step (value-and-grad + update) is one ``jax.jit`` function that
donates the parameters and optimizer state.  The loss is read back every batch
(``float(loss)``), as train_torch.py (``loss.item()``) and the examples
(``float(value)``) do, so no epoch ends with work still queued.  The step is
compiled before the first epoch (for the full and the short last batch, on
copies of the parameters), as the examples compile the s2sad gradient first;
that time is reported apart.
Memory is not measured (XLA's allocator is not visible from Python).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RNN_STEPS, RNN_CHUNK, RNN_HIDDEN, CLASSES = 4, 196, 64, 10
RNN_LR, RNN_BATCH = 0.015, 100
DIM, FILTERS, WIDTH, POOL = 50, 8, 3, 8
CNN_LR, CNN_BATCH = 1e-3, 64
ADAM = (0.9, 0.999, 1e-8)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", choices=["rnn", "cnn"])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", help="npz with x_train, y_train, x_test, y_test")
    p.add_argument("--embedding", help="npy table for the CNN embedding")
    p.add_argument("--limit", type=int, help="use only this many training examples")
    p.add_argument(
        "--synthetic",
        action="store_true",
        help="the examples' small generated data (examples/... --synthetic)",
    )
    p.add_argument("--json", help="also write the results here")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------
# Models (the s2sad examples' NumPy models, in jax.numpy)
# ----------------------------------------------------------------------------


def init_params(model: str, seed: int, data: dict) -> dict:
    """The s2sad examples' initialisation: same generator, same draws, same order."""
    import numpy as np

    from s2sad import optim

    rng = np.random.default_rng(seed)
    if model == "rnn":
        return {
            "Wx": optim.xavier_uniform(rng, RNN_CHUNK, RNN_HIDDEN),
            "Wh": optim.xavier_uniform(rng, RNN_HIDDEN, RNN_HIDDEN),
            "bh": np.zeros(RNN_HIDDEN, np.float32),
            "Wo": optim.xavier_uniform(rng, RNN_HIDDEN, CLASSES),
            "bo": np.zeros(CLASSES, np.float32),
        }
    positions = (data["x_train"].shape[1] - WIDTH + 1) // POOL
    return {
        "E": np.array(data["embedding"], dtype=np.float32),
        "K": optim.xavier_uniform(
            rng, DIM * WIDTH, FILTERS * WIDTH, (FILTERS, DIM, WIDTH)
        ),
        "kb": np.zeros(FILTERS, np.float32),
        "W": optim.xavier_uniform(rng, FILTERS * positions, 1),
        "b": np.zeros(1, np.float32),
    }


def rnn_logits(params: dict, x):
    import jax.numpy as jnp

    h = jnp.zeros((x.shape[0], params["Wh"].shape[0]), dtype=x.dtype)
    for t in range(RNN_STEPS):
        xt = x[:, t * RNN_CHUNK : (t + 1) * RNN_CHUNK]
        h = jnp.tanh(xt @ params["Wx"] + h @ params["Wh"] + params["bh"])
    return h @ params["Wo"] + params["bo"]


def rnn_loss(params: dict, x, y):
    """Mean softmax cross-entropy against integer labels."""
    import jax
    import jax.numpy as jnp

    logp = jax.nn.log_softmax(rnn_logits(params, x), axis=1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def cnn_logits(params: dict, ids):
    import jax
    import jax.numpy as jnp

    x = jnp.transpose(params["E"][ids], (0, 2, 1))  # (n, 50, length)
    c = jax.lax.conv_general_dilated(
        x, params["K"], window_strides=(1,), padding="VALID"
    )  # (n, 8, length - 2): NCW input, OIW kernel, like F.conv1d
    c = jax.nn.relu(c + params["kb"][None, :, None])
    positions = c.shape[2] // POOL
    p = c[:, :, : positions * POOL].reshape(c.shape[0], c.shape[1], positions, POOL)
    flat = p.max(axis=3).reshape(c.shape[0], -1)
    return (flat @ params["W"] + params["b"])[:, 0]


def cnn_loss(params: dict, ids, y):
    """Mean sigmoid binary cross-entropy against float labels."""
    import jax.numpy as jnp

    z = cnn_logits(params, ids)
    return jnp.mean(jnp.logaddexp(0.0, z) - y * z)


# ----------------------------------------------------------------------------
# Training steps (jitted, donating parameters and optimizer state)
# ----------------------------------------------------------------------------


def make_step(model: str):
    """(step, init_state): ``step(params, state, x, y) -> (params, state, loss)``."""
    import jax
    import jax.numpy as jnp

    loss = rnn_loss if model == "rnn" else cnn_loss
    vg = jax.value_and_grad(loss)
    if model == "rnn":

        def sgd(params, state, x, y):
            value, grads = vg(params, x, y)
            new = jax.tree_util.tree_map(lambda p, g: p - RNN_LR * g, params, grads)
            return new, state, value

        return jax.jit(sgd, donate_argnums=(0,)), lambda params: ()
    b1, b2, eps = ADAM

    def adam(params, state, x, y):
        value, grads = vg(params, x, y)
        m, v, t = state
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
        step = CNN_LR * jnp.sqrt(1 - b2**t) / (1 - b1**t)
        eps_hat = eps * jnp.sqrt(1 - b2**t)
        new = jax.tree_util.tree_map(
            lambda p, m, v: p - step * m / (jnp.sqrt(v) + eps_hat), params, m, v
        )
        return new, (m, v, t), value

    def init(params):
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return (zeros, jax.tree_util.tree_map(jnp.zeros_like, params), jnp.float32(0))

    return jax.jit(adam, donate_argnums=(0, 1)), init


def predict_fn(model: str):
    import jax
    import jax.numpy as jnp

    if model == "rnn":
        return jax.jit(lambda params, x: jnp.argmax(rnn_logits(params, x), axis=1))
    return jax.jit(lambda params, ids: (cnn_logits(params, ids) > 0).astype(jnp.int32))


def accuracy(predict, params, x, y, chunk: int = 1000) -> float:
    import numpy as np

    hits = sum(
        int(np.sum(np.asarray(predict(params, x[i : i + chunk])) == y[i : i + chunk]))
        for i in range(0, len(x), chunk)
    )
    return hits / max(len(x), 1)


def arrays(model: str, data: dict) -> dict:
    """Inputs float32 pixels / int32 ids; labels int32 (RNN) or float32 (CNN)."""
    import numpy as np

    out = {}
    for part in ("train", "test"):
        x, y = data[f"x_{part}"], data[f"y_{part}"]
        out[f"x_{part}"] = x.astype(np.float32 if model == "rnn" else np.int32)
        out[f"y_{part}"] = y.astype(np.int32 if model == "rnn" else np.float32)
    return out


def run(opts: argparse.Namespace) -> dict:
    import jax
    import numpy as np

    from bench.train_torch import load_data

    data = load_data(opts)
    arr = arrays(opts.model, data)
    batch = RNN_BATCH if opts.model == "rnn" else CNN_BATCH
    step, init_state = make_step(opts.model)
    predict = predict_fn(opts.model)
    params = jax.tree_util.tree_map(
        jax.numpy.asarray, init_params(opts.model, opts.seed, data)
    )
    state = init_state(params)
    x, y = arr["x_train"], arr["y_train"]
    t0 = time.perf_counter()
    for size in sorted({min(batch, len(x)), len(x) % batch} - {0}):
        copies = jax.tree_util.tree_map(jax.numpy.copy, (params, state))
        jax.block_until_ready(step(*copies, x[:size], y[:size]))  # compiles
    compile_s = time.perf_counter() - t0
    rng = np.random.default_rng(opts.seed)
    epochs = []
    for epoch in range(opts.epochs):
        perm = rng.permutation(len(x))
        total, seen = 0.0, 0
        t0, cpu0 = time.perf_counter(), time.process_time()
        for start in range(0, len(x), batch):
            idx = perm[start : start + batch]
            params, state, value = step(params, state, x[idx], y[idx])
            total += float(value) * len(idx)
            seen += len(idx)
        jax.block_until_ready(params)
        seconds = time.perf_counter() - t0
        cpu_seconds = time.process_time() - cpu0
        acc = accuracy(predict, params, arr["x_test"], arr["y_test"])
        loss = total / max(seen, 1)
        epochs.append(
            {
                "seconds": seconds,
                "cpu_seconds": cpu_seconds,
                "train_loss": loss,
                "test_accuracy": acc,
            }
        )
        print(
            f"epoch {epoch + 1}: {seconds:.2f} s, loss {loss:.4f}, test acc {acc:.4f}",
            flush=True,
        )
    secs = [e["seconds"] for e in epochs]
    import jaxlib

    return {
        "model": opts.model,
        "framework": f"jax {jax.__version__} / jaxlib {jaxlib.__version__} (jit)",
        "threads": opts.threads,
        "n_train": len(x),
        "n_test": len(arr["x_test"]),
        "batch": batch,
        "compile_s": compile_s,
        "epochs": epochs,
        "first_epoch_s": secs[0] if secs else None,
        "mean_epoch_s": sum(secs) / len(secs) if secs else None,
        "mean_epoch_after_first_s": sum(secs[1:]) / len(secs[1:]) if secs[1:] else None,
        "final_test_accuracy": epochs[-1]["test_accuracy"] if epochs else None,
    }


def summary(result: dict) -> str:
    after = result["mean_epoch_after_first_s"]
    return "\n".join(
        [
            (
                f"{result['model']} ({result['framework']}, {result['threads']} "
                f"thread(s)), {result['n_train']} train / {result['n_test']} test, "
                f"batch {result['batch']}; step compiled in {result['compile_s']:.2f} s"
            ),
            (
                f"first epoch {result['first_epoch_s']:.2f} s, "
                f"mean {result['mean_epoch_s']:.2f} s"
                + (f", mean after first {after:.2f} s" if after is not None else "")
            ),
            f"final test accuracy {result['final_test_accuracy']:.4f}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from bench.run import apply_threads

    apply_threads(opts.threads)  # XLA flags and CPU affinity, before jax loads
    result = run(opts)
    print(summary(result))
    if opts.json:
        Path(opts.json).write_text(
            json.dumps(result, indent=1) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
