"""Attributes of an argument object as local variables along the function.

A method that writes an attribute and reads it back in the same call
(``self.cache = x @ W; ...; return f(self.cache)``), or writes items into it
(``self.states[:, t] = h``), gets a local for that attribute: a write sets
the local, a read uses it, so the gradient flows as through any variable; and
the local is stored on the object after each write, so that the object holds
what Python would have put there when the call returns::

    self.states = np.zeros((n, T + 1))       self_states = np.zeros((n, T + 1))
                                              self.states = self_states
    for t in range(T):                        for t in range(T):
        self.states[:, t] = h(t)      ->          self_states[:, t] = h(t)
                                              self.states = self_states
    return self.states.sum()                  return self_states.sum()

(a write inside a loop is stored once after the loop when the local exists
before it).  Normalize turns ``self.states = self_states`` into
``store_attribute``, which copies arrays, or, after items were written (or
``+=``), into ``store_items``, which writes into the array the object holds,
as Python changes it in place; the local such an attribute starts from is
then a copy, so the reverse sweep never puts old items back into it.  A read that may come before any
write in the call starts from the object's value (``self_h = self.h`` first).

Only objects the function sees whole: a parameter never rebound, used only
through its attributes (no method of its own called, not passed anywhere).
Otherwise the attribute stays as it was, and front/objects.py refuses a read
of an attribute the call set to a differentiated value.
"""

from __future__ import annotations

import ast
import types

from s2sad.runtime.objects import read_attribute
from s2sad.transforms.astutil import anno, assign, const, copy_loc, name
from s2sad.transforms.front.calls import CallInfo


def _root_attr(e: ast.expr):
    """``(p, a)`` for ``p.a``, ``p.a[i]``, ``p.a[i][j]``; else None."""
    while isinstance(e, ast.Subscript):
        e = e.value
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):
        return e.value.id, e.attr
    return None


class _Scan(ast.NodeVisitor):
    """What the function does with the attributes of each name."""

    def __init__(self):
        self.written: dict[str, set[str]] = {}
        self.item_written: dict[str, set[str]] = {}  # items, or +=
        self.whole: dict[str, set[str]] = {}  # p.a = v
        self.read: dict[str, set[str]] = {}
        self.called: dict[str, set[str]] = {}
        self.bare: set[str] = set()
        self.stored: set[str] = set()  # rebound names

    def _target(self, t: ast.expr, aug: bool):
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._target(e, aug)
            return
        if isinstance(t, ast.Starred):
            return self._target(t.value, aug)
        hit = _root_attr(t)
        if hit is not None:
            p, a = hit
            into = self.item_written if isinstance(t, ast.Subscript) or aug else None
            self.written.setdefault(p, set()).add(a)
            if into is not None:
                into.setdefault(p, set()).add(a)
            else:
                self.whole.setdefault(p, set()).add(a)
            if isinstance(t, ast.Subscript):
                self._subscripts(t)
            return
        self.visit(t)

    def _subscripts(self, t: ast.expr):
        while isinstance(t, ast.Subscript):
            self.visit(t.slice)
            t = t.value

    def visit_Assign(self, node):
        self.visit(node.value)
        for t in node.targets:
            self._target(t, False)

    def visit_AugAssign(self, node):
        self.visit(node.value)
        self._target(node.target, True)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)
        self._target(node.target, False)

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            self.called.setdefault(f.value.id, set()).add(f.attr)
            for a in node.args + [k.value for k in node.keywords]:
                self.visit(a)
            return
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name):
            self.read.setdefault(node.value.id, set()).add(node.attr)
            return
        self.generic_visit(node)

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            self.bare.add(node.id)
        else:
            self.stored.add(node.id)

    def visit_FunctionDef(self, node):  # a nested function sees the object whole
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                self.bare.add(n.id)

    visit_Lambda = visit_AsyncFunctionDef = visit_FunctionDef


def _is_method(example, attr: str) -> bool:
    """Whether ``obj.attr(...)`` calls a method of the object's class (which
    may read or write its attributes) rather than a callable it holds."""
    if example is None:
        return True
    if attr in getattr(example, "__dict__", {}):
        return False
    return isinstance(
        getattr(type(example), attr, None),
        (types.FunctionType, property, staticmethod, classmethod),
    ) or not hasattr(example, attr)


def _writes(node: ast.AST, kind: str = "written") -> set[tuple[str, str]]:
    scan = _Scan()
    scan.visit(node)
    return {(p, a) for p, attrs in getattr(scan, kind).items() for a in attrs}


