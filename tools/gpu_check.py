"""CuPy on a GPU machine: the CuPy conformance tests and one timing.

    sh tools/gpu_check.sh                # or: python tools/gpu_check.py

Installs nothing.  Needs CuPy and a CUDA device (and torch is not needed):

1. runs exactly the CuPy cases of the conformance suite (``tests/backends``,
   ``-k cupy``: the primitives, models, loops, forward mode, refusals and the
   corpus, each compared with NumPy in float64); without CuPy or a GPU they
   are skipped and this says so;
2. times the gradient of a two-layer MLP (784-256-10, softmax cross-entropy,
   float64) on NumPy and on CuPy, interleaved, and prints the medians and
   their ratio.

It exits non-zero when a test fails or CuPy / a GPU is missing.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's s2sad


def _cupy():
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - import error or no CUDA device
        return None, f"CuPy not usable here ({type(exc).__name__}: {exc})"
    if count < 1:
        return None, "CuPy imports, but no CUDA device is visible"
    return cupy, f"CuPy {cupy.__version__}, {count} CUDA device(s)"


def conformance() -> int:
    """The CuPy cases of tests/backends (pytest's exit status)."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-rs",
        "tests/backends",
        "-k",
        "cupy",
    ]
    print("$", " ".join(command), flush=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.call(command, cwd=ROOT, env=env)


def loss(params, X, y):
    from s2sad.runtime import nn

    h = np.tanh(X @ params["W1"] + params["b1"])
    return nn.softmax_cross_entropy(h @ params["W2"] + params["b2"], y)


def timing(cupy, rows: int = 4096, repeat: int = 11) -> None:
    """Median seconds of one MLP gradient, NumPy against CuPy (interleaved)."""
    import s2sad

    rng = np.random.default_rng(0)
    shapes = {"W1": (784, 256), "b1": (256,), "W2": (256, 10), "b2": (10,)}
    params = {k: rng.normal(size=s) * 0.05 for k, s in shapes.items()}
    X, y = rng.normal(size=(rows, 784)), rng.integers(0, 10, rows)
    gpu_params = {k: cupy.asarray(v) for k, v in params.items()}
    gX, gy = cupy.asarray(X), cupy.asarray(y)
    f = s2sad.grad(loss)
    want, got = f(params, X, y), f(gpu_params, gX, gy)  # compile, warm up
    for k in want:
        np.testing.assert_allclose(cupy.asnumpy(got[k]), want[k], rtol=1e-9)
    times: dict = {"numpy": [], "cupy": []}
    for _ in range(repeat):
        start = time.perf_counter()
        f(params, X, y)
        times["numpy"].append(time.perf_counter() - start)
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        f(gpu_params, gX, gy)
        cupy.cuda.Device().synchronize()
        times["cupy"].append(time.perf_counter() - start)
    numpy_s, cupy_s = (statistics.median(times[k]) for k in ("numpy", "cupy"))
    print(f"MLP 784-256-10 gradient, {rows} rows, float64, median of {repeat}:")
    print(f"  numpy {numpy_s * 1e3:9.2f} ms")
    print(f"  cupy  {cupy_s * 1e3:9.2f} ms   (numpy / cupy = {numpy_s / cupy_s:.2f})")


def main() -> int:
    cupy, about = _cupy()
    print(about, flush=True)
    status = conformance()
    if cupy is None:
        print("no timing: CuPy or a GPU is missing (the CuPy tests were skipped)")
        return 2
    timing(cupy)
    return status


if __name__ == "__main__":
    sys.exit(main())
