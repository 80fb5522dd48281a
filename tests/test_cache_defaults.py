"""A module whose functions have non-literal defaults (``nonlinearity=np.tanh``,
``y=Y_OBSERVED``) is loaded from the disk cache by the next process, not
compiled again: the binding of a callee's default object says where another
process finds it (``["default", module, qualname, parameter]``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

MODEL = """\
import numpy as np

Y_OBSERVED = np.array([0.5, -1.0, 2.0])


def acq(x, y=Y_OBSERVED):
    return np.sum((x - y) ** 2)


def predict(params, x, nonlinearity=np.tanh):
    return nonlinearity(x @ params)


def inner(W, x):
    return np.sum(predict(W, x) ** 2) + acq(x[0])  # defaults read in a callee


def loss(W, x):
    return inner(W, x) + acq(W[:, 0])
"""

WORKER = """\
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import s2sad
from defaults_model import loss
W = np.linspace(-1.0, 1.0, 6).reshape(3, 2)
x = np.linspace(0.5, 1.5, 12).reshape(4, 3)
g = s2sad.grad(loss, argnums=(0, 1))(W, x)
_, t = s2sad.jvp(loss, (W, x), (np.ones_like(W), np.ones_like(x)))
print(" ".join(repr(float(v)) for v in [*g[0].ravel(), *g[1].ravel(), t]))
"""


def _run(tmp_path: Path, cache: Path) -> tuple[list[float], str]:
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        S2SAD_CACHE_DIR=str(cache),
        S2SAD_LOG_COMPILES="1",
        OPENBLAS_NUM_THREADS="1",
    )
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(tmp_path)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [float(v) for v in done.stdout.split()], done.stderr


def test_a_module_with_non_literal_defaults_loads_from_the_cache(tmp_path):
    (tmp_path / "defaults_model.py").write_text(MODEL)
    cache = tmp_path / "cache"
    first, log1 = _run(tmp_path, cache)
    assert "compiled defaults_model.loss" in log1
    second, log2 = _run(tmp_path, cache)
    assert "compiling" not in log2, log2
    assert log2.count("loaded defaults_model.loss") == 2  # grad and jvp
    np.testing.assert_array_equal(first, second)
    # and the values are the gradient's: central differences in this process
    sys.path.insert(0, str(tmp_path))
    try:
        import defaults_model as m
    finally:
        sys.path.remove(str(tmp_path))
    W = np.linspace(-1.0, 1.0, 6).reshape(3, 2)
    x = np.linspace(0.5, 1.5, 12).reshape(4, 3)
    want = []
    for arr, other, first_arg in ((W, x, True), (x, W, False)):
        for j in np.ndindex(arr.shape):
            hi, lo = arr.copy(), arr.copy()
            hi[j] += 1e-6
            lo[j] -= 1e-6
            f_hi = m.loss(hi, other) if first_arg else m.loss(other, hi)
            f_lo = m.loss(lo, other) if first_arg else m.loss(other, lo)
            want.append((f_hi - f_lo) / 2e-6)
    np.testing.assert_allclose(second[:-1], want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(second[-1], sum(want), rtol=1e-6, atol=1e-7)
