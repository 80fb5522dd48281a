"""Arrays the user's code creates at data size, in a call over Dask data.

``np.zeros((X.shape[0], h))`` in a loss whose ``X`` is a chunked Dask array
would be made on the driver (in its memory) and shipped to the workers.  Inside
:func:`s2sad.runtime.backend.run`, the emitted code runs with ``np`` rebound to
:data:`NP`, whose creation functions (:data:`CREATIONS`) build the array in Dask
when a dimension of the requested shape is the size of a chunked axis of a Dask
argument (:func:`data_dims`), chunked as that axis; every other shape, and every
other NumPy name, is NumPy's own.  A creation that only looks data-sized (a
parameter that happens to have as many entries as the data has rows) becomes a
small Dask array: the same values, computed in the one ``dask.compute`` of the
call.  Only :mod:`s2sad.runtime.backend` uses this module.
"""

from __future__ import annotations

import contextvars
import types
import weakref
from typing import Any

import numpy as np

from s2sad.runtime import rebinding

#: inside a Dask call: size -> chunks of the Dask arguments' chunked axes
_DIMS: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "s2sad_dask_dims", default=None
)


def data_dims(values: Any, found: dict | None = None) -> dict:
    """``{size: chunks}`` for every axis split in more than one chunk of the Dask
    arrays in ``values`` (lists, tuples and dicts searched)."""
    found = {} if found is None else found
    if isinstance(values, (list, tuple)):
        for v in values:
            data_dims(v, found)
    elif isinstance(values, dict):
        data_dims(list(values.values()), found)
    elif hasattr(values, "__dask_graph__") and hasattr(values, "chunks"):
        for size, chunks in zip(values.shape, values.chunks):
            if len(chunks) > 1:
                found.setdefault(size, chunks)
    return found


def enter(dims: dict) -> contextvars.Token:
    return _DIMS.set(dims)


def leave(token: contextvars.Token) -> None:
    _DIMS.reset(token)


def _chunks_for(shape: Any) -> tuple | None:
    """Dask chunks for an array of ``shape`` with a data-sized axis, else None."""
    dims = _DIMS.get()
    if not dims:
        return None
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(int(n) for n in shape)
    except TypeError:
        return None
    if not any(n in dims for n in shape):
        return None
    return tuple(dims.get(n, n) for n in shape)


def _creation(name: str) -> Any:
    real = getattr(np, name)

    def create(shape: Any, dtype: Any = float, order: str = "C", **kwargs: Any):
        chunks = _chunks_for(shape) if order == "C" and not kwargs else None
        if chunks is None:
            return real(shape, dtype, order, **kwargs)
        import dask.array as da

        return getattr(da, name)(chunks_shape(chunks), dtype=dtype, chunks=chunks)

    create.__name__ = name
    create.__doc__ = real.__doc__
    return create


def _full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C", **kw):
    chunks = _chunks_for(shape) if order == "C" and not kw else None
    if chunks is None:
        return np.full(shape, fill_value, dtype, order, **kw)
    import dask.array as da

    return da.full(chunks_shape(chunks), fill_value, dtype=dtype, chunks=chunks)


def chunks_shape(chunks: tuple) -> tuple:
    """The shape of an array with ``chunks`` (an int per axis: one chunk)."""
    return tuple(c if isinstance(c, int) else sum(c) for c in chunks)


def _eye(N: int, M: Any = None, k: int = 0, dtype: Any = float, **kw: Any) -> Any:
    dims = _DIMS.get() or {}
    chunks = dims.get(int(N)) or dims.get(int(M if M is not None else N))
    if chunks is None or kw:
        return np.eye(N, M, k, dtype, **kw)
    import dask.array as da

    return da.eye(N, chunks=max(chunks), M=M, k=k, dtype=dtype)


#: NumPy's creation functions that build data-sized arrays in Dask
CREATIONS: dict = {
    "zeros": _creation("zeros"),
    "ones": _creation("ones"),
    "empty": _creation("empty"),
    "full": _full,
    "eye": _eye,
}
_BY_FUNCTION = {getattr(np, name): fn for name, fn in CREATIONS.items()}


class _Numpy:
    """``np`` in emitted code over Dask data: NumPy, except :data:`CREATIONS`."""

    def __getattr__(self, name: str) -> Any:
        own = CREATIONS.get(name)
        return own if own is not None else getattr(np, name)

    def __repr__(self) -> str:
        return "<numpy, creating data-sized arrays in Dask>"


NP = _Numpy()

# ---------------------------------------------------------------- rebinding globals

_REBOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_VIEWS: dict = {}


def rebound(fn: types.FunctionType) -> types.FunctionType:
    """``fn`` (emitted code) with ``np`` (and numpy's creation functions, in
    its globals or seen through a module) as :data:`NP`'s."""
    return rebinding.rebound(fn, translate, _REBOUND)


def translate(value: Any) -> Any:
    """What a global of emitted code is over Dask data."""
    if value is np:
        return NP
    if isinstance(value, types.ModuleType):
        if value.__name__.startswith(("numpy", "s2sad.", "math", "dask")):
            return value  # numpy.linalg..., the runtime: as they are
        return _VIEWS.setdefault(id(value), _ModuleView(value))
    if isinstance(value, types.FunctionType) and "_s2sad_lines" in value.__globals__:
        return rebound(value)  # another emitted module (a callee's gradient)
    try:
        own = _BY_FUNCTION.get(value)
    except TypeError:  # unhashable
        return value
    return own if own is not None else value


class _ModuleView:
    """A user's module seen from Dask-rebound code (``model.np`` is :data:`NP`,
    as the emitted globals check ``model.np is not np`` expects)."""

    def __init__(self, module: types.ModuleType):
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return translate(getattr(self._module, name))

    def __repr__(self) -> str:
        return f"<{self._module.__name__} over Dask data>"
