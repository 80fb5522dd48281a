"""docs/sharp-bits.md: a function with no source (a plain ``python`` prompt,
``python -c``) gets a clear ``s2sad.errors`` message, the one the page shows.

Run as a user runs it, in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "sharp-bits.md").read_text(encoding="utf-8")
CODE = """\
import numpy as np, s2sad
def f(x): return np.sum(x * x)
s2sad.grad(f)(np.ones(3))
"""
HINT = "hint: s2sad needs functions defined in a .py file: put it in one and import it"


def python(args: list[str], tmp_path: Path, stdin: str | None = None):
    env = dict(os.environ, S2SAD_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "how, why",
    [
        ("-c", "(defined at <string>:2): code run by `python -c` or exec() keeps"),
        ("stdin", "(defined at <stdin>:1): a plain `python` prompt keeps no source"),
    ],
)
def test_no_source_is_a_clear_s2sad_error(tmp_path, how, why):
    if how == "-c":
        done = python(["-c", CODE], tmp_path)
    else:  # what a plain prompt does: code read from stdin
        prompt = CODE.replace("\ns2sad", "\n\ns2sad")  # a blank line ends the def
        done = python(["-i"], tmp_path, stdin=prompt)
    err = done.stderr
    message = f"s2sad.errors.SourceUnavailableError: cannot read the source of f {why}"
    assert message in err and HINT in err
    assert "Traceback" in err and "OSError" not in err  # no chained inspect error
    if how == "-c":
        assert done.returncode == 1


def test_the_page_shows_the_message_users_get(tmp_path):
    err = python(["-c", "\n" + CODE], tmp_path).stderr
    last = err.strip().splitlines()[-2:]
    assert last[0].startswith("s2sad.errors.SourceUnavailableError: ")
    for line in last:
        assert line in PAGE, f"docs/sharp-bits.md does not show: {line}"


def test_readme_points_at_the_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Sharp bits", 1)[1].split("\n## ", 1)[0]
    assert "docs/sharp-bits.md" in section and "python -c" in section
    for topic in ("python -c", "Globals and closures", "At kinks", "NaN", "In place"):
        assert topic in PAGE
