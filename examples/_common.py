"""Shared pieces of the example scripts: options, training loop, metrics, output.

Each example supplies a loss ``loss(params, x, y)`` written in plain NumPy, a
``predict(params, x)`` returning class ids, the parameters (a dict of float
arrays), an optimizer from :mod:`s2sad.optim` and its data; :func:`fit`
differentiates the loss with ``s2sad.value_and_grad`` and trains.

BLAS libraries read their thread count when NumPy is first imported, so this
module applies ``--threads N`` (default 1) from ``sys.argv`` to the
environment *before* it imports NumPy, when NumPy is not loaded yet; a script
therefore imports this module before NumPy.  :func:`apply_threads` repeats the
setting (and restricts the process to N CPUs) when ``main(argv)`` runs.

Memory is measured by :class:`_allocations.AllocationCounter` (bytes of NumPy
array buffers allocated during a training epoch); see that module.
"""

from __future__ import annotations

import os
import sys


def _threads_from_argv(argv: list[str]) -> int:
    """The value of ``--threads`` in argv (``--threads N`` or ``--threads=N``), or 1."""
    for i, arg in enumerate(argv):
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
        if arg == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
    return 1


def set_thread_env(n: int) -> None:
    """Ask OpenMP / MKL / OpenBLAS for ``n`` threads (read when NumPy loads)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)


if "numpy" not in sys.modules:  # too late otherwise: the BLAS pool already exists
    try:
        set_thread_env(_threads_from_argv(sys.argv[1:]))
    except ValueError:
        pass  # argparse reports the bad value later

# ruff: noqa: E402  (the imports below must follow the thread setting above)
import argparse
import copy
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

import _data
import s2sad
from _allocations import MEMORY_WHAT, AllocationCounter
from _progress import progress

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


# ----------------------------------------------------------------------------
# Options
# ----------------------------------------------------------------------------


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each option's default, unless there is none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def make_parser(
    description: str, *, epochs: int, batch_size: int, lr: float
) -> argparse.ArgumentParser:
    """The options every example shares, with the example's own defaults."""
    p = argparse.ArgumentParser(
        description=description, formatter_class=DefaultsFormatter
    )
    p.add_argument("--epochs", type=int, default=epochs, help="training epochs")
    p.add_argument("--batch-size", type=int, default=batch_size, help="batch size")
    p.add_argument("--lr", type=float, default=lr, help="learning rate")
    p.add_argument("--limit", type=int, help="train on the first N training samples")
    p.add_argument("--seed", type=int, default=0, help="initialisation and shuffling")
    p.add_argument("--data", metavar="DIR", help=_data.DATA_HELP)
    p.add_argument("--json", metavar="PATH", help="write per-epoch metrics here")
    p.add_argument("--plot", metavar="PATH", help="PNG of the curves (matplotlib)")
    p.add_argument("--threads", type=int, default=1, help="BLAS threads and CPUs")
    p.add_argument(
        "--mem",
        choices=["off", "extra", "epochs"],
        default="off",
        help="count the bytes NumPy allocates (for the benchmarks): not at all, "
        "in one extra untimed epoch on a copy of the model (as "
        "bench/train_torch.py does), or inside every timed epoch (slows them "
        "~10%%)",
    )
    # Tiny generated data for the tests; not for users.
    p.add_argument("--synthetic", action="store_true", help=argparse.SUPPRESS)
    return p


def apply_threads(n: int) -> None:
    """Limit BLAS to ``n`` threads and the process to ``n`` CPUs.

    The environment only takes effect if NumPy was not imported yet (running
    the script does that; a test calling ``main`` does not), the CPU affinity
    always does.
    """
    set_thread_env(n)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if 0 < n < len(cpus):
        os.sched_setaffinity(0, cpus[:n])


def limit_train(data: Arrays, limit: int | None) -> Arrays:
    """Keep only the first ``limit`` training samples (all when None)."""
    x_train, y_train, x_test, y_test = data
    if limit:
        x_train, y_train = x_train[:limit], y_train[:limit]
    return x_train, y_train, x_test, y_test


def synthetic_digits(seed: int, n_train: int = 500, n_test: int = 200) -> Arrays:
    """Ten noisy prototype 'images' in MNIST's layout (float32 (n, 784), int
    labels): learnable in a few epochs, for tests that must not load MNIST."""
    rng = np.random.default_rng(seed)
    protos = rng.random((10, 784), dtype=np.float32)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, 10, n)
        noise = rng.random((n, 784), dtype=np.float32)
        return (0.5 * protos[y] + 0.5 * noise).astype(np.float32), y

    return (*draw(n_train), *draw(n_test))


class _NoCounter:
    """Stand-in for :class:`AllocationCounter` when nothing is counted."""

    kind = "off"

    def __enter__(self) -> "_NoCounter":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def result(self) -> dict[str, int]:
        return {}


# ----------------------------------------------------------------------------
# Batches, metrics
# ----------------------------------------------------------------------------


