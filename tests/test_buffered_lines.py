"""Errors raised in the buffered form of a gradient name the user's line.

The buffered module (arrays of 64 KB and up, or the workspace forced) ends with
``f_value_and_grad.buffer_results = {...}``; the line table counted that
statement as a function with no lines, matched nothing, and was left out, so
an error raised there (a rule's NotImplementedError, a shape mismatch) had no
note naming the user's file and line.
"""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import workspace


def std_where(x):
    return np.var(x, where=x > -0.5) + np.std(x, axis=0, where=x < 1.0).sum()


@pytest.mark.parametrize("forced", [True, False])
def test_buffered_error_is_located(forced, monkeypatch):
    if forced:
        monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
        monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
        x = np.random.default_rng(0).standard_normal((3, 4))
    else:  # 80 KB: buffered by default
        x = np.random.default_rng(0).standard_normal((100, 100))
    g = s2sad.grad(std_where)
    for _ in range(2):
        with pytest.raises(NotImplementedError, match="where=") as info:
            g(x)
        notes = "".join(getattr(info.value, "__notes__", []))
        assert "test_buffered_lines.py:18" in notes, notes
    assert "ws" in g.source  # the buffered form was the one that ran
