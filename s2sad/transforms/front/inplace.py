"""In-place changes of an array argument: on a copy, or refused (both modes).

The emitted code rebinds names (``x += 1.0`` becomes ``x_1 = x + 1.0``), so it
cannot change the caller's array as the user's function would.  At the top
level, with the call's arguments, an array argument that the name keeps to the
end is worked on as a copy taken at entry and written back at every exit
(:func:`entry_copies`).  Otherwise s2sad refuses, at the user's line, every
in-place change of an argument that may be an array (or a list): augmented
assignment and ``out=`` (item assignment and in-place methods are refused by
the activity and forward passes).  Immutable arguments keep Python's
rebinding semantics::

    def f(x, s):        # x an array, s a float (from the call's arguments)
        s += 1.0        # fine: rebinds s
        x += 1.0        # refused: "copy it first: x = x + 1.0"

Without example arguments (ahead of time, or a callee), any argument may be
an array: refused too, unless the name was rebound before (``x = x * 2.0``),
or the callee's job was requested for call sites that pass a known immutable
scalar there (``ParsedFunction.scalar_params``: a constant, ``float(...)``,
``np.mean(x)``; front/aliasing.py marks the call sites), or a new array that
nothing else holds or reads again (``ParsedFunction.fresh_params``: ``f(np.exp(x))``
or ``t = a * b; f(t)`` with ``t`` read nowhere else): nobody can see the change,
so rebinding the name is the same thing.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from s2sad.errors import UnsupportedSyntaxError
from s2sad.runtime.objects import write_argument
from s2sad.transforms.astutil import anno, copy_loc, walk
from s2sad.transforms.front.calls import CallInfo

#: argument types that ``+=`` rebinds instead of changing in place
IMMUTABLE = (float, int, bool, complex, tuple, str, np.generic, type(None))


def run(parsed: Any, top: bool = False) -> None:
    """Raise :class:`UnsupportedSyntaxError` for in-place changes of arguments;
    at the top level, an array argument changed in place is worked on as a copy
    (:func:`entry_copies`)."""
    node = parsed.node
    a = node.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    examples = parsed.example_args
    if top:
        params -= entry_copies(parsed)
    else:
        params -= fresh_copies(parsed)
    mutable = {
        p
        for p in params
        if not isinstance(examples.get(p, []), IMMUTABLE)
        and p not in parsed.scalar_params  # every call site passes a scalar
        and p not in parsed.fresh_params  # ... or a new array nobody else sees
    }
    problems, rebound = [], set()
    for stmt in node.body:
        for sub in _walk(stmt):
            target = _changed(sub)
            if target in mutable and target not in rebound:
                problems.append(_problem(parsed, sub, target))
        if isinstance(stmt, ast.Assign):
            rebound |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            rebound.add(stmt.target.id)
    if problems:
        raise UnsupportedSyntaxError(problems)


def _walk(stmt: ast.stmt):
    """The nodes of ``stmt``, not those of nested functions (their own names)."""
    stack = [stmt]
    while stack:
        sub = stack.pop()
        yield sub
        if not isinstance(sub, (ast.FunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(sub))


def _changed(sub: ast.AST) -> str | None:
    """The name ``sub`` changes in place: ``x += ...``, ``f(..., out=x)``."""
    if isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
        return sub.target.id
    if isinstance(sub, ast.Call):
        for k in sub.keywords:
            if k.arg == "out" and isinstance(k.value, ast.Name):
                return k.value.id
    return None


def _problem(parsed: Any, sub: ast.AST, x: str):
    if isinstance(sub, ast.AugAssign):
        op = ast.unparse(ast.BinOp(left=ast.Name(x), op=sub.op, right=sub.value))
        hint = f"copy it first: {x} = {op} (a new array; the caller's stays as it is)"
        what = "augmented assignment"
    else:
        hint = f"drop out= and assign the result, or work on a copy: {x} = {x}.copy()"
        what = "out="
    return parsed.source.problem(
        sub,
        f"in-place change ({what}) of the argument '{x}', which may be an array: "
        "s2sad changes a caller's array only for the function it differentiates, "
        "called with its arguments, when the name keeps that array to the end",
        hint,
    )


# ------------------------------------------------------------- entry copies


def entry_copies(parsed: Any) -> set[str]:
    """Array arguments the top-level function changes in place, rewritten to work
    on a copy taken at entry, written back into the caller's array at every exit::

        def f(x):                   def f(x):
                                        x_local = copy(x)
            x[0] = 2.0 * x[1]           x_local[0] = 2.0 * x_local[1]
            x *= 3.0                    x_local *= 3.0
                                        write_argument(x, x_local)
            return np.sum(x * x)        return np.sum(x_local * x_local)

    The gradient is with respect to the value ``x`` had on entry (the copy's
    rule passes the cotangent through); the caller's array ends as Python leaves
    it; the copy is the compiled function's own, so reverse mode may save and
    restore its items and buffers may hold its versions.  Only when the name
    keeps the caller's array to the end: re-bound (``x = x * 2``), used in a
    nested function or given to ``out=``, it stays refused.  Returns the
    arguments rewritten."""
    node = parsed.node
    done = set()
    for p in [x.arg for x in node.args.args]:
        if isinstance(parsed.example_args.get(p), np.ndarray) and _in_place_only(
            node, p
        ):
            _rewrite(node, p, _fresh(node, f"{p}_local"))
            done.add(p)
    return done


def fresh_copies(parsed: Any) -> set[str]:
    """A callee's parameter that every call passes a new array nobody else holds
    or reads again (``ParsedFunction.fresh_params``) and that it writes items
    into (``p[i] = v``, ``np.add(p, v, out=p)``): worked on as a copy taken at
    entry, not written back: nobody could see the change.  (``p += g`` alone
    needs no copy: it rebinds ``p``.)"""
    node, done = parsed.node, set()
    for p in sorted(parsed.fresh_params):
        if _items_written(node, p) and _in_place_only(node, p):
            _rewrite(node, p, _fresh(node, f"{p}_local"), back_too=False)
            done.add(p)
    return done


def _items_written(node: ast.FunctionDef, p: str) -> bool:
    for sub in walk(node):
        for t in sub.targets if isinstance(sub, ast.Assign) else []:
            while isinstance(t, ast.Subscript):
                t = t.value
                if isinstance(t, ast.Name) and t.id == p:
                    return True
    return False


def _in_place_only(node: ast.FunctionDef, p: str) -> bool:
    changed = False
    for stmt in node.body:
        for sub in _walk(stmt):
            if isinstance(sub, (ast.FunctionDef, ast.Lambda)) and any(
                isinstance(n, ast.Name) and n.id == p for n in walk(sub)
            ):
                return False
            if _changed(sub) == p and not isinstance(sub, ast.AugAssign):
                return False  # out=p
            if isinstance(sub, (ast.Assign, ast.AugAssign)):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                for t in targets:
                    root = t
                    while isinstance(root, ast.Subscript):
                        root = root.value
                    if isinstance(root, ast.Name) and root.id == p:
                        changed = True
            if (
                isinstance(sub, ast.Name)
                and sub.id == p
                and not isinstance(sub.ctx, ast.Load)
                and not _aug_target(node, sub)
            ):
                return False  # re-bound: the name leaves the caller's array
    return changed


def _aug_target(node: ast.AST, name_node: ast.Name) -> bool:
    return any(
        isinstance(s, ast.AugAssign) and s.target is name_node for s in walk(node)
    )


def _fresh(node: ast.FunctionDef, base: str) -> str:
    used = {n.id for n in walk(node) if isinstance(n, ast.Name)}
    used |= {x.arg for x in node.args.args}
    out, k = base, 1
    while out in used:
        out, k = f"{base}_{k}", k + 1
    return out


def _rewrite(node: ast.FunctionDef, p: str, local: str, back_too=True) -> None:
    for stmt in node.body:
        for sub in _walk(stmt):
            if isinstance(sub, ast.Name) and sub.id == p:
                sub.id = local

    def helper(fn: Any, wanted: str, origin: list, *args: ast.expr) -> ast.Call:
        func = ast.Name(id=wanted, ctx=ast.Load())
        anno(func)["bind"] = (fn, origin)
        c = ast.Call(func=func, args=list(args), keywords=[])
        anno(c)["call"] = CallInfo("rule", fn)
        return c

    def load(n: str) -> ast.Name:
        return ast.Name(id=n, ctx=ast.Load())

    first = node.body[0]
    copy = ast.Assign(
        targets=[ast.Name(id=local, ctx=ast.Store())],
        value=helper(np.copy, "copy", ["module", "numpy", "copy"], load(p)),
        type_comment=None,
    )
    node.body.insert(0, copy_loc(copy, first))
    if not back_too:
        return
    origin = ["module", "s2sad.runtime.objects", "write_argument"]

    def back(like: ast.stmt) -> ast.stmt:
        c = helper(write_argument, "write_argument", origin, load(p), load(local))
        return copy_loc(ast.Expr(value=copy_loc(c, like)), like)

    _before_returns(node.body, back)


def _before_returns(body: list[ast.stmt], back) -> None:
    """``back(ret)`` before each ``return`` of ``body`` (nested functions aside),
    and at the end when the body may fall off it."""
    for i in range(len(body) - 1, -1, -1):
        s = body[i]
        if isinstance(s, ast.Return):
            body.insert(i, back(s))
        elif not isinstance(s, (ast.FunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(s, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    _before_returns(inner, back)
            for h in getattr(s, "handlers", []):
                _before_returns(h.body, back)
    if not body or not isinstance(body[-1], ast.Return):
        body.append(back(body[-1] if body else ast.Pass()))
