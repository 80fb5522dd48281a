"""Forward mode and higher order: ``jvp``, ``hvp``, ``hessian``, ``jacobian``.

    f_jvp = s2sad.jvp(f, argnums=0)
    value, t_out = f_jvp(x, W, t_x)        # J t_x from an emitted forward-mode module

    s2sad.hvp(f)(x, W, v)                  # H v: forward mode over f's gradient module
    s2sad.hessian(f)(x, W)                 # H, one H v per entry of x (small inputs)
    s2sad.jacobian(f)(x, W)                # forward or reverse mode, by the shapes

Second derivatives differentiate *emitted code*: ``hvp`` compiles the gradient
module of ``f`` (as ``s2sad.grad`` does) and then compiles that module's
function in forward mode.  Compilation is lazy and cached like ``grad``'s.

Importing this module is light (NumPy, the runtime and :mod:`s2sad.api`); the
compiler and the cache are imported on the first compile.  It registers
``grad(grad(f))`` with :func:`s2sad.api.register_derivative_rule`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from s2sad import adapters
from s2sad.api import (
    CompiledModule,
    ForwardFunction,
    GradientFunction,
    register_derivative_rule,
)
from s2sad.binding import (
    FLOAT_ERRORS,
    CallBinding,
    argnums_tuple,
    argument_classes,
    check_differentiable,
    normalize_argnums,
    numpy_floats,
    object_signature,
    primal_or_raise,
    tangent_like,
)
from s2sad.errors import GlobalsChangedError, NonScalarOutputError
from s2sad.options import FOREIGN, Options
from s2sad.runtime import arrayapi

# ---------------------------------------------------------------- what gets transformed


@dataclass
class _Target:
    """A Python function to compile in forward mode, and how user calls map onto it."""

    fn: Callable
    argnums: tuple[int, ...]
    prepare: Callable[[list], list]  # user arguments -> fn's arguments
    output: Callable[[Any], Any]  # fn's result -> what the user gets (value or tangent)
    options: Options


def _forward_options() -> Options:
    """Options of a forward-mode module (imports the forward transform: compiling)."""
    from s2sad.transforms.forward import assembly

    return assembly.ForwardOptions()


def _plain_target(
    fun: Callable, argnums: tuple[int, ...], values: list, fresh: bool = False
) -> _Target:
    return _Target(fun, argnums, list, lambda r: r, _forward_options())


def _gradient_target(
    gf: GradientFunction, argnums: tuple[int, ...], values: list, fresh: bool = False
) -> _Target:
    """The emitted ``<f>_value_and_grad`` of a ``grad``/``value_and_grad`` object."""
    inner = argnums_tuple(gf.argnums)
    # the plain form: forward mode transforms this module, buffers and all
    options = dataclasses.replace(gf.options, workspace=False)
    fn = reverse_function(gf.fun, inner, options, values, fresh)

    def output(result: Any) -> Any:
        value, grads = result
        grads = grads if isinstance(gf.argnums, tuple) else grads[0]
        return (value, grads) if gf.with_value else grads

    return _Target(fn, argnums, lambda v: list(v) + [1.0], output, _forward_options())


def _jvp_target(
    jf: JvpFunction, argnums: tuple[int, ...], values: list, fresh: bool = False
) -> _Target:
    """The emitted ``<f>_jvp`` of an inner ``jvp`` (differentiated in its primal inputs)."""
    n = len(values) - 1
    if any(i >= n for i in argnums):
        raise ValueError(
            "jvp of a jvp differentiates with respect to the primal arguments "
            "only (not the inner tangents)"
        )
    fn = jf._entry(values[:n], fresh)[0]

    def prepare(v: list) -> list:
        return list(v[:n]) + list(jf._tangent_list(v[:n], v[n]))

    return _Target(fn, argnums, prepare, lambda r: r, _forward_options())


def reverse_function(
    fun: Callable,
    argnums: tuple[int, ...],
    options: Options,
    values: list,
    fresh: bool = False,
) -> Callable:
    """``fun``'s emitted value-and-gradient function (cached like ``s2sad.grad``;
    ``fresh``: compiled again, for globals rebound since the cached compile)."""
    from s2sad import cache

    def compile_source():
        from s2sad import pipeline

        return pipeline.compile_function(
            fun, argnums, options, tuple(values), formatted=False
        )

    sig, classes = object_signature(values), argument_classes(values)
    module, _, _ = cache.load(
        fun, argnums, options, sig, compile_source, fresh, classes
    )
    return cache.entry_function(module)


# ---------------------------------------------------------------- jvp


class JvpFunction(CompiledModule, ForwardFunction):
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
        signature = (
            fun.call_signature
            if isinstance(fun, JvpFunction)
            else inspect.signature(fun)
        )
        self._call = CallBinding(signature)
        self._compiled: dict[str, tuple] = {}
        self._classes: dict[str, tuple] = {}  # what each was compiled for (api)
        self._lock = threading.Lock()
        self._last: tuple | None = None

    def _target(self, values: list, fresh: bool = False) -> _Target:
        nums = argnums_tuple(self.argnums)
        if isinstance(self.fun, GradientFunction):
            return _gradient_target(self.fun, nums, values, fresh)
        if isinstance(self.fun, JvpFunction):
            return _jvp_target(self.fun, nums, values, fresh)
        return _plain_target(self.fun, nums, values, fresh)

    def _namespace(self, values: list) -> str | None:
        """The torch/CuPy/Array API library of a plain jvp's arguments (else None:
        forward over reverse and jvp of jvp are not verified there)."""
        if isinstance(self.fun, (GradientFunction, JvpFunction)):
            return None
        return arrayapi.library_of(values)

    def _entry(self, values: list, fresh: bool = False) -> tuple:
        """``(function, path, source, target)`` for these primal arguments: from
        memory, the disk cache, or compiled (always compiled when ``fresh``)."""
        lib = self._namespace(values)
        sig = f"{lib}:{object_signature(values, lib)}"
        classes = argument_classes(values)  # (redefined under their names: again)
        entry = None if fresh else self._compiled.get(sig)
        if entry is None or self._classes.get(sig) != classes:
            with self._lock:
                stale = fresh or self._classes.get(sig) != classes
                entry = None if stale else self._compiled.get(sig)
                if entry is None:
                    entry = self._compile(values, lib, fresh)
                    self._compiled[sig] = entry
                    self._classes[sig] = classes
        self._last = entry
        return entry

    def _compile(self, values: list, lib: str | None, fresh: bool = False) -> tuple:
        from s2sad import cache

        target = self._target(values, fresh)
        if lib is not None:  # the Array API path: no bool arithmetic inlined
            options = dataclasses.replace(target.options, buffers=FOREIGN)
            target = dataclasses.replace(target, options=options)
        args = target.prepare(values)

        def compile_source():
            from s2sad import pipeline

            return pipeline.compile_function(
                target.fn,
                target.argnums,
                target.options,
                tuple(args),
                mode="forward",
                line_table=True,
                formatted=False,  # black only for .source
            )

        sig, classes = object_signature(args, lib), argument_classes(args)
        module, path, source = cache.load(
            target.fn,
            target.argnums,
            target.options,
            sig,
            compile_source,
            fresh,
            classes,
        )
        return cache.entry_function(module), path, source, target

    def emitted(self, values: list) -> Callable:
        """The emitted ``_jvp`` function for these primal arguments."""
        return self._entry(list(values))[0]

    def compile(self, *args: Any) -> JvpFunction:
        """Compile (or load) for these primal arguments without running anything."""
        self._entry(self._bind(args))
        return self

    @property
    def call_signature(self) -> inspect.Signature:
        """``(*params, tangents)``: how this function is called."""
        signature = self._call.signature
        params = list(signature.parameters.values())
        extra = inspect.Parameter("tangents", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return signature.replace(parameters=params + [extra])

    def _bind(self, args: tuple) -> list:
        return self._call.bind(args)

    def _tangent_list(self, values: list, tangents: Any) -> list:
        nums = argnums_tuple(self.argnums)
        if isinstance(self.argnums, tuple):
            if not isinstance(tangents, (tuple, list)) or len(tangents) != len(nums):
                raise ValueError(
                    f"argnums={self.argnums}: pass a tuple of {len(nums)} " "tangents"
                )
        else:
            tangents = (tangents,)
        names = self._call.names
        out = []
        for i, t in zip(nums, tangents):
            if i >= len(values):
                raise IndexError(
                    f"argnums={i} but the function takes {len(values)} " "arguments"
                )
            check_differentiable(values[i], names[i], i, "derivatives")
            out.append(tangent_like(t, values[i], f"for '{names[i]}'"))
        return out

    def __call__(self, *args: Any) -> tuple:
        if not args:
            raise TypeError("call as f_jvp(*args, tangents)")
        values = self._bind(args[:-1])
        ts = self._tangent_list(values, args[-1])
        try:
            fn, value, tangent, target = self._run(values, ts)
        except FLOAT_ERRORS as exc:
            # derivative code on Python floats (t / x at x = 0.0): NumPy's semantics
            primal_or_raise(self.fun, values, exc)
            fn, _, _, target = self._entry(values)
            args = target.prepare(values)
            value, tangent = fn(*numpy_floats(args), *numpy_floats(ts))
        except Exception as exc:  # say where in the user's source
            from s2sad import locate

            locate.add_note(exc, self.fun, "jvp")
            raise
        return target.output(value), target.output(tangent)

    def _run(self, values: list, ts: list) -> tuple:
        """Run the emitted ``_jvp``; compiled again when a global it was specialised
        on has been rebound (the emitted entry checks them first), as ``grad`` does."""
        for attempt in range(3):
            # 0: the code in memory; 1: the cache's code; 2: compiled afresh
            fn, _, _, target = self._entry(values, fresh=attempt == 2)
            lib = self._namespace(values)
            try:
                if lib is not None:  # torch, CuPy, Array API: in their namespace
                    args = [*target.prepare(values), *ts]
                    return (fn, *arrayapi.run(fn, args, [], lib), target)
                return (fn, *fn(*target.prepare(values), *ts), target)
            except GlobalsChangedError:
                if attempt == 2:
                    raise
                self._compiled.pop(f"{lib}:{object_signature(values, lib)}", None)
        raise AssertionError("unreachable")


_MISSING = object()


def jvp(
    fun: Callable | None = None,
    argnums: Any = 0,
    tangents: Any = _MISSING,
    *,
    has_aux: bool = False,
):
    """Forward mode: ``jvp(f)(*args, tangents) -> (f(*args), J tangents)``.

    Usable as ``@s2sad.jvp``, ``@s2sad.jvp(argnums=(0, 1))`` or ``s2sad.jvp(f)``.
    ``f`` may also be a ``grad``/``value_and_grad`` function (forward over
    reverse) or another ``jvp`` function (differentiated in its primal inputs).

    JAX's form computes at once: ``jvp(f, primals, tangents) -> (out, t_out)``
    (``(out, t_out, aux)`` with ``has_aux=True``), one tangent per primal.
    """
    if tangents is not _MISSING:
        return jvp_at(fun, argnums, tangents, has_aux)
    if has_aux:
        raise TypeError(
            "has_aux is for JAX's form jvp(f, primals, tangents, has_aux=True)"
        )
    if not isinstance(argnums, int):
        argnums = normalize_argnums(argnums)
    if fun is None:
        return lambda f: JvpFunction(f, argnums)
    if isinstance(fun, (int, tuple)):
        raise TypeError("pass argnums by keyword: jvp(f, argnums=...)")
    return JvpFunction(fun, argnums)


def jvp_target(fun: Callable, n: int) -> tuple[Callable, tuple, dict, tuple[int, ...]]:
    """(function to compile, leading arguments, keywords, positions of the n primals)."""
    bound = adapters.unwrap(fun)
    target, prefix, keywords = bound if bound is not None else (fun, (), {})
    if adapters.is_rule_only(target) or not callable(target):
        raise TypeError(
            f"vjp/jvp need a Python function, not {target!r}; use s2sad.grad for "
            "ufuncs and builtins"
        )
    return target, prefix, keywords, tuple(range(len(prefix), len(prefix) + n))


def split_aux(out: Any, has_aux: bool, name: str) -> tuple[Any, Any]:
    if not has_aux:
        return out, None
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise NonScalarOutputError(
            f"has_aux=True: {name} must return a pair (value, aux), but it returned "
            f"a {type(out).__name__}"
        )
    return out[0], out[1]


# ---------------------------------------------------------------- jvp, JAX's form


def jvp_at(
    fun: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False
) -> tuple:
    """``jvp(f, primals, tangents) -> (out, J tangents)`` (``(out, t_out, aux)``
    with ``has_aux``): every primal is differentiated."""
    if not isinstance(primals, (tuple, list)) or not isinstance(
        tangents, (tuple, list)
    ):
        raise TypeError("jvp(f, primals, tangents): primals and tangents are tuples")
    if len(primals) != len(tangents):
        raise ValueError(
            f"jvp: {len(primals)} primals but {len(tangents)} tangents; give one "
            "tangent per primal"
        )
    target, prefix, keywords, nums = jvp_target(fun, len(primals))
    if keywords:
        raise TypeError(
            "jvp of a functools.partial with keyword arguments: bind them "
            "positionally, or pass them to the function"
        )
    jf = JvpFunction(target, nums)
    out, t_out = jf(*prefix, *primals, tuple(tangents))
    if not has_aux:
        return out, t_out
    value, aux = split_aux(out, True, getattr(fun, "__qualname__", repr(fun)))
    return (
        value,
        split_aux(t_out, True, getattr(fun, "__qualname__", repr(fun)))[0],
        aux,
    )


# ---------------------------------------------------------------- second order


def _gradient(fun: Callable, argnums: int | tuple[int, ...], with_value: bool = False):
    return GradientFunction(fun, argnums, with_value)


class HvpFunction(ForwardFunction):
    """``hvp(f)(*args, v) -> H v``: forward mode over f's emitted gradient module."""

    def __init__(self, fun: Callable, argnums: int | tuple[int, ...] = 0):
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.argnums = argnums
        self._jvp = JvpFunction(_gradient(fun, argnums), argnums)

    @property
    def source(self) -> str:
        """The emitted forward-over-reverse module."""
        return self._jvp.source

    @property
    def path(self) -> str:
        return self._jvp.path

    def __call__(self, *args: Any) -> Any:
        return self._jvp(*args)[1]


