"""Full-batch gradient time against rows: NumPy, s2sad over Dask, data_parallel and a
hand-written Dask gradient (issue 17).

    python bench/dask_rows.py                                  # logreg, 1e5..4e6 + 1.6e7
    python bench/dask_rows.py --rows 1e5,1e6 --repeat 5
    python bench/dask_rows.py --model mlp --rows 1e5,4e5       # no hand-written MLP

A ``LocalCluster`` (processes, ``--workers``, ``--memory-limit`` each) holds the
data, generated on the workers with ``dask.array.random`` (never here) in chunks
of ``--chunk-rows`` rows.  Data that fits in half the cluster's memory is
persisted first; larger data (the last size by default: more than one worker's
memory limit) is generated inside every call, streamed through the workers.

Per row count, the variants run interleaved, ``--repeat`` times, and the table
gives medians of:

* NumPy in this process (its own rows, drawn here; up to ``--numpy-max-rows``);
* ``s2sad.value_and_grad`` on the Dask arrays (the emitted code, lazily, one
  ``dask.compute``);
* ``s2sad.data_parallel`` (the NumPy gradient per row block, one tree reduction);
* a hand-written Dask gradient of the same loss (logreg only);

then the ``dask.compute`` calls and bytes brought to the driver per call, and the
size of each Dask variant's graph (tasks, and pickled bytes when it pickles).  The
three Dask variants' gradients are checked against each other before timing.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's s2sad

FEATURES = 8


def logreg(w, b, X, y):
    z = X @ w + b
    return np.mean(np.logaddexp(0.0, z) - y * z)


def mlp(W1, b1, W2, b2, X, y):
    h = np.tanh(X @ W1 + b1)
    out = h @ W2 + b2
    return np.mean((out[:, 0] - y) ** 2)


def hand_logreg(w, b, X, y):
    """The gradient of ``logreg`` written by hand in Dask: one compute."""
    import dask
    import dask.array as da

    z = X @ w + b
    value = da.mean(da.logaddexp(0.0, z) - y * z)
    r = (1.0 / (1.0 + da.exp(-z)) - y) / X.shape[0]
    value, gw, gb = dask.compute(value, X.T @ r, r.sum())
    return float(value), (gw, float(gb))


class Computes:
    """Counts ``dask.compute`` calls and the bytes they return to the driver."""

    def __init__(self):
        import dask
        import dask.array.core
        import dask.base

        self.calls = self.bytes = 0
        real = dask.base.compute

        def counted(*args, **kwargs):
            results = real(*args, **kwargs)
            self.calls += 1
            self.bytes += sum(np.asarray(r).nbytes for r in _leaves(results))
            return results

        for module in (dask, dask.base, dask.array.core):
            module.compute = counted


def _leaves(x):
    if isinstance(x, (tuple, list)):
        for v in x:
            yield from _leaves(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _leaves(v)
    else:
        yield x


def _params(model: str, rng) -> tuple:
    if model == "logreg":
        return (rng.normal(size=FEATURES) * 0.3, 0.1)
    return (
        rng.normal(size=(FEATURES, 16)) * 0.3,
        rng.normal(size=16),
        rng.normal(size=(16, 1)) * 0.3,
        rng.normal(size=1),
    )


def _dask_data(model: str, rows: int, chunk: int, seed: int):
    import dask.array as da

    rng = da.random.default_rng(seed)
    X = rng.normal(size=(rows, FEATURES), chunks=(chunk, FEATURES))
    if model == "logreg":
        y = (rng.uniform(size=rows, chunks=chunk) < 0.5).astype(np.float64)
    else:
        y = rng.normal(size=rows, chunks=chunk)
    return X, y


def _graph_size(objs) -> tuple[int, int | None]:
    """(tasks, pickled bytes or None) of the merged graphs of Dask objects."""
    graph: dict = {}
    for o in _leaves(objs):
        if hasattr(o, "__dask_graph__"):
            graph.update(dict(o.__dask_graph__()))
    try:
        size = len(pickle.dumps(graph))
    except Exception:  # noqa: BLE001 (some tasks do not pickle: not measured)
        size = None
    return len(graph), size


def _close(a, b) -> bool:
    return all(
        np.allclose(x, y, rtol=1e-9, atol=1e-12) for x, y in zip(_leaves(a), _leaves(b))
    )


def _one_size(rows, args, client, counter, params, loss, rng) -> str:
    """One row of the table: every variant over ``rows`` rows."""
    import dask
    from dask.utils import parse_bytes

    import s2sad

    n = len(params)
    argnums = tuple(range(n))
    emitted = s2sad.value_and_grad(loss, argnums=argnums)
    parallel = s2sad.data_parallel(loss, (n, n + 1), argnums=argnums)
    numpy_grad = s2sad.value_and_grad(loss, argnums=argnums)
    limit = parse_bytes(args.memory_limit)
    chunk = min(int(args.chunk_rows), -(-rows // (2 * args.workers)))
    X, y = _dask_data(args.model, rows, chunk, seed=rows)
    data_bytes = rows * (FEATURES + 1) * 8
    fits = data_bytes < 0.5 * limit * args.workers
    if fits:
        X, y = client.persist([X, y])
        dask.compute(X.sum(), y.sum())  # wait until they are on the workers
    where = "persisted" if fits else f"streamed ({data_bytes / 1e9:.1f} GB)"
    variants = {
        "emitted": lambda: emitted(*params, X, y),
        "parallel": lambda: parallel(*params, X, y),
    }
    if args.model == "logreg":
        variants["hand"] = lambda: hand_logreg(*params, X, y)
    if rows <= args.numpy_max_rows:
        Xn = rng.normal(size=(rows, FEATURES))
        yn = (rng.uniform(size=rows) < 0.5) * 1.0
        variants["numpy"] = lambda: numpy_grad(*params, Xn, yn)
    results = {k: v() for k, v in variants.items() if k != "numpy"}
    for k, r in results.items():  # the Dask variants agree
        assert _close(r, results["emitted"]), (k, r, results["emitted"])
    times: dict = {k: [] for k in variants}
    calls: dict = {k: 0 for k in variants}
    sent: dict = {k: 0 for k in variants}
    for _ in range(args.repeat):  # interleaved
        for k, fn in variants.items():
            counter.calls = counter.bytes = 0
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
            calls[k] += counter.calls
            sent[k] += counter.bytes
    with s2sad.lazy_gradients():
        lazy = emitted(*params, X, y)
    tasks_e, bytes_e = _graph_size(lazy)
    tasks_p, bytes_p = _graph_size(parallel.graph(*params, X, y))
    tasks_h = "-"
    if args.model == "logreg":
        z = X @ params[0] + params[1]
        r = 1.0 / (1.0 + np.exp(-z)) - y
        tasks_h = _graph_size(
            (np.mean(np.logaddexp(0.0, z) - y * z), X.T @ r, r.sum())
        )[0]

    def cell(k, times=times):
        if k not in times:
            return "-"
        return f"{statistics.median(times[k]) * 1e3:.0f} ms"

    dask_keys = [k for k in variants if k != "numpy"]
    per_call = "/".join(f"{calls[k] / args.repeat:.0f}" for k in dask_keys)
    per_bytes = "/".join(f"{sent[k] / args.repeat:.0f}" for k in dask_keys)
    return (
        f"| {rows:.1e} | {where} | {cell('numpy')} | {cell('emitted')} "
        f"| {cell('parallel')} | {cell('hand')} | {per_call} | {per_bytes} "
        f"| {tasks_e} / {tasks_p} / {tasks_h} | {bytes_e} / {bytes_p} |"
    )
    if fits:
        client.cancel([X, y])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1e5,4e5,1e6,4e6,1.6e7")
    parser.add_argument("--model", choices=("logreg", "mlp"), default="logreg")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="400MB", help="per worker")
    parser.add_argument("--chunk-rows", type=float, default=5e5)
    parser.add_argument("--numpy-max-rows", type=float, default=4e6)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=args.workers,
        processes=True,
        threads_per_worker=1,
        memory_limit=args.memory_limit,
        dashboard_address=None,
        silence_logs=50,
    )
    client = Client(cluster)
    counter = Computes()
    loss = logreg if args.model == "logreg" else mlp
    rng = np.random.default_rng(0)
    params = _params(args.model, rng)
    print(
        f"{args.model}, {FEATURES} features, {args.workers} workers x "
        f"{args.memory_limit}, chunks of {int(args.chunk_rows)} rows, "
        f"median of {args.repeat}"
    )
    print(
        "| rows | data | NumPy | s2sad over Dask | data_parallel | hand-written Dask "
        "| computes/call | bytes to driver/call | tasks (emitted / dp / hand) "
        "| graph bytes (emitted / dp) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rows in (int(float(r)) for r in args.rows.split(",")):
        print(_one_size(rows, args, client, counter, params, loss, rng), flush=True)
    client.close()
    cluster.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
