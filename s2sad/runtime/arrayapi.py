"""Gradients over torch, CuPy and Array API arrays: the emitted code, in their namespace.

A call of ``s2sad.grad`` whose arguments hold arrays of one of
:data:`NAMESPACE_LIBRARIES` (parameters and data in that one library, on one
device) takes the plain path (no workspace) and runs *the same emitted code*
as a NumPy call, with other globals (:func:`run`, :func:`translate`):

* ``np`` (any name bound to NumPy) is :data:`~s2sad.runtime.arrayapi_numpy.NP`,
  which maps the NumPy functions of the verified subset onto the arrays'
  namespace (``array_api_compat.array_namespace``): new arrays are created on
  the arguments' device, float64 by default as in NumPy;
* each runtime rule is its Array API version, from
  :mod:`~s2sad.runtime.arrayapi_rules` and :mod:`~s2sad.runtime.arrayapi_joining`
  (the allow-list, ``RULES``), which build cotangents without writing into any
  array (torch and Array API arrays may be immutable);
* every other NumPy function and rule raises a ForeignArrayError naming it
  (and, through ``s2sad.locate``, the user's line): not verified means refused.

The NumPy path never reaches this module.
"""

from __future__ import annotations

import types
import weakref
from typing import Any

import numpy as np

from s2sad.errors import ForeignArrayError
from s2sad.runtime import arrayapi_joining, rebinding
from s2sad.runtime.arrayapi_numpy import (
    FUNCTIONS,
    NP,
    Context,
    Refused,
    enter,
    leave,
    refuse,
)

#: array libraries whose arrays run the emitted code in their own namespace
NAMESPACE_LIBRARIES = ("torch", "array_api_strict", "cupy")


# ---------------------------------------------------------------- the call


def library(x: Any) -> str | None:
    """The namespace library of an array (``"torch"``...), None for others."""
    t = type(x)
    root = t.__module__.partition(".")[0]
    if root in NAMESPACE_LIBRARIES and hasattr(x, "shape") and hasattr(x, "dtype"):
        return root
    return None


def library_of(values: list) -> str | None:
    """The namespace library of the first torch, CuPy or Array API array in
    ``values`` (None when there is none; mixed libraries are refused by run)."""
    arrays: list = []
    _arrays_in(values, arrays)
    for a in arrays:
        lib = library(a)
        if lib is not None:
            return lib
    return None


def run(fn: Any, values: list, seed: list, lib: str) -> tuple:
    """``fn(*values, *seed)`` with ``fn``'s globals rebound to ``lib``'s namespace."""
    import array_api_compat

    arrays: list = []
    _arrays_in(values, arrays)
    _check_one_library(arrays, lib)
    xp = array_api_compat.array_namespace(*arrays)
    device = array_api_compat.device(arrays[0])
    token = enter(Context(xp, device, lib))
    # a NumPy function passed as an argument (activation=np.tanh): the verified one
    values = [translate(v) if _numpy_function(v) else v for v in values]
    try:
        return rebound(fn)(*values, *seed)
    except (TypeError, IndexError, AttributeError, RuntimeError, ValueError) as exc:
        if not isinstance(exc, TypeError) and not _from_library(exc):
            raise  # the user's own error
        refused = ForeignArrayError(
            f"{lib} refused an operation of the gradient code "
            f"({type(exc).__name__}: {exc}). {lib} is stricter than NumPy (the "
            "Array API has no arithmetic with booleans, no flat or list indexing, "
            "no array methods, no conversion to NumPy off the CPU); this step is "
            f"not verified on {lib}. Write it with verified functions (e.g. "
            "np.sum(x) for x.sum()), or pass NumPy arrays."
        )
        raise refused.with_traceback(exc.__traceback__) from None
    finally:
        leave(token)


def _from_library(exc: BaseException) -> bool:
    """Whether an array library raised ``exc`` (its code, or a missing method)."""
    if isinstance(exc, AttributeError) and library(getattr(exc, "obj", None)):
        return True
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    module = tb.tb_frame.f_globals.get("__name__", "")
    return module.partition(".")[0] in (*NAMESPACE_LIBRARIES, "array_api_compat")


def _numpy_function(value: Any) -> bool:
    module = getattr(value, "__module__", None) or ""
    return (
        callable(value) and module.startswith("numpy") and not hasattr(value, "shape")
    )


