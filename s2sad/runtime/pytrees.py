"""Pytrees: the containers whose float leaves s2sad differentiates.

Nodes are dicts, lists, tuples, namedtuples, dataclasses and the classes
registered with :func:`register_pytree`; ``None`` is an empty subtree (its
gradient is ``None``); everything else is a leaf::

    s2sad.register_pytree(Params, lambda p: ([p.W, p.b], p.name),
                          lambda name, children: Params(*children, name=name))

A gradient with respect to a namedtuple, dataclass or registered object is an
object of the same type (its children the gradients).  Inside the emitted
code the cotangent of ``p.W`` is the dict ``{"W": g}``; :func:`rebuild` turns
such a dict (or an object of the type) into the object.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from s2sad.runtime.refcounts import EXCLUSIVE_REFS

#: registered classes -> (flatten(obj) -> (children, aux), unflatten(aux, children))
_REGISTERED: dict[type, tuple[Callable, Callable]] = {}


def register_pytree(
    cls: type,
    flatten: Callable[[Any], tuple[list, Any]],
    unflatten: Callable[[Any, list], Any],
) -> type:
    """Make instances of ``cls`` pytree nodes (like ``jax.tree_util.register_pytree_node``).

    ``flatten(obj)`` returns ``(children, aux)`` (aux: static data, not
    differentiated) and ``unflatten(aux, children)`` rebuilds an object.
    Returns ``cls``.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_pytree needs a class, not {cls!r}")
    _REGISTERED[cls] = (flatten, unflatten)
    return cls


def is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_object_node(x: Any) -> bool:
    """A namedtuple, dataclass instance or registered object (not dict/list/tuple)."""
    t = type(x)
    return (
        t in _REGISTERED
        or is_namedtuple(x)
        or (dataclasses.is_dataclass(x) and not isinstance(x, type))
    )


def children(x: Any) -> list[tuple[str, Any]] | None:
    """``[(path step, child), ...]`` of a node, None for a leaf (None: no children)."""
    if x is None:
        return []
    t = type(x)
    if t in _REGISTERED:
        kids, _ = _REGISTERED[t][0](x)
        return [(f"[{i}]", c) for i, c in enumerate(kids)]
    if isinstance(x, dict):
        return [(f"[{k!r}]", v) for k, v in x.items()]
    if is_namedtuple(x):
        return [(f".{f}", getattr(x, f)) for f in type(x)._fields]
    if isinstance(x, (list, tuple)):
        return [(f"[{i}]", v) for i, v in enumerate(x)]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [(f".{f.name}", getattr(x, f.name)) for f in _fields(x)]
    return None


def _fields(x: Any) -> list:
    """A dataclass's children: its init fields, except strings (static data that
    ``dataclasses.replace`` carries over, like JAX's meta fields)."""
    return [
        f
        for f in dataclasses.fields(x)
        if f.init and not isinstance(getattr(x, f.name), str)
    ]


def rebuild(x: Any, kids: list) -> Any:
    """A node like ``x`` with these children (in the order of :func:`children`)."""
    if x is None:
        return None
    t = type(x)
    if t in _REGISTERED:
        _, aux = _REGISTERED[t][0](x)
        return _REGISTERED[t][1](aux, list(kids))
    if isinstance(x, dict):
        return dict(zip(x.keys(), kids))
    if is_namedtuple(x):
        return t._make(kids)
    if isinstance(x, (list, tuple)):
        return t(kids)
    names = [f.name for f in _fields(x)]
    return dataclasses.replace(x, **dict(zip(names, kids)))


