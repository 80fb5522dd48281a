"""The run-time check in front of a ``for`` the compiler reads by position.

Emitted code runs ``for x in seq`` as ``for i in range(len(seq)): x = seq[i]``.
That is what Python iterates for lists, tuples, strings, ranges and arrays, but
not for a mapping (``d[0], d[1]...`` are values, not the keys, or a KeyError),
a set, a generator or a dict view. Where the compiler cannot tell which kind of
object the loop gets (a callee's result, an item of a container), the emitted
code calls :func:`check_positional` once before the loop: a cheap type test,
and a located :class:`~s2sad.errors.UnsupportedSyntaxError` for any object whose
items by position may not be the items Python iterates.
"""

from __future__ import annotations

import linecache
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from s2sad.errors import Problem, UnsupportedSyntaxError
from s2sad.runtime.registry import nondifferentiable

__all__ = ["check_positional", "positional"]

#: iterated exactly as they are indexed (the common cases, decided by one test)
_POSITIONAL = (list, tuple, np.ndarray, str, range, bytes)


def positional(seq: Any) -> bool:
    """Whether iterating ``seq`` gives ``seq[0], seq[1], ... seq[len(seq) - 1]``:
    the built-in sequences and NumPy arrays, other registered ``Sequence`` types
    (named tuples, ``UserList``), and arrays of other libraries; never a mapping,
    a set, an iterator or an object of unknown kind that defines ``__iter__``."""
    if type(seq) in _POSITIONAL:
        return True
    if isinstance(seq, Mapping) or callable(getattr(seq, "keys", None)):
        return False  # iterates its keys (dict subclasses, pandas frames...)
    if isinstance(seq, (Sequence, np.ndarray)):
        return True
    cls = type(seq)
    if not hasattr(cls, "__getitem__") or not hasattr(cls, "__len__"):
        return False  # a set, a generator, a dict view: not readable by position
    if hasattr(seq, "__array_namespace__") or (
        hasattr(cls, "__array__") and hasattr(seq, "shape")
    ):
        return True  # an array of another library: its rows, in order
    # Python iterates an object without __iter__ through __getitem__ by position
    return not hasattr(cls, "__iter__")


def check_positional(seq: Any, filename: str, line: int, col: int) -> None:
    """Raise a refusal located at the loop's iterable (``filename:line:col``)
    unless ``seq`` iterates as it is indexed."""
    if type(seq) in _POSITIONAL or positional(seq):
        return
    kind = type(seq).__name__
    if isinstance(seq, Mapping) or callable(getattr(seq, "keys", None)):
        what = f"'for' over a mapping ({kind}) that the compiler could not see"
        hint = (
            "iterate over list(d) (its keys), d.items() or d.values(), "
            "or build the dict in this function or pass it as an argument"
        )
    else:
        what = f"'for' over a {kind}, which cannot be read by position"
        hint = "iterate over list(...) of it"
    raise UnsupportedSyntaxError(
        Problem(
            filename,
            line,
            col,
            f"unsupported construct: {what} (the loop reads items by position, "
            "seq[0], seq[1], ...)",
            hint,
            linecache.getline(filename, line),
        )
    )


nondifferentiable(check_positional)  # a check: no derivative, no tangent
