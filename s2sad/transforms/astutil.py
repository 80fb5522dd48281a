"""Small AST builders and the one annotation helper the passes share.

Annotations live in a dict attached to nodes (``anno(node)``) so passes never
reach into each other's internals.
"""

from __future__ import annotations

import ast
from ast import AST
from collections.abc import Iterator
from typing import Any


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``: ``node`` and everything under it, in the same order (breadth
    first, each node's children queued before it is yielded, so a caller may
    replace a yielded node's fields), about 40% faster: one list and ``_fields``
    read directly, no generator per node.  The passes walk whole functions many
    times (a 1,000-statement function: over three million nodes a compile)."""
    todo = [node]
    for n in todo:  # the list grows while it is read: a queue without popping
        for field in n._fields:
            v = getattr(n, field, None)
            if isinstance(v, AST):
                todo.append(v)
            elif isinstance(v, list):
                for item in v:
                    if isinstance(item, AST):
                        todo.append(item)
        yield n


def anno(node: ast.AST) -> dict[str, Any]:
    """The s2sad annotation dict of ``node`` (created on first use)."""
    d = getattr(node, "_s2sad", None)
    if d is None:
        d = {}
        node._s2sad = d
    return d


def name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def const(value: Any) -> ast.Constant:
    return ast.Constant(value=value)


def assign(
    target: str | ast.expr, value: ast.expr, like: ast.AST | None = None
) -> ast.Assign:
    if isinstance(target, str):
        target = name(target, store=True)
    node = ast.Assign(targets=[target], value=value, type_comment=None)
    if like is not None:
        copy_loc(node, like)
    return node


def call(func: str | ast.expr, *args: ast.expr, **kwargs: ast.expr) -> ast.Call:
    if isinstance(func, str):
        func = dotted(func)
    keywords = [ast.keyword(arg=k, value=v) for k, v in kwargs.items()]
    return ast.Call(func=func, args=list(args), keywords=keywords)


def index_value(idx: ast.expr) -> ast.expr:
    """An index (with slices) as an ordinary expression: ``1:n`` -> ``slice(1, n, None)``."""
    if isinstance(idx, ast.Slice):
        parts = [getattr(idx, k) or const(None) for k in ("lower", "upper", "step")]
        return call("slice", *parts)
    if isinstance(idx, ast.Tuple):
        return ast.Tuple(elts=[index_value(e) for e in idx.elts], ctx=ast.Load())
    return idx


def dotted(path: str) -> ast.expr:
    """``"a.b.c"`` -> Attribute(Attribute(Name(a), b), c)."""
    parts = path.split(".")
    node: ast.expr = name(parts[0])
    for part in parts[1:]:
        node = ast.Attribute(value=node, attr=part, ctx=ast.Load())
    return node


def copy_loc(node: ast.AST, like: ast.AST) -> ast.AST:
    """Copy line/column from ``like`` onto ``node`` and every located child lacking one."""
    for sub in walk(node):
        if hasattr(like, "lineno") and "lineno" in sub._attributes:
            if getattr(sub, "lineno", None) is None:
                sub.lineno = like.lineno
                sub.col_offset = like.col_offset
                sub.end_lineno = getattr(like, "end_lineno", like.lineno)
                sub.end_col_offset = getattr(like, "end_col_offset", like.col_offset)
    return node


def without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    """A function body without its leading docstring (if it has one)."""
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return body[1:]
    return body


def loads(node: ast.AST) -> set[str]:
    """Names read anywhere inside ``node``."""
    return {
        n.id
        for n in walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def stores(node: ast.AST) -> set[str]:
    """Names bound anywhere inside ``node`` (assignment and loop targets)."""
    return {
        n.id
        for n in walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def nested_defs(node: ast.AST) -> set[str]:
    """Names of the functions defined anywhere inside ``node`` (not ``node``'s own)."""
    return {
        s.name for s in walk(node) if isinstance(s, ast.FunctionDef) and s is not node
    }


def not_any(flags: list[str]) -> ast.expr:
    """``not (a or b ...)`` over flag names (sorted for determinism)."""
    flags = sorted(flags)
    inner: ast.expr = name(flags[0])
    if len(flags) > 1:
        inner = ast.BoolOp(op=ast.Or(), values=[name(f) for f in flags])
    return ast.UnaryOp(op=ast.Not(), operand=inner)


def any_of(flags: list[str]) -> ast.expr:
    flags = sorted(flags)
    if len(flags) == 1:
        return name(flags[0])
    return ast.BoolOp(op=ast.Or(), values=[name(f) for f in flags])


class Namer:
    """Fresh, readable, collision-free names derived from a base name."""

    def __init__(self, reserved: set[str] | None = None):
        self.used: set[str] = set(reserved or ())
        # per base, the first of base, base_1, base_2, ... that may still be
        # free in ``_counted`` (``used`` only grows; a snapshot restored is a
        # new set, and starts over): ``fresh`` of the 1,000th ``tanh`` tried
        # every name before it
        self._counted: set[str] | None = None
        self._next: dict[str, int] = {}

    def reserve(self, *names: str) -> None:
        self.used.update(names)

    def fresh(self, base: str) -> str:
        """The first of ``base``, ``base_1``, ``base_2``, ... not used yet."""
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "t"
        if base[0].isdigit():
            base = "t" + base
        used = self.used
        if used is not self._counted:
            self._counted, self._next = used, {}
        i = self._next.get(base, 0)
        candidate = f"{base}_{i}" if i else base
        while candidate in used:
            i += 1
            candidate = f"{base}_{i}"
        used.add(candidate)
        self._next[base] = i + 1
        return candidate


def function_def(
    fn_name: str, params: list[str], body: list[ast.stmt]
) -> ast.FunctionDef:
    """A plain ``def fn_name(*params): body`` node."""
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=p) for p in params],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
        vararg=None,
        kwarg=None,
    )
    return ast.FunctionDef(
        name=fn_name,
        args=args,
        body=body or [ast.Pass()],
        decorator_list=[],
        returns=None,
        type_comment=None,
        type_params=[],
    )


def in_loop(root: ast.AST, stmt: ast.AST) -> bool:
    """Whether ``stmt`` sits in a ``for`` or ``while`` of ``root`` (True when it
    is not in ``root`` at all: the safe answer for how often it runs)."""
    loops = [n for n in walk(root) if isinstance(n, (ast.For, ast.While))]
    if any(stmt is n for loop in loops for n in walk(loop)):
        return True
    return not any(stmt is n for n in walk(root))


def reversed_name(e: ast.expr) -> str | None:
    """``r`` where ``e`` is ``reversed(r)``, ``r`` a name; else None."""
    if (
        isinstance(e, ast.Call)
        and isinstance(e.func, ast.Name)
        and e.func.id == "reversed"
        and len(e.args) == 1
        and not e.keywords
        and isinstance(e.args[0], ast.Name)
    ):
        return e.args[0].id
    return None
