"""In-place changes of an array argument are refused (both modes).

The emitted code rebinds names (``x += 1.0`` becomes ``x_1 = x + 1.0``), so it
cannot change the caller's array as the user's function would.  Rather than
two semantics, s2sad refuses, at the user's line, every in-place change of an
argument that may be an array (or a list): augmented assignment and ``out=``
(item assignment and in-place methods are refused by the activity and forward
passes).  Immutable arguments keep Python's rebinding semantics::

    def f(x, s):        # x an array, s a float (from the call's arguments)
        s += 1.0        # fine: rebinds s
        x += 1.0        # refused: "copy it first: x = x + 1.0"

Without example arguments (ahead of time, or a callee), any argument may be
an array: refused too, unless the name was rebound before (``x = x * 2.0``),
or the callee's job was requested for call sites that pass a known immutable
scalar there (``ParsedFunction.scalar_params``: a constant, ``float(...)``,
``np.mean(x)``; front/aliasing.py marks the call sites).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from s2sad.errors import UnsupportedSyntaxError

#: argument types that ``+=`` rebinds instead of changing in place
IMMUTABLE = (float, int, bool, complex, tuple, str, np.generic, type(None))


def run(parsed: Any) -> None:
    """Raise :class:`UnsupportedSyntaxError` for in-place changes of arguments."""
    node = parsed.node
    a = node.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    examples = parsed.example_args
    mutable = {
        p
        for p in params
        if not isinstance(examples.get(p, []), IMMUTABLE)
        and p not in parsed.scalar_params  # every call site passes a scalar
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
        "s2sad does not change the caller's arrays",
        hint,
    )
