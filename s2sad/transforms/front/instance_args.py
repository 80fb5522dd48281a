"""Argument objects taken apart like the objects a function builds (front/instances.py).

When the function both sets attributes of an object it is given and calls its
methods (``layer.W = W; layer.forward_pass(X)``), a gradient would have to
flow through the object.  Such an argument (a parameter never rebound, used
only through its attributes and methods, of a plain user class) gets the
same treatment as an object built inside: its methods are inlined, and the
attributes the call may set are locals.  It stays a real object: an attribute
nobody sets in the call is read from it, and every write is also stored on it
(``layer.W = layer_W``, ``store_attribute`` after normalize), so the object
holds afterwards what Python would have put there.  A local whose first use
may come before the call sets it starts from the object's value
(``read_attribute``).  The entry checks the object's class is still the one
compiled for.
"""

from __future__ import annotations

import ast
import types
from typing import Any

from s2sad.runtime.objects import read_attribute
from s2sad.runtime.support import globals_changed
from s2sad.transforms.astutil import anno, call, const, copy_loc, name
from s2sad.transforms.front.calls import CallInfo, holds_objects
from s2sad.transforms.front.instance_parts import (
    Obj,
    lookup,
    plain_class,
    set_attributes,
)
from s2sad.transforms.front.objects import _bound
from s2sad.transforms.front.parse import MISSING


def _root(t: ast.expr):
    while isinstance(t, ast.Subscript):
        t = t.value
    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
        return t.value.id, t.attr
    return None


def candidates(node: ast.FunctionDef, examples: dict) -> dict[str, Obj]:
    """The parameters to take apart, each as an :class:`Obj` with ``real`` set."""
    stored = {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    fine: set[int] = set()
    written: dict[str, set[str]] = {}
    items: dict[str, set[str]] = {}
    methods: dict[str, set[str]] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            fine.add(id(n.value))
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                methods.setdefault(f.value.id, set()).add(f.attr)
        targets = (
            n.targets
            if isinstance(n, ast.Assign)
            else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        )
        for t in targets:
            for elt in t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]:
                hit = _root(elt)
                if hit is not None:
                    written.setdefault(hit[0], set()).add(hit[1])
                    if isinstance(elt, ast.Subscript) or isinstance(n, ast.AugAssign):
                        items.setdefault(hit[0], set()).add(hit[1])
    bare = {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in fine
    }
    out = {}
    for a in node.args.args:
        p, e = a.arg, examples.get(a.arg, MISSING)
        if e is MISSING or p in stored or p in bare or not written.get(p):
            continue
        cls = type(e)
        if isinstance(e, (list, tuple, type)) or not holds_objects(e):
            continue
        if not plain_class(cls) or not hasattr(e, "__dict__"):
            continue
        if not any(
            isinstance(lookup(cls, m)[0], types.FunctionType) and m not in vars(e)
            for m in methods.get(p, ())
        ):
            continue
        obj = Obj(cls, p)
        obj.real, obj.example = p, e
        init_only = _init_attributes(cls)
        obj.written = (set_attributes(cls) - init_only) | written[p]
        obj.items = set_attributes(cls, items=True) | items.get(p, set())
        out[p] = obj
    return out


def _init_attributes(cls: type) -> set[str]:
    """Attributes only ``__init__`` sets (not set by a call to another method)."""
    init = lookup(cls, "__init__")[0]
    if not isinstance(init, types.FunctionType):
        return set()
    others = set_attributes(cls, skip=init)
    return set_attributes(cls, only=init) - others


def guard(obj: Obj, like: ast.AST) -> ast.stmt:
    """``if type(layer) is not Dense: globals_changed(...)``."""
    cls = obj.cls
    ref = _bound(cls.__name__, cls, ["module", cls.__module__, cls.__qualname__])
    test = ast.Compare(
        left=call("type", name(obj.real)), ops=[ast.IsNot()], comparators=[ref]
    )
    fail = ast.Call(
        func=_bound("globals_changed", globals_changed, None),
        args=[const(f"the class of '{obj.real}' (compiled for {cls.__name__})")],
        keywords=[],
    )
    anno(fail)["call"] = CallInfo("rule", globals_changed)
    node = ast.If(test=test, body=[ast.Expr(value=fail)], orelse=[])
    for n in ast.walk(node):
        copy_loc(n, like)
    return node


def entry(obj: Obj, attr: str, local: str, where: ast.AST, copy=False) -> ast.stmt:
    """``layer_W = read_attribute(layer, "W")``: the value when the call starts
    (a copy of an array the call writes items into)."""
    func = name("read_attribute")
    anno(func)["bind"] = (
        read_attribute,
        ["module", "s2sad.runtime.objects", "read_attribute"],
    )
    args = [name(obj.real), const(attr)] + ([const(True)] if copy else [])
    value = ast.Call(func=func, args=args, keywords=[])
    anno(value)["call"] = CallInfo("rule", read_attribute, {"item_write": False})
    node = ast.Assign(targets=[name(local, store=True)], value=value)
    for n in ast.walk(node):
        copy_loc(n, where)
    return node


def store(obj: Obj, attr: str, local: str, where: ast.AST, items=False) -> ast.stmt:
    """``layer.W = layer_W``: Python's semantics, the object holds the value
    (its array changed in place after items were written: ``store_items``)."""
    target = ast.Attribute(value=name(obj.real), attr=attr, ctx=ast.Store())
    anno(target)["items"] = items
    node = ast.Assign(targets=[target], value=name(local))
    for n in ast.walk(node):
        copy_loc(n, where)
    return node


def real(obj: Obj, attr: str, like: ast.AST) -> ast.expr:
    """``layer.b`` read from the object itself."""
    node = ast.Attribute(value=name(obj.real), attr=attr, ctx=ast.Load())
    for n in ast.walk(node):
        copy_loc(n, like)
    return node


def keeps_real(obj: Any, attr: str) -> bool:
    """An attribute read from the object as it is: the call does not set it, or
    it holds an object (a sub-layer, whose methods resolve on it)."""
    if attr not in obj.written:
        return True
    v = getattr(obj.example, attr, MISSING)
    return v is not MISSING and holds_objects(v)


def aug_read(inl: Any, t: ast.expr, ctx: Any) -> None:
    """``layer.acc += x`` on an argument object reads ``layer.acc`` first."""
    owner = inl.handle(t.value, ctx) if isinstance(t, ast.Attribute) else None
    if owner is not None and owner.real is not None:
        owner.items.add(t.attr)
        inl.real_read(owner, t.attr, t)
