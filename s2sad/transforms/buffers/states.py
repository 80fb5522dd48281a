"""Scalar code: a tape only one loop fills, one value an iteration, is read by
iterating over it backwards instead of popping it.

When the whole function's tape traffic is one ``tape.append(v)`` at the top of
a ``for`` loop over a ``range`` and one ``s = tape.pop()`` first in the loop
that runs that range backwards, the tape holds exactly that loop's values, so
the backward loop may walk it (no call per iteration)::

    for i in r:                             for i in r:
        tape.append(s)                          tape.append(s)
        s = 0.9 * math_sin(s) + mul_1           s = 0.9 * math_sin(s) + mul_1
    ...                              ->     ...
    for i in reversed(r):                   for s in reversed(tape):
        s = tape.pop()                          g_x = g_x + g_out * 0.1
        g_x = g_x + g_out * 0.1                 ...
        ...

Each backward iteration binds the same value to ``s`` at the same point; the
loop counter, unread in the backward loop and after it, is no longer bound.
"""

from __future__ import annotations

import ast

from s2sad.transforms import liveness
from s2sad.transforms.astutil import reversed_name, walk
from s2sad.transforms.comments import is_marker


def walk_backwards(fn: ast.FunctionDef, live: dict, builtins: set[str]) -> bool:
    """Rewrite ``fn``'s backward loop in place when the tape is its alone;
    ``builtins``: the builtin names nothing shadows.  Whether it did."""
    if not {"range", "reversed"} <= builtins:
        return False
    body = fn.body
    uses = [s for s in body if _mentions_tape(s)]
    if len(uses) != 3 or not _is_init(uses[0]):
        return False
    fwd, bwd = uses[1], uses[2]
    if not (isinstance(fwd, ast.For) and isinstance(bwd, ast.For)):
        return False
    r = fwd.iter
    if not (
        isinstance(r, ast.Name)
        and isinstance(fwd.target, ast.Name)
        and isinstance(bwd.target, ast.Name)
        and reversed_name(bwd.iter) == r.id
        and _bound_to_range(body, r.id)
    ):
        return False
    between = body[body.index(fwd) : body.index(bwd) + 1]
    if liveness.all_writes(between) & {r.id, "tape"}:
        return False
    if not (_one_top_level(fwd, _is_push) and _one_top_level(bwd, _is_pop)):
        return False
    first = next((s for s in bwd.body if not is_marker(s)), None)
    if first is None or not _is_pop(first):
        return False
    counter = bwd.target.id
    if counter in liveness.reads(ast.Module(body=bwd.body, type_ignores=[])):
        return False
    if counter in live[id(bwd)]:
        return False
    bwd.target = ast.Name(id=first.targets[0].id, ctx=ast.Store())
    bwd.iter.args = [ast.Name(id="tape", ctx=ast.Load())]
    bwd.body.remove(first)
    if not any(not is_marker(s) for s in bwd.body):
        bwd.body.append(ast.Pass())
    return True


def _mentions_tape(s: ast.stmt) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "tape" for n in walk(s))


def _is_init(s: ast.stmt) -> bool:
    """``tape = []``."""
    return (
        isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and s.targets[0].id == "tape"
        and isinstance(s.value, ast.List)
        and not s.value.elts
    )


def _tape_call(e: ast.expr, method: str) -> bool:
    return (
        isinstance(e, ast.Call)
        and isinstance(e.func, ast.Attribute)
        and isinstance(e.func.value, ast.Name)
        and e.func.value.id == "tape"
        and e.func.attr == method
    )


def _is_push(s: ast.stmt) -> bool:
    """``tape.append(v)`` (``v`` reads no tape)."""
    return (
        isinstance(s, ast.Expr)
        and _tape_call(s.value, "append")
        and len(s.value.args) == 1
        and not s.value.keywords
        and not _mentions_tape(ast.Expr(value=s.value.args[0]))
    )


def _is_pop(s: ast.stmt) -> bool:
    """``x = tape.pop()``."""
    return (
        isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and s.targets[0].id != "tape"
        and _tape_call(s.value, "pop")
        and not s.value.args
        and not s.value.keywords
    )


def _one_top_level(loop: ast.For, kind) -> bool:
    """The loop reads the tape in exactly one statement, of ``kind``, at the top
    level of its body (so once an iteration)."""
    reading = [s for s in loop.body if _mentions_tape(s)]
    return len(reading) == 1 and kind(reading[0]) and not _mentions_tape(loop.iter)


def _bound_to_range(body: list[ast.stmt], r: str) -> bool:
    """``r`` is bound once in the function, at its top level, to ``range(...)``."""
    binds = [s for s in body if r in liveness.all_writes([s])]
    return (
        len(binds) == 1
        and isinstance(binds[0], ast.Assign)
        and isinstance(binds[0].value, ast.Call)
        and isinstance(binds[0].value.func, ast.Name)
        and binds[0].value.func.id == "range"
    )
