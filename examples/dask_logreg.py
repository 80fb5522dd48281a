"""Full-batch L2 logistic regression over rows chunked across a Dask cluster.

    python examples/dask_logreg.py                      # 200,000 rows, 2 workers
    python examples/dask_logreg.py --rows 2e6 --chunks 16
    python examples/dask_logreg.py --scheduler tcp://host:8786

The data are generated on the workers (``dask.array.random``), never on this
process, and stay there.  The same NumPy loss is minimised with SciPy's L-BFGS-B
(``jac=True``) three times:

* ``s2sad.value_and_grad`` called on the Dask arrays (the emitted code runs
  lazily on the workers, one ``dask.compute`` per call);
* ``s2sad.data_parallel``: the NumPy-compiled gradient on each row block, the
  blocks added in one tree reduction;
* ``s2sad.value_and_grad`` on the same rows in NumPy, in this process (only
  when they are at most ``--numpy-max-rows``; they are brought here for that);

and the coefficients are checked against each other.  When dask-glm is
installed, its ``algorithms.lbfgs`` fits the same objective (written as a sum:
``lamduh = rows * lam``, no normalisation) and is compared too; without it the
comparison is skipped and the script says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's s2sad

__s2sad__ = ["loss"]  # `s2sad compile examples/dask_logreg.py` writes its gradient


def loss(w, X, y, lam):
    """Mean logistic loss over rows plus (lam / 2) |w|^2; X's last column is ones."""
    z = X @ w
    return np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * lam * np.sum(w**2)


def make_data(rows: int, features: int, chunks: int, seed: int):
    """X (rows x features, last column ones) and 0/1 labels, built on the workers."""
    import dask.array as da

    step = -(-rows // chunks)
    rng = da.random.default_rng(seed)
    X = rng.normal(size=(rows, features - 1), chunks=(step, features - 1))
    X = da.concatenate([X, da.ones((rows, 1), chunks=(step, 1))], axis=1)
    truth = np.linspace(-1.0, 1.0, features)
    p = 1.0 / (1.0 + da.exp(-(X @ truth)))
    y = (rng.uniform(size=rows, chunks=step) < p).astype(np.float64)
    return X.rechunk((step, features)), y


def fit(value_and_grad, features: int, args: tuple) -> dict:
    """L-BFGS-B from zeros with a tight tolerance; the coefficients and a summary."""
    from scipy.optimize import minimize

    start = time.perf_counter()
    result = minimize(
        value_and_grad,
        np.zeros(features),
        args=args,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 500, "gtol": 1e-10, "ftol": 1e-15},
    )
    return {
        "coef": result.x,
        "loss": float(result.fun),
        "iterations": int(result.nit),
        "evaluations": int(result.nfev),
        "seconds": time.perf_counter() - start,
    }


def dask_glm_coefficients(X, y, rows: int, lam: float):
    """dask-glm's L-BFGS on the same objective, or None when it is not installed."""
    try:
        from dask_glm.algorithms import lbfgs
        from dask_glm.families import Logistic
    except ImportError:
        return None
    # dask-glm minimises sum_i loss_i + lamduh * |w|^2 / 2: the mean form times rows
    return np.asarray(
        lbfgs(
            X,
            y,
            regularizer="l2",
            lamduh=rows * lam,
            family=Logistic,
            max_iter=500,
            tol=1e-10,
            normalize=False,
        )
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=2e5)
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--chunks", type=int, default=8, help="row blocks")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lam", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--numpy-max-rows", type=float, default=1e6)
    parser.add_argument("--scheduler", help="address of a running scheduler")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    rows = int(args.rows)

    from dask.distributed import Client, LocalCluster

    import s2sad

    cluster = None
    if args.scheduler:
        client = Client(args.scheduler)
    else:
        cluster = LocalCluster(
            n_workers=args.workers,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            silence_logs=40,
        )
        client = Client(cluster)
    try:
        X, y = make_data(rows, args.features, args.chunks, args.seed)
        X, y = client.persist([X, y])  # computed once, kept on the workers
        data = (X, y, args.lam)
        results = {
            "s2sad.value_and_grad over Dask": fit(
                s2sad.value_and_grad(loss), args.features, data
            ),
            "s2sad.data_parallel": fit(
                s2sad.data_parallel(loss, batch_argnums=(1, 2)), args.features, data
            ),
        }
        if rows <= args.numpy_max_rows:
            X_np, y_np = client.compute([X, y], sync=True)  # a copy, for the check
            results["NumPy, one process"] = fit(
                s2sad.value_and_grad(loss), args.features, (X_np, y_np, args.lam)
            )
        glm = dask_glm_coefficients(X, y, rows, args.lam)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

    reference = next(reversed(results.values()))["coef"]
    print(
        f"{rows} rows x {args.features} features in {args.chunks} blocks, lam {args.lam}"
    )
    print("| gradient | iterations | seconds | loss | max abs coef difference |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        r["max_abs_difference"] = float(np.max(np.abs(r["coef"] - reference)))
        print(
            f"| {name} | {r['iterations']} | {r['seconds']:.2f} | {r['loss']:.10f} "
            f"| {r['max_abs_difference']:.1e} |"
        )
    agree = all(r["max_abs_difference"] < 1e-6 for r in results.values())
    glm_difference = None
    if glm is None:
        print("dask-glm is not installed: its comparison is skipped")
    else:
        glm_difference = float(np.max(np.abs(glm - reference)))
        print(f"dask-glm lbfgs: max abs coef difference {glm_difference:.1e}")
        agree = agree and glm_difference < 1e-4
    print("coefficients agree" if agree else "COEFFICIENTS DIFFER")
    if args.json:
        out = {
            name: {
                k: (v.tolist() if isinstance(v, np.ndarray) else v)
                for k, v in r.items()
            }
            for name, r in results.items()
        }
        out["dask_glm_max_abs_difference"] = glm_difference
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
