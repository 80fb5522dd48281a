"""Gradients over torch, CuPy and Array API arrays: the emitted code, run in their namespace.

A call of ``s2sad.grad`` whose arguments hold arrays of one of
:data:`NAMESPACE_LIBRARIES` (parameters and data in that one library, on one
device) takes the plain path (no workspace) and runs *the same emitted code*
as a NumPy call, with other globals (:func:`run`):

* ``np`` (any name bound to NumPy) is :data:`NP`, an object that maps the
  NumPy functions of the verified subset (:data:`FUNCTIONS`) onto the array's
  namespace (``array_api_compat.array_namespace``): new arrays are created on
  the arguments' device, float64 by default as in NumPy;
* each runtime rule is its Array API version from
  :mod:`s2sad.runtime.arrayapi_rules`, which builds cotangents without writing
  into any array (torch and Array API arrays may be immutable);
* every other NumPy function and rule raises a ForeignArrayError naming it
  (and, through ``s2sad.locate``, the user's line): not verified means refused.

The NumPy path never reaches this module.
"""

from __future__ import annotations

import contextvars
import math
import types
import weakref
from typing import Any, NamedTuple

import numpy as np

from s2sad.errors import ForeignArrayError

#: array libraries whose arrays run the emitted code in their own namespace
NAMESPACE_LIBRARIES = ("torch", "array_api_strict", "cupy")


class Context(NamedTuple):
    """The namespace of the running foreign call."""

    xp: Any
    device: Any
    library: str


_CURRENT: contextvars.ContextVar[Context | None] = contextvars.ContextVar(
    "s2sad_namespace", default=None
)


def current() -> Context:
    """The running call's namespace (only inside :func:`run`)."""
    ctx = _CURRENT.get()
    if ctx is None:  # a rebound function called outside run: never silently NumPy
        raise ForeignArrayError(
            "s2sad's Array API gradient code ran outside s2sad.grad's call"
        )
    return ctx


def refuse(what: str, hint: str = "") -> ForeignArrayError:
    """The error for ``what`` outside the verified subset (the caller raises it)."""
    ctx = _CURRENT.get()
    lib = ctx.library if ctx is not None else "this library"
    return ForeignArrayError(
        f"{what} is not verified on {lib} arrays: s2sad runs gradients over "
        f"{lib} for the functions its tests check against NumPy (README, "
        "'Beyond one machine') and refuses the rest rather than risk a silent "
        f"difference. {hint or 'Write this step with verified functions, or pass NumPy arrays (np.asarray(x), x.numpy() for torch) for this gradient.'}"
    )


# ---------------------------------------------------------------- the call


def library(x: Any) -> str | None:
    """The namespace library of an array (``"torch"``...), None for others."""
    t = type(x)
    root = t.__module__.partition(".")[0]
    if root in NAMESPACE_LIBRARIES and hasattr(x, "shape") and hasattr(x, "dtype"):
        return root
    return None


def run(fn: Any, values: list, seed: list, lib: str) -> tuple:
    """``fn(*values, *seed)`` with ``fn``'s globals rebound to ``lib``'s namespace."""
    import array_api_compat

    arrays: list = []
    _arrays_in(values, arrays)
    _check_one_library(arrays, lib)
    xp = array_api_compat.array_namespace(*arrays)
    device = array_api_compat.device(arrays[0])
    token = _CURRENT.set(Context(xp, device, lib))
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
        _CURRENT.reset(token)


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


# ---------------------------------------------------------------- rebinding globals

#: emitted function -> the same code with this module's globals
_REBOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def rebound(fn: types.FunctionType) -> types.FunctionType:
    """``fn`` (emitted code) with its globals translated by :func:`translate`;
    the module's other functions are rebound with it (one new globals dict)."""
    done = _REBOUND.get(fn)
    if done is not None:
        return done
    old = fn.__globals__
    new: dict = {}
    for name, value in old.items():
        if isinstance(value, types.FunctionType) and value.__globals__ is old:
            new[name] = _with_globals(value, new)
        else:
            new[name] = translate(value)
    done = new[fn.__name__] if new.get(fn.__name__) is not None else None
    if done is None or done.__code__ is not fn.__code__:
        done = _with_globals(fn, new)
    _REBOUND[fn] = done
    return done