def cotangent_children(g: Any, x: Any) -> list:
    """The children of cotangent ``g`` of the object node ``x``, in x's order:
    ``g`` is an object of x's type, a dict by field name (what ``p.W`` in emitted
    code accumulates), a list/tuple in order, or None."""
    kids = children(x)
    if g is None:
        return [None] * len(kids)
    if isinstance(g, dict):
        if type(x) not in _REGISTERED:
            return [g.get(step.lstrip(".")) for step, _ in kids]
        # a registered class read through attributes: each attribute is the child
        # object it refers to
        out: list = [None] * len(kids)
        for attr, gi in g.items():
            hits = [i for i, (_, c) in enumerate(kids) if getattr(x, attr) is c]
            if not hits:
                raise TypeError(
                    f"{type(x).__name__}.{attr} is not one of the children its "
                    "registered flatten function returns: differentiate through "
                    "the children, or flatten it to them"
                )
            out[hits[0]] = gi
        return out
    if type(g) is type(x):
        return [c for _, c in children(g)]
    if isinstance(g, (list, tuple)) and len(g) == len(kids):
        return list(g)
    raise TypeError(
        f"cotangent of a {type(x).__name__} must be a {type(x).__name__}, a dict or "
        f"a sequence of {len(kids)}, not {type(g).__name__}"
    )


def leaves(x: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every leaf of ``x`` with its path (``['W']``, ``.b``, ``[0]``), in order."""
    kids = children(x)
    if kids is None:
        return [(path, x)]
    out = []
    for step, c in kids:
        out += leaves(c, path + step)
    return out


def unflatten(x: Any, values: list) -> Any:
    """``x``'s structure with its leaves replaced by ``values`` (in order)."""
    it = iter(values)

    def build(node: Any) -> Any:
        kids = children(node)
        if kids is None:
            return next(it)
        return rebuild(node, [build(c) for _, c in kids])

    return build(x)


def tree_map(f: Callable[..., Any], x: Any, *rest: Any) -> Any:
    """``f`` over the leaves of ``x`` (and the matching leaves of ``rest``)."""
    xs = [v for _, v in leaves(x)]
    others = [[v for _, v in leaves(r)] for r in rest]
    return unflatten(x, [f(v, *(o[i] for o in others)) for i, v in enumerate(xs)])


def plain_dict() -> bool:
    """Whether a plain dict is a dict node (``dict`` not registered as a class)."""
    return dict not in _REGISTERED


def finalize_dict(g: dict, x: dict, finalize: Callable) -> dict:
    """``finalize(g, x)`` (``support.finalize``) of a dict of parameters, without
    a call per entry where the entry is an array cotangent of its parameter's
    shape and float dtype: there the same test and copy as finalize's first
    branch (the reference count here: the dict's, this name's and getrefcount's,
    as finalize's own: the caller's name, the parameter and getrefcount's);
    ``finalize(entry, parameter)`` for any other entry."""
    result = {}
    nd = np.ndarray
    for k, v in x.items():
        gk = g.get(k)
        if type(gk) is nd and type(v) is nd:
            dt = gk.dtype
            same = gk.shape == v.shape and (dt is v.dtype or dt == v.dtype)
            if same and dt.kind in "fc":
                if (
                    sys.getrefcount(gk) <= EXCLUSIVE_REFS
                    and gk.base is None
                    and gk.flags.writeable
                ):
                    result[k] = gk
                else:
                    result[k] = np.array(gk, copy=True)
                continue
        result[k] = finalize(gk, v)
    return result


def field_tangent(t: Any, x: Any, attr: str) -> Any:
    """Forward mode: the tangent of ``x.attr``, a field of a pytree value ``x``
    (a namedtuple, or a dataclass's init field) whose tangent is ``t`` (a
    value of ``x``'s type, or a dict of field tangents; None: zero).  Any
    other attribute (a class attribute: a constant) has a zero tangent."""
    if t is None:
        return None
    if is_namedtuple(x):
        fields = type(x)._fields
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = [f.name for f in _fields(x)]
    else:
        from s2sad.errors import UnsupportedOperationError

        raise UnsupportedOperationError(
            f"forward mode reads the attribute '{attr}' of a {type(x).__name__}, "
            "which is no namedtuple or dataclass (a registered pytree's leaves "
            "have no names); hint: pass its arrays as arguments, or use reverse mode"
        )
    if attr not in fields:
        return None
    return t.get(attr) if isinstance(t, dict) else getattr(t, attr)
