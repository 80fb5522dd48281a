"""Linked workspaces: a backward callee entered without keying its residuals.

A callee's backward function enters its workspace by the shape key of its
arguments, ``ws.enter("f_backward", (g_out, saved))``, which walks every
residual (and the tape) on every call.  When the forward function provably
computes residuals whose shape keys follow from its own arguments' (the key
its workspace was entered with), the backward's key follows from that one and
``g_out``'s, so the forward hands its residuals to the workspace and the
backward enters by them::

    def f_forward(x, W, ws=NO_WORKSPACE):
        ws = ws.enter("f_forward", (x, W))
        ...
        return (out, ws.link((tape, h, W), (config.STEPS,)))

    def f_backward(g_out, saved, ws=NO_WORKSPACE):
        ws = ws.enter_linked("f_backward", g_out, saved, (0, 1))
        (tape, h, W) = saved

The proof (:func:`checks`) is a sufficient condition on the forward's body,
before its buffer sites are written: straight-line code and ``for`` loops over
ranges fixed by the arguments (so the tape's length is fixed), no attribute
reads of objects (attributes other than an array's shape, dtype, transpose
and methods, or a module's names), every binding a form whose shape and dtype the argument
shapes fix (``buffers/facts.py``), and every residual and taped value such a
name, an argument or a value fixed by the signature.  Shapes and dtypes are not
the whole key: ints, small integer arrays and ranges are keyed by value, so
the residuals whose shapes alone are proved (``checks``, the tape among them)
must hold, at the recording call, values whose keys read no value
(``shapekeys.value_free``); otherwise the run-time pool keeps the full key.
"""

from __future__ import annotations

import ast
import types
from typing import Any

import numpy as np

from s2sad.transforms.astutil import anno, name, walk
from s2sad.transforms.buffers.facts import SHAPE_METHODS, Facts

#: attributes of arguments whose reads the proof accepts (fixed by the key)
_ARRAY_ATTRS = {"shape", "ndim", "size", "dtype", "T"}


class _LinkFacts(Facts):
    """Facts in which a module's attribute (``config.STEPS``: read live on every
    call, not guarded) counts as fixed: its value joins the link's key."""

    def is_fixed(self, v: Any) -> bool:
        return _module_read(v, self) or super().is_fixed(v)


def _module_read(v: Any, facts: Facts) -> bool:
    """``m.NAME`` of a user module ``m`` the module binds (NumPy's left out)."""
    if not (isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name)):
        return False
    n = v.value.id
    obj = facts.module.bindings.get(n) if n not in facts.defs else None
    return isinstance(obj, types.ModuleType) and obj is not np


def _module_reads(fwd: ast.FunctionDef, facts: Facts) -> list[ast.expr]:
    """The module attributes the forward reads as values, each once."""
    called = {id(n.func) for n in walk(fwd) if isinstance(n, ast.Call)}
    seen: dict[str, ast.expr] = {}
    for n in walk(fwd):
        if _module_read(n, facts) and id(n) not in called:
            seen.setdefault(ast.unparse(n), n)
    return [seen[k] for k in sorted(seen)]


def _residuals(fwd: ast.FunctionDef) -> ast.Tuple | None:
    """The residual tuple of ``return (out, (r1, r2, ...))``, all names."""
    ret = fwd.body[-1] if fwd.body else None
    if not (isinstance(ret, ast.Return) and isinstance(ret.value, ast.Tuple)):
        return None
    elts = ret.value.elts
    if len(elts) != 2 or not isinstance(elts[1], ast.Tuple):
        return None
    if not all(isinstance(e, ast.Name) for e in elts[1].elts):
        return None
    return elts[1]


def _tape_append(s: ast.stmt) -> ast.expr | None:
    """The value of a ``tape.append(v)`` statement of the reverse pass."""
    if (
        isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Call)
        and anno(s.value).get("tape") == "append"
        and len(s.value.args) == 1
    ):
        return s.value.args[0]
    return None


def _statements_ok(stmts: list[ast.stmt], facts: Facts, pushed: list) -> bool:
    """Straight-line assignments, tape pushes and ``for`` loops over fixed ranges."""
    for s in stmts:
        if isinstance(s, ast.Assign):
            target = s.targets[0]
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            if len(s.targets) != 1 or not all(isinstance(n, ast.Name) for n in names):
                return False
            v = s.value
            empty = isinstance(v, ast.List) and not v.elts  # the tape
            if not (empty or facts.is_fixed(v) or facts.is_shaped(v)):
                return False
        elif isinstance(s, ast.For):
            if s.orelse or not isinstance(s.target, ast.Name):
                return False
            if not facts.is_fixed(s.iter):
                return False
            if not _statements_ok(s.body, facts, pushed):
                return False
        elif _tape_append(s) is not None:
            pushed.append(_tape_append(s))
        elif not (isinstance(s, ast.Return) and s is stmts[-1]):
            return False
    return True


