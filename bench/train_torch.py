#!/usr/bin/env python
"""Train the PyTorch RNN-MNIST or CNN-IMDB model and report speed and accuracy.

    python bench/train_torch.py rnn --epochs 3
    python bench/train_torch.py cnn --epochs 3 --threads 1
    python bench/train_torch.py rnn --data mnist.npz --limit 10000

Data: by default the loaders of ``s2sad.datasets`` (MNIST; IMDB with 10,000
words and 130 tokens, GloVe 50-d for the embedding).  ``--data FILE.npz`` takes
arrays ``x_train, y_train, x_test, y_test`` instead (for the CNN also
``embedding``, or ``--embedding FILE.npy``; without either a seeded random
table is used).

Reported: test accuracy after every epoch, seconds per epoch (the first one and
the average), and memory.  tracemalloc does not see PyTorch's allocator, so the
memory figure is the sum of the sizes of all allocations PyTorch's CPU allocator
made during one extra training epoch, run under ``torch.profiler`` with
``profile_memory=True`` on a copy of the trained model and optimizer (so the
profiler's overhead never touches the timed epochs).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
    p.add_argument("--mem-batches", type=int, help="profile only this many batches")
    p.add_argument("--no-mem", action="store_true", help="skip the memory epoch")
    p.add_argument("--json", help="also write the results here")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------


def load_data(opts: argparse.Namespace) -> dict:
    """Arrays x_train, y_train, x_test, y_test (+ embedding for the CNN)."""
    import numpy as np

    if getattr(opts, "synthetic", False):
        data = synthetic_data(opts.model, opts.seed)
    elif opts.data:
        with np.load(opts.data) as f:
            data = {k: f[k] for k in f.files}
    elif opts.model == "rnn":
        from s2sad.datasets import load_mnist

        data = dict(zip(("x_train", "y_train", "x_test", "y_test"), load_mnist()))
    else:
        from s2sad.datasets import load_glove, load_imdb

        *arrays, vocab = load_imdb(num_words=10000, maxlen=130)
        data = dict(zip(("x_train", "y_train", "x_test", "y_test"), arrays))
        data["embedding"] = load_glove(vocab)
    if opts.model == "cnn" and "embedding" not in data:
        data["embedding"] = _embedding(opts, data)
    if opts.limit:
        data["x_train"], data["y_train"] = (
            data["x_train"][: opts.limit],
            data["y_train"][: opts.limit],
        )
    return data


def synthetic_data(model: str, seed: int, maxlen: int = 130) -> dict:
    """The generated data of the examples' ``--synthetic`` option (same seed,
    same arrays), so s2sad, PyTorch and JAX can be compared without downloads."""
    sys.path.insert(0, str(ROOT / "examples"))
    keys = ("x_train", "y_train", "x_test", "y_test")
    if model == "rnn":
        import _common

        return dict(zip(keys, _common.synthetic_digits(seed)))
    import cnn_imdb

    arrays, table = cnn_imdb.synthetic_reviews(seed, maxlen)
    return {**dict(zip(keys, arrays)), "embedding": table}


def _embedding(opts: argparse.Namespace, data: dict):
    import numpy as np

    if opts.embedding:
        return np.load(opts.embedding).astype(np.float32)
    vocab = int(max(data["x_train"].max(), data["x_test"].max())) + 1
    rng = np.random.default_rng(opts.seed)
    print(f"no embedding given: random normal(0, 0.1) table of {vocab} x 50")
    return (0.1 * rng.normal(size=(vocab, 50))).astype(np.float32)


def to_tensors(model_name: str, data: dict) -> dict:
    """Inputs as tensors: pixels float32 / ids int64; labels int64 or float32."""
    import torch

    out = {}
    for part in ("train", "test"):
        x, y = data[f"x_{part}"], data[f"y_{part}"]
        out[f"x_{part}"] = torch.from_numpy(
            x.astype("float32" if model_name == "rnn" else "int64")
        )
        out[f"y_{part}"] = torch.from_numpy(
            y.astype("int64" if model_name == "rnn" else "float32")
        )
    return out


# ----------------------------------------------------------------------------
# Training, evaluation, memory
# ----------------------------------------------------------------------------


def train_epoch(
    model, opt, x, y, batch: int, rng, max_batches: int | None = None
) -> float:
    """One pass over shuffled data; returns the mean training loss."""
    import torch

    perm = torch.from_numpy(rng.permutation(len(x)))
    total, seen = 0.0, 0
    for k, start in enumerate(range(0, len(x), batch)):
        if max_batches is not None and k >= max_batches:
            break
        idx = perm[start : start + batch]
        opt.zero_grad(set_to_none=True)
        loss = model.loss(x[idx], y[idx])
        loss.backward()
        opt.step()
        total += loss.item() * len(idx)
        seen += len(idx)
    return total / max(seen, 1)


def accuracy(model, x, y, chunk: int = 1000) -> float:
    import torch

    with torch.no_grad():
        hits = sum(
            int((model.predict(x[i : i + chunk]) == y[i : i + chunk].long()).sum())
            for i in range(0, len(x), chunk)
        )
    return hits / len(x)


def allocations_per_epoch(model, opt, tensors: dict, batch: int, opts) -> dict:
    """Bytes and count of CPU-allocator allocations over one training epoch."""
    import numpy as np
    from torch.profiler import ProfilerActivity, profile

    model, opt = copy.deepcopy(model), copy.deepcopy(opt)  # keep the real run clean
    rng = np.random.default_rng(opts.seed + 999)
    x, y = tensors["x_train"], tensors["y_train"]
    batches = -(-len(x) // batch)
    limit = min(opts.mem_batches or batches, batches)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train_epoch(model, opt, x, y, batch, rng, max_batches=limit)
    sizes = [
        e.nbytes()
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.nbytes() > 0
    ]
    scale = batches / limit
    return {
        "bytes_per_epoch": sum(sizes) * scale,
        "allocations_per_epoch": len(sizes) * scale,
        "profiled_batches": limit,
        "batches_per_epoch": batches,
        "what": "sum of sizes of PyTorch CPU-allocator allocations (torch.profiler, "
        "profile_memory=True) during one training epoch on a copy of the model",
    }


def build(opts: argparse.Namespace, data: dict):
    import torch

    from bench import torch_models as tm

    torch.manual_seed(opts.seed)
    if opts.model == "rnn":
        model, batch = tm.RNNMnist(), tm.RNN_BATCH
    else:
        maxlen = data["x_train"].shape[1]
        model, batch = tm.CNNImdb(data["embedding"], maxlen=maxlen), tm.CNN_BATCH
    return model, tm.make_optimizer(opts.model, model), batch


def run(opts: argparse.Namespace) -> dict:
    import numpy as np
    import torch

    data = load_data(opts)
    tensors = to_tensors(opts.model, data)
    model, opt, batch = build(opts, data)
    rng = np.random.default_rng(opts.seed)
    epochs = []
    for epoch in range(opts.epochs):
        t0, cpu0 = time.perf_counter(), time.process_time()
        loss = train_epoch(
            model, opt, tensors["x_train"], tensors["y_train"], batch, rng
        )
        seconds = time.perf_counter() - t0
        cpu_seconds = time.process_time() - cpu0
        acc = accuracy(model, tensors["x_test"], tensors["y_test"])
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
    result = {
        "model": opts.model,
        "framework": f"torch {torch.__version__}",
        "threads": torch.get_num_threads(),
        "n_train": len(tensors["x_train"]),
        "n_test": len(tensors["x_test"]),
        "batch": batch,
        "epochs": epochs,
        "first_epoch_s": secs[0] if secs else None,
        "mean_epoch_s": sum(secs) / len(secs) if secs else None,
        "mean_epoch_after_first_s": sum(secs[1:]) / len(secs[1:]) if secs[1:] else None,
        "final_test_accuracy": epochs[-1]["test_accuracy"] if epochs else None,
    }
    if not opts.no_mem:
        result["memory"] = allocations_per_epoch(model, opt, tensors, batch, opts)
    return result


def summary(result: dict) -> str:
    after = result["mean_epoch_after_first_s"]
    lines = [
        (
            f"{result['model']} ({result['framework']}, {result['threads']} "
            f"thread(s)), {result['n_train']} train / {result['n_test']} test, "
            f"batch {result['batch']}"
        ),
        (
            f"first epoch {result['first_epoch_s']:.2f} s, "
            f"mean {result['mean_epoch_s']:.2f} s"
            + (f", mean after first {after:.2f} s" if after is not None else "")
        ),
        f"final test accuracy {result['final_test_accuracy']:.4f}",
    ]
    mem = result.get("memory")
    if mem:
        lines.append(
            f"allocated per epoch: {mem['bytes_per_epoch'] / 2**20:.1f} MiB in "
            f"{mem['allocations_per_epoch']:.0f} allocations ({mem['what']}; "
            f"{mem['profiled_batches']} of {mem['batches_per_epoch']} batches profiled)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from bench.run import apply_threads

    apply_threads(opts.threads)
    import torch

    torch.set_num_threads(opts.threads)
    result = run(opts)
    print(summary(result))
    if opts.json:
        Path(opts.json).write_text(
            json.dumps(result, indent=1) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
