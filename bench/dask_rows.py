"""Full-batch MLP gradient over Dask rows against NumPy in one process (issue 17).

    python bench/dask_rows.py                       # 1e5, 4e5 rows, 2 workers
    python bench/dask_rows.py --rows 1e5,1e6,4e6 --workers 2 --chunks 4

For each row count: the NumPy gradient in this process, and s2sad's gradient
over the same rows chunked across a ``LocalCluster`` (processes, data persisted
on the workers first), with the ``dask.compute`` calls per gradient call, the
bytes those computes bring to the driver, and the pickled size of the lazy
gradient graph (it should not grow with the rows).  Timed by hand, never in
the tests; the gradients are checked against NumPy's before timing.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's s2sad


def mlp(W1, b1, W2, b2, X, y):
    h = np.tanh(X @ W1 + b1)
    out = h @ W2 + b2
    return np.mean((out[:, 0] - y) ** 2)


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
    else:
        yield x


def best(fn, args, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1e5,4e5")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    import dask.array as da
    from dask.distributed import Client, LocalCluster

    import s2sad

    cluster = LocalCluster(
        n_workers=args.workers,
        processes=True,
        threads_per_worker=1,
        dashboard_address=None,
        silence_logs=50,
    )
    client = Client(cluster)
    counter = Computes()
    rng = np.random.default_rng(0)
    params = (
        rng.normal(size=(8, 16)),
        rng.normal(size=16),
        rng.normal(size=(16, 1)),
        rng.normal(size=1),
    )
    grad = s2sad.grad(mlp, argnums=(0, 1, 2, 3))
    print(
        "| rows | NumPy | s2sad over Dask | computes/call | bytes to driver/call "
        "| graph bytes |"
    )
    print("|---|---|---|---|---|---|")
    for rows in (int(float(r)) for r in args.rows.split(",")):
        X, y = rng.normal(size=(rows, 8)), rng.normal(size=rows)
        step = -(-rows // args.chunks)
        Xd = client.persist(da.from_array(X, chunks=(step, 8)))
        yd = client.persist(da.from_array(y, chunks=step))
        want = grad(*params, X, y)
        got = grad(*params, Xd, yd)
        assert all(np.allclose(g, w, rtol=1e-9) for g, w in zip(got, want))
        t_numpy = best(grad, (*params, X, y), args.repeat)
        counter.calls = counter.bytes = 0
        t_dask = best(grad, (*params, Xd, yd), args.repeat)
        calls, sent = counter.calls / args.repeat, counter.bytes / args.repeat
        with s2sad.lazy_gradients():
            lazy = grad(*params, Xd, yd)
        graph = {}
        for g in lazy:
            graph.update(dict(g.__dask_graph__()))
        size = len(pickle.dumps(graph))
        print(
            f"| {rows:.0e} | {t_numpy * 1e3:.0f} ms | {t_dask * 1e3:.0f} ms "
            f"| {calls:.0f} | {sent:.0f} | {size} |"
        )
    client.close()
    cluster.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
