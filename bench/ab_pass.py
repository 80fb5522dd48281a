#!/usr/bin/env python
"""A/B of compiler passes: each problem's s2sad gradient with and without them.

    python bench/ab_pass.py --without shifts --only logsumexp,mlp2,rnn_mnist
    python bench/ab_pass.py --without shifts --repeat 31 --threads 1

For each problem the s2sad value-and-gradient is compiled twice in this one
process (each into its own fresh cache folder): once by the pipeline as it is,
once with the passes named by ``--without`` taken out of ``pipeline.PASSES``.
Both are checked against the hand-written gradient, then the hand-written one
and both variants are timed round-robin in the same repetitions (as
bench/run.py does), so machine load hits all three alike; the table gives
medians and minima.  A lever's before/after without a second checkout.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--without", required=True, help="pass names, a,b")
    p.add_argument("--only", default="logsumexp,mlp2,rnn_mnist", help="problems")
    p.add_argument("--repeat", type=int, default=21)
    p.add_argument("--target", type=float, default=0.05, help="s per measurement")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: this process's CPU time (steadier on a loaded machine)",
    )
    return p.parse_args(argv)


def compiled(problem, args: tuple, drop: set[str]):
    """A prepared s2sad run of ``problem`` compiled without the passes ``drop``."""
    from bench.columns import S2SAD
    from s2sad import pipeline

    saved_passes, saved_dir = pipeline.PASSES, os.environ.get("S2SAD_CACHE_DIR")
    folder = tempfile.mkdtemp(prefix="s2sad-ab-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["S2SAD_CACHE_DIR"] = folder
    pipeline.PASSES = [p for p in saved_passes if p[0] not in drop]
    try:
        col = S2SAD()
        col.setup(1)
        return col.prepare(problem, args)  # compiles on its first call
    finally:
        pipeline.PASSES = saved_passes
        if saved_dir is None:
            os.environ.pop("S2SAD_CACHE_DIR", None)
        else:
            os.environ["S2SAD_CACHE_DIR"] = saved_dir


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from bench.run import apply_threads

    apply_threads(opts.threads)
    from bench import timing
    from bench.columns import Handwritten
    from bench.problems import PROBLEMS
    from bench.report import fmt_time
    from s2sad import pipeline

    drop = {n for n in opts.without.split(",") if n}
    unknown = drop - {p[0] for p in pipeline.PASSES}
    if unknown:
        print(f"no such pass: {sorted(unknown)}", file=sys.stderr)
        return 2
    label = "without " + ",".join(sorted(drop))
    rows = []
    for name in opts.only.split(","):
        problem = PROBLEMS[name]
        args = problem.make_data()
        prepared = {
            "hand-written": Handwritten().prepare(problem, args),
            "as is": compiled(problem, args, set()),
            label: compiled(problem, args, drop),
        }
        reference = prepared["hand-written"].check()
        for key, prep in prepared.items():
            err = timing.compare(prep.check(), reference)
            if err > timing.tolerance(args):
                print(f"{name}: {key} differs from hand-written: {err:.1e}")
                return 1
        runs = {key: prep.run for key, prep in prepared.items()}
        clock = time.process_time if opts.clock == "cpu" else time.perf_counter
        result = timing.interleaved(runs, opts.repeat, opts.target, clock)
        rows.append((name, result))
        line = ", ".join(f"{k} {fmt_time(v['median_s'])}" for k, v in result.items())
        print(f"{name}: {line}", flush=True)
    keys = ["hand-written", "as is", label]
    print(
        "\n| problem | "
        + " | ".join(f"{k}: median (min)" for k in keys)
        + f" | {label} / as is (medians) |"
    )
    print("|" + "---|" * (len(keys) + 2))
    for name, result in rows:
        cells = [
            f"{fmt_time(result[k]['median_s'])} ({fmt_time(min(result[k]['times_s']))})"
            for k in keys
        ]
        ratio = result[label]["median_s"] / result["as is"]["median_s"]
        print(f"| {name} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