def _with_globals(fn: types.FunctionType, globs: dict) -> types.FunctionType:
    new = types.FunctionType(
        fn.__code__, globs, fn.__name__, fn.__defaults__, fn.__closure__
    )
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


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
                view = _Refused(value.__name__)
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
        from s2sad.runtime import arrayapi_rules

        name = _qualified(value)
        return arrayapi_rules.RULES.get(name) or _refused_function(name)
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


class _Refused:
    """A NumPy submodule (``np.linalg``...): every attribute refused."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, name: str) -> Any:
        raise refuse(f"{self._name}.{name}")


class _RefusedFunction:
    """A runtime rule or NumPy function outside the verified subset."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise refuse(f"{self.name} (used by the gradient of your function)")


# ---------------------------------------------------------------- NumPy's names


def scalar(x: Any, like: Any = None) -> Any:
    """``x`` as an array of the call's library: Python numbers become 0-d arrays
    of ``like``'s dtype (float64 for floats, as in NumPy), on the call's device."""
    if hasattr(x, "shape") and not isinstance(x, np.generic):
        return x
    ctx = current()
    if isinstance(x, np.ndarray):
        raise refuse("a NumPy array inside the gradient code")
    xp = ctx.xp
    if like is not None and hasattr(like, "dtype"):
        dtype = like.dtype
    elif isinstance(x, (bool, np.bool_)):
        dtype = xp.bool
    elif isinstance(x, (int, np.integer)):
        dtype = xp.int64
    else:
        dtype = xp.float64
    return xp.asarray(x, dtype=dtype, device=ctx.device)


def _pair(x: Any, y: Any) -> tuple:
    if not hasattr(x, "shape"):
        x = scalar(x, y if hasattr(y, "dtype") else None)
    if not hasattr(y, "shape"):
        y = scalar(y, x)
    return x, y


def _unary(name: str, xp_name: str | None = None) -> Any:
    def fn(x: Any, /, **kwargs: Any) -> Any:
        _no_kwargs(name, kwargs)
        return getattr(current().xp, xp_name or name)(scalar(x))

    fn.__name__ = name
    return fn


def _binary(name: str, xp_name: str | None = None) -> Any:
    def fn(x: Any, y: Any, /, **kwargs: Any) -> Any:
        _no_kwargs(name, kwargs)
        return getattr(current().xp, xp_name or name)(*_pair(x, y))

    fn.__name__ = name
    return fn


def _no_kwargs(name: str, kwargs: dict, allowed: tuple = ()) -> None:
    extra = [k for k, v in kwargs.items() if k not in allowed and v is not None]
    if extra:
        raise refuse(f"numpy.{name} with {', '.join(map(repr, extra))}")


def _reduction(name: str, xp_name: str | None = None) -> Any:
    def fn(x: Any, axis: Any = None, keepdims: bool = False, **kwargs: Any) -> Any:
        _no_kwargs(name, kwargs)
        xp = current().xp
        if isinstance(axis, list):
            axis = tuple(axis)
        return getattr(xp, xp_name or name)(scalar(x), axis=axis, keepdims=keepdims)

    fn.__name__ = name
    return fn


def where(condition: Any, x: Any, y: Any, /) -> Any:
    x, y = _pair(x, y)
    return current().xp.where(scalar(condition), x, y)


def transpose(a: Any, axes: Any = None) -> Any:
    axes = tuple(range(a.ndim))[::-1] if axes is None else tuple(axes)
    return current().xp.permute_dims(a, axes)


def reshape(a: Any, shape: Any, **kwargs: Any) -> Any:
    _no_kwargs("reshape", {k: v for k, v in kwargs.items() if v != "C"})
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return current().xp.reshape(a, shape)


def concatenate(arrays: Any, axis: int = 0, **kwargs: Any) -> Any:
    _no_kwargs("concatenate", kwargs)
    if axis is None:
        raise refuse("numpy.concatenate with axis=None")
    return current().xp.concat(list(arrays), axis=axis)


def stack(arrays: Any, axis: int = 0, **kwargs: Any) -> Any:
    _no_kwargs("stack", kwargs)
    return current().xp.stack(list(arrays), axis=axis)


def expand_dims(a: Any, axis: Any) -> Any:
    xp = current().xp
    for ax in sorted(axis if isinstance(axis, tuple) else (axis,)):
        a = xp.expand_dims(a, axis=ax)
    return a


