"""tools/gpu_check.py (run by the lead on a GPU machine): without CuPy or a GPU
the CuPy conformance cases skip saying why, and the tool says so too."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.backends.libraries import MAKERS

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location(
        "gpu_check", ROOT / "tools" / "gpu_check.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cupy_cases_skip_with_a_reason_or_run():
    tool = _tool()
    cupy, about = tool._cupy()
    if cupy is not None:
        assert MAKERS["cupy"]().name == "cupy"  # a GPU here: the cases run
        return
    assert "CuPy" in about
    with pytest.raises(pytest.skip.Exception, match="CuPy is"):
        MAKERS["cupy"]()


def test_the_tool_runs_exactly_the_cupy_cases(monkeypatch):
    tool = _tool()
    seen = []
    monkeypatch.setattr(
        tool.subprocess, "call", lambda cmd, **kw: seen.append(cmd) or 0
    )
    assert tool.conformance() == 0
    assert seen[0][-3:] == ["tests/backends", "-k", "cupy"]
