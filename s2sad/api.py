"""The public decorators: ``grad`` and ``value_and_grad``.

Compilation is lazy: the first call parses, transforms and emits the gradient
module (or loads it from the cache), later calls go straight to it.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable

import numpy as np

from s2sad.errors import NonDifferentiableArgumentError, NonScalarOutputError
from s2sad.options import Options
from s2sad.runtime.workspace import shape_key, worthwhile

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
        self._signature = inspect.signature(fun)
        self._compiled: dict[str, tuple] = {}
        self._lock = threading.Lock()
        params = list(self._signature.parameters.values())
        self._names = [p.name for p in params]
        # plain positional parameters only: calls with all of them skip Signature.bind
        self._simple = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
        self._last = None
        # updated=(): copying fun.__dict__ would overwrite this object's own state
        # when fun is itself a wrapper object
        functools.update_wrapper(self, fun, updated=())

    @property
    def _argnums(self) -> tuple[int, ...]:
        return self.argnums if isinstance(self.argnums, tuple) else (self.argnums,)

    # -- compiled module
    def _bind(self, args, kwargs) -> list[Any]:
        if self._simple and not kwargs and len(args) == len(self._names):
            return list(args)
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return list(bound.arguments.values())

    def _type_signature(self, values: list[Any]) -> str:
        """What changes the emitted code: unusual argument types (their methods are
        inlined), which arguments are ints/bools/strings (sizes and flags the
        workspace pass treats as fixed), and whether any argument holds arrays."""
        parts = []
        arrays = False
        for v in values:
            t = type(v)
            if t is np.ndarray or t is list or t is tuple or t is dict:
                arrays = True
                parts.append("-")
            elif t is int or t is bool or t is str:
                parts.append("i")
            elif isinstance(v, (np.generic, float, int, type(None))):
                parts.append("-")
            else:
                parts.append(f"{t.__module__}.{t.__qualname__}")
        if not arrays:
            return ",".join(parts) + ";scalar"
        return ",".join(parts) + ("" if worthwhile(values) else ";small")

    def _module(self, values: list[Any]):
        sig = self._type_signature(values)
        entry = self._compiled.get(sig)
        if entry is None:
            with self._lock:
                entry = self._compiled.get(sig)
                if entry is None:
                    argnums = self._argnums
                    options = self.options.for_call(values)  # buffers decided here
                    from s2sad import cache

                    def compile_source():
                        from s2sad import pipeline  # the compiler: only on a cache miss

                        return pipeline.compile_function(
                            self.fun, argnums, options, tuple(values)
                        )

                    module, path, source = cache.load(
                        self.fun, argnums, options, sig, compile_source
                    )
                    fn = next(
                        getattr(module, n)
                        for n in dir(module)
                        if n.endswith("_value_and_grad")
                        and callable(getattr(module, n))
                    )
                    pool = None
                    if "ws" in inspect.signature(fn).parameters:
                        from s2sad.runtime.workspace import Pool

                        pool = Pool(fn, source)
                    entry = (fn, path, source, pool)
                    self._compiled[sig] = entry
        self._last = entry
        return entry

    def compile(self, *args, **kwargs) -> "GradientFunction":
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
                _check_differentiable(
                    v, self._names[i], i
                )  # the slow path: pytrees, errors
        fn, _, _, pool = self._module(values)
        if pool is None:
            value, grads = fn(*values)
        else:
            value, grads = self._with_workspace(pool, values, out)
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


def _check_differentiable(value: Any, name: str, index: int, path: str = "") -> None:
    where = f"argument '{name}'{path} (argnums={index})"
    if isinstance(value, dict):
        for k, v in value.items():
            _check_differentiable(v, name, index, f"{path}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for k, v in enumerate(value):
            _check_differentiable(v, name, index, f"{path}[{k}]")
    elif isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer))):
        raise NonDifferentiableArgumentError(
            f"{where} is {type(value).__name__} {value!r}: gradients are defined for float "
            "values only. Pass a float (e.g. 3.0), or leave it out of argnums."
        )
    elif isinstance(value, np.ndarray) and value.dtype.kind not in "fc":
        raise NonDifferentiableArgumentError(
            f"{where} is an array of dtype {value.dtype}: gradients are defined for float "
            "arrays only. Convert it with .astype(np.float64), or leave it out of argnums."
        )
    elif not isinstance(value, (float, np.floating, np.ndarray, complex)):
        raise NonDifferentiableArgumentError(
            f"{where} is a {type(value).__name__}: s2sad differentiates floats, float arrays "
            "and dicts/lists/tuples of them."
        )


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


def _decorator(with_value: bool):
    def make(
        fun: Callable | None = None,
        argnums: int | tuple[int, ...] = 0,
        *,
        optimize: bool = True,
    ):
        if fun is None:
            return lambda f: GradientFunction(f, argnums, with_value, optimize)
        if isinstance(fun, int) or isinstance(fun, tuple):
            raise TypeError(
                "pass argnums by keyword: grad(f, argnums=...) or @grad(argnums=...)"
            )
        if isinstance(fun, GradientFunction):
            # grad(grad(f)): forward over reverse, by transforming the emitted module
            from s2sad.higher import grad_of_gradient

            return grad_of_gradient(fun, argnums, with_value)
        if type(fun).__module__ == "s2sad.higher":
            raise TypeError(
                f"grad of a {type(fun).__name__} (made by s2sad.jvp, hvp, hessian or "
                "jacobian) is not supported: for second derivatives use s2sad.hvp(f), "
                "s2sad.hessian(f) or s2sad.grad(s2sad.grad(f))"
            )
        return GradientFunction(fun, argnums, with_value, optimize)

    return make


grad = _decorator(False)
grad.__doc__ = """Gradient of a scalar function with respect to ``argnums`` (default 0).

    @s2sad.grad                         # bare decorator
    def loss(w, x): ...

    dloss = s2sad.grad(loss, argnums=(0, 1))   # tuple of gradients

Each gradient has the structure, shape and dtype of its argument.
"""

value_and_grad = _decorator(True)
value_and_grad.__doc__ = (
    """Like :func:`grad`, but the function returns ``(value, gradient)``."""
)
