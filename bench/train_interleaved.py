#!/usr/bin/env python
"""RNN training epochs of s2sad, hand-written NumPy and JAX jit, interleaved in one process.

    python bench/train_interleaved.py --epochs 7
    python bench/train_interleaved.py --epochs 7 --without hoist,peel

bench/train_compare.py runs each framework in its own process, one after
another, so a loaded machine can favour any of them.  This script trains the
RNN of examples/rnn_mnist.py (the example's own ``loss`` and ``optim.SGD``
step, as ``examples/_common.fit`` does) on synthetic MNIST-shaped data, and
times, epoch by epoch in turn (the order rotating), the same training with:

* ``s2sad``: the example's gradient compiled by the pipeline as it is;
* ``s2sad without P`` (``--without P``): compiled without the passes ``P``;
* ``hand-written``: bench/handwritten.py's RNN gradient and the same SGD step
  (the NumPy floor: what careful NumPy code costs, one thread);
* ``jax jit``: bench/train_jax.py's jitted SGD step.

Every variant starts from the same weights and sees the same batches (one
permutation per epoch, shared), so their losses agree.  The table gives the
median epoch time (CPU clock by default: steadier on a shared machine) and
each one's ratio to s2sad's and to the hand-written floor.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=5, help="timed epochs per variant")
    p.add_argument("--n", type=int, default=10000, help="training examples")
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.015)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--without", default="", help="also s2sad without these passes")
    p.add_argument("--only", default="s2sad,hand-written,jax jit", help="variants")
    p.add_argument("--clock", choices=["wall", "cpu"], default="cpu")
    return p.parse_args(argv)


def _s2sad_step(loss, drop: set[str], lr: float):
    """A training step ``step(params, x, y) -> loss`` with a fresh compile."""
    import s2sad
    from s2sad import optim, pipeline

    folder = tempfile.mkdtemp(prefix="s2sad-epoch-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    saved_passes, saved_dir = pipeline.PASSES, os.environ.get("S2SAD_CACHE_DIR")
    os.environ["S2SAD_CACHE_DIR"] = folder
    pipeline.PASSES = [p for p in saved_passes if p[0] not in drop]
    vg = s2sad.value_and_grad(loss, argnums=0)
    opt = optim.SGD(lr)

    def step(params, x, y):
        value, grads = vg(params, x, y)
        opt.step(params, grads)
        return float(value)

    def compile_now(params, x, y):
        try:
            vg.compile(params, x, y)
        finally:
            pipeline.PASSES = saved_passes
            if saved_dir is None:
                os.environ.pop("S2SAD_CACHE_DIR", None)
            else:
                os.environ["S2SAD_CACHE_DIR"] = saved_dir

    return step, compile_now


def _handwritten_step(lr: float):
    from bench import handwritten

    names = ("Wx", "Wh", "bh", "Wo", "bo")

    def step(params, x, y):
        value, grads = handwritten.rnn_mnist(*(params[k] for k in names), x, y)
        for k, g in zip(names, grads):
            params[k] -= lr * g
        return float(value)

    return step


def _jax_step():
    import jax

    from bench import train_jax

    jstep, _ = train_jax.make_step("rnn")
    box = {}

    def step(params, x, y):
        if "p" not in box:
            box["p"] = jax.tree_util.tree_map(jax.numpy.asarray, params)
        box["p"], _, value = jstep(box["p"], (), x, y.astype("int32"))
        return float(value)

    return step


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(opts.threads)
    sys.path[:0] = [str(ROOT), str(ROOT / "examples")]
    import numpy as np
    import rnn_mnist

    rng = np.random.default_rng(0)
    protos = rng.random((10, 784), dtype=np.float32)
    y = rng.integers(0, 10, opts.n)
    x = (0.5 * protos[y] + 0.5 * rng.random((opts.n, 784), dtype=np.float32)).astype(
        np.float32
    )
    init = rnn_mnist.init_params(np.random.default_rng(0))
    wanted = [v for v in opts.only.split(",") if v]
    steps, params = {}, {}
    if "s2sad" in wanted:
        steps["s2sad"], compile_now = _s2sad_step(rnn_mnist.loss, set(), opts.lr)
        compile_now(init, x[: opts.batch], y[: opts.batch])
    drop = {p for p in opts.without.split(",") if p}
    if drop:
        label = "s2sad without " + ",".join(sorted(drop))
        steps[label], compile_now = _s2sad_step(rnn_mnist.loss, drop, opts.lr)
        compile_now(init, x[: opts.batch], y[: opts.batch])
    if "hand-written" in wanted:
        steps["hand-written"] = _handwritten_step(opts.lr)
    if "jax jit" in wanted:
        steps["jax jit"] = _jax_step()
    for name, step in steps.items():
        params[name] = {k: v.copy() for k, v in init.items()}
        step(params[name], x[: opts.batch], y[: opts.batch])  # warm up
    clock = time.process_time if opts.clock == "cpu" else time.perf_counter
    times = {name: [] for name in steps}
    losses = {name: [] for name in steps}
    names = list(steps)
    shuffle = np.random.default_rng(1)
    for epoch in range(opts.epochs):
        perm = shuffle.permutation(opts.n)
        batches = [perm[i : i + opts.batch] for i in range(0, opts.n, opts.batch)]
        k = epoch % len(names)
        for name in names[k:] + names[:k]:
            step, p, total = steps[name], params[name], 0.0
            t0 = clock()
            for idx in batches:
                total += step(p, x[idx], y[idx]) * len(idx)
            times[name].append(clock() - t0)
            losses[name].append(total / opts.n)
        line = ", ".join(f"{n} {times[n][-1]:.3f} s" for n in names)
        print(f"epoch {epoch + 1}: {line}", flush=True)
    base = statistics.median(times[names[0]])
    floor = statistics.median(times.get("hand-written", [float("nan")]))
    print(
        f"\nRNN epoch, {opts.n} examples, batch {opts.batch}, {opts.threads} "
        f"thread(s), {opts.clock} clock, median of {opts.epochs} interleaved epochs\n"
    )
    print(f"| variant | epoch | vs {names[0]} | vs hand-written | last loss |")
    print("|---|---|---|---|---|")
    for name in names:
        med = statistics.median(times[name])
        print(
            f"| {name} | {med:.3f} s | {med / base:.2f}x | {med / floor:.2f}x "
            f"| {losses[name][-1]:.4f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
