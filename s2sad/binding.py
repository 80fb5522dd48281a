"""How a call of a differentiated function is bound, checked and keyed.

Shared by :mod:`s2sad.api` (``grad``) and :mod:`s2sad.higher` (``jvp``,
``hvp``, ...), so that both read arguments, refuse non-float ones and decide
which compiled module a call needs in the same way.  Light on purpose: NumPy
and the runtime only, never the compiler.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from s2sad.errors import NonDifferentiableArgumentError
from s2sad.runtime import arrayapi, backend, pytrees, support
from s2sad.runtime.workspace import worthwhile


def argnums_tuple(argnums: int | tuple[int, ...]) -> tuple[int, ...]:
    """``argnums`` as a tuple (an int selects one argument)."""
    return argnums if isinstance(argnums, tuple) else (argnums,)


def normalize_argnums(argnums: Any) -> int | tuple[int, ...]:
    """``argnums`` as the transforms keep it: an int, or a tuple for any sequence.

    JAX's convention: ``argnums=[0, 1]`` behaves as ``(0, 1)`` (the gradients come
    back as a tuple); NumPy integers count as ints.  Anything else is a TypeError
    naming what was passed.
    """
    if isinstance(argnums, (int, np.integer)) and not isinstance(
        argnums, (bool, np.bool_)
    ):
        return int(argnums)
    if isinstance(argnums, (str, bytes, dict)) or not hasattr(argnums, "__iter__"):
        raise TypeError(
            f"argnums must be an int or a sequence of ints, not {argnums!r}"
        )
    items = tuple(argnums)
    for i in items:
        if not isinstance(i, (int, np.integer)) or isinstance(i, (bool, np.bool_)):
            raise TypeError(
                f"argnums must be an int or a sequence of ints; {argnums!r} holds {i!r}"
            )
    return tuple(int(i) for i in items)


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


def _type_name(value: Any, depth: int = 3) -> str:
    """The class of an object, with the classes of the objects it holds in its
    attributes (``Net{l1:Dense{},l2:Dense{}}``): the compiled code resolved the
    methods of those sub-objects too, so a different class there compiles again."""
    t = type(value)
    out = f"{t.__module__}.{t.__qualname__}"
    attrs = getattr(value, "__dict__", None)
    if depth == 0 or not isinstance(attrs, dict) or isinstance(value, _OPAQUE):
        return out
    inner = []
    for k, v in sorted(attrs.items()):
        if isinstance(v, (list, tuple)):
            objs = [_type_name(x, depth - 1) for x in v if not isinstance(x, _PLAIN)]
            if objs:
                inner.append(f"{k}:[{','.join(objs)}]")
        elif isinstance(v, _ROUTINES):  # self.act = np.tanh: which one matters
            code = getattr(v, "__code__", None)
            line = f":{code.co_firstlineno}" if code is not None else ""
            what = getattr(v, "__qualname__", getattr(v, "__name__", ""))
            inner.append(f"{k}={getattr(v, '__module__', '')}.{what}{line}")
        elif not isinstance(v, _PLAIN):
            inner.append(f"{k}:{_type_name(v, depth - 1)}")
    return out + "{" + ",".join(inner) + "}" if inner else out


def argnums_range_message(fn: Any, i: int, n: int, signature: Any) -> str:
    """The IndexError's text for an ``argnums`` entry past the arguments."""
    text = f"argnums={i} but {getattr(fn, '__name__', fn)} takes {n} arguments"
    star = [p.name for p in signature.parameters.values() if p.kind is p.VAR_POSITIONAL]
    if star:
        text += (
            f" (*{star[0]} counts as one, and s2sad differentiates no *args "
            "parameter: list the parameters, or pass the arrays as one tuple)"
        )
    return text


def argument_classes(values: Any, depth: int = 3) -> tuple:
    """The user classes of the objects among ``values`` and in their
    attributes, lists, tuples and dicts (the classes whose methods and
    properties compiled code inlines), in a fixed order, each once.  The
    cache key holds their sources (``cache.class_sources``); a compiled entry
    remembers them, so a class redefined under the same name (a reloaded
    module, a re-run notebook cell) compiles again."""
    found: dict[int, type] = {}

    def visit(v: Any, d: int) -> None:
        if isinstance(v, (list, tuple)):
            for x in v:
                visit(x, d)
            return
        if isinstance(v, dict):
            for x in v.values():
                visit(x, d)
            return
        if isinstance(v, _PLAIN) or isinstance(v, _OPAQUE) or isinstance(v, _ROUTINES):
            return
        t = type(v)
        mod = (getattr(t, "__module__", "") or "").split(".")[0]
        if mod in ("numpy", "builtins", "s2sad") or id(t) in found:
            return
        found[id(t)] = t
        attrs = getattr(v, "__dict__", None)
        if d and isinstance(attrs, dict):
            for x in attrs.values():
                visit(x, d - 1)

    visit(list(values), depth)
    return tuple(found.values())


