"""Attribute assignment on objects: ``self.x = v`` inside differentiated code.

Normalize turns ``obj.attr = value`` into ``store_attribute(obj, "attr", value)``,
which does what Python does: the object holds the value afterwards.  The write
itself contributes nothing to any gradient: a function that reads the
attribute back reads the local it was written from
(s2sad/transforms/front/attributes.py), and a read the compiler cannot turn
into one is refused (s2sad/transforms/front/objects.py).

An array is stored as a copy: emitted gradient code may compute an
intermediate into a preallocated buffer that a later call writes over, and
the object must keep the value it was given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from s2sad.runtime.registry import nondifferentiable
from s2sad.runtime.tangents import constant


def store_attribute(obj: Any, attr: str, value: Any) -> None:
    """``setattr(obj, attr, value)``, arrays copied (see the module docstring)."""
    if isinstance(value, np.ndarray):
        value = value.copy()
    setattr(obj, attr, value)


nondifferentiable(store_attribute)
constant(store_attribute)


def read_attribute(obj: Any, attr: str, copy: bool = False) -> Any:
    """``getattr(obj, attr)``: the value an attribute has when a function starts
    that then keeps it in a local (s2sad/transforms/front/attributes.py); a
    copy when the function writes items into it (the reverse sweep puts the
    old items back into the local, which must not be the object's array)."""
    value = getattr(obj, attr)
    return value.copy() if copy and isinstance(value, np.ndarray) else value


def store_items(obj: Any, attr: str, value: Any) -> None:
    """``obj.attr`` after items were written into it (``self.states[:, t] = h``,
    ``self.acc += x``): Python changed the array the object holds in place, so
    whoever else holds that array sees the change; other values are stored."""
    cur = getattr(obj, attr, None)
    if (
        isinstance(cur, np.ndarray)
        and isinstance(value, np.ndarray)
        and cur is not value
        and cur.shape == value.shape
        and cur.dtype == value.dtype
        and cur.flags.writeable
    ):
        np.copyto(cur, value)
    else:
        store_attribute(obj, attr, value)


nondifferentiable(store_items)
constant(store_items)


nondifferentiable(read_attribute)
constant(read_attribute)


def write_argument(arg: Any, value: Any) -> None:
    """The caller's array ``arg`` gets ``value``: the differentiated function changed
    its argument in place (``x[0] = ...``, ``x *= 2``) and s2sad ran it on a copy
    taken at entry (s2sad/transforms/front/inplace.py).  The write carries no
    gradient: the gradient is with respect to the value on entry."""
    if isinstance(arg, np.ndarray) and value is not arg:
        np.copyto(arg, value)


nondifferentiable(write_argument)
constant(write_argument)
