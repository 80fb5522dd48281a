"""The public decorators: ``grad`` and ``value_and_grad``.

Compilation is lazy: the first call parses, transforms and emits the gradient
module (or loads it from the cache), later calls go straight to it.

This module never imports :mod:`s2sad.higher` (which builds on it).  Objects
that are derivatives themselves are differentiated through
:func:`register_derivative_rule`, which ``s2sad.higher`` fills when imported
(``import s2sad`` does that); objects made by forward mode carry the marker
:class:`ForwardFunction`, so ``grad`` refuses them without knowing their module.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from s2sad.binding import (
    CallBinding,
    argnums_tuple,
    check_differentiable,
    type_signature,
)
from s2sad.errors import NonScalarOutputError, S2SADError, full_tracebacks
from s2sad.logs import describe
from s2sad.logs import logger as log
from s2sad.options import Options
from s2sad.runtime.workspace import shape_key

# The compiler (pipeline, cache -> gast, black) is imported on first compile only,
# so a module that merely decorates functions runs with NumPy alone.


class CompiledModule:
    """``.source`` and ``.path`` of the module a transform emitted; subclasses keep
    their last compiled entry, ``(function, path, source)``, in ``self._last``."""

    _last: tuple | None = None

    @property
    def source(self) -> str:
        """The emitted module's code."""
        return self._entry_part(2)

    @property
    def path(self) -> str:
        """The file the emitted module lives in."""
        return str(self._entry_part(1))

    def _entry_part(self, i: int):
        if self._last is None:
            raise RuntimeError(
                "not compiled yet: call the function (or .compile) first"
            )
        return self._last[i]


class ForwardFunction:
    """Marker base of the objects ``s2sad.higher`` returns (``jvp``, ``hvp``,
    ``hessian``, ``jacobian``): :func:`grad` refuses to differentiate them."""


class GradientFunction(CompiledModule):
    """The callable returned by :func:`grad` / :func:`value_and_grad`.

    ``.source`` is the emitted module's code and ``.path`` its file; both are
    available after the first call (or after :meth:`compile`).
    """

    def __init__(
        self,
        fun: Callable,
        argnums: int | tuple[int, ...],
        with_value: bool,
        optimize: bool = True,
    ):
        if not callable(fun):
            raise TypeError(f"grad() needs a function, got {type(fun).__name__}")
        self.fun = fun
        self.argnums = argnums
        self.with_value = with_value
        self.options = Options(optimize=optimize)
        self._call = CallBinding(inspect.signature(fun))
        self._compiled: dict[str, tuple] = {}
        self._lock = threading.Lock()
        self._last = None
        # updated=(): copying fun.__dict__ would overwrite this object's own state
        # when fun is itself a wrapper object
        functools.update_wrapper(self, fun, updated=())

    @property
    def _argnums(self) -> tuple[int, ...]:
        return argnums_tuple(self.argnums)

    # -- compiled module
    def _bind(self, args: tuple, kwargs: dict) -> list[Any]:
        return self._call.bind(args, kwargs)

    def _module(self, values: list[Any]) -> tuple:
        """``(function, path, source, pool)`` for arguments like ``values``: loaded
        from the cache, or compiled on a miss."""
        sig = type_signature(values)
        entry = self._compiled.get(sig)
        if entry is not None and entry is not self._last:
            if log.isEnabledFor(logging.DEBUG):  # switching signatures, not every call
                log.debug("reusing compiled %s for %r", self._describe(), sig)
        if entry is None:
            with self._lock:
                entry = self._compiled.get(sig)
                if entry is None:
                    if self._compiled and log.isEnabledFor(logging.INFO):
                        log.info(
                            "recompiling %s: new argument signature %r (compiled "
                            "before: %s)",
                            self._describe(),
                            sig,
                            ", ".join(map(repr, self._compiled)),
                        )
                    argnums = self._argnums
                    options = self.options.for_call(values)  # buffers decided here
                    from s2sad import cache

                    def compile_source():
                        from s2sad import pipeline  # the compiler: only on a cache miss

                        return pipeline.compile_function(
                            self.fun, argnums, options, tuple(values), line_table=True
                        )

                    try:
                        module, path, source = cache.load(
                            self.fun, argnums, options, sig, compile_source
                        )
                    except S2SADError as exc:  # the user's problem: not s2sad's frames
                        if not full_tracebacks():
                            raise exc.with_traceback(None) from None
                        raise
                    fn = cache.entry_function(module)
                    pool = None
                    if "ws" in inspect.signature(fn).parameters:
                        from s2sad.runtime.workspace import Pool
                        from s2sad.transforms.buffers.record import recorder

                        pool = Pool(fn, recorder(fn, source))
                    entry = (fn, path, source, pool)
                    self._compiled[sig] = entry
        self._last = entry
        return entry

    def _describe(self) -> str:
        return describe(self.fun, self._argnums, self.options)

    def compile(self, *args, **kwargs) -> GradientFunction:
        """Compile (or load) for these example arguments without running the gradient."""
        self._module(self._bind(args, kwargs))
        return self

    # -- calling
    def __call__(self, *args, out=None, **kwargs):
        values = self._bind(args, kwargs)
        for i in self._argnums:
            if i >= len(values):
                raise IndexError(
                    f"argnums={i} but {self.fun.__name__} takes {len(values)} arguments"
                )
            v = values[i]
            if not (
                type(v) is float or (type(v) is np.ndarray and v.dtype.kind == "f")
            ):
                # the slow path: pytrees, errors
                check_differentiable(v, self._call.names[i], i)
        fn, _, _, pool = self._module(values)
        try:
            if pool is None:
                value, grads = fn(*values)
            else:
                value, grads = self._with_workspace(pool, values, out)
        except Exception as exc:  # say where in the user's source (costs nothing else)
            from s2sad import locate

            locate.add_note(exc, self.fun)
            raise
        if not (type(value) is float or np.size(value) == 1) or isinstance(
            value, (tuple, list, dict)
        ):
            raise NonScalarOutputError(
                f"{self.fun.__qualname__} returned a value of shape {np.shape(value)}; grad needs "
                "a scalar output. Reduce it first (e.g. np.sum(...)), or differentiate each "
                "output separately."
            )
        if out is not None:
            grads = _write_into(
                out, grads if isinstance(self.argnums, tuple) else grads[0]
            )
        elif not isinstance(self.argnums, tuple):
            grads = grads[0]
        return (value, grads) if self.with_value else grads

    def _with_workspace(self, pool: Any, values: list, out: Any) -> tuple:
        """Run the emitted function with preallocated buffers for these shapes.

        ``out=`` arrays go to the function (its ``finalize`` writes into them); the
        value is copied when it is a workspace buffer, so callers never hold one.
        """
        results = None
        if out is not None:
            results = out if isinstance(self.argnums, tuple) else (out,)
            if not isinstance(results, tuple) or len(results) != len(self._argnums):
                results = None
        (value, grads), ws = pool.call(shape_key(values), values, results)
        if ws is not None and ws.owns(value):
            value = value.copy()
        return value, grads


