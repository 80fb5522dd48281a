"""Verification against the hand-written gradients, then interleaved timing.

Timing is round-robin: each repetition runs every column once (the starting
column rotates), so a burst of machine noise lands on all columns alike instead
of on whichever happened to run then.  Each measurement runs ``n`` calls, with
``n`` calibrated per column so one measurement takes about ``target`` seconds;
the reported number is the median over repetitions of time per call.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable

import numpy as np

TOL_F64 = 1e-7  # norm-wise relative error allowed against the hand-written result
TOL_F32 = 1e-4


def tolerance(args: tuple) -> float:
    """Float32 problems get the looser tolerance."""
    f32 = any(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in args)
    return TOL_F32 if f32 else TOL_F64


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shape {a.shape} != {b.shape}")
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def compare(result: tuple, reference: tuple) -> float:
    """Largest relative error of value and every gradient vs the reference."""
    value, grads = result
    ref_value, ref_grads = reference
    worst = _rel(value, ref_value)
    if grads is None:
        return worst
    if len(grads) != len(ref_grads):
        raise ValueError(f"{len(grads)} gradients, expected {len(ref_grads)}")
    for g, r in zip(grads, ref_grads):
        worst = max(worst, _rel(g, r))
    return worst


def _one(run: Callable) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def calibrate(run: Callable, target: float) -> int:
    """Calls per measurement so that one measurement takes about ``target`` s."""
    run()
    run()  # warm-up (JAX eager compiles each primitive on first use)
    single = min(_one(run) for _ in range(3))
    return max(1, min(100_000, math.ceil(target / max(single, 1e-9))))


def interleaved(
    runs: dict[str, Callable],
    repeat: int,
    target: float,
    clock: Callable[[], float] = time.perf_counter,
) -> dict:
    """Median seconds per call of every run, measured round-robin.

    ``clock=time.process_time`` counts this process's CPU time instead of the
    wall clock: less disturbed by other jobs on a shared machine, blind to
    time spent waiting."""
    inner = {name: calibrate(run, target) for name, run in runs.items()}
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    gc.collect()
    for r in range(repeat):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            run, n = runs[name], inner[name]
            t0 = clock()
            for _ in range(n):
                run()
            times[name].append((clock() - t0) / n)
    return {
        name: {"median_s": statistics.median(ts), "inner": inner[name], "times_s": ts}
        for name, ts in times.items()
    }
