"""examples/dask_logreg.py, small: L-BFGS-B over Dask rows with s2sad.value_and_grad
and s2sad.data_parallel agrees with the NumPy fit.

It runs as a script (as a user runs it), so its loss lives in ``__main__`` and
reaches the workers by value: data_parallel ships the source with it.  It uses
the suite's LocalCluster through ``--scheduler``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dask.distributed", reason="dask is not installed (extra 'dask')")
pytest.importorskip("scipy", reason="the example minimises with SciPy")

SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "dask_logreg.py"


def test_dask_logistic_regression_example(client, tmp_path):
    out = tmp_path / "fit.json"
    command = [sys.executable, str(SCRIPT), "--rows", "3000", "--features", "5"]
    command += ["--chunks", "3", "--scheduler", client.scheduler.address]
    command += ["--json", str(out)]
    done = subprocess.run(
        command,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "coefficients agree" in done.stdout
    results = json.loads(out.read_text())
    numpy_fit = results["NumPy, one process"]
    for name in ("s2sad.value_and_grad over Dask", "s2sad.data_parallel"):
        assert results[name]["max_abs_difference"] < 1e-6, name
        assert results[name]["loss"] == pytest.approx(numpy_fit["loss"], rel=1e-10)
    assert numpy_fit["iterations"] > 2  # it did optimise
