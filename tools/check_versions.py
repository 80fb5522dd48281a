#!/usr/bin/env python
"""Run the compiler tests at the lowest and the highest gast and black we allow.

    python tools/check_versions.py              # both ends, corpus + transforms
    python tools/check_versions.py --tests tests # the whole suite

For each end it makes a virtual environment that sees this Python's packages
(NumPy, pytest), installs the pinned gast and black into it, and runs pytest
on this checkout.  The bounds live in pyproject.toml; change them together
with ENDS below, after this script passes.  An unpinned gast is what broke
Tangent, so the upper bounds stay until a new release has been tried here.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENDS = {
    "lowest": ["gast==0.5.0", "black==23.1.0"],
    "highest": ["gast==0.7.0", "black==26.10.1"],
}


def run_end(name: str, pins: list[str], tests: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix=f"s2sad-{name}-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
            check=True,
        )
        py = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
        subprocess.run([str(py), "-m", "pip", "install", "-q", *pins], check=True)
        env = dict(
            os.environ, PYTHONPATH=str(ROOT), S2SAD_CACHE_DIR=str(Path(tmp) / "c")
        )
        print(f"== {name}: {' '.join(pins)}", flush=True)
        cmd = [str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
        return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tests", nargs="*", default=["tests/corpus", "tests/transforms"])
    p.add_argument("--end", choices=sorted(ENDS), action="append")
    args = p.parse_args()
    ends = args.end or list(ENDS)
    failed = [e for e in ends if run_end(e, ENDS[e], args.tests)]
    print("failed: " + ", ".join(failed) if failed else "passed: " + ", ".join(ends))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
