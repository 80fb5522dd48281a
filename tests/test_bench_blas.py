"""bench/run.py records which OpenBLAS kernels the NumPy columns ran on."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _header(choice: str, env_core: str | None) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("OPENBLAS_CORETYPE", None)
    if env_core is not None:
        env["OPENBLAS_CORETYPE"] = env_core
    cmd = [sys.executable, str(REPO / "bench" / "run.py"), "--only", "logreg"]
    cmd += ["--columns", "handwritten", "--repeat", "1", "--target", "0.001"]
    cmd += ["--no-compile-probe", "--no-save", "--blas-core", choice]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return next(line for line in out.stdout.splitlines() if "OpenBLAS kernels" in line)


@pytest.mark.parametrize(
    "choice, env_core, expected",
    [
        ("env", "Haswell", "Haswell (OPENBLAS_CORETYPE=Haswell)"),
        ("Haswell", None, "Haswell (OPENBLAS_CORETYPE=Haswell)"),
        ("auto", "Haswell", "(chosen by OpenBLAS)"),
    ],
)
def test_blas_core_is_applied_and_reported(choice, env_core, expected):
    header = _header(choice, env_core)
    if "unknown" in header:
        pytest.skip("this NumPy's BLAS does not report its kernels")
    assert expected in header