def object_key(value: Any) -> str:
    """What a method compiled for ``value`` as its receiver depends on: its class
    and the classes (and functions) held in its attributes."""
    if isinstance(value, (list, tuple)):
        return _objects_in(value)
    if isinstance(value, _ROUTINES):  # a function argument: which one, exactly
        return f"{_routine_name(value)}@{id(value)}"
    return _type_name(value)


def _routine_name(v: Any) -> str:
    code = getattr(v, "__code__", None)
    line = f":{code.co_firstlineno}" if code is not None else ""
    what = getattr(v, "__qualname__", getattr(v, "__name__", ""))
    return f"{getattr(v, '__module__', '')}.{what}{line}"


def _objects_in(seq) -> str:
    """``-``, or the classes of the objects in a list (layers)."""
    objs = [_type_name(x) for x in seq if not isinstance(x, _PLAIN)]
    return f"[{','.join(objs)}]" if objs else "-"


def type_signature(values: list[Any]) -> str:
    """What changes a gradient module's code, for the cache key of ``grad``.

    Unusual argument types (their methods are inlined), which arguments are
    ints/bools/strings (sizes and flags the workspace pass treats as fixed),
    which are Python floats (``-``) and which NumPy scalars or None (their type),
    and whether any argument holds arrays: ``;scalar`` when none does (scalar
    code), ``;small`` when buffers are not worthwhile for these shapes.
    """
    parts = []
    arrays = False
    for i, v in enumerate(values):
        t = type(v)
        if t is np.ndarray:
            arrays = True
            parts.append(array_key(v))
        elif t is list or t is tuple or t is dict:
            arrays = True
            parts.append(t.__name__[0] + (_objects_in(v) if t is not dict else "-"))
        elif t is int or t is bool or t is str:
            parts.append("i")
        elif t is float:
            parts.append("-")
        elif isinstance(v, (np.generic, float, int, type(None))):
            # not a Python number: scalar code treats those as numbers
            # (transforms/reverse/scalars.py), so these need a module of their own
            parts.append(t.__name__)
        elif isinstance(v, _ROUTINES):  # activation=np.tanh: which function
            parts.append(f"fn:{_routine_name(v)}")
        elif _unverified_array(v):  # data of another library: refused, not guessed
            raise NonDifferentiableArgumentError(
                _unverified_message(f"argument {i}", v)
            )
        else:
            parts.append(_type_name(v))
    if not arrays:
        return ",".join(parts) + ";scalar"
    return ",".join(parts) + ("" if worthwhile(values) else ";small")


#: objects whose attributes are no instance state (a module's globals...)
_OPAQUE = (types.ModuleType, type, types.FunctionType, types.MethodType, np.vectorize)
_ROUTINES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, np.ufunc)
_PLAIN = (np.ndarray, np.generic, float, int, bool, list, tuple, dict, type(None), str)


def object_signature(values: list[Any], namespace: str | None = None) -> str:
    """The cache key part of modules compiled without buffers (forward mode, and
    the plain gradient modules it transforms): only the types of objects whose
    methods are inlined change their code.  Arrays of other libraries are
    refused here: these transforms run no backend guard (``s2sad.grad`` does),
    except those of the ``namespace`` library a jvp runs in (``s2sad.runtime.
    arrayapi``)."""
    return ",".join(
        (
            _plain_key(v)
            if isinstance(v, _PLAIN)
            or (namespace is not None and backend.library(v) == namespace)
            else _unguarded(v, i)
        )
        for i, v in enumerate(values)
    )


def _plain_key(v: Any) -> str:
    """``object_signature``'s part for a plain value: arrays by dtype, lists,
    tuples and dicts, Python floats and NumPy doubles apart (``array_key``)."""
    t = type(v)
    if t is np.ndarray:
        return array_key(v)
    if t is list or t is tuple or t is dict:
        return t.__name__[0] + "-"
    if t is float:
        return "f"
    return "float64" if t is np.float64 else "-"


