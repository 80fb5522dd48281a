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
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from s2sad import locate  # registers the line table's parser for the runtime
from s2sad.binding import (
    FLOAT_ERRORS,
    CallBinding,
    argnums_range_message,
    argnums_tuple,
    argument_classes,
    check_differentiable,
    normalize_argnums,
    numpy_floats,
    primal_or_raise,
    python_floats,
    type_signature,
)
from s2sad.errors import (
    GlobalsChangedError,
    S2SADError,
    full_tracebacks,
)
from s2sad.fastpath import (
    MISS,
    fast_failed,
    fast_result,
    remember,
    small_floats,
    warm_call,
)
from s2sad.logs import describe
from s2sad.logs import logger as log
from s2sad.options import Options, debug_nans_from_env
from s2sad.outputs import check_scalar, explain_output, unshare, write_into
from s2sad.runtime import backend
from s2sad.runtime.scalar import uses_math, with_numpy_math
from s2sad.runtime.workspace import shape_key

# The compiler (pipeline, cache -> gast, black) is imported on first compile only,
# so a module that merely decorates functions runs with NumPy alone.
#: the cache's code has its line table and skips black (``.source`` formats it)
FOR_CACHE = {"line_table": True, "formatted": False}


class CompiledModule:
    """``.source`` and ``.path`` of the module a transform emitted; subclasses keep
    their last compiled entry, ``(function, path, source)``, in ``self._last``."""

    _last: tuple | None = None

    @property
    def source(self) -> str:
        """The emitted module's code, black-formatted (on first read: not cached so)."""
        from s2sad.transforms.emit import formatted

        return formatted(self._entry_part(2))

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
        debug_nans: bool = False,
        has_aux: bool = False,
    ):
        if not callable(fun):
            raise TypeError(f"grad() needs a function, got {type(fun).__name__}")
        self.fun = fun
        self.argnums = normalize_argnums(argnums)
        #: one gradient, not a tuple of them
        self._single = not isinstance(self.argnums, tuple)
        self.with_value = with_value
        #: f returns ``(value, aux)``: value is differentiated, aux handed back as is
        self.has_aux = bool(has_aux)
        self.options = Options(optimize=optimize, debug_nans=debug_nans)
        self._call = CallBinding(inspect.signature(fun))
        self._compiled: dict[str, tuple] = {}
        self._classes: dict[str, tuple] = {}  # the classes each was compiled for
        #: the fast path of calls of Python numbers (and small arrays) like the
        #: last one (``fastpath.fast_entry``): ``__call__`` goes straight to the
        #: emitted function, no binding, checking or signature work; None until
        #: such a call went well, and whenever another module than the last runs
        self._hot: tuple | None = None
        #: the warm path of buffered calls like the last one (``fastpath.warm_call``)
        self._warm: tuple | None = None
        self._lock = threading.Lock()
        self._last = None
        # updated=(): copying fun.__dict__ would overwrite this object's own state
        # when fun is itself a wrapper object
        functools.update_wrapper(self, fun, updated=())

    @property
    def _argnums(self) -> tuple[int, ...]:
        return argnums_tuple(self.argnums)

    def __repr__(self) -> str:
        kind = "value_and_grad" if self.with_value else "grad"
        name = getattr(self.fun, "__qualname__", None) or repr(self.fun)
        aux = ", has_aux=True" if self.has_aux else ""
        return f"<s2sad.{kind} of {name}, argnums={self.argnums!r}{aux}>"

    # -- compiled module
    def _bind(self, args: tuple, kwargs: dict) -> list[Any]:
        return self._call.bind(args, kwargs)

    def _module(self, values: list[Any], fresh: bool = False) -> tuple:
        """``(function, path, source, pool)`` for arguments like ``values``: loaded
        from the cache, or compiled on a miss (always compiled when ``fresh``)."""
        sig = type_signature(values)
        classes = argument_classes(values)  # (redefined under their names: again)
        stale = fresh or self._classes.get(sig) != classes
        entry = None if stale else self._compiled.get(sig)
        if entry is not None and entry is not self._last:
            if log.isEnabledFor(logging.DEBUG):  # switching signatures, not every call
                log.debug("reusing compiled %s for %r", self._describe(), sig)
        if entry is None:
            with self._lock:
                stale = fresh or self._classes.get(sig) != classes
                entry = None if stale else self._compiled.get(sig)
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
                            self.fun, argnums, options, tuple(values), **FOR_CACHE
                        )

                    try:
                        module, path, source = cache.load(
                            self.fun,
                            argnums,
                            options,
                            sig,
                            compile_source,
                            fresh,
                            classes,
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
                    self._classes[sig] = classes
        if entry is not self._last:
            self._hot = self._warm = None  # the fast paths are the last module's
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
        hot = self._hot  # see fastpath.fast_entry
        if (
            hot is not None
            and not kwargs
            and (
                type(args[0]) is hot[0]
                if len(args) == 1
                else tuple(map(type, args)) == hot[0]
            )
            and (hot[2] is None or small_floats(args, hot[2]))
        ):
            try:
                value, grads = hot[1](*args)
            except Exception as exc:
                return fast_failed(self, exc, args, out)
            if type(value) is not float and type(value) is not np.float64:
                check_scalar(self, value)
            if out is not None:
                return fast_result(self, value, grads, out)
            if hot[3]:  # one gradient, not a tuple of them
                grads = grads[0]
            return (value, grads) if hot[4] else grads
        warm = self._warm  # buffered calls like the last one: fastpath.warm_call
        if warm is not None and not kwargs:
            result = warm_call(self, warm, args, out)
            if result is not MISS:
                return result
        values = self._bind(args, kwargs)
        for i in self._argnums:
            if i >= len(values):
                n, sig = len(values), self._call.signature
                raise IndexError(argnums_range_message(self.fun, i, n, sig))
            v = values[i]
            if not (
                type(v) is float or (type(v) is np.ndarray and v.dtype.kind == "f")
            ):
                # the slow path: pytrees, errors
                check_differentiable(v, self._call.names[i], i)
        # has_aux: the output is (value, aux); seeding (1.0, None) differentiates
        # the value alone (aux's cotangent is None: no backward work reaches it)
        seed = [(1.0, None)] if self.has_aux else []
        try:
            value, grads = self._run(values, out, seed)
        except S2SADError as exc:  # compile errors: the function must not run again
            raise locate.into_message(exc, self.fun)
        except Exception as exc:
            value, grads = self._failed(exc, values, seed, args, kwargs)
        if self.has_aux:
            value, aux = value
        check_scalar(self, value)
        if not kwargs and not self.has_aux:
            remember(self, args)
        if self._single:
            grads = grads[0]
        if out is not None:
            grads = write_into(out, grads)
        if self.has_aux:
            return ((value, aux), grads) if self.with_value else (grads, aux)
        return (value, grads) if self.with_value else grads

    def _run(self, values: list, out: Any, seed: list) -> tuple:
        """The emitted function's ``(value, grads)``; compiled again when a global it
        was specialised on has been rebound (its first statement checks them)."""
        for attempt in range(3):
            # 0: the code in memory; 1: the cache's code for the current globals;
            # 2: compiled afresh (the cache key could not tell the globals apart)
            fn, _, _, pool = self._module(values, fresh=attempt == 2)
            try:
                if pool is None:  # backend: Dask arrays run guarded, one compute
                    return backend.run(fn, values, seed, self._argnums)
                return self._with_workspace(pool, values, out, seed)
            except GlobalsChangedError:
                if attempt == 2:
                    raise
                self._compiled.pop(type_signature(values), None)
        raise AssertionError("unreachable")

    def _failed(
        self, exc: Exception, values: list, seed: list, args: tuple, kwargs: dict
    ) -> tuple:
        """The emitted function raised ``exc``: NumPy's answer where Python float
        arithmetic or ``math`` raised and NumPy does not; else ``exc``, said better."""
        if isinstance(exc, FLOAT_ERRORS):
            fn = self._module(values)[0]
            return self._with_numpy_floats(fn, values, exc, seed)
        if isinstance(exc, ValueError):  # math.log(0.0): a domain error
            fn = self._module(values)[0]
            try:
                if uses_math(fn):
                    return self._with_numpy_floats(fn, values, exc, seed)
            except ValueError as again:
                if again is not exc:  # not the user's own error: NumPy's rerun failed
                    raise
        explain_output(self, args, kwargs, exc)

        locate.add_note(exc, self.fun)
        raise exc

    def _with_numpy_floats(
        self, fn: Callable, values: list, exc: Exception, seed: list
    ) -> tuple:
        """Python float arithmetic raised in derivative code (``g / x`` at ``x =
        0.0``), or a ``math`` function did (``math.log(0.0)``): run again on
        ``np.float64`` arguments, with NumPy's functions for ``math``'s, for
        NumPy's inf, nan and warnings, as the user's function gets them; float
        gradients stay floats."""
        value = primal_or_raise(self.fun, values, exc)
        _, grads = with_numpy_math(fn)(*numpy_floats(values), *seed)
        return value, tuple(
            python_floats(g, values[i]) for g, i in zip(grads, self._argnums)
        )

    def _with_workspace(
        self, pool: Any, values: list, out: Any, seed: list = ()
    ) -> tuple:
        """Run the emitted function with preallocated buffers for these shapes.

        ``out=`` arrays go to the function (its ``finalize`` writes into them); the
        value is copied when it is a workspace buffer, so callers never hold one.
        """
        results = None
        if out is not None:
            results = out if isinstance(self.argnums, tuple) else (out,)
            if not isinstance(results, tuple) or len(results) != len(self._argnums):
                results = None
        (value, grads), ws = pool.call(
            shape_key(values), list(values) + list(seed), results
        )
        if ws is not None:
            value = unshare(value, ws)
        return value, grads


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
    fun: Callable,
    argnums: int | tuple[int, ...],
    with_value: bool,
    optimize: bool,
    debug_nans: bool | None = None,
    has_aux: bool = False,
) -> Callable:
    """What ``grad(fun)`` / ``value_and_grad(fun)`` returns."""
    if isinstance(fun, (int, tuple, list)):
        raise TypeError(
            "pass argnums by keyword: grad(f, argnums=...) or @grad(argnums=...)"
        )
    argnums = normalize_argnums(argnums)
    rule = _derivative_rule(fun)
    if rule is not None:
        if has_aux:
            raise TypeError(
                "has_aux=True is not supported for derivatives of derivatives"
            )
        return rule(fun, argnums, with_value)
    from s2sad import adapters

    bound = adapters.unwrap(fun)
    if bound is not None:  # functools.partial, bound method
        target, prefix, keywords = bound
        inner = _differentiate(
            target,
            adapters.shift(argnums, len(prefix)),
            with_value,
            optimize,
            debug_nans,
            has_aux,
        )
        return adapters.BoundGradient(fun, inner, prefix, keywords)
    if adapters.is_rule_only(fun):  # np.sin, abs, math.exp: no source, a rule
        return adapters.RuleGradient(fun, argnums, with_value, has_aux)
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
    if debug_nans is None:
        debug_nans = debug_nans_from_env()
    return GradientFunction(fun, argnums, with_value, optimize, debug_nans, has_aux)