def _arrays_in(value: Any, found: list) -> None:
    t = type(value)
    if t is float or t is int or t is bool or value is None or t is str:
        return
    if t is list or t is tuple or t is dict:
        for v in value.values() if t is dict else value:
            _arrays_in(v, found)
        return
    from s2sad.runtime import pytrees

    if pytrees.is_object_node(value):
        for _, v in pytrees.children(value):
            _arrays_in(v, found)
        return
    if (
        hasattr(value, "shape")
        and hasattr(value, "dtype")
        or isinstance(value, np.generic)
    ):
        found.append(value)


def _check_one_library(arrays: list, lib: str) -> None:
    """Refuse arrays of two libraries, or of one library on two devices."""
    import array_api_compat

    devices = []
    for a in arrays:
        other = library(a)
        if other != lib:
            name = f"{type(a).__module__}.{type(a).__qualname__}"
            raise ForeignArrayError(
                f"a gradient call mixes {lib} arrays with a {name}: s2sad runs a "
                "call in one array library, on one device. Convert every argument "
                f"to {lib} (on the same device), or every one to NumPy; pass "
                "constants as Python numbers."
            )
        dev = array_api_compat.device(a)
        if dev not in devices:
            devices.append(dev)
    if len(devices) > 1:
        raise ForeignArrayError(
            f"a gradient call has {lib} arrays on devices "
            f"{', '.join(map(str, devices))}: s2sad runs a call on one device. "
            "Move every argument to the same device first."
        )


def tangent_like(t: Any, x: Any) -> Any:
    """A jvp's tangent for the namespace array ``x``: ``t`` as x's float dtype,
    or zeros like ``x`` for None (same library and device: checked by :func:`run`)."""
    import array_api_compat

    xp = array_api_compat.array_namespace(x)
    if t is None:
        return xp.zeros_like(x)
    return t if t.dtype == x.dtype else xp.astype(t, x.dtype)


# ---------------------------------------------------------------- rebinding globals

#: emitted function -> the same code with this module's globals
_REBOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def rebound(fn: types.FunctionType) -> types.FunctionType:
    """``fn`` (emitted code) with its globals translated by :func:`translate`;
    the module's other functions are rebound with it (one new globals dict)."""
    return rebinding.rebound(fn, translate, _REBOUND)


#: modules and refused functions -> their one stand-in (globals checks compare
#: ``mod.name is not name``: both sides must give the same object)
_STAND_INS: dict = {}


def translate(value: Any) -> Any:
    """What a global of emitted code is on the namespace path."""
    if value is np:
        return NP
    if isinstance(value, types.ModuleType):
        if value.__name__ == "math" or value.__name__.startswith("s2sad.errors"):
            return value
        view = _STAND_INS.get(value)
        if view is None:
            if value.__name__.startswith("numpy"):  # numpy.linalg...: not verified
                view = Refused(value.__name__)
            else:
                view = _ModuleView(value)
            view = _STAND_INS.setdefault(value, view)
        return view
    if type(value) is dict and "__name__" in value:  # a module's globals (checks)
        view = _STAND_INS.get(id(value))
        if view is None:
            view = _STAND_INS.setdefault(id(value), _GlobalsView(value))
        return view
    if isinstance(value, types.FunctionType) and "_s2sad_lines" in value.__globals__:
        return rebound(value)  # another emitted module (a callee's gradient)
    module = getattr(value, "__module__", None) or ""
    if callable(value) and module.startswith("numpy"):
        name = getattr(value, "__name__", "")
        return FUNCTIONS.get(name) or _refused_function(f"numpy.{name}")
    if callable(value) and module.startswith("s2sad.runtime."):
        return arrayapi_joining.rule_for(value, _qualified(value)) or _refused_function(
            _qualified(value)
        )
    return value


def _refused_function(name: str) -> Any:
    return _STAND_INS.setdefault(name, _RefusedFunction(name))


def _qualified(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or ""
    return f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"


class _ModuleView:
    """A module seen from the namespace path: its attributes translated (the
    emitted globals check ``mod.np is not np`` compares the same :data:`NP`)."""

    def __init__(self, module: types.ModuleType):
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return translate(getattr(self._module, name))

    def __repr__(self) -> str:
        return f"<{self._module.__name__} on the Array API path>"


class _GlobalsView:
    """A module's globals dict seen from the namespace path (entries translated)."""

    def __init__(self, globs: dict):
        self._globals = globs

    def __getitem__(self, name: str) -> Any:
        return translate(self._globals[name])

    def get(self, name: str, default: Any = None) -> Any:
        return translate(self._globals[name]) if name in self._globals else default

    def __contains__(self, name: str) -> bool:
        return name in self._globals


class _RefusedFunction:
    """A runtime rule or NumPy function outside the verified subset."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise refuse(f"{self.name} (used by the gradient of your function)")
