"""Methods of dicts and lists written as item reads, item writes and appends.

Runs in desugar.  A dict method has no adjoint rule, so ``cfg.get("eps",
1e-5)`` on a dict that also holds a differentiated value was refused; written
as subscripts, every later pass knows it.  Only receivers known to be dicts
(lists) are rewritten: an argument whose value in this call is one, or a local
assigned once from a literal (``{}``, ``[]``, ``dict(...)``, ``list(...)``)::

    eps = cfg.get("eps", 1e-5)     ->  eps = cfg["eps"] if "eps" in cfg else 1e-5
    m = d.setdefault("m", v)       ->  if "m" not in d:
                                           d["m"] = v
                                       m = d["m"]
    d.update({"a": x}, b=y)        ->  d["a"] = x
                                       d["b"] = y
    xs.extend([a, b])              ->  xs.append(a)
                                       xs.append(b)

The key and the dict must be names or constants (read twice).  The writes
(``setdefault``, ``update``) are rewritten on a dict argument only in the
differentiated function itself, where an item written into an argument that is
not differentiated stays there for the caller, as in Python; in a called
function they stay method calls, which run as written when no differentiated
value is involved and are refused at their line otherwise.
"""

from __future__ import annotations

import ast
from typing import Any

from s2sad.transforms.astutil import anno, copy_loc, name, walk

_STMT_LISTS = ("body", "orelse")


def run(node: ast.FunctionDef, examples: dict, top: bool, namer) -> None:
    kinds = _container_kinds(node, examples or {})
    if not kinds:
        return
    params = {a.arg for a in node.args.args}
    writable = {v for v in kinds if top or v not in params}
    node.body = _block(node.body, kinds, writable, namer)


def _container_kinds(node: ast.FunctionDef, examples: dict) -> dict[str, type]:
    counts: dict[str, int] = {}
    for sub in walk(node):
        if isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load):
            counts[sub.id] = counts.get(sub.id, 0) + 1
    kinds: dict[str, type] = {}
    kwarg = anno(node).get("kwarg")
    if kwarg is not None and counts.get(kwarg, 0) == 0:
        kinds[kwarg] = dict
    for a in node.args.args:
        value = examples.get(a.arg)
        if isinstance(value, (dict, list)) and counts.get(a.arg, 0) == 0:
            kinds[a.arg] = type(value)
    for sub in walk(node):
        if (
            isinstance(sub, ast.Assign)
            and len(sub.targets) == 1
            and isinstance(sub.targets[0], ast.Name)
            and counts.get(sub.targets[0].id) == 1
        ):
            kind = _literal_kind(sub.value)
            if kind is not None:
                kinds[sub.targets[0].id] = kind
    return kinds


def _literal_kind(value: ast.expr) -> type | None:
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return dict
    if isinstance(value, (ast.List, ast.ListComp)):
        return list
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return {"dict": dict, "list": list}.get(value.func.id)
    return None


def _simple(e: ast.expr | None) -> bool:
    return isinstance(e, (ast.Name, ast.Constant))


def _method(e: Any, kinds: dict, kind: type, *methods: str) -> bool:
    return (
        isinstance(e, ast.Call)
        and isinstance(e.func, ast.Attribute)
        and e.func.attr in methods
        and isinstance(e.func.value, ast.Name)
        and kinds.get(e.func.value.id) is kind
    )


def _item(d: str, key: ast.expr, store: bool = False) -> ast.Subscript:
    ctx = ast.Store() if store else ast.Load()
    return ast.Subscript(value=name(d), slice=key, ctx=ctx)