def _object_reads(fwd: ast.FunctionDef, facts: Facts) -> bool:
    """Whether the body reads an attribute other than an array's shape, dtype
    or transpose, an array method called (``x.reshape(...)``), a module's name
    or the tape's ``append`` (an object's attributes are not in its key)."""
    methods = {
        id(n.func)
        for n in walk(fwd)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and (n.func.attr in SHAPE_METHODS or anno(n).get("tape") == "append")
    }
    return any(
        isinstance(n, ast.Attribute)
        and n.attr not in _ARRAY_ATTRS
        and id(n) not in methods
        and not _module_read(n, facts)
        and not (
            isinstance(n.value, ast.Name)
            and facts.module.bindings.get(n.value.id) is np
            and n.value.id not in facts.defs
        )
        for n in walk(fwd)
    )


def checks(fwd: ast.FunctionDef, module: Any) -> tuple | None:
    """``(positions, reads)``: the positions of the residuals whose keys the
    recording call must find free of values, and the module attributes the
    forward reads (their values join the key); None when the forward's residual
    keys are not proved to follow from its arguments' and those values (see the
    module docstring).  Call it on the forward as the reverse pass emitted it,
    before its buffer sites are written."""
    residual = _residuals(fwd)
    params = [a.arg for a in fwd.args.args]
    if residual is None or "ws" in params:
        return None
    facts = _LinkFacts(module, {p: False for p in params}, callee=False)
    facts.collect(fwd.body)
    facts.solve()
    if _object_reads(fwd, facts):
        return None
    pushed: list = []
    if not _statements_ok(fwd.body, facts, pushed):
        return None

    def fixed(e: ast.expr) -> bool:
        return isinstance(e, ast.Name) and (e.id in params or e.id in facts.fixed)

    for v in pushed:
        if not (
            fixed(v)
            or (isinstance(v, ast.Constant) and v.value is None)
            or (isinstance(v, ast.Name) and v.id in facts.shaped)
        ):
            return None
    out = []
    for i, r in enumerate(residual.elts):
        if r.id == "tape" and r.id not in params:
            out.append(i)
        elif fixed(r):
            continue
        elif r.id in facts.shaped:
            out.append(i)
        else:
            return None
    return tuple(out), _module_reads(fwd, facts)


def link(fwd: ast.FunctionDef, bwd: ast.FunctionDef, proof: tuple) -> bool:
    """``return (out, ws.link(residuals, (reads...)))`` in the forward and ``ws
    = ws.enter_linked(name, g_out, saved, positions)`` in the backward (``proof``
    from :func:`checks`); whether done (both must enter workspaces of their
    own, as ``wiring.callee`` writes them)."""
    at, reads = proof
    enter = _enter(bwd)
    if enter is None or _enter(fwd) is None or _residuals(fwd) is None:
        return False
    ret = fwd.body[-1].value
    values = ast.Tuple(
        elts=[
            ast.Attribute(value=name(r.value.id), attr=r.attr, ctx=ast.Load())
            for r in reads
        ],
        ctx=ast.Load(),
    )
    ret.elts[1] = ast.Call(
        func=ast.Attribute(value=name("ws"), attr="link", ctx=ast.Load()),
        args=[ret.elts[1], values] if reads else [ret.elts[1]],
        keywords=[],
    )
    g_out, saved = enter.args[1].elts
    enter.func.attr = "enter_linked"
    enter.args = [
        enter.args[0],
        g_out,
        saved,
        ast.Tuple(elts=[ast.Constant(i) for i in at], ctx=ast.Load()),
    ]
    return True


def _enter(fn: ast.FunctionDef) -> ast.Call | None:
    """The ``ws.enter(name, (args...))`` call of ``ws = ...`` first in ``fn``."""
    first = fn.body[0] if fn.body else None
    if not (isinstance(first, ast.Assign) and isinstance(first.value, ast.Call)):
        return None
    call = first.value
    f = call.func
    if not (
        isinstance(f, ast.Attribute)
        and f.attr == "enter"
        and isinstance(f.value, ast.Name)
        and f.value.id == "ws"
        and len(call.args) == 2
        and isinstance(call.args[1], ast.Tuple)
        and len(call.args[1].elts) == 2
    ):
        return None
    return call
