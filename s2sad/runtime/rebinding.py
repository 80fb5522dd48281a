"""Emitted code run with other globals: the mechanism the foreign-array paths share.

:mod:`~s2sad.runtime.backend_dask` (Dask data) and :mod:`~s2sad.runtime.arrayapi`
(torch, CuPy, Array API) run the very code the compiler emitted for NumPy, with
each global of its module replaced by their ``translate(value)``: ``np`` by
their stand-in, rules by their versions.  The functions of that module are
rebound together (one new globals dict), so a call from one emitted function to
another stays on the same path.  This module imports nothing of the runtime, so
both can use it without an import cycle.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable
from typing import Any


def rebound(
    fn: types.FunctionType,
    translate: Callable[[Any], Any],
    cache: weakref.WeakKeyDictionary,
) -> types.FunctionType:
    """``fn`` with its module's globals translated (kept in ``cache``, keyed by
    ``fn``); the module's other functions are rebound with it."""
    done = cache.get(fn)
    if done is not None:
        return done
    old = fn.__globals__
    new: dict = {}
    for name, value in old.items():
        if isinstance(value, types.FunctionType) and value.__globals__ is old:
            new[name] = with_globals(value, new)
        else:
            new[name] = translate(value)
    done = new.get(fn.__name__)
    if done is None or getattr(done, "__code__", None) is not fn.__code__:
        done = with_globals(fn, new)
    cache[fn] = done
    return done


def with_globals(fn: types.FunctionType, globs: dict) -> types.FunctionType:
    """``fn`` (same code, defaults and closure) reading ``globs`` as its globals."""
    new = types.FunctionType(
        fn.__code__, globs, fn.__name__, fn.__defaults__, fn.__closure__
    )
    new.__kwdefaults__ = fn.__kwdefaults__
    return new