def _block(stmts: list[ast.stmt], kinds: dict, writable: set, namer) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for s in stmts:
        for field in _STMT_LISTS:
            inner = getattr(s, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                setattr(s, field, _block(inner, kinds, writable, namer))
        if isinstance(s, (ast.FunctionDef, ast.ClassDef)):
            out.append(s)
            continue
        new = _writes(s, kinds, writable, namer) or [s]
        for n in new:
            _Gets(kinds).visit(n)
            for sub in walk(n):
                if isinstance(sub, (ast.expr, ast.stmt)) and not hasattr(sub, "lineno"):
                    ast.copy_location(sub, s)
        out.extend(new)
    return out


def _first(values: list[ast.expr], s: ast.stmt, namer) -> tuple[list, list]:
    """Python evaluates all the values before the first write: those that are
    not names or constants go into fresh names first."""
    if len(values) < 2:
        return [], values
    before, out = [], []
    for v in values:
        if _simple(v):
            out.append(v)
            continue
        tmp = namer.fresh("value")
        before.append(copy_loc(ast.Assign(targets=[name(tmp, True)], value=v), s))
        out.append(name(tmp))
    return before, out


def _writes(s: ast.stmt, kinds: dict, writable: set, namer) -> list[ast.stmt] | None:
    """The statements for ``d.setdefault``/``d.update``/``xs.extend`` standing
    alone (or ``m = d.setdefault(...)``); None for any other statement."""
    target = None
    value = s.value if isinstance(s, (ast.Expr, ast.Assign)) else None
    if isinstance(s, ast.Assign):
        if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
            return None
        target = s.targets[0]
    if value is None or not isinstance(value, ast.Call):
        return None
    func = value.func
    recv = (
        func.value.id
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
        else None
    )
    if recv not in writable:
        return None
    if _method(value, kinds, dict, "setdefault"):
        if (
            value.keywords
            or len(value.args) not in (1, 2)
            or not _simple(value.args[0])
        ):
            return None
        key = value.args[0]
        default = value.args[1] if len(value.args) == 2 else ast.Constant(None)
        missing = ast.Compare(left=key, ops=[ast.NotIn()], comparators=[name(recv)])
        fill = ast.Assign(targets=[_item(recv, key, True)], value=default)
        out: list[ast.stmt] = [
            copy_loc(ast.If(test=missing, body=[copy_loc(fill, s)], orelse=[]), s)
        ]
        if target is not None:
            out.append(
                copy_loc(ast.Assign(targets=[target], value=_item(recv, key)), s)
            )
        return out
    if target is not None:
        return None
    if _method(value, kinds, dict, "update"):
        pairs = []
        for a in value.args:
            if not isinstance(a, ast.Dict) or None in a.keys or len(value.args) > 1:
                return None
            pairs += list(zip(a.keys, a.values))
        for k in value.keywords:
            if k.arg is None:
                return None
            pairs.append((ast.Constant(k.arg), k.value))
        before, values = _first([v for _, v in pairs], s, namer)
        return before + [
            copy_loc(ast.Assign(targets=[_item(recv, k, True)], value=v), s)
            for (k, _), v in zip(pairs, values)
        ]
    if _method(value, kinds, list, "extend"):
        if value.keywords or len(value.args) != 1:
            return None
        items = value.args[0]
        if not isinstance(items, (ast.List, ast.Tuple)) or any(
            isinstance(e, ast.Starred) for e in items.elts
        ):
            return None
        append = ast.Attribute(value=name(recv), attr="append", ctx=ast.Load())
        before, values = _first(list(items.elts), s, namer)
        return before + [
            copy_loc(ast.Expr(ast.Call(func=append, args=[e], keywords=[])), s)
            for e in values
        ]
    return None


class _Gets(ast.NodeTransformer):
    """``d.get(k[, default])`` on a dict: ``d[k] if k in d else default``."""

    def __init__(self, kinds: dict):
        self.kinds = kinds

    def visit_Lambda(self, node):
        return node

    def visit_FunctionDef(self, node):
        return node

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        if not _method(node, self.kinds, dict, "get"):
            return node
        if node.keywords or len(node.args) not in (1, 2) or not _simple(node.args[0]):
            return node
        d, key = node.func.value.id, node.args[0]
        default = node.args[1] if len(node.args) == 2 else ast.Constant(None)
        test = ast.Compare(left=key, ops=[ast.In()], comparators=[name(d)])
        out = ast.IfExp(test=test, body=_item(d, key), orelse=default)
        for sub in walk(out):
            if not hasattr(sub, "lineno"):
                ast.copy_location(sub, node)
        return out
