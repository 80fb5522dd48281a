"""Forward-mode (tangent) rules: the registry, and the helpers emitted JVP code calls.

A tangent rule says how a primal pushes the tangent ``t`` of ONE positional
argument forward to its output, the Jacobian-vector product ``J_i t``; the
compiler adds the contributions of every argument that has a tangent.  Most
primals need no code, only a kind:

* ``linear(f, slots)``: ``f`` is linear in each slot while the other arguments
  stay fixed (``sum``, ``reshape``, ``x[i]``, ``matmul``, ``einsum``), so
  ``J_i t = f(..., t, ...)``: the emitted tangent reads like the primal line.
* elementwise (every ufunc and ``math`` function with an adjoint rule, and those
  declared with ``elementwise(f)``): the Jacobian is diagonal, so the *adjoint*
  rule with ``g := t`` is the JVP, inlined as source when it is one expression.
* ``scalar(f)``: ``f`` returns a scalar, so ``J_i t = <d_f(1, ...)[i], t>``.
* ``reduction(f)``: each output entry depends on its own slice of ``x`` only
  (max, prod, var, norm, logsumexp...), so ``J t = sum(d_f(1, ...)[0] * t)``
  over the reduced axes.
* ``additive(f)``: ``f`` is jointly linear and reads ``None`` as zero
  (``support.add``): the tangent is ``f`` applied to all tangents at once.
* ``adjoint_of_multilinear(d_f)``: the adjoint rule of a multilinear primal
  (``d_matmul``): linear in ``g``, and cotangent ``k`` is linear in every
  argument but the ``k``-th, which it does not read.  Needed for
  forward-over-reverse (Hessian-vector products).
* ``@tangent(f, argnum=i)``: a written rule ``jvp_f(t, ans, *args, **kwargs)``
  returning ``J_i t``; one ``return`` expression is inlined as source.
  Positions without a written rule have zero tangent.

``None`` is the zero tangent, as it is the zero cotangent in reverse mode.

The built-in tangent rules sit in each family module (``reductions.py``...),
after that family's adjoint rules; the rules of the helpers that emitted code
calls (``support``'s and this module's) are at the end of this module.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import getitem as operator_getitem
from typing import Any

import numpy as np

from s2sad.runtime import registry, support
from s2sad.runtime.support import MISSING, ones_like_output, pad, zeros_like

KINDS = ("linear", "elementwise", "scalar", "reduction", "additive",
         "adjoint_of_multilinear", "written", "zero")  # fmt: skip


@dataclass(frozen=True)
class TangentRule:
    """How one primal pushes tangents forward (see the module docstring)."""

    primal: Any
    kind: str
    # linear, adjoint_of_multilinear: slots (None: every argument)
    slots: frozenset[int] | None = None
    written: dict[int, Callable] = field(default_factory=dict)
    adjoint: Callable | None = None  # elementwise/scalar/reduction: the adjoint rule
    broadcasts: bool = False  # elementwise: the adjoint returns broadcast shapes
    none_ok: bool = False  # the primal reads a None tangent as zero
    container: bool = False  # the result may be a container with None entries
    name: str = ""

    def differentiable_in(self, i: int) -> bool:
        if self.kind in ("linear", "adjoint_of_multilinear"):
            return self.slots is None or i in self.slots
        if self.kind == "written":
            return i in self.written or -1 in self.written
        return self.kind != "zero"


_TANGENTS: dict[Any, TangentRule] = {}
_ELEMENTWISE: set[Any] = set()
#: adjoint rules of reductions over fixed axes -> those axes (see ``reduction``)
_FIXED_AXES: dict[Any, tuple[int, ...]] = {}


_CHANGES = [0]  # bumped on every registration: fingerprint() is cached per value


def _register(primals: tuple, **fields: Any) -> None:
    _CHANGES[0] += 1
    for primal in primals:
        rule = TangentRule(primal, name=registry.display_name(primal), **fields)
        _TANGENTS[registry.key_of(primal)] = rule


def linear(
    *primals: Any,
    slots: tuple[int, ...] | None = (0,),
    none_ok: bool = False,
    container: bool = False,
) -> None:
    """Declare ``primals`` linear in each of ``slots`` (None: every argument)."""
    _register(
        primals,
        kind="linear",
        none_ok=none_ok,
        container=container,
        slots=None if slots is None else frozenset(slots),
    )


def additive(*primals: Any) -> None:
    """Declare ``primals`` jointly linear, reading ``None`` as zero (``support.add``)."""
    _register(primals, kind="additive", none_ok=True, container=True)


def adjoint_of_multilinear(*rules: Any, slots: tuple[int, ...] | None = None) -> None:
    """Declare adjoint rules ``d_f(g, ans, *args)`` of multilinear primals;
    ``slots``: the rule's positions with a tangent (None: every one), so that
    an integer argument (an axis, a loop's range) never gets one."""
    _register(
        rules,
        kind="adjoint_of_multilinear",
        container=True,
        slots=None if slots is None else frozenset(slots),
    )


def constant(*primals: Any) -> None:
    """Declare that ``primals`` have zero tangent (they read only shapes or types)."""
    _register(primals, kind="zero")


def elementwise(*primals: Any) -> None:
    """Declare ``primals`` elementwise: their adjoint rule with g := t is the JVP."""
    _CHANGES[0] += 1
    _ELEMENTWISE.update(registry.key_of(p) for p in primals)


def scalar(*primals: Any) -> None:
    """Declare ``primals`` scalar-valued: J t = <gradient, t> from the adjoint rule."""
    for primal in primals:
        _register((primal,), kind="scalar", adjoint=_adjoint_of(primal))


def reduction(*primals: Any, axes: tuple[int, ...] | None = None) -> None:
    """Declare ``primals`` reductions whose outputs each read one slice of ``x``.

    ``axes``: the axes they always reduce (matrix norms read the last two), for
    primals whose adjoint rule takes no ``axis`` argument.
    """
    for primal in primals:
        adjoint = _adjoint_of(primal)
        if axes is not None:
            _FIXED_AXES[adjoint] = tuple(axes)
        _register((primal,), kind="reduction", adjoint=adjoint)


def tangent(*primals: Any, argnum: int = 0, container: bool = False) -> Callable:
    """Register ``jvp_f(t, ans, *args, **kwargs) -> J_argnum t`` for ``primals``.

    ``argnum=-1`` registers one rule for every position, called as
    ``jvp_f(t, ans, *args, argnum=i, **kwargs)``.
    """

    def register(fn: Callable) -> Callable:
        for primal in primals:
            old = _TANGENTS.get(registry.key_of(primal))
            written = (
                dict(old.written) if old is not None and old.kind == "written" else {}
            )
            written[argnum] = fn
            _register(
                (primal,),
                kind="written",
                written=written,
                container=container or (old is not None and old.container),
            )
        return fn

    return register


def _adjoint_of(primal: Any) -> Callable:
    rule = registry.registered(primal)  # (its module registered it just before)
    if rule is None or rule.adjoint is None:
        raise registry_error(primal)
    return rule.adjoint


def registry_error(primal: Any) -> Exception:
    """(The runtime imports nothing from the compiler side, s2sad.errors included.)"""
    return LookupError(
        f"{registry.display_name(primal)} has no adjoint or tangent rule"
    )


def lookup(fn: Any) -> TangentRule | None:
    """The tangent rule of ``fn``: registered, or derived from its adjoint rule."""
    registry.ensure_loaded()
    try:
        key = registry.key_of(fn)
        rule = _TANGENTS.get(key)
    except TypeError:
        return None
    if rule is not None:
        return rule
    adj = registry.lookup(fn)
    if adj is None:
        return None
    if adj.adjoint is None:
        return TangentRule(fn, "zero", name=adj.name)
    if _is_elementwise(fn, key):
        return TangentRule(
            fn,
            "elementwise",
            adjoint=adj.adjoint,
            broadcasts=adj.broadcasts,
            name=adj.name,
        )
    return None


def _is_elementwise(fn: Any, key: Any) -> bool:
    if key in _ELEMENTWISE:
        return True
    if isinstance(fn, np.ufunc):
        return fn.signature is None
    return getattr(fn, "__module__", None) == "math" or (
        inspect.isbuiltin(fn) and getattr(math, getattr(fn, "__name__", ""), None) is fn
    )


def fingerprint() -> str:
    """A hash of every tangent rule (kind, slots, written sources); part of cache keys."""
    registry.ensure_loaded()
    return _fingerprint(_CHANGES[0], registry.fingerprint())


@functools.lru_cache(maxsize=4)
def _fingerprint(changes: int, adjoints: str) -> str:
    h = hashlib.sha256(adjoints.encode())
    for rule in sorted(_TANGENTS.values(), key=lambda r: r.name):
        h.update(f"{rule.name}:{rule.kind}:{sorted(rule.slots or [])}".encode())
        h.update(f"{rule.none_ok}{rule.container}".encode())
        for i, fn in sorted(rule.written.items()):
            h.update(f"{i}".encode() + _source(fn).encode())
    for key in sorted(registry.display_name(p) for p in _ELEMENTWISE):
        h.update(key.encode())
    h.update(_source(inspect.getmodule(fingerprint)).encode())
    return h.hexdigest()[:16]


def _source(obj: Any) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return repr(obj)


# ---------------------------------------------------------------- helpers for emitted code


def or_zeros(t: Any, x: Any) -> Any:
    """``t``, or the zero tangent of ``x`` when ``t`` is None.

    A range (which gradient modules keep on their tape with the values they
    restore) gets a list of zeros, so that reversing or indexing it still works.
    """
    if t is not None:
        return t
    if isinstance(x, range):
        return [0.0] * len(x)
    return zeros_like(x)


def filled(t: Any, x: Any) -> Any:
    """The tangent ``t`` of a container ``x`` with zeros in place of None entries."""
    if t is None:
        return zeros_like(x)
    if isinstance(x, dict):
        return {k: filled(t.get(k), v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) and isinstance(t, (list, tuple)):
        return type(t)(filled(ti, xi) for ti, xi in zip(t, x))
    return t


def broadcast_like(t: Any, ans: Any) -> Any:
    """``t`` broadcast to the shape of ``ans`` (a no-op when they already agree)."""
    shape = np.shape(ans)
    return t if np.shape(t) == shape else np.broadcast_to(t, shape)


def method_receiver(t: Any, x: Any) -> Any:
    """The tangent ``t`` of a method's receiver ``x``, able to take the method: a
    NumPy scalar (``np.log`` of a Python float) has a Python float as tangent,
    which has no ``.sum()``; it becomes a NumPy scalar of ``x``'s float dtype."""
    if type(t) in (float, int) and isinstance(x, (np.generic, np.ndarray)):
        return np.asarray(t, dtype=x.dtype if x.dtype.kind in "fc" else None)[()]
    return t


def zero_entry(ts: Any, k: int) -> tuple:
    """The tuple ``ts`` with entry ``k`` set to None (zero)."""
    out = list(ts)
    out[k] = None
    return tuple(out)


def set_item(t: Any, index: Any, value: Any) -> None:
    """``t[index] = value`` where a None ``value`` means zero."""
    if value is None and not isinstance(t, (list, dict)):
        value = 0
    t[index] = value


def restore_tangent(t: Any, index: Any, old_t: Any, old: Any) -> None:
    """The tangent side of ``support.restore_item(x, index, old)``."""
    if old is MISSING:
        t.pop(index, None)
    else:
        set_item(t, index, old_t)


def finish(t: Any, x: Any) -> Any:
    """The tangent of the output ``x`` as the caller gets it: x's structure, no None."""
    if t is None:
        return zeros_like(x)
    if isinstance(x, dict):
        return {k: finish(t.get(k), v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(finish(ti, xi) for ti, xi in zip(t, x))
    if isinstance(x, np.ndarray):
        dtype = x.dtype if x.dtype.kind in "fc" else np.float64
        t = np.asarray(t, dtype=dtype)
        return t.copy() if t.shape == x.shape else np.broadcast_to(t, x.shape).copy()
    if isinstance(x, np.generic) and x.dtype.kind in "fc":
        return x.dtype.type(t)
    if isinstance(x, (bool, str, type(None))):
        return zeros_like(x)
    return float(t) if np.ndim(t) == 0 else t


def _vdot(a: Any, b: Any) -> Any:
    """<a, b> over nested lists/tuples/dicts of arrays and floats; None is zero."""
    if a is None or b is None:
        return 0.0
    if isinstance(a, dict):
        return sum(_vdot(v, b.get(k)) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        return sum(_vdot(u, v) for u, v in zip(a, b))
    return np.sum(np.multiply(a, b))


def jvp_scalar(
    adjoint: Callable, argnum: int, t: Any, ans: Any, *args: Any, **kwargs: Any
) -> Any:
    """J t for a scalar-valued primal: the gradient of argument ``argnum`` dotted with t."""
    grads = pad(adjoint(ones_like_output(ans), ans, *args, **kwargs), len(args))
    out = _vdot(grads[argnum], t)
    dtype = getattr(ans, "dtype", None)
    return dtype.type(out) if dtype is not None and dtype.kind == "f" else out


@functools.cache
def _signature(fn: Callable) -> inspect.Signature:
    return inspect.signature(fn)


def jvp_reduction(
    adjoint: Callable, t: Any, ans: Any, x: Any, *args: Any, **kwargs: Any
) -> Any:
    """J t for a reduction: each output entry reads only its own slice of ``x``.

    The adjoint rule with g = 1 gives d ans / d x entry by entry; summing its
    product with ``t`` over the reduced axes is exactly the Jacobian applied to t.
    """
    weights = adjoint(np.ones_like(ans), ans, x, *args, **kwargs)[0]
    bound = _signature(adjoint).bind(None, ans, x, *args, **kwargs)
    axis = _FIXED_AXES.get(adjoint, bound.arguments.get("axis"))
    keepdims = bool(bound.arguments.get("keepdims", False))
    out = np.sum(np.multiply(weights, t), axis=axis, keepdims=keepdims)
    return out.astype(ans.dtype, copy=False) if hasattr(ans, "dtype") else out


def pushforward(fn: Any, argnum: int, t: Any, *args: Any, **kwargs: Any) -> Any:
    """``J_argnum t`` of ``fn(*args, **kwargs)`` by fn's tangent rule, evaluated directly.

    What the compiler emits for one contribution, as a function: for checking
    rules against finite differences (``s2sad.testing``-style) without compiling.
    None means a zero tangent.
    """
    rule = lookup(fn)
    if rule is None:
        raise registry_error(fn)
    if not rule.differentiable_in(argnum) or rule.kind == "zero":
        return None
    ans = fn(*args, **kwargs)
    with_t = [t if k == argnum else a for k, a in enumerate(args)]
    if rule.kind == "linear":
        if rule.primal not in (operator_getitem, list, tuple) and not rule.none_ok:
            with_t[argnum] = filled(t, args[argnum])
        return fn(*with_t, **kwargs)
    if rule.kind == "additive":
        return fn(*[t if k == argnum else None for k in range(len(args))], **kwargs)
    if rule.kind == "adjoint_of_multilinear":
        if argnum == 1:
            return None
        out = fn(*with_t, **kwargs)
        return zero_entry(out, argnum - 2) if argnum >= 2 else out
    if rule.kind == "elementwise":
        out = pad(rule.adjoint(t, ans, *args, **kwargs), len(args))[argnum]
        return broadcast_like(out, ans) if rule.broadcasts and out is not None else out
    if rule.kind == "scalar":
        return jvp_scalar(rule.adjoint, argnum, t, ans, *args, **kwargs)
    if rule.kind == "reduction":
        return (
            jvp_reduction(rule.adjoint, t, ans, *args, **kwargs)
            if argnum == 0
            else None
        )
    written = rule.written.get(argnum)
    if written is not None:
        return written(t, ans, *args, **kwargs)
    return rule.written[-1](t, ans, *args, argnum=argnum, **kwargs)


# ================================================================ tangents of the helpers
# The helpers emitted gradient code calls (support's and this module's), so that a
# gradient can be differentiated again in forward mode (Hessian-vector products).
# Their tangents live here, not in support.py: support is imported by this module.

additive(support.add, support.accumulate)
# (none_ok: they read None as zero; container: the result may hold None entries even
# when the tangent passed in holds none)
linear(support.unbroadcast, support.finalize, support.without_item, or_zeros, filled,
       finish, none_ok=True)  # fmt: skip
linear(support.item_of, support.written_item, support.split_last, none_ok=True,
       container=True)  # fmt: skip
linear(support.pad, support.copy_item, zero_entry, container=True)
linear(broadcast_like)
constant(support.zeros_like, support.ones_like_output)
# they put back what a gradient call wrote into the caller's containers (not
# differentiated): the tangents of those containers are nobody's
constant(support.keep_item, support.redo_items)