def _creation(name: str) -> Any:
    def fn(shape: Any, dtype: Any = None, **kwargs: Any) -> Any:
        _no_kwargs(name, kwargs)
        ctx = current()
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return getattr(ctx.xp, name)(
            shape, dtype=_dtype(dtype) or ctx.xp.float64, device=ctx.device
        )

    fn.__name__ = name
    return fn


def _like(name: str) -> Any:
    def fn(a: Any, dtype: Any = None, **kwargs: Any) -> Any:
        _no_kwargs(name, kwargs)
        return getattr(current().xp, name)(a, dtype=_dtype(dtype))

    fn.__name__ = name
    return fn


def _dtype(dtype: Any) -> Any:
    """NumPy's dtype names (``np.float64``, ``float``) as the library's dtypes."""
    if dtype is None:
        return None
    xp = current().xp
    if dtype is float:
        return xp.float64
    name = getattr(dtype, "__name__", None) or str(dtype)
    name = name.rpartition(".")[2]
    if name in _DTYPES:
        return getattr(xp, name)
    return dtype  # already the library's dtype


_DTYPES = ("float64", "float32", "int64", "int32", "bool")


def asarray(a: Any, dtype: Any = None) -> Any:
    if hasattr(a, "shape") and not isinstance(a, np.ndarray):
        return a if dtype is None else current().xp.astype(a, _dtype(dtype))
    ctx = current()
    if dtype is None and isinstance(a, (float, list, tuple)):
        dtype = ctx.xp.float64 if _has_float(a) else None
    return ctx.xp.asarray(a, dtype=_dtype(dtype), device=ctx.device)


def _has_float(a: Any) -> bool:
    if isinstance(a, (list, tuple)):
        return any(_has_float(v) for v in a)
    return isinstance(a, float)


def matmul(a: Any, b: Any, /) -> Any:
    return a @ b


#: the NumPy functions verified on the namespace path (README's allow-list)
FUNCTIONS: dict = {
    **{n: _unary(n) for n in ("exp", "log", "log1p", "expm1", "sin", "cos")},
    **{n: _unary(n) for n in ("tanh", "sqrt", "abs", "sign", "square")},
    "absolute": _unary("absolute", "abs"),
    "negative": _unary("negative"),
    **{n: _binary(n) for n in ("maximum", "minimum", "add", "subtract", "multiply")},
    "divide": _binary("divide"),
    "power": _binary("power", "pow"),
    "greater": _binary("greater"),
    "less": _binary("less"),
    "equal": _binary("equal"),
    "sum": _reduction("sum"),
    "mean": _reduction("mean"),
    "max": _reduction("max"),
    "amax": _reduction("amax", "max"),
    "min": _reduction("min"),
    "amin": _reduction("amin", "min"),
    "where": where,
    "matmul": matmul,
    "transpose": transpose,
    "reshape": reshape,
    "concatenate": concatenate,
    "stack": stack,
    "expand_dims": expand_dims,
    "zeros": _creation("zeros"),
    "ones": _creation("ones"),
    "zeros_like": _like("zeros_like"),
    "ones_like": _like("ones_like"),
    "asarray": asarray,
    "shape": lambda a: tuple(a.shape),
    "ndim": lambda a: a.ndim,
    "size": lambda a: math.prod(a.shape),
}

#: NumPy's constants (the same numbers in every library)
CONSTANTS = {"pi": np.pi, "e": np.e, "inf": np.inf, "nan": np.nan, "newaxis": None}


class _Namespace:
    """``np`` on the namespace path: :data:`FUNCTIONS`, dtypes, constants."""

    def __getattr__(self, name: str) -> Any:
        if name in FUNCTIONS:
            return FUNCTIONS[name]
        if name in CONSTANTS:
            return CONSTANTS[name]
        if name in _DTYPES:
            return getattr(current().xp, name)
        if isinstance(getattr(np, name, None), types.ModuleType):
            return translate(getattr(np, name))  # np.linalg...: refused per function
        raise refuse(f"numpy.{name}")

    def __repr__(self) -> str:
        return "<NumPy's names on the Array API path>"


#: what emitted code calls ``np`` on the namespace path
NP = _Namespace()
