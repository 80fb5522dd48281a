"""Callables that are not plain Python functions, made differentiable.

``grad`` compiles Python source.  What it is given may also be:

- a ``functools.partial``: the underlying function is compiled, the bound
  arguments are passed in front of the call's (``argnums`` counts the
  partial's own positional parameters, as in JAX);
- a bound method ``obj.loss``: its function is compiled with ``obj`` as the
  first argument;
- a NumPy ufunc, a builtin or a ``math`` function (no source): its registered
  adjoint rule is applied directly, ``grad(np.sin)(1.0) == cos(1.0)``.

This module never imports :mod:`s2sad.api`; the api builds these objects.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from s2sad.binding import argnums_tuple, check_differentiable
from s2sad.errors import NonScalarOutputError, SourceUnavailableError
from s2sad.runtime import registry, support


def unwrap(fun: Any) -> tuple[Callable, tuple, dict] | None:
    """``(function, leading arguments, keywords)`` for a partial or bound method
    (nested ones flattened); None for anything else."""
    prefix: tuple = ()
    keywords: dict = {}
    target = fun
    changed = False
    while True:
        if isinstance(target, functools.partial):
            prefix = tuple(target.args) + prefix
            keywords = {**target.keywords, **keywords}
            target = target.func
        elif isinstance(target, types.MethodType):
            prefix = (target.__self__,) + prefix
            target = target.__func__
        else:
            break
        changed = True
    return (target, prefix, keywords) if changed else None


def shift(argnums: int | tuple[int, ...], by: int) -> int | tuple[int, ...]:
    """``argnums`` of the wrapper as positions in the underlying function."""
    if isinstance(argnums, tuple):
        return tuple(i + by for i in argnums)
    return argnums + by


def has_source(fun: Any) -> bool:
    """Whether ``fun`` is Python code s2sad can read (not a ufunc or builtin)."""
    return isinstance(fun, (types.FunctionType, types.MethodType, functools.partial))


def is_rule_only(fun: Any) -> bool:
    """A ufunc, builtin or C function: differentiated through its registered rule."""
    if isinstance(fun, np.ufunc):
        return True
    return isinstance(
        fun, (types.BuiltinFunctionType, types.BuiltinMethodType)
    ) or type(fun).__name__ in ("_ArrayFunctionDispatcher", "cython_function_or_method")


class BoundGradient:
    """``grad`` of a partial or bound method: the underlying function's gradient
    (``inner``, a ``GradientFunction``) called with the bound arguments in front."""

    def __init__(self, fun: Any, inner: Any, prefix: tuple, keywords: dict):
        self.fun = fun
        self.inner = inner
        self.prefix = prefix
        self.keywords = keywords
        self.argnums = shift(inner.argnums, -len(prefix))
        self.__doc__ = getattr(inner.fun, "__doc__", None)
        self.__wrapped__ = fun

    def __call__(self, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        return self.inner(*self.prefix, *args, out=out, **{**self.keywords, **kwargs})

    def compile(self, *args: Any, **kwargs: Any) -> BoundGradient:
        self.inner.compile(*self.prefix, *args, **{**self.keywords, **kwargs})
        return self

    @property
    def source(self) -> str:
        return self.inner.source

    @property
    def path(self) -> str:
        return self.inner.path

    def __repr__(self) -> str:
        kind = "value_and_grad" if self.inner.with_value else "grad"
        return f"<s2sad.{kind} of {self.fun!r}, argnums={self.argnums!r}>"


class RuleGradient:
    """``grad`` of a function without source (``np.sin``, ``abs``, ``math.exp``),
    computed by its registered adjoint rule."""

    def __init__(
        self,
        fun: Any,
        argnums: int | tuple[int, ...],
        with_value: bool,
        has_aux: bool = False,
    ):
        rule = registry.lookup(fun)
        name = registry.display_name(fun)
        if rule is None:
            raise SourceUnavailableError(
                f"{name} has no Python source and no registered rule: register one "
                f"with @s2sad.adjoint({name}) or differentiate a Python function "
                "that calls it"
            )
        if has_aux:
            raise TypeError(f"has_aux=True needs a Python function, not {name}")
        self.fun = fun
        self.rule = rule
        self.argnums = argnums
        self.with_value = with_value
        self.__name__ = getattr(fun, "__name__", name)
        self.__doc__ = getattr(fun, "__doc__", None)

    def __repr__(self) -> str:
        kind = "value_and_grad" if self.with_value else "grad"
        return (
            f"<s2sad.{kind} of {registry.display_name(self.fun)}, "
            f"argnums={self.argnums!r}>"
        )

    def __call__(self, *args: Any) -> Any:
        nums = argnums_tuple(self.argnums)
        for i in nums:
            if i >= len(args):
                raise IndexError(
                    f"argnums={i} but {self.__name__} got {len(args)} arguments"
                )
            check_differentiable(args[i], f"#{i}", i)
        ans = self.fun(*args)
        if isinstance(ans, (tuple, list, dict)) or np.size(ans) != 1:
            raise NonScalarOutputError(
                f"{self.__name__} returned a value of shape {np.shape(ans)}; grad "
                "needs a scalar output"
            )
        if self.rule.differentiable:
            seed = np.ones_like(ans, dtype=np.result_type(ans, float))
            cts = self.rule.adjoint(seed[()], ans, *args)
            cts = tuple(cts[: len(args)]) + (None,) * (len(args) - len(cts))
            if self.rule.broadcasts:
                cts = tuple(support.unbroadcast(c, a) for c, a in zip(cts, args))
        else:
            cts = (None,) * len(args)
        grads = tuple(support.finalize(cts[i], args[i]) for i in nums)
        grads = grads if isinstance(self.argnums, tuple) else grads[0]
        return (ans, grads) if self.with_value else grads
