"""Arrays of other libraries (Dask) in gradient code: the one place that knows them.

NumPy arrays take the buffered fast path and never reach this module.  A call
whose arguments hold a *foreign* array (today: a ``dask.array.Array``) takes
the plain path instead (no workspace), and runs inside :func:`guard`, which

* routes the NumPy functions whose meaning differs in that library to the
  NumPy meaning (:data:`_DASK_OVERRIDES`: Dask's ``cholesky`` returns the upper
  factor, NumPy's the lower one; ``np.size`` would compute the array);
* turns every pull of a Dask array to the driver (``__array__``, ``float()``,
  and Dask's fallback that computes a NumPy copy for a function Dask lacks)
  into a :class:`~s2sad.errors.ForeignArrayError` naming the NumPy function
  and the rule that called it, unless the user opted out with
  :func:`allow_driver_pulls`.

Rules keep cotangents in the data's library through the few helpers here
(:func:`as_array`, :func:`matmul_grads`, :func:`one_hot`), and :func:`gather`
computes the gradients of NumPy parameters with one ``dask.compute`` per call.
Verified libraries are listed in :data:`VERIFIED`; any other array type is
refused when the call is bound (``s2sad.binding``).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from s2sad.errors import ForeignArrayError
from s2sad.runtime import arrayapi, backend_dask, located

#: the array libraries whose gradients are checked against NumPy's in the tests
VERIFIED = ("dask", *arrayapi.NAMESPACE_LIBRARIES)

#: inside a foreign call: the library's name; None outside
_ACTIVE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "s2sad_foreign_call", default=None
)
#: the user asked for lazy gradients (:func:`lazy_gradients`)
_LAZY: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "s2sad_lazy", default=False
)
#: the user allowed pulls to the driver (:func:`allow_driver_pulls`)
_ALLOW_PULLS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "s2sad_allow_pulls", default=False
)


# ---------------------------------------------------------------- recognising arrays


def library(x: Any) -> str | None:
    """``"dask"`` for a Dask array, the library's name for a torch, CuPy or
    array-api-strict array (:mod:`s2sad.runtime.arrayapi`), None for NumPy and
    everything else."""
    t = type(x)
    if t is np.ndarray or t is float or t is int:
        return None
    if t.__module__.startswith("dask.") and hasattr(t, "__dask_graph__"):
        return "dask"
    return arrayapi.library(x)


def is_foreign(x: Any) -> bool:
    """Whether ``x`` is a Dask array (NumPy's functions dispatch on it: the
    rules' own Dask branches); the namespace libraries never reach the rules."""
    return library(x) == "dask"


def in_namespace(x: Any) -> bool:
    """Whether ``x`` is a torch, CuPy or array-api-strict array."""
    return library(x) in arrayapi.NAMESPACE_LIBRARIES


def foreign_in(values: Any) -> str | None:
    """The foreign library of the first foreign array in ``values`` (lists, tuples
    and dicts are searched), or None when every array is NumPy's."""
    t = type(values)
    if t is np.ndarray or t is float or t is int or values is None:
        return None
    if t is list or t is tuple:
        for v in values:
            found = foreign_in(v)
            if found is not None:
                return found
        return None
    if t is dict:
        return foreign_in(list(values.values()))
    return library(values)


def any_foreign(*xs: Any) -> bool:
    """Whether any of ``xs`` is a foreign array (NumPy arrays: decided at once)."""
    for x in xs:
        t = type(x)
        if t is not np.ndarray and t is not float and library(x) == "dask":
            return True
    return False


def broadcast_like(g: Any, x: Any) -> Any:
    """``g`` broadcast to the shape of the foreign array ``x``, in x's library and
    chunked like it (a NumPy ``g`` would be materialised on the driver)."""
    import dask.array as da

    if is_foreign(g):
        return da.broadcast_to(g, x.shape)
    g = np.asarray(g)
    lead = x.ndim - g.ndim
    chunks = tuple(
        x.chunks[lead + i] if n != 1 else (1,) for i, n in enumerate(g.shape)
    )
    return da.broadcast_to(da.from_array(g, chunks=chunks), x.shape, chunks=x.chunks)


def as_array(x: Any) -> Any:
    """``np.asarray(x)``, except that a foreign array stays where it is (lazy)."""
    return x if is_foreign(x) else np.asarray(x)


# ---------------------------------------------------------------- rules' helpers


def _mT(a: Any) -> Any:
    return np.swapaxes(a, -1, -2)


def _sum_to(g: Any, shape: tuple) -> Any:
    """``g`` summed down to ``shape`` (undoing broadcasting), in g's library."""
    extra = g.ndim - len(shape)
    if extra > 0:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def matmul_grads(g: Any, x: Any, y: Any) -> tuple:
    """The cotangents of ``x @ y`` for ``g``, built in the operands' library.

    1-d operands are promoted as ``matmul`` does and demoted again; broadcast
    batch axes are summed away.
    """
    xv = x[None, :] if x.ndim == 1 else x
    yv = y[:, None] if y.ndim == 1 else y
    gv = g
    if x.ndim == 1:
        gv = gv[..., None, :]
    if y.ndim == 1:
        gv = gv[..., None]
    gx = _sum_to(gv @ _mT(yv), xv.shape)
    gy = _sum_to(_mT(xv) @ gv, yv.shape)
    if x.ndim == 1:
        gx = gx[..., 0, :]
    if y.ndim == 1:
        gy = gy[..., 0]
    return gx, gy


def eye(n: int, dtype: Any, like: Any) -> Any:
    """``np.eye(n, dtype=dtype)`` in the library of ``like`` (lazy for Dask)."""
    if is_foreign(like):
        import dask.array as da

        return da.eye(n, chunks=like.chunksize[-1], dtype=dtype)
    return np.eye(n, dtype=dtype)


def one_hot(labels: Any, classes: int, dtype: Any) -> Any:
    """``labels[..., None] == arange(classes)`` as ``dtype`` (labels' library)."""
    return (labels[..., None] == np.arange(classes)).astype(dtype)


def place_diagonal(g: Any, shape: tuple, offset: int, axis1: int, axis2: int) -> Any:
    """Zeros of ``shape`` with ``g`` on the diagonal (``np.diagonal``'s layout),
    built lazily in g's library by a mask (no writes into a computed array)."""
    rows, cols = shape[axis1], shape[axis2]
    r = np.arange(rows, like=g)[:, None]
    c = np.arange(cols, like=g)[None, :]
    mask = (c - r) == offset
    along_rows = offset >= 0  # entry k of the diagonal sits in row k (else column k)
    length = rows if along_rows else cols
    pad = [(0, 0)] * (g.ndim - 1) + [(0, length - g.shape[-1])]
    full = np.pad(g, pad) if length != g.shape[-1] else g
    full = full[..., :, None] if along_rows else full[..., None, :]
    dtype = g.dtype if g.dtype.kind == "f" else np.float64
    placed = np.where(mask, full, 0).astype(dtype)
    return np.moveaxis(placed, (-2, -1), (axis1, axis2))


# ---------------------------------------------------------------- one compute per call


def gather(grads: Any, params: Any, lazy: bool = False) -> Any:
    """``grads`` with every foreign gradient of a NumPy parameter computed and
    converted to the parameter's type, by one ``dask.compute`` for all of them.

    ``grads`` and ``params`` have the same structure; gradients of foreign
    parameters stay lazy.  ``lazy=True`` computes nothing.
    """
    leaves: list = []
    skeleton = _collect(grads, params, leaves)
    if lazy or _LAZY.get() or not leaves:
        return grads
    import dask

    computed = dask.compute(*[g for g, _ in leaves])
    done = [_like_param(c, p) for c, (_, p) in zip(computed, leaves)]
    return _fill(skeleton, iter(done))


_SLOT = object()


def _collect(g: Any, p: Any, leaves: list) -> Any:
    if is_foreign(g) and not is_foreign(p):
        leaves.append((g, p))
        return _SLOT
    if isinstance(g, dict):  # p None: the value, or aux (computed too)
        ps = p if isinstance(p, dict) else {}
        return {k: _collect(v, ps.get(k), leaves) for k, v in g.items()}
    if isinstance(g, (list, tuple)):
        ps = p if isinstance(p, (list, tuple)) else [None] * len(g)
        return _rebuilt(g, [_collect(a, b, leaves) for a, b in zip(g, ps)])
    return g


def _fill(skeleton: Any, done: Iterator) -> Any:
    if skeleton is _SLOT:
        return next(done)
    if isinstance(skeleton, dict):
        return {k: _fill(v, done) for k, v in skeleton.items()}
    if isinstance(skeleton, (list, tuple)):
        return _rebuilt(skeleton, [_fill(v, done) for v in skeleton])
    return skeleton


def _rebuilt(seq: Any, items: list) -> Any:
    """A list or tuple of ``seq``'s type holding ``items`` (namedtuples too)."""
    return type(seq)(*items) if hasattr(seq, "_fields") else type(seq)(items)


def _like_param(value: Any, param: Any) -> Any:
    if isinstance(param, np.ndarray):
        kind = param.dtype.kind
        return np.array(value, dtype=param.dtype if kind in "fc" else float)
    if isinstance(param, np.generic):
        return param.dtype.type(value)
    if isinstance(param, float):
        return float(value)
    return value


# ---------------------------------------------------------------- the call's guard


def run(fn: Any, values: list, seed: list, argnums: tuple) -> tuple:
    """``fn(*values, *seed)``, the emitted plain code's ``(value, grads)``.

    When ``values`` hold a foreign array it runs inside the library's guard,
    then one compute gives the value and the gradients of NumPy parameters
    (none under :func:`lazy_gradients`).
    """
    lib = foreign_in(values)
    if lib is None:
        return fn(*values, *seed)
    if lib != "dask":  # torch, CuPy, Array API: the code in their namespace
        return arrayapi.run(fn, values, seed, lib)
    token = backend_dask.enter(backend_dask.data_dims(values))
    try:
        with guard(lib):  # np.zeros((X.shape[0], h)): made in Dask (backend_dask)
            value, grads = backend_dask.rebound(fn)(*values, *seed)
            params = tuple(values[i] for i in argnums)
            return gather((value, grads), (None, params))
    except (TypeError, ValueError, IndexError) as exc:
        if isinstance(exc.__context__, ForeignArrayError):  # NumPy turned a
            raise exc.__context__ from None  # refused pull into its own error
        if "setting an array element with a sequence" in str(exc):
            raise ForeignArrayError(
                "a Dask value was written into a NumPy array (y[i] = x[i] with y "
                "made by NumPy): that would compute it on the driver. Build y from "
                "Dask values (np.stack, or np.zeros with a data-sized shape, which "
                "is made in Dask), or allow it with s2sad.allow_driver_pulls()."
            ).with_traceback(exc.__traceback__) from None
        rule = _failed_rule(exc)
        if rule is None:
            raise  # the user's own code failed on Dask arrays: as Python would
        raise ForeignArrayError(
            f"the gradient rule {rule} failed on Dask arrays ({type(exc).__name__}: "
            f"{exc}); this step is not verified on Dask. Dask data with NumPy "
            "parameters is the verified form: pass the differentiated arguments as "
            "NumPy arrays, or compute this part with NumPy."
        ).with_traceback(exc.__traceback__) from None
    finally:
        backend_dask.leave(token)


def _failed_rule(exc: BaseException) -> str | None:
    """The runtime function (a rule or helper of the emitted code) under which
    ``exc`` was raised, or None when it came from the user's code itself."""
    tb, rule = exc.__traceback__, None
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if (
            rule is None
            and module.startswith("s2sad.runtime.")
            and module
            not in (
                __name__,
                backend_dask.__name__,
            )
        ):
            rule = f"{module}.{tb.tb_frame.f_code.co_name}"
        tb = tb.tb_next
    return rule


@contextlib.contextmanager
def lazy_gradients() -> Iterator[None]:
    """Inside, gradients over Dask data come back as lazy Dask arrays (no compute):
    ``dask.compute(*grads)`` runs them, e.g. together with other work."""
    token = _LAZY.set(True)
    try:
        yield
    finally:
        _LAZY.reset(token)


@contextlib.contextmanager
def allow_driver_pulls() -> Iterator[None]:
    """Let gradients over Dask arrays pull arrays to the driver (the opt-out).

    Inside, a rule that needs a NumPy copy gets one (Dask computes it on the
    driver, as outside s2sad); outside, that raises ForeignArrayError.
    """
    token = _ALLOW_PULLS.set(True)
    try:
        yield
    finally:
        _ALLOW_PULLS.reset(token)


@contextlib.contextmanager
def guard(lib: str) -> Iterator[None]:
    """Run a gradient over ``lib``'s arrays with the library's hooks on."""
    if lib == "dask":
        _install_dask_hooks()
    token = _ACTIVE.set(lib)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def _caller() -> str:
    """The runtime rule (or the user's function) that called into the library."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("s2sad.runtime.") and module != __name__:
            code = frame.f_code
            return f"the rule {module}.{getattr(code, 'co_qualname', code.co_name)}"
        if "_s2sad_lines" in frame.f_globals:
            where = located.frame_location(frame)
            return f"the {where}" if where else "the emitted code of your function"
        frame = frame.f_back
    return "the gradient code"


def _in_gradient_code() -> bool:
    """Whether emitted gradient code is among the few callers of the hooked Dask
    method (directly or through a rule): Dask data that arrived unguarded.  The
    runtime's functions called by the user's own code stay Dask's business."""
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return False
        if "_s2sad_lines" in frame.f_globals:
            return True
        frame = frame.f_back
    return False


def _refuse_unguarded(what: str) -> None:
    if _ALLOW_PULLS.get() or not _in_gradient_code():
        return
    raise ForeignArrayError(
        f"{what} reached s2sad's gradient code outside the Dask guard: through a "
        "closure or a global, or in a transform that does not support Dask (jvp, "
        "hvp, vjp, hessian, jacobian). Pass Dask data as an argument of s2sad.grad "
        "or s2sad.value_and_grad, which keep it on the workers and mean NumPy's "
        "functions (e.g. the lower Cholesky factor)."
    )


def watch() -> None:
    """Install the Dask hooks when Dask is loaded (called once per compiled
    signature), so that Dask data reaching gradient code unguarded is refused."""
    if "dask.array" in sys.modules:
        _install_dask_hooks()


def _refuse_pull(what: str) -> None:
    if _ALLOW_PULLS.get():
        return
    raise ForeignArrayError(
        f"{what} would compute a Dask array on the driver (a pull of the data), in "
        f"{_caller()}. s2sad keeps gradients over Dask data on the workers; write "
        "this step with functions Dask implements, or wrap the call in "
        "`with s2sad.allow_driver_pulls():` to accept the pull."
    )


def _dask_implements(func: Any) -> bool:
    """Whether Dask has its own ``func`` (else it computes a NumPy copy)."""
    import dask.array as da
    from dask.array.core import _HANDLED_FUNCTIONS

    if func in _HANDLED_FUNCTIONS:
        return True
    module: Any = da
    for part in func.__module__.split(".")[1:]:
        module = getattr(module, part, None)
        if module is None:
            return False
    own = getattr(module, func.__name__, None)
    return own is not None and own is not func


def _dask_cholesky(a: Any, upper: bool = False) -> Any:
    import dask.array as da

    return da.linalg.cholesky(a, lower=not upper)  # NumPy's default: the lower factor


def _size(a: Any, axis: Any = None) -> Any:
    return a.size if axis is None else a.shape[axis]


#: NumPy functions whose Dask meaning differs, or which Dask would compute on the
#: driver: their NumPy meaning, built in Dask (only inside :func:`guard`)
_DASK_OVERRIDES: dict = {
    np.linalg.cholesky: _dask_cholesky,
    np.size: _size,
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
}


def _install_dask_hooks() -> None:
    """Wrap Dask's dispatch and conversions once; they act only inside guard."""
    from dask.array.core import Array

    if getattr(Array, "_s2sad_hooked", False):
        return
    dispatch = Array.__array_function__

    def __array_function__(self, func, types, args, kwargs):
        if _ACTIVE.get() is not None:
            override = _DASK_OVERRIDES.get(func)
            if override is not None:
                return override(*args, **kwargs)
            if not _dask_implements(func):
                _refuse_pull(f"{func.__module__}.{func.__name__}, which Dask lacks,")
        else:
            _refuse_unguarded(
                f"a Dask array passed to {func.__module__}.{func.__name__}"
            )
        return dispatch(self, func, types, args, kwargs)

    Array.__array_function__ = __array_function__
    for name in ("__array__", "__float__", "__int__", "__complex__", "__bool__"):
        _wrap_conversion(Array, name)
    Array._s2sad_hooked = True


def _wrap_conversion(cls: type, name: str) -> None:
    original = getattr(cls, name, None)
    if original is None:
        return

    def converted(self, *args, **kwargs):
        if _ACTIVE.get() is not None:
            _refuse_pull(f"{name} of a Dask array of shape {self.shape}")
        else:
            _refuse_unguarded(f"{name} of a Dask array of shape {self.shape}")
        return original(self, *args, **kwargs)

    converted.__name__ = name
    converted.__doc__ = original.__doc__
    setattr(cls, name, converted)
