"""Forward mode's runtime helpers on the Array API path (torch, CuPy, array-api-strict).

``s2sad.jvp`` over arrays of a namespace library runs the emitted forward
module with ``np`` rebound (:func:`s2sad.runtime.arrayapi.run`), as gradients
do; the helpers of :mod:`s2sad.runtime.tangents` it calls are these versions
(:data:`RULES`, merged into the allow-list of
:mod:`s2sad.runtime.arrayapi_joining`).  The tangent rules themselves are the
adjoint rules' inlined expressions (diagonal Jacobians) or their Array API
versions, the same as for gradients; anything else is refused by name.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from s2sad.runtime.arrayapi_numpy import current
from s2sad.runtime.arrayapi_rules import as_float, is_array, zeros_like


def or_zeros(t: Any, x: Any) -> Any:
    """tangents.or_zeros: ``t``, or the zero tangent of ``x`` for None."""
    if t is not None:
        return t
    if isinstance(x, range):
        return [0.0] * len(x)
    return zeros_like(x)


def filled(t: Any, x: Any) -> Any:
    """tangents.filled: the tangent of a container with zeros for None entries."""
    if t is None:
        return zeros_like(x)
    if isinstance(x, dict):
        return {k: filled(t.get(k), v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) and isinstance(t, (list, tuple)):
        return type(t)(filled(ti, xi) for ti, xi in zip(t, x))
    return t


def broadcast_like(t: Any, ans: Any) -> Any:
    """tangents.broadcast_like: ``t`` broadcast to the shape of ``ans``."""
    shape = tuple(ans.shape) if is_array(ans) else ()
    if is_array(t) and tuple(t.shape) == shape:
        return t
    return current().xp.broadcast_to(as_float(t, ans), shape)


def method_receiver(t: Any, x: Any) -> Any:
    """tangents.method_receiver: a Python-number tangent of an array receiver as
    an array of its dtype (so that it has the method)."""
    if type(t) in (float, int) and is_array(x):
        return current().xp.asarray(t, dtype=x.dtype)
    return t


def zero_entry(ts: Any, k: int) -> tuple:
    """tangents.zero_entry: ``ts`` with entry ``k`` None (zero)."""
    out = list(ts)
    out[k] = None
    return tuple(out)


def finish(t: Any, x: Any) -> Any:
    """tangents.finish: the output's tangent in x's structure, shape and float
    dtype, a new array of the call's library (never None)."""
    if t is None:
        return zeros_like(x)
    if isinstance(x, dict):
        return {k: finish(t.get(k), v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(finish(ti, xi) for ti, xi in zip(t, x))
    if isinstance(x, (bool, str)):
        return zeros_like(x)
    if not is_array(x):  # a Python number
        return t if is_array(t) else float(t)
    xp = current().xp
    t = as_float(t, x)
    if tuple(t.shape) != tuple(x.shape):
        t = xp.broadcast_to(t, tuple(x.shape))
    return xp.asarray(t, copy=True)


def jvp_reduction(
    adjoint: Any, t: Any, ans: Any, x: Any, *args: Any, **kwargs: Any
) -> Any:
    """tangents.jvp_reduction: J t of a reduction, from its (Array API) adjoint
    with g = 1 (each output entry reads its own slice of ``x``)."""
    xp = current().xp
    ones = xp.ones_like(ans) if is_array(ans) else 1.0
    weights = adjoint(ones, ans, x, *args, **kwargs)[0]
    bound = _signature(adjoint).bind(None, ans, x, *args, **kwargs)
    axis = bound.arguments.get("axis")
    if isinstance(axis, list):
        axis = tuple(axis)
    keepdims = bool(bound.arguments.get("keepdims", False))
    out = xp.sum(weights * as_float(t, weights), axis=axis, keepdims=keepdims)
    return xp.astype(out, ans.dtype) if is_array(ans) else out


def jvp_scalar(
    adjoint: Any, argnum: int, t: Any, ans: Any, *args: Any, **kwargs: Any
) -> Any:
    """tangents.jvp_scalar: J t of a scalar-valued primal, the gradient of
    argument ``argnum`` (its Array API adjoint, seeded with 1) dotted with t."""
    xp = current().xp
    seed = xp.ones_like(ans) if is_array(ans) else 1.0
    grads = list(adjoint(seed, ans, *args, **kwargs))
    grads += [None] * (len(args) - len(grads))
    out = _vdot(grads[argnum], t)
    return xp.astype(out, ans.dtype) if is_array(ans) and is_array(out) else out


def _vdot(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return 0.0
    if isinstance(a, dict):
        return sum(_vdot(v, b.get(k)) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        return sum(_vdot(u, v) for u, v in zip(a, b))
    return current().xp.sum(a * as_float(b, a)) if is_array(a) else a * b


@functools.cache
def _signature(fn: Any) -> inspect.Signature:
    return inspect.signature(fn)


def _named(*fns: Any) -> dict:
    return {f"s2sad.runtime.tangents.{f.__name__}": f for f in fns}


#: tangents' helpers -> their versions on the namespace path
RULES: dict = _named(
    or_zeros,
    filled,
    broadcast_like,
    method_receiver,
    zero_entry,
    finish,
    jvp_reduction,
    jvp_scalar,
)