def _write_into(out: Any, grads: Any) -> Any:
    """Copy gradients into the caller's arrays (same structure); return ``out``."""
    if isinstance(out, dict):
        for k in out:
            out[k] = _write_into(out[k], grads[k])
        return out
    if isinstance(out, list):
        for i in range(len(out)):
            out[i] = _write_into(out[i], grads[i])
        return out
    if isinstance(out, tuple):
        return tuple(_write_into(o, g) for o, g in zip(out, grads))
    if isinstance(out, np.ndarray):
        if grads is not out:  # the emitted code may have written it already
            np.copyto(out, grads)
        return out
    raise TypeError("out= must hold NumPy arrays where the gradients are arrays")


# ---------------------------------------------------------------- derivatives of derivatives

#: how to differentiate objects that are derivatives themselves: their class ->
#: ``rule(fun, argnums, with_value)``, which returns the callable grad gives back
_DERIVATIVE_RULES: dict[type, Callable[..., Callable]] = {}


def register_derivative_rule(cls: type, rule: Callable[..., Callable]) -> None:
    """Let :func:`grad` differentiate instances of ``cls`` with ``rule``.

    ``s2sad.higher`` registers forward over reverse for :class:`GradientFunction`
    (``grad(grad(f))``); this module cannot import it, as it builds on this one.
    """
    _DERIVATIVE_RULES[cls] = rule


def _derivative_rule(fun: Any) -> Callable[..., Callable] | None:
    for cls in type(fun).__mro__:
        if cls in _DERIVATIVE_RULES:
            return _DERIVATIVE_RULES[cls]
    return None


def _differentiate(
    fun: Callable, argnums: int | tuple[int, ...], with_value: bool, optimize: bool
) -> Callable:
    """What ``grad(fun)`` / ``value_and_grad(fun)`` returns."""
    if isinstance(fun, (int, tuple)):
        raise TypeError(
            "pass argnums by keyword: grad(f, argnums=...) or @grad(argnums=...)"
        )
    rule = _derivative_rule(fun)
    if rule is not None:
        return rule(fun, argnums, with_value)
    if isinstance(fun, GradientFunction):
        raise TypeError(
            "grad of a grad function is computed by s2sad.higher (forward over "
            "reverse): import s2sad (or s2sad.higher) before differentiating it"
        )
    if isinstance(fun, ForwardFunction):
        raise TypeError(
            f"grad of a {type(fun).__name__} (made by s2sad.jvp, hvp, hessian or "
            "jacobian) is not supported: for second derivatives use s2sad.hvp(f), "
            "s2sad.hessian(f) or s2sad.grad(s2sad.grad(f))"
        )
    return GradientFunction(fun, argnums, with_value, optimize)


# ---------------------------------------------------------------- public decorators


def grad(
    fun: Callable | None = None,
    argnums: int | tuple[int, ...] = 0,
    *,
    optimize: bool = True,
) -> Any:
    """Gradient of a scalar function with respect to ``argnums`` (default 0).

        @s2sad.grad                         # bare decorator
        def loss(w, x): ...

        dloss = s2sad.grad(loss, argnums=(0, 1))   # tuple of gradients

    Each gradient has the structure, shape and dtype of its argument.  Without
    ``fun`` (``@s2sad.grad(argnums=1)``) it returns the decorator.  ``fun`` may
    itself be a ``grad`` function with a scalar gradient: ``grad(grad(f))`` is
    the second derivative (forward over reverse).  ``optimize=False`` emits the
    plain form: no buffers and no dead-code removal.
    """
    if fun is None:
        return lambda f: _differentiate(f, argnums, False, optimize)
    return _differentiate(fun, argnums, False, optimize)


def value_and_grad(
    fun: Callable | None = None,
    argnums: int | tuple[int, ...] = 0,
    *,
    optimize: bool = True,
) -> Any:
    """Like :func:`grad`, but the function returns ``(value, gradient)``."""
    if fun is None:
        return lambda f: _differentiate(f, argnums, True, optimize)
    return _differentiate(fun, argnums, True, optimize)