class _Rewrite:
    def __init__(self, mirrored: dict[tuple[str, str], str], items: set):
        self.mirrored = mirrored
        self.items = items  # attributes with items written (or +=) somewhere
        self.needs_init: dict[tuple[str, str], ast.AST] = {}  # -> the first read
        self.loop_depth = 0

    def local(self, e: ast.expr, done: set) -> ast.expr:
        """Reads of mirrored attributes in ``e`` become their locals."""
        mirrored, needs = self.mirrored, self.needs_init

        class _Reads(ast.NodeTransformer):
            def visit_Attribute(self, node):
                if isinstance(node.value, ast.Name):
                    key = (node.value.id, node.attr)
                    if key in mirrored and isinstance(node.ctx, ast.Load):
                        if key not in done:
                            needs.setdefault(key, node)
                        return copy_loc(name(mirrored[key]), node)
                return self.generic_visit(node)

        return _Reads().visit(e)

    def target(self, t: ast.expr, done: set, written: list) -> ast.expr:
        if isinstance(t, (ast.Tuple, ast.List)):
            t.elts = [self.target(e, done, written) for e in t.elts]
            return t
        if isinstance(t, ast.Starred):
            t.value = self.target(t.value, done, written)
            return t
        hit = _root_attr(t)
        if hit is None or hit not in self.mirrored:
            return self.local(t, done)
        if isinstance(t, ast.Subscript):
            if hit not in done:
                self.needs_init.setdefault(hit, t)
            base = t
            while isinstance(base.value, ast.Subscript):
                base.slice = self.local(base.slice, done)
                base = base.value
            base.slice = self.local(base.slice, done)
            base.value = copy_loc(name(self.mirrored[hit]), base.value)
            written.append((hit, True))
            return t
        written.append((hit, False))
        return copy_loc(name(self.mirrored[hit], store=True), t)

    def block(self, body: list[ast.stmt], done: set, deferred: set) -> list:
        out: list[ast.stmt] = []
        for s in body:
            out.extend(self.stmt(s, done, deferred))
        return out

    def stmt(self, s: ast.stmt, done: set, deferred: set) -> list:
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            if getattr(s, "value", None) is None:
                return [s]
            s.value = self.local(s.value, done)
            written: list = []
            hit = _root_attr(s.target) if isinstance(s, ast.AugAssign) else None
            if hit in self.mirrored and hit not in done:
                self.needs_init.setdefault(hit, s)
            if isinstance(s, ast.Assign):
                s.targets = [self.target(t, done, written) for t in s.targets]
            else:
                s.target = self.target(s.target, done, written)
            out = [s]
            aug = isinstance(s, ast.AugAssign)
            for key, items in dict.fromkeys(written):
                done.add(key)
                if key not in deferred:
                    out.append(self.store(key, s, items or aug))
            return out
        if isinstance(s, (ast.For, ast.While)):
            if isinstance(s, ast.For):
                s.iter = self.local(s.iter, done)
                s.target = self.local(s.target, done)
            else:
                s.test = self.local(s.test, done)
            # written in the loop and already a local: stored once, after it
            later = (_writes(s) & done) - deferred
            s.body = self.block(s.body, set(done), deferred | later)
            s.orelse = self.block(s.orelse, set(done), deferred | later)
            whole = _writes(s, "whole")
            return [s] + [self.store(k, s, k not in whole) for k in sorted(later)]
        if isinstance(s, ast.If):
            s.test = self.local(s.test, done)
            a, b = set(done), set(done)
            s.body, s.orelse = self.block(s.body, a, deferred), self.block(
                s.orelse, b, deferred
            )
            done |= a & b
            return [s]
        return [self.local(s, done)]

    def store(self, key: tuple[str, str], like: ast.AST, items: bool) -> ast.stmt:
        """``self.a = self_a``; after items were written, ``store_items``: the
        object's array changes in place, as in Python (front/objects.py)."""
        p, a = key
        target = ast.Attribute(value=name(p), attr=a, ctx=ast.Store())
        anno(target)["items"] = items
        node = assign(target, name(self.mirrored[key]), like)
        for n in ast.walk(node):
            copy_loc(n, like)
        return node


def run(node: ast.FunctionDef, examples: dict, namer) -> None:
    """Give the attributes this function writes and reads back locals (see the
    module docstring)."""
    scan = _Scan()
    for s in node.body:
        scan.visit(s)
    params = {a.arg for a in node.args.args}
    mirrored: dict[tuple[str, str], str] = {}
    for p in sorted(scan.written):
        if p not in params or p in scan.stored or p in scan.bare:
            continue
        if any(_is_method(examples.get(p), m) for m in scan.called.get(p, ())):
            continue
        wanted = (scan.written[p] & scan.read.get(p, set())) | scan.item_written.get(
            p, set()
        )
        for a in sorted(wanted - scan.called.get(p, set())):
            mirrored[(p, a)] = namer.fresh(f"{p}_{a}")
    if not mirrored:
        return
    items = {(p, a) for p, attrs in scan.item_written.items() for a in attrs}
    rw = _Rewrite(mirrored, items)
    body = rw.block(node.body, set(), set())
    inits = [
        _entry(k, mirrored[k], where, k in items)
        for k, where in sorted(rw.needs_init.items())
    ]
    node.body = inits + body


def _entry(key: tuple[str, str], local: str, where: ast.AST, copy: bool) -> ast.stmt:
    """``self_h = read_attribute(self, "h")``: the value on entry, for a read that
    may come before the function writes it.  front/objects.py refuses it in a
    callee when the differentiated call sets the attribute to a differentiated
    value (an earlier call would have left one there, its gradient lost)."""
    func = name("read_attribute")
    anno(func)["bind"] = (
        read_attribute,
        ["module", "s2sad.runtime.objects", "read_attribute"],
    )
    args = [name(key[0]), const(key[1])] + ([const(True)] if copy else [])
    value = ast.Call(func=func, args=args, keywords=[])
    # an item written into the array on entry: the message says so (objects.py)
    item = isinstance(where, (ast.Subscript, ast.AugAssign))
    anno(value)["call"] = CallInfo("rule", read_attribute, {"item_write": item})
    node = assign(local, value)
    for n in ast.walk(node):
        copy_loc(n, where)
    return node
