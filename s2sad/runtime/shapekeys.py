"""Workspace keys: what fixes the shapes of a function's buffer sites.

A workspace (:mod:`s2sad.runtime.workspace`) holds buffers per *shape key* of
a function's arguments: array shapes and dtypes, container layouts, and the
values of ints, bools and strings (they may be sizes or flags).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class MaskArgument(Exception):
    """A boolean array among the arguments (raised inside shape_key)."""


def shape_key(values: list) -> tuple | None:
    """What fixes every site's shape: array shapes and dtypes, container layouts,
    and the values of ints, bools and strings (they may be sizes or flags).

    None when an argument holds a boolean array: indexing with it gives a shape
    that depends on its values, so such calls go without buffers.
    """
    try:
        return _items_key(values)
    except MaskArgument:
        return None


#: the key of None (as ``value_key`` gives it), for ``_items_key``'s inline test
_NONE_KEY = (type(None), None)


def _items_key(values: Any) -> tuple:
    """The keys of a list or tuple's items: float arrays (the common case) and
    None (a tape's first entries) inline, the same keys ``value_key`` gives."""
    nd = np.ndarray
    return tuple(
        [
            (
                (v.shape, v.dtype)
                if type(v) is nd and v.dtype.kind in "fc"
                else _NONE_KEY if v is None else value_key(v)
            )
            for v in values
        ]
    )


def _array_key(v: np.ndarray) -> tuple:
    dtype = v.dtype
    if dtype.kind in "biu":
        if dtype.kind == "b":
            raise MaskArgument
        if v.size <= 1:
            # may be a size or a bound; a tuple, as tolist() of shape (1,) is a list
            return (v.shape, dtype.char, tuple(v.reshape(-1).tolist()))
    return (v.shape, dtype)


def value_key(v: Any) -> Any:
    """The key of one value (see shape_key); raises MaskArgument for a boolean array."""
    t = type(v)
    if t is np.ndarray:
        return _array_key(v)
    if t is list or t is tuple:  # a tape: mostly arrays, keyed without a detour
        return (t, _items_key(v))
    if t is dict:
        nd = np.ndarray
        return (
            dict,
            tuple(
                [
                    (
                        k,
                        (
                            (x.shape, x.dtype)
                            if type(x) is nd and x.dtype.kind in "fc"
                            else value_key(x)
                        ),
                    )
                    for k, x in v.items()
                ]
            ),
        )
    if t is float or t is complex:
        return t
    if t is int or t is bool or t is str or v is None:
        return (t, v)
    if t is range:
        return (t, v.start, v.stop, v.step)
    if isinstance(v, np.generic):
        return (t, v.item()) if v.dtype.kind in "iub" else (t,)
    if t is slice:
        return (t, value_key(v.start), value_key(v.stop), value_key(v.step))
    return (t, id(v))


def value_free(v: Any) -> bool:
    """Whether ``value_key(v)`` reads no value of ``v``, only its type, shape and
    dtype: float and complex arrays, other arrays of more than one entry,
    Python and NumPy floats, None, and containers of these.  Two values of one
    type, shape and dtype then always have the same key."""
    t = type(v)
    if t is np.ndarray:
        return v.dtype.kind in "fc" or (v.dtype.kind != "b" and v.size > 1)
    if t is float or t is complex or v is None:
        return True
    if t is list or t is tuple:
        return all(map(value_free, v))
    if t is dict:
        return all(map(value_free, v.values()))
    return isinstance(v, np.generic) and v.dtype.kind in "fc"
