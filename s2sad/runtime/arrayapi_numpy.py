"""NumPy's names on the Array API path: what ``np`` is in emitted code run over
torch, CuPy or array-api-strict arrays (:mod:`s2sad.runtime.arrayapi`).

:data:`NP` maps the NumPy functions of the verified subset (:data:`FUNCTIONS`)
onto the running call's namespace (``array_api_compat``, :func:`current`): new
arrays are created on the call's device, float64 by default as in NumPy, and
Python numbers meet arrays as 0-d arrays of the array's dtype.  Every other
name raises a ForeignArrayError (:func:`refuse`).
"""

from __future__ import annotations

import contextvars
import math
import types
from typing import Any, NamedTuple

import numpy as np

from s2sad.errors import ForeignArrayError


class Context(NamedTuple):
    """The namespace of the running foreign call."""

    xp: Any
    device: Any
    library: str


_CURRENT: contextvars.ContextVar[Context | None] = contextvars.ContextVar(
    "s2sad_namespace", default=None
)


def enter(ctx: Context) -> contextvars.Token:
    """Make ``ctx`` the running call's namespace (undo with :func:`leave`)."""
    return _CURRENT.set(ctx)


def leave(token: contextvars.Token) -> None:
    _CURRENT.reset(token)


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


class Refused:
    """A NumPy submodule (``np.linalg``...): every attribute refused."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, name: str) -> Any:
        raise refuse(f"{self._name}.{name}")


#: numpy submodules -> their refusing stand-in (one each: identity checks hold)
_STAND_INS: dict = {}


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
            return _STAND_INS.setdefault(name, Refused(f"numpy.{name}"))  # np.linalg
        raise refuse(f"numpy.{name}")

    def __repr__(self) -> str:
        return "<NumPy's names on the Array API path>"


#: what emitted code calls ``np`` on the namespace path
NP = _Namespace()