def batch_indices(n: int, size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """A shuffled pass over ``range(n)`` in batches of ``size`` (the last may be short)."""
    perm = rng.permutation(n)
    for start in range(0, n, size):
        yield perm[start : start + size]


def accuracy(
    predict: Callable, params: dict, x: np.ndarray, y: np.ndarray, chunk: int = 1000
) -> float:
    """Fraction of ``predict(params, x) == y``, evaluated in chunks."""
    hits = sum(
        int(np.sum(predict(params, x[i : i + chunk]) == y[i : i + chunk]))
        for i in range(0, len(x), chunk)
    )
    return hits / max(len(x), 1)


def mean_loss(
    loss: Callable, params: dict, x: np.ndarray, y: np.ndarray, chunk: int = 1000
) -> float:
    """The loss over all of ``x`` (a mean of chunk means weighted by chunk size)."""
    total = sum(
        float(loss(params, x[i : i + chunk], y[i : i + chunk])) * len(x[i : i + chunk])
        for i in range(0, len(x), chunk)
    )
    return total / max(len(x), 1)


# ----------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------


@dataclass
class Model:
    """What an example hands to :func:`fit`."""

    name: str
    loss: Callable  # loss(params, x, y) -> scalar, plain NumPy
    predict: Callable  # predict(params, x) -> class ids
    params: dict
    optimizer: Any  # an s2sad.optim optimizer
    config: dict = field(default_factory=dict)  # recorded in the JSON


def fit(model: Model, data: Arrays, args: argparse.Namespace) -> dict:
    """Train ``model`` on ``data`` as the options say; return the results dict."""
    x_train, y_train, x_test, y_test = data
    vg = s2sad.value_and_grad(model.loss, argnums=0)
    t0 = time.perf_counter()
    size = min(args.batch_size, len(x_train))
    vg.compile(model.params, x_train[:size], y_train[:size])
    compile_s = time.perf_counter() - t0
    print(f"gradient code: {vg.path} (compiled or loaded in {compile_s:.2f} s)")
    rng = np.random.default_rng(args.seed)
    epochs = []
    for epoch in range(1, args.epochs + 1):
        label = f"epoch {epoch}/{args.epochs}"
        counter = AllocationCounter() if args.mem == "epochs" else _NoCounter()
        row = {"epoch": epoch}
        row.update(_train_epoch(model, vg, x_train, y_train, args, rng, label, counter))
        row.update(_evaluate(model, data))
        epochs.append(row)
        print(_epoch_line(row), flush=True)
    result = _results(model, args, data, vg.path, compile_s, epochs)
    if args.mem == "extra":
        result["memory"].update(_memory_epoch(model, vg, x_train, y_train, args))
    return result


def _memory_epoch(
    model: Model, vg: Callable, x: np.ndarray, y: np.ndarray, args: argparse.Namespace
) -> dict:
    """Allocations of one more epoch on copies of the parameters and optimizer.

    The timed epochs run without the counter (its Python callback per
    allocation costs time); the copies keep the trained model untouched.
    """
    twin = copy.copy(model)
    twin.params = copy.deepcopy(model.params)
    twin.optimizer = copy.deepcopy(model.optimizer)
    rng = np.random.default_rng(args.seed + 999)
    counter = AllocationCounter()
    row = _train_epoch(twin, vg, x, y, args, rng, "memory epoch", counter)
    out = {"measured": "one extra training epoch on a copy of the model"}
    if "alloc_bytes" in row:
        out["bytes_per_epoch"] = row["alloc_bytes"]
        out["allocations_per_epoch"] = row["alloc_count"]
    else:
        out["peak_bytes"] = row.get("peak_bytes")
    return out


def _train_epoch(
    model: Model,
    vg: Callable,
    x: np.ndarray,
    y: np.ndarray,
    args: argparse.Namespace,
    rng: np.random.Generator,
    label: str,
    counter: Any,
) -> dict:
    """One shuffled pass with an optimizer step per batch; timed and measured."""
    bar = progress(label, -(-len(x) // args.batch_size))
    loss_sum, seen = 0.0, 0
    with counter:
        t0, cpu0 = time.perf_counter(), time.process_time()
        for k, idx in enumerate(batch_indices(len(x), args.batch_size, rng), 1):
            value, grads = vg(model.params, x[idx], y[idx])
            model.optimizer.step(model.params, grads)
            loss_sum += float(value) * len(idx)
            seen += len(idx)
            bar.update(k, loss_sum / seen)
        seconds = time.perf_counter() - t0
        cpu_seconds = time.process_time() - cpu0
    bar.close(loss_sum / max(seen, 1))
    return {
        "loss": loss_sum / max(seen, 1),
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,  # robust to other processes on a shared machine
        **counter.result(),
    }


def _evaluate(model: Model, data: Arrays) -> dict:
    x_train, y_train, x_test, y_test = data
    return {
        "train_accuracy": accuracy(model.predict, model.params, x_train, y_train),
        "test_accuracy": accuracy(model.predict, model.params, x_test, y_test),
        "test_loss": mean_loss(model.loss, model.params, x_test, y_test),
    }


def _epoch_line(row: dict) -> str:
    mem = ""
    if "alloc_bytes" in row:
        mem = f", {row['alloc_bytes'] / 2**20:.0f} MiB allocated"
    elif "peak_bytes" in row:
        mem = f", peak {row['peak_bytes'] / 2**20:.0f} MiB"
    return (
        f"epoch {row['epoch']}: {row['seconds']:.2f} s, loss {row['loss']:.4f}, "
        f"train acc {row['train_accuracy']:.4f}, test acc {row['test_accuracy']:.4f}"
        f"{mem}"
    )


def _results(
    model: Model,
    args: argparse.Namespace,
    data: Arrays,
    grad_path: str,
    compile_s: float,
    epochs: list[dict],
) -> dict:
    secs = [e["seconds"] for e in epochs]
    kind = "off" if args.mem == "off" else AllocationCounter().kind
    return {
        "model": model.name,
        "framework": f"s2sad {s2sad.__version__}, numpy {np.__version__}",
        "s2sad_revision": source_revision(),
        "threads": args.threads,
        "options": {k: v for k, v in vars(args).items() if k not in ("json", "plot")},
        "config": model.config,
        "n_train": len(data[0]),
        "n_test": len(data[2]),
        "gradient_file": grad_path,
        "compile_s": compile_s,
        "epochs": epochs,
        "first_epoch_s": secs[0] if secs else None,
        "mean_epoch_s": sum(secs) / len(secs) if secs else None,
        "mean_epoch_after_first_s": sum(secs[1:]) / len(secs[1:]) if secs[1:] else None,
        "final_test_accuracy": epochs[-1]["test_accuracy"] if epochs else None,
        "memory": {
            "kind": kind,
            "what": MEMORY_WHAT.get(kind, "not measured"),
            "where": args.mem,
        },
    }


# ----------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------


def source_revision() -> str | None:
    """The git commit s2sad was imported from, ``+dirty`` if s2sad/ has local
    changes (results depend on the compiler's version); None outside a checkout."""
    root = Path(s2sad.__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "s2sad"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def summary(result: dict) -> str:
    """A few lines in the spirit of the seeds' tables."""
    lines = [
        f"{result['model']} ({result['framework']}, {result['threads']} thread(s)): "
        f"{result['n_train']} train / {result['n_test']} test",
    ]
    if result["epochs"]:
        lines.append(
            f"s/epoch first {result['first_epoch_s']:.2f}, mean {result['mean_epoch_s']:.2f}"
            f"; final test accuracy {result['final_test_accuracy']:.4f}"
        )
        alloc = [e["alloc_bytes"] for e in result["epochs"] if "alloc_bytes" in e]
        if alloc:
            lines.append(
                f"allocated per epoch: first {alloc[0] / 2**20:.0f} MiB, mean "
                f"{sum(alloc) / len(alloc) / 2**20:.0f} MiB (NumPy array buffers)"
            )
    mem = result["memory"]
    if "bytes_per_epoch" in mem:
        lines.append(
            f"allocated in an extra epoch: {mem['bytes_per_epoch'] / 2**20:.0f} MiB in "
            f"{mem['allocations_per_epoch']} NumPy array buffers"
        )
    elif mem.get("peak_bytes") is not None:
        lines.append(
            f"tracemalloc peak in an extra epoch: {mem['peak_bytes'] / 2**20:.0f} MiB"
        )
    return "\n".join(lines)


def write_json(path: str, result: dict) -> None:
    Path(path).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def plot(path: str, result: dict) -> bool:
    """Loss, accuracy and seconds per epoch as a PNG; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            f"--plot {path}: matplotlib is not installed (pip install matplotlib); "
            "no plot written",
            file=sys.stderr,
        )
        return False
    rows = result["epochs"]
    ep = [r["epoch"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    axes[0].plot(ep, [r["loss"] for r in rows], "o-", label="train (running)")
    axes[0].plot(ep, [r["test_loss"] for r in rows], "s-", label="test")
    axes[1].plot(ep, [r["train_accuracy"] for r in rows], "o-", label="train")
    axes[1].plot(ep, [r["test_accuracy"] for r in rows], "s-", label="test")
    axes[2].bar(ep, [r["seconds"] for r in rows])
    for ax, title in zip(axes, ("loss", "accuracy", "seconds per epoch")):
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.set_xticks(ep)
        if title != "seconds per epoch":
            ax.legend()
    fig.suptitle(f"{result['model']} ({result['framework']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def finish(result: dict, args: argparse.Namespace) -> None:
    """Print the summary and write the JSON / plot the options ask for."""
    print(summary(result))
    if args.json:
        write_json(args.json, result)
        print(f"metrics written to {args.json}")
    if args.plot and plot(args.plot, result):
        print(f"plot written to {args.plot}")


def mnist_data(args) -> tuple:
    """MNIST (x_train, y_train, x_test, y_test), or synthetic digits with ``--synthetic``."""
    if args.synthetic:
        return synthetic_digits(args.seed)
    return _data.mnist(args)