def hvp(fun: Callable | None = None, argnums: int | tuple[int, ...] = 0):
    """Hessian-vector product of a scalar function: ``hvp(f)(*args, v) -> H v``.

    ``v`` and the result have the structure of the argument(s) selected by
    ``argnums`` (tuples of them for a tuple), like gradients do.
    """
    if fun is None:
        return lambda f: HvpFunction(f, argnums)
    return HvpFunction(fun, argnums)


def basis(x: Any) -> list[Any]:
    """Unit tangents of a float or array argument, one per entry (C order)."""
    if isinstance(x, (dict, list, tuple)):
        raise TypeError(
            "hessian and jacobian take float or array arguments (not "
            "dicts, lists or tuples); use hvp or jvp for those"
        )
    if isinstance(x, np.ndarray):
        dtype = x.dtype if x.dtype.kind in "fc" else np.float64
        out = []
        for k in range(x.size):
            e = np.zeros(x.size, dtype=dtype)
            e[k] = 1
            out.append(e.reshape(x.shape))
        return out
    return [1.0]


def grad_of_gradient(
    inner: Any, argnums: int | tuple[int, ...] = 0, with_value: bool = False
) -> Callable:
    """``grad(grad(f, argnums=i), argnums=j)`` computed as forward over reverse.

    The inner gradient must be a scalar (argument i is a float or has one entry).
    By symmetry of second derivatives, d/dx_j (df/dx_i) = d/dx_i (df/dx_j): one
    JVP of the gradient w.r.t. x_j in the direction e_i, with no reverse-over-
    reverse pass.
    """
    if not isinstance(inner, GradientFunction):
        raise TypeError("grad_of_gradient needs a function made by s2sad.grad")
    if inner.with_value or isinstance(inner.argnums, tuple):
        raise NonScalarOutputError(
            "grad of value_and_grad or of a tuple of gradients: the inner function's "
            "output is not a scalar; differentiate one gradient (an int argnums)"
        )
    i = inner.argnums
    outer = JvpFunction(_gradient(inner.fun, argnums), i)

    def second(*args: Any) -> Any:
        if np.size(args[i]) != 1:
            raise NonScalarOutputError(
                f"grad of grad: the inner gradient has the shape {np.shape(args[i])} of "
                f"argument {i}, not a scalar; use s2sad.hessian or s2sad.hvp"
            )
        _, d2 = outer(*args, basis(args[i])[0])
        if not with_value:
            return d2
        return inner(*args), d2

    functools.update_wrapper(second, inner.fun)
    return second


register_derivative_rule(GradientFunction, grad_of_gradient)
