"""Every runtime module imports first in a fresh process.

Before: ``import s2sad.runtime.steps`` failed with a circular ImportError
(steps -> reductions -> a tangent declaration looked its rule up, which loaded
every rule module -> stepreads -> steps, half initialised), so an emitted
module whose first runtime import was ``steps`` (and ``pytest
tests/runtime/test_steps.py`` on its own) failed."""

import subprocess
import sys
from pathlib import Path

import pytest

import s2sad.runtime

RUNTIME = Path(s2sad.runtime.__file__).parent
MODULES = sorted(p.stem for p in RUNTIME.glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", ["steps", "stepreads", "fused", "reductions"])
def test_a_runtime_module_imported_first(name):
    code = (
        f"import s2sad.runtime.{name}\n"
        "import numpy as np\n"
        "from s2sad.runtime import registry\n"
        "assert registry.lookup(np.tanh) is not None\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]


def test_every_runtime_module_imports_first_in_one_run():
    code = "\n".join(
        f"subprocess.run([sys.executable, '-c', 'import s2sad.runtime.{m}'], check=True)"
        for m in MODULES
    )
    run = subprocess.run(
        [sys.executable, "-c", "import subprocess, sys\n" + code],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
