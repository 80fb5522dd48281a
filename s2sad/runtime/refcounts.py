"""In-place updates of cotangents nobody else can see.

``g_x = accumulate(g_x, c)`` may add into g_x's own buffer when no other name,
view or container refers to it: then the update is invisible, exactly like the
functional ``g_x + c``, and saves an allocation (and its page faults).  Whether
anything else refers to the array is read from its reference count, compared
with the count of a calibration call of the same shape.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def _count_refs(a: Any, *_: Any) -> int:
    return sys.getrefcount(a)


def _calibrate() -> int:
    local = np.zeros(1)
    return _count_refs(local)


def _refcounts_are_reliable() -> bool:
    gil = getattr(sys, "_is_gil_enabled", None)
    return gil is None or gil()  # free-threaded builds count references differently


EXCLUSIVE_REFS = _calibrate() if _refcounts_are_reliable() else -1


def exclusive(a: np.ndarray, extra: int = 0) -> bool:
    """True when only the caller's one variable refers to ``a`` (called from a helper
    whose first parameter is ``a``, one level below generated code), besides
    ``extra`` references the caller knows of (a workspace's own)."""
    return (
        sys.getrefcount(a) - 1 - extra <= EXCLUSIVE_REFS
        and a.base is None
        and a.flags.writeable
    )


def fits_in_place(a: np.ndarray, b: Any) -> bool:
    """``a += b`` keeps a's shape and dtype."""
    if type(b) is np.ndarray and b.shape == a.shape and b.dtype == a.dtype:
        return True
    if np.result_type(a, b) != a.dtype:
        return False
    return (
        np.shape(b) == a.shape or np.broadcast_shapes(np.shape(b), a.shape) == a.shape
    )
