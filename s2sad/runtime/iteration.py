"""The run-time check in front of a ``for`` the compiler reads by position.

Emitted code runs ``for x in seq`` as ``for i in range(len(seq)): x = seq[i]``.
That is what Python iterates for lists, tuples, strings, ranges and arrays, but
not for a mapping (``d[0], d[1]...`` are values, not the keys, or a KeyError),
a set, a generator or a dict view. Where the compiler cannot tell which kind of
object the loop gets (a callee's result, an item of a container), the emitted
code calls :func:`check_positional` once before the loop: a cheap type test,
and a located :class:`~s2sad.errors.UnsupportedSyntaxError` for any object whose
items by position may not be the items Python iterates.

A loop over a mapping ``d`` (``for k in d``, ``d.items()``, ``d.values()``) is
run as a loop over ``list(d.keys())`` reading ``d[k]``: what Python iterates for
``dict`` and the mappings that keep its protocol, not for a subclass that
overrides ``__iter__``, ``keys``, ``items``, ``values`` or ``__getitem__``
(:func:`plain_mapping`). Where the compiler cannot tell, :func:`check_mapping`
refuses such an object at run time.

``v *= 0.5`` rebinds ``v`` when it holds an immutable number (a NumPy scalar,
a float) and changes an array in place; where the compiler could not tell
which and only an array would give a wrong gradient (another name holds it,
front/rebinds.py), :func:`check_rebinds` refuses an array at run time.
"""

from __future__ import annotations

import linecache
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from s2sad.errors import AliasingError, Problem, UnsupportedSyntaxError
from s2sad.runtime.registry import nondifferentiable

__all__ = [
    "check_mapping",
    "check_positional",
    "check_rebinds",
    "plain_mapping",
    "plain_mapping_class",
    "positional",
]

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


#: mappings whose iteration, views and items agree with ``list(d.keys())``, ``d[k]``
_PLAIN_MAPPINGS = (dict, OrderedDict, defaultdict, Counter, MappingProxyType)

#: what a loop over a mapping reads: a subclass that overrides one is not plain
_PROTOCOL = ("__iter__", "keys", "items", "values", "__getitem__")


def plain_mapping(d: Any) -> bool:
    """Whether ``for k in d``, ``d.items()`` and ``d.values()`` iterate exactly as
    a loop over ``list(d.keys())`` reading ``d[k]``: a ``dict`` (or ``OrderedDict``)
    whose class keeps their iteration protocol (a subclass may add methods)."""
    return plain_mapping_class(type(d))


def plain_mapping_class(cls: type) -> bool:
    """:func:`plain_mapping` of the instances of ``cls``."""
    if cls in _PLAIN_MAPPINGS:
        return True
    for base in (OrderedDict, dict):
        if issubclass(cls, base):
            return all(getattr(cls, m) is getattr(base, m) for m in _PROTOCOL)
    return False


def check_mapping(d: Any, filename: str, line: int, col: int) -> None:
    """Raise a refusal located at the loop's iterable unless ``d`` is a
    :func:`plain_mapping` (the loop reads it through ``list(d.keys())``)."""
    if type(d) is dict or plain_mapping(d):
        return
    _refuse(
        filename,
        line,
        col,
        f"'for' over a {type(d).__name__} the compiler could not see, which may "
        "not iterate as a dict does",
        "iterate over list(d.items()) or pass a dict (its class must not "
        "override __iter__, keys, items, values or __getitem__)",
    )


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
    what += " (the loop reads items by position, seq[0], seq[1], ...)"
    _refuse(filename, line, col, what, hint)


def _refuse(filename: str, line: int, col: int, what: str, hint: str) -> None:
    raise UnsupportedSyntaxError(
        Problem(
            filename,
            line,
            col,
            f"unsupported construct: {what}",
            hint,
            linecache.getline(filename, line),
        )
    )


def check_rebinds(value: Any, problems: tuple) -> None:
    """Raise the located :class:`~s2sad.errors.AliasingError` of ``problems``
    (``(filename, line, col, message, hint)`` each) unless ``value`` is an
    immutable number, which an augmented assignment rebinds instead of changing."""
    if isinstance(value, (int, float, complex, np.generic)):
        return
    kind = type(value).__name__
    raise AliasingError(
        [
            Problem(
                filename,
                line,
                col,
                f"{message} (the value changed was a {kind} when it ran)",
                hint,
                linecache.getline(filename, line),
            )
            for filename, line, col, message, hint in problems
        ]
    )


nondifferentiable(check_positional)  # a check: no derivative, no tangent
nondifferentiable(check_mapping)
nondifferentiable(check_rebinds)