def array_key(v: np.ndarray) -> str:
    """The key part of a NumPy array argument: its dtype (``a<f8``).  The compiled
    code may rely on an argument being an array of that dtype (its methods, no
    casts of float64 cotangents: ``transforms/reverse/likes.py``), so another
    type or dtype compiles again (lists, tuples and dicts are told apart from
    Python floats, and those from other numbers, for the same reason)."""
    return "a" + v.dtype.str


def _unguarded(value: Any, i: int) -> str:
    """The type name of an unusual argument; an error for a foreign array."""
    if backend.is_foreign(value):
        raise NonDifferentiableArgumentError(
            f"argument {i} is a Dask array: over Dask data s2sad runs grad and "
            "value_and_grad (guarded, one dask.compute per call); jvp, hvp, vjp, "
            "hessian and jacobian are not verified there yet. Pass NumPy arrays "
            "(e.g. x.compute() for a sample), or use s2sad.grad."
        )
    if backend.in_namespace(value):
        raise NonDifferentiableArgumentError(
            f"argument {i} is a {_qualified_type(value)}: over torch, CuPy and "
            "Array API arrays s2sad runs grad, value_and_grad and jvp (in the "
            "array's namespace); hvp, vjp, hessian and jacobian are not verified "
            "there yet. Pass NumPy arrays, or use s2sad.grad / s2sad.jvp."
        )
    if _unverified_array(value):
        raise NonDifferentiableArgumentError(
            _unverified_message(f"argument {i}", value)
        )
    return _type_name(value)


def _qualified_type(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


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
    if value is None:
        return  # an empty subtree: its gradient is None
    if pytrees.is_object_node(value):  # namedtuple, dataclass, registered class
        for step, v in pytrees.children(value):
            check_differentiable(v, name, index, what, path + step)
    elif isinstance(value, dict):
        for k, v in value.items():
            check_differentiable(v, name, index, what, f"{path}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for k, v in enumerate(value):
            check_differentiable(v, name, index, what, f"{path}[{k}]")
    elif backend.is_foreign(value):  # a Dask array: its gradient stays lazy
        if value.dtype.kind != "f":
            raise NonDifferentiableArgumentError(
                f"{where} is a Dask array of dtype {value.dtype}: {what} are defined "
                "for float arrays only. Convert it with .astype(np.float64), or "
                "leave it out of argnums."
            )
    elif backend.in_namespace(value):  # torch, CuPy, Array API: float arrays
        import array_api_compat

        if what not in ("gradients", "derivatives"):  # vjp, hvp...: not verified
            raise NonDifferentiableArgumentError(
                f"{where} is a {_qualified_type(value)}: over torch, CuPy and "
                "Array API arrays s2sad runs grad, value_and_grad and jvp; hvp, "
                "vjp, hessian and jacobian are not verified there yet. Pass NumPy "
                "arrays, or use s2sad.grad / s2sad.jvp."
            )

        xp = array_api_compat.array_namespace(value)
        if not xp.isdtype(value.dtype, "real floating"):
            raise NonDifferentiableArgumentError(
                f"{where} is a {_qualified_type(value)} of dtype {value.dtype}: "
                f"{what} are defined for real float arrays only. Convert it to "
                "float64, or leave it out of argnums."
            )
    elif _unverified_array(value):
        raise NonDifferentiableArgumentError(_unverified_message(where, value))
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
            "arrays and pytrees of them (dicts, lists, tuples, namedtuples, "
            "dataclasses, classes registered with s2sad.register_pytree)."
        )


def _unverified_array(value: Any) -> bool:
    """An array of a library s2sad has not verified (torch, CuPy, JAX, Array API
    libraries: they speak DLPack or the Array API); Dask's is verified."""
    t = type(value)
    return (hasattr(t, "__array_namespace__") or hasattr(t, "__dlpack__")) and not (
        isinstance(value, (np.ndarray, np.generic)) or backend.library(value)
    )


def _unverified_message(where: str, value: Any) -> str:
    return (
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}: s2sad "
        "runs gradients over NumPy arrays, over Dask arrays with NumPy parameters, "
        "and over torch, CuPy and array-api-strict arrays with parameters and data "
        f"in one library ({', '.join(backend.VERIFIED)}: the libraries its tests "
        "check against NumPy); other array libraries are not verified "
        "yet, and are refused rather than risk a silent difference. Convert it to "
        "NumPy (np.asarray(x), or x.numpy() for torch)."
    )


# ---------------------------------------------------------------- float edge cases

#: what Python float arithmetic raises where NumPy gives inf or nan (and a warning):
#: ``g / x`` at ``x = 0.0`` in a derivative rule, ``x ** 2.0`` past the float range
FLOAT_ERRORS = (ZeroDivisionError, OverflowError)


