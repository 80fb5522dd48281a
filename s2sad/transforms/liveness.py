"""Which names may still be read after each statement of an emitted function.

A name is *live* after a statement when some path from there reads it before
it is bound again.  Loops join the state after their body with the state at
their head until nothing changes, so a name read in the next iteration stays
live at the end of the body::

    g_x = 0.0                       # live after: g_x, g_out, r, tape
    for i in reversed(r):
        g_mul = g_out               # live after: g_mul, g_out, g_x, r, tape
        g_out = None                # dead store: g_out is bound again below
        s = tape.pop()
        g_x = g_x + g_mul * 0.1
        g_out = g_mul * math.cos(s)
    return (value, (float(g_x),))

Only the statements emitted code is made of are understood; anything else
(``try``, ``with``, ``break``, nested functions and lambdas, whose bodies read
names later, ``del``, walrus) raises :class:`Unsupported`, and callers leave the
function as it is.
"""

from __future__ import annotations

import ast

from s2sad.transforms.astutil import walk

_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Pass)
#: expressions that bind names or read them at another time
_OPAQUE = (
    ast.Lambda,
    ast.NamedExpr,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.Yield,
    ast.YieldFrom,
    ast.Await,
)
#: builtins that read or write a frame's locals by name
_FRAME_READERS = frozenset({"locals", "vars", "eval", "exec", "dir"})


class Unsupported(Exception):
    """A statement or expression this analysis does not model."""


def live_after(body: list[ast.stmt]) -> dict[int, frozenset[str]]:
    """``id(statement) -> names live after it``, for every statement of ``body``
    (a function's body: nothing is live after its end)."""
    out: dict[int, frozenset[str]] = {}
    _block(body, frozenset(), out)
    return out


def reads(node: ast.AST) -> set[str]:
    """Names ``node`` reads (an augmented assignment reads its target too)."""
    found = {n.id for n in walk(node) if isinstance(n, ast.Name) and _loads(n.ctx)}
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        found.add(node.target.id)
    return found


def writes(node: ast.AST) -> set[str]:
    """Names a simple statement binds (whole names: not items or attributes)."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target] if node.value is not None else []
    elif isinstance(node, ast.For):
        targets = [node.target]
    else:
        return set()
    out: set[str] = set()
    for t in targets:
        _bound(t, out)
    return out


def all_writes(stmts: list[ast.stmt]) -> set[str]:
    """Names bound anywhere in ``stmts``, nested blocks and loop targets included."""
    return {
        n.id
        for s in stmts
        for n in walk(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def check(body: list[ast.stmt]) -> None:
    """Raise :class:`Unsupported` when ``body`` holds anything not modelled."""
    allowed = (*_SIMPLE, ast.If, ast.For, ast.While, ast.Return, ast.Raise)
    for s in body:
        for n in walk(s):
            if isinstance(n, ast.stmt) and not isinstance(n, allowed):
                raise Unsupported(type(n).__name__)
            if isinstance(n, _OPAQUE):
                raise Unsupported(type(n).__name__)
            if isinstance(n, ast.Name) and (
                isinstance(n.ctx, ast.Del) or n.id in _FRAME_READERS
            ):
                raise Unsupported(n.id)
            if isinstance(n, (ast.For, ast.While)) and n.orelse:
                raise Unsupported("a loop's else")


def _loads(ctx: ast.expr_context) -> bool:
    return isinstance(ctx, ast.Load)


def _bound(t: ast.expr, out: set[str]) -> None:
    if isinstance(t, ast.Name):
        out.add(t.id)
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            _bound(e, out)
    elif isinstance(t, ast.Starred):
        _bound(t.value, out)


def _block(stmts: list[ast.stmt], after: frozenset[str], out: dict) -> frozenset[str]:
    live = after
    for s in reversed(stmts):
        out[id(s)] = live
        live = _statement(s, live, out)
    return live


def _statement(s: ast.stmt, after: frozenset[str], out: dict) -> frozenset[str]:
    if isinstance(s, ast.If):
        return frozenset(
            reads(s.test) | _block(s.body, after, out) | _block(s.orelse, after, out)
        )
    if isinstance(s, (ast.For, ast.While)):
        head = after
        while True:
            body_in = _block(s.body, head, out)
            if isinstance(s, ast.For):  # each iteration binds the target first
                new = head | (body_in - writes(s)) | reads(s.target)
            else:
                new = head | body_in | reads(s.test)
            if new == head:
                break
            head = frozenset(new)
        if isinstance(s, ast.For):
            return frozenset(head | reads(s.iter))
        return head
    if isinstance(s, (ast.Return, ast.Raise)):
        return frozenset(reads(s))
    if isinstance(s, _SIMPLE):
        return frozenset((after - writes(s)) | reads(s))
    raise Unsupported(type(s).__name__)
