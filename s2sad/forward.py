"""Forward mode and higher order: ``jvp``, ``hvp``, ``hessian``, ``jacobian``.

    f_jvp = s2sad.jvp(f, argnums=0)
    value, t_out = f_jvp(x, W, t_x)        # J t_x from an emitted forward-mode module

    s2sad.hvp(f)(x, W, v)                  # H v: forward mode over f's gradient module
    s2sad.hessian(f)(x, W)                 # H, one H v per entry of x (small inputs)
    s2sad.jacobian(f)(x, W)                # forward or reverse mode, by the shapes

Second derivatives differentiate *emitted code*: ``hvp`` compiles the gradient
module of ``f`` (as ``s2sad.grad`` does) and then compiles that module's
function in forward mode.  Compilation is lazy and cached like ``grad``'s.
"""

from __future__ import annotations

import functools
import inspect
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from s2sad import cache, pipeline
from s2sad.errors import NonDifferentiableArgumentError, NonScalarOutputError
from s2sad.runtime import support
from s2sad.transforms import forward


def _argnums_tuple(argnums: int | tuple[int, ...]) -> tuple[int, ...]:
    return argnums if isinstance(argnums, tuple) else (argnums,)


def _type_signature(values: list[Any]) -> str:
    """Types that change the emitted code (objects whose methods are inlined)."""
    plain = (np.ndarray, np.generic, float, int, bool, list, tuple, dict, type(None), str)
    return ",".join("-" if isinstance(v, plain) else
                    f"{type(v).__module__}.{type(v).__qualname__}" for v in values)


