"""How a call of a differentiated function is bound, checked and keyed.

Shared by :mod:`s2sad.api` (``grad``) and :mod:`s2sad.higher` (``jvp``,
``hvp``, ...), so that both read arguments, refuse non-float ones and decide
which compiled module a call needs in the same way.  Light on purpose: NumPy
and the runtime only, never the compiler.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from s2sad.errors import NonDifferentiableArgumentError
from s2sad.runtime.workspace import worthwhile


def argnums_tuple(argnums: int | tuple[int, ...]) -> tuple[int, ...]:
    """``argnums`` as a tuple (an int selects one argument)."""
    return argnums if isinstance(argnums, tuple) else (argnums,)


class CallBinding:
    """A function's signature, ready to turn calls into its argument list."""

    def __init__(self, signature: inspect.Signature):
        self.signature = signature
        params = list(signature.parameters.values())
        #: the parameter names, in order (for error messages)
        self.names = [p.name for p in params]
        # plain positional parameters only: calls with all of them skip Signature.bind
        self._simple = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)

    def bind(self, args: tuple, kwargs: dict | None = None) -> list[Any]:
        """Every parameter's value for this call, defaults filled in, in order."""
        if self._simple and not kwargs and len(args) == len(self.names):
            return list(args)
        bound = self.signature.bind(*args, **(kwargs or {}))
        bound.apply_defaults()
        return list(bound.arguments.values())


# ---------------------------------------------------------------- cache keys


def _type_name(value: Any) -> str:
    t = type(value)
    return f"{t.__module__}.{t.__qualname__}"


def type_signature(values: list[Any]) -> str:
    """What changes a gradient module's code, for the cache key of ``grad``.

    Unusual argument types (their methods are inlined), which arguments are
    ints/bools/strings (sizes and flags the workspace pass treats as fixed),
    and whether any argument holds arrays: ``;scalar`` when none does (scalar
    code), ``;small`` when buffers are not worthwhile for these shapes.
    """
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
            parts.append(_type_name(v))
    if not arrays:
        return ",".join(parts) + ";scalar"
    return ",".join(parts) + ("" if worthwhile(values) else ";small")


_PLAIN = (np.ndarray, np.generic, float, int, bool, list, tuple, dict, type(None), str)


def object_signature(values: list[Any]) -> str:
    """The cache key part of modules compiled without buffers (forward mode, and
    the plain gradient modules it transforms): only the types of objects whose
    methods are inlined change their code."""
    return ",".join("-" if isinstance(v, _PLAIN) else _type_name(v) for v in values)


# ---------------------------------------------------------------- checks


def check_differentiable(
    value: Any, name: str, index: int, what: str = "gradients", path: str = ""
) -> None:
    """Refuse an argument that cannot be differentiated, saying where it is.

    ``name`` and ``index`` are the parameter's name and position; entries of
    dicts, lists and tuples are checked one by one and named by their ``path``
    (``argument 'p'['W'] (argnums=0)``).  ``what`` is the word for the result
    in the message (``"derivatives"`` for forward mode).
    """
    where = f"argument '{name}'{path} (argnums={index})"
    if isinstance(value, dict):
        for k, v in value.items():
            check_differentiable(v, name, index, what, f"{path}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for k, v in enumerate(value):
            check_differentiable(v, name, index, what, f"{path}[{k}]")
    elif isinstance(value, (bool, np.bool_, int, np.integer)):
        raise NonDifferentiableArgumentError(
            f"{where} is {type(value).__name__} {value!r}: {what} are defined for "
            "float values only. Pass a float (e.g. 3.0), or leave it out of argnums."
        )
    elif isinstance(value, (complex, np.complexfloating)) or (
        isinstance(value, np.ndarray) and value.dtype.kind == "c"
    ):
        kind = (
            f"an array of dtype {value.dtype}"
            if isinstance(value, np.ndarray)
            else f"{type(value).__name__} {value!r}"
        )
        raise NonDifferentiableArgumentError(
            f"{where} is {kind}: complex arguments are not supported yet. "
            "Differentiate the real and imaginary parts as separate float arguments "
            "(e.g. pass x.real and x.imag and build x = re + 1j * im inside)."
        )
    elif isinstance(value, np.ndarray) and value.dtype.kind != "f":
        raise NonDifferentiableArgumentError(
            f"{where} is an array of dtype {value.dtype}: {what} are defined for float "
            "arrays only. Convert it with .astype(np.float64), or leave it out of "
            "argnums."
        )
    elif not isinstance(value, (float, np.floating, np.ndarray)):
        raise NonDifferentiableArgumentError(
            f"{where} is a {type(value).__name__}: s2sad differentiates floats, float "
            "arrays and dicts/lists/tuples of them."
        )