def holds_python_float(value: Any) -> bool:
    """Whether a Python float is anywhere in ``value`` (lists, tuples, dicts)."""
    t = type(value)
    if t is float:
        return True
    if t is list or t is tuple:
        return any(holds_python_float(v) for v in value)
    if t is dict:
        return any(holds_python_float(v) for v in value.values())
    return False


def numpy_floats(value: Any) -> Any:
    """``value`` with every Python float as ``np.float64`` (NumPy's semantics for
    0, inf and nan: results and warnings instead of exceptions)."""
    t = type(value)
    if t is float:
        return np.float64(value)
    if t is list or t is tuple:
        return t(numpy_floats(v) for v in value)
    if t is dict:
        return {k: numpy_floats(v) for k, v in value.items()}
    return value


def python_floats(result: Any, like: Any) -> Any:
    """``result`` with 0-d NumPy floats back to ``float`` where ``like`` (the
    argument it is the derivative of) holds a Python float."""
    t = type(like)
    if t is float:
        return float(result) if isinstance(result, np.floating) else result
    if (t is list or t is tuple) and isinstance(result, (list, tuple)):
        return type(result)(python_floats(r, v) for r, v in zip(result, like))
    if t is dict and isinstance(result, dict):
        return {k: python_floats(r, like.get(k)) for k, r in result.items()}
    return result


def primal_or_raise(fun: Callable, values: list, exc: BaseException) -> Any:
    """``fun(*values)``, when ``exc`` (one of :data:`FLOAT_ERRORS`, or a ``math``
    domain error, raised by an emitted function) came from derivative code or
    from ``math`` standing in for NumPy only; else ``exc`` again.

    When the user's own function raises on these floats too (``1.0 / x`` at
    ``0.0``), Python's semantics hold and the error is the user's.
    """
    if not holds_python_float(values):
        raise exc
    try:
        return fun(*values)
    except (*FLOAT_ERRORS, type(exc)):
        raise exc from None


def tangent_like(t: Any, x: Any, where: str) -> Any:
    """The caller's tangent in ``x``'s structure, shape and float dtype (None: zeros)."""
    if t is None:
        return support.zeros_like(x)
    if pytrees.is_object_node(x):  # namedtuple, dataclass, registered class
        kids = pytrees.cotangent_children(t, x)
        return pytrees.rebuild(
            x,
            [
                tangent_like(ti, xi, f"{where}{step}")
                for ti, (step, xi) in zip(kids, pytrees.children(x))
            ],
        )
    if x is None:
        return None
    if backend.in_namespace(x) and (t is None or backend.in_namespace(t)):
        if t is not None and tuple(t.shape) != tuple(x.shape):
            raise ValueError(
                f"tangent {where} has shape {tuple(t.shape)}, the argument "
                f"{tuple(x.shape)}"
            )
        return arrayapi.tangent_like(t, x)  # one library, one device: checked by run
    if backend.in_namespace(x) or backend.in_namespace(t):
        lib = backend.library(x) or backend.library(t)
        raise NonDifferentiableArgumentError(
            f"the tangent {where} or its argument is a {lib} array and the other "
            "is not, or this transform is one of hvp, vjp, hessian, jacobian (not "
            "verified on torch, CuPy and Array API arrays): s2sad runs grad, "
            "value_and_grad and jvp there, with arguments and tangents in one "
            "library. Convert both, or pass NumPy arrays."
        )
    if isinstance(x, dict):
        if not isinstance(t, dict) or set(t) - set(x):
            raise ValueError(
                f"tangent {where} must be a dict with the keys of the argument"
            )
        return {k: tangent_like(t.get(k), v, f"{where}[{k!r}]") for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        if not isinstance(t, (list, tuple)) or len(t) != len(x):
            raise ValueError(f"tangent {where} must be a list/tuple of length {len(x)}")
        return type(x)(
            tangent_like(ti, xi, f"{where}[{i}]")
            for i, (ti, xi) in enumerate(zip(t, x))
        )
    if np.shape(t) != np.shape(x):
        raise ValueError(
            f"tangent {where} has shape {np.shape(t)}, the argument " f"{np.shape(x)}"
        )
    if isinstance(x, np.ndarray):
        return np.asarray(t, dtype=x.dtype if x.dtype.kind in "fc" else np.float64)
    if isinstance(x, np.generic):
        return x.dtype.type(t)
    return float(t)