def _check_differentiable(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _check_differentiable(v, f"{where}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for k, v in enumerate(value):
            _check_differentiable(v, f"{where}[{k}]")
    elif isinstance(value, (bool, np.bool_, int, np.integer)) or (
            isinstance(value, np.ndarray) and value.dtype.kind not in "fc"):
        raise NonDifferentiableArgumentError(
            f"{where} is {type(value).__name__} "
            f"{getattr(value, 'dtype', value)!s}: derivatives are defined for float "
            "values only. Pass floats (e.g. 3.0 or x.astype(np.float64)), or leave it out "
            "of argnums.")
    elif not isinstance(value, (float, np.floating, np.ndarray, complex)):
        raise NonDifferentiableArgumentError(
            f"{where} is a {type(value).__name__}: s2sad differentiates floats, float "
            "arrays and dicts/lists/tuples of them.")


def _tangent_like(t: Any, x: Any, where: str) -> Any:
    """The caller's tangent in ``x``'s structure, shape and float dtype (None: zeros)."""
    if t is None:
        return support.zeros_like(x)
    if isinstance(x, dict):
        if not isinstance(t, dict) or set(t) - set(x):
            raise ValueError(f"tangent {where} must be a dict with the keys of the argument")
        return {k: _tangent_like(t.get(k), v, f"{where}[{k!r}]") for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        if not isinstance(t, (list, tuple)) or len(t) != len(x):
            raise ValueError(f"tangent {where} must be a list/tuple of length {len(x)}")
        return type(x)(_tangent_like(ti, xi, f"{where}[{i}]")
                       for i, (ti, xi) in enumerate(zip(t, x)))
    if np.shape(t) != np.shape(x):
        raise ValueError(f"tangent {where} has shape {np.shape(t)}, the argument "
                         f"{np.shape(x)}")
    if isinstance(x, np.ndarray):
        return np.asarray(t, dtype=x.dtype if x.dtype.kind in "fc" else np.float64)
    if isinstance(x, np.generic):
        return x.dtype.type(t)
    return float(t)


# ---------------------------------------------------------------- what gets transformed


@dataclass
class _Target:
    """A Python function to compile in forward mode, and how user calls map onto it."""

    fn: Callable
    argnums: tuple[int, ...]
    prepare: Callable[[list], list]  # user arguments -> fn's arguments
    output: Callable[[Any], Any]  # fn's result -> what the user gets (value or tangent)
    options: pipeline.Options


def _plain_target(fun: Callable, argnums: tuple[int, ...], values: list) -> _Target:
    return _Target(fun, argnums, list, lambda r: r, forward.ForwardOptions())


def _gradient_target(gf: Any, argnums: tuple[int, ...], values: list) -> _Target:
    """The emitted ``<f>_value_and_grad`` of a ``grad``/``value_and_grad`` object."""
    inner = _argnums_tuple(gf.argnums)
    fn = reverse_function(gf.fun, inner, gf.options, values)

    def output(result: Any) -> Any:
        value, grads = result
        grads = grads if isinstance(gf.argnums, tuple) else grads[0]
        return (value, grads) if gf.with_value else grads

    return _Target(fn, argnums, lambda v: list(v) + [1.0], output, forward.ForwardOptions())


def _jvp_target(jf: "JvpFunction", argnums: tuple[int, ...], values: list) -> _Target:
    """The emitted ``<f>_jvp`` of an inner ``jvp`` (differentiated in its primal inputs)."""
    n = len(values) - 1
    if any(i >= n for i in argnums):
        raise ValueError("jvp of a jvp differentiates with respect to the primal arguments "
                         "only (not the inner tangents)")
    fn = jf.emitted(values[:n])

    def prepare(v: list) -> list:
        return list(v[:n]) + list(jf._tangent_list(v[:n], v[n]))

    return _Target(fn, argnums, prepare, lambda r: r, forward.ForwardOptions())


def reverse_function(fun: Callable, argnums: tuple[int, ...], options: pipeline.Options,
                     values: list) -> Callable:
    """``fun``'s emitted value-and-gradient function (cached like ``s2sad.grad``)."""
    sig = _type_signature(values)

    def compile_source():
        return pipeline.compile_function(fun, argnums, options, tuple(values))

    module, _, _ = cache.load(fun, argnums, options, sig, compile_source)
    return next(getattr(module, n) for n in dir(module)
                if n.endswith("_value_and_grad") and callable(getattr(module, n)))


def _first_function(module: Any) -> Callable:
    """The first function the emitted module defines (its top-level ``_jvp``)."""
    return next(v for v in vars(module).values()
                if inspect.isfunction(v) and v.__module__ == module.__name__)


# ---------------------------------------------------------------- jvp


class JvpFunction:
    """The callable returned by :func:`jvp`: ``f_jvp(*args, tangents) -> (value, tangent)``.

    ``tangents`` has the structure of the argument selected by ``argnums`` (a
    tuple of them when ``argnums`` is a tuple).  ``.source`` and ``.path`` are
    the emitted module after the first call (or :meth:`compile`).
    """

    def __init__(self, fun: Callable, argnums: int | tuple[int, ...] = 0):
        if not callable(fun):
            raise TypeError(f"jvp() needs a function, got {type(fun).__name__}")
        functools.update_wrapper(self, fun, updated=())  # not fun's __dict__: its state
        self.fun = fun
        self.argnums = argnums
        self._signature = inspect.signature(fun)
        self._compiled: dict[str, tuple] = {}
        self._lock = threading.Lock()
        self._last: tuple | None = None

    def _target(self, values: list) -> _Target:
        from s2sad.api import GradientFunction

        nums = _argnums_tuple(self.argnums)
        if isinstance(self.fun, GradientFunction):
            return _gradient_target(self.fun, nums, values)
        if isinstance(self.fun, JvpFunction):
            return _jvp_target(self.fun, nums, values)
        return _plain_target(self.fun, nums, values)

    def _entry(self, values: list) -> tuple:
        sig = _type_signature(values)
        entry = self._compiled.get(sig)
        if entry is None:
            with self._lock:
                entry = self._compiled.get(sig)
                if entry is None:
                    entry = self._compile(values, sig)
                    self._compiled[sig] = entry
        self._last = entry
        return entry

    def _compile(self, values: list, sig: str) -> tuple:
        target = self._target(values)
        args = target.prepare(values)

        def compile_source():
            return forward.compile_function(target.fn, target.argnums, target.options,
                                            tuple(args))

        module, path, source = cache.load(target.fn, target.argnums, target.options,
                                          _type_signature(args), compile_source)
        return _first_function(module), path, source, target

    def emitted(self, values: list) -> Callable:
        """The emitted ``_jvp`` function for these primal arguments."""
        return self._entry(list(values))[0]

    def compile(self, *args: Any) -> "JvpFunction":
        """Compile (or load) for these primal arguments without running anything."""
        self._entry(self._bind(args))
        return self

    @property
    def source(self) -> str:
        if self._last is None:
            raise RuntimeError("not compiled yet: call the function (or .compile) first")
        return self._last[2]

    @property
    def path(self) -> str:
        if self._last is None:
            raise RuntimeError("not compiled yet: call the function (or .compile) first")
        return str(self._last[1])

    def _bind(self, args: tuple) -> list:
        bound = self._signature.bind(*args)
        bound.apply_defaults()
        return list(bound.arguments.values())

    def _tangent_list(self, values: list, tangents: Any) -> list:
        nums = _argnums_tuple(self.argnums)
        if isinstance(self.argnums, tuple):
            if not isinstance(tangents, (tuple, list)) or len(tangents) != len(nums):
                raise ValueError(f"argnums={self.argnums}: pass a tuple of {len(nums)} "
                                 "tangents")
        else:
            tangents = (tangents,)
        names = list(self._signature.parameters)
        out = []
        for i, t in zip(nums, tangents):
            if i >= len(values):
                raise IndexError(f"argnums={i} but the function takes {len(values)} "
                                 "arguments")
            _check_differentiable(values[i], f"argument '{names[i]}' (argnums={i})")
            out.append(_tangent_like(t, values[i], f"for '{names[i]}'"))
        return out

    def __call__(self, *args: Any) -> tuple:
        if not args:
            raise TypeError("call as f_jvp(*args, tangents)")
        values = self._bind(args[:-1])
        ts = self._tangent_list(values, args[-1])
        fn, _, _, target = self._entry(values)
        value, tangent = fn(*target.prepare(values), *ts)
        return target.output(value), target.output(tangent)


def jvp(fun: Callable | None = None, argnums: int | tuple[int, ...] = 0):
    """Forward mode: ``jvp(f)(*args, tangents) -> (f(*args), J tangents)``.

    Usable as ``@s2sad.jvp``, ``@s2sad.jvp(argnums=(0, 1))`` or ``s2sad.jvp(f)``.
    ``f`` may also be a ``grad``/``value_and_grad`` function (forward over
    reverse) or another ``jvp`` function (differentiated in its primal inputs).
    """
    if fun is None:
        return lambda f: JvpFunction(f, argnums)
    if isinstance(fun, (int, tuple)):
        raise TypeError("pass argnums by keyword: jvp(f, argnums=...)")
    return JvpFunction(fun, argnums)