# ---------------------------------------------------------------- public decorators


def grad(
    fun: Callable | None = None,
    argnums: int | Sequence[int] = 0,
    *,
    has_aux: bool = False,
    optimize: bool = True,
    debug_nans: bool | None = None,
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

    ``debug_nans=True`` checks each cotangent after its backward block and raises
    :class:`~s2sad.errors.NonFiniteCotangentError` at the first NaN or inf,
    naming the source line and the operand; the default (None) reads the
    environment variable ``S2SAD_DEBUG_NANS`` (``1`` switches it on) when
    ``grad`` is called.  Off, the emitted code has no checks at all.

    ``argnums`` may be any sequence (a list acts as a tuple).  With
    ``has_aux=True`` ``fun`` returns ``(value, aux)``: only ``value`` is
    differentiated and the call returns ``(gradient, aux)``.  ``fun`` may also be
    a ``functools.partial``, a bound method, a lambda, or a NumPy ufunc / builtin /
    ``math`` function (differentiated through its registered rule).
    """
    if fun is None:
        return lambda f: _differentiate(
            f, argnums, False, optimize, debug_nans, has_aux
        )
    return _differentiate(fun, argnums, False, optimize, debug_nans, has_aux)


def value_and_grad(
    fun: Callable | None = None,
    argnums: int | Sequence[int] = 0,
    *,
    has_aux: bool = False,
    optimize: bool = True,
    debug_nans: bool | None = None,
) -> Any:
    """Like :func:`grad`, but the function returns ``(value, gradient)``.

    With ``has_aux=True`` it returns ``((value, aux), gradient)``.
    """
    if fun is None:
        return lambda f: _differentiate(f, argnums, True, optimize, debug_nans, has_aux)
    return _differentiate(fun, argnums, True, optimize, debug_nans, has_aux)
