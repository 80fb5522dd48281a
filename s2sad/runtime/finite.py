"""``debug_nans``: the check emitted after each backward block.

Emitted code imports :func:`check_finite` from ``s2sad.runtime.support`` with
the other helpers; it lives here to keep that module small.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def check_finite(
    g: Any, filename: str, line: int, source_line: str, operand: str
) -> None:
    """``debug_nans``: raise where a cotangent first holds a NaN or an infinity.

    Emitted after each backward block (``s2sad.grad(f, debug_nans=True)``), with
    the user's file, line and source line of the statement the block reverses,
    and the operand whose cotangent it is.  ``None`` (no cotangent) passes.
    """
    bad = _first_non_finite(g)
    if bad is None:
        return
    from s2sad.errors import NonFiniteCotangentError

    raise NonFiniteCotangentError(filename, line, source_line, operand, bad)


def _first_non_finite(g: Any) -> str | None:
    """A description of g's first non-finite entry, or None when all are finite."""
    if g is None or isinstance(g, (bool, int, str)):
        return None
    if isinstance(g, dict):
        items = g.items()
    elif isinstance(g, (list, tuple)):
        items = enumerate(g)
    else:
        a = np.asarray(g)
        if a.dtype.kind not in "fc" or np.isfinite(a).all():
            return None
        bad = ~np.isfinite(a)
        where = np.unravel_index(int(np.argmax(bad)), a.shape) if a.ndim else ()
        value = a[where]
        at = f" at index {tuple(int(i) for i in where)}" if a.ndim else ""
        return f"{value}{at} ({int(bad.sum())} of {a.size} entries non-finite)"
    for k, v in items:
        bad = _first_non_finite(v)
        if bad is not None:
            return f"{bad} in entry [{k!r}]"
    return None
