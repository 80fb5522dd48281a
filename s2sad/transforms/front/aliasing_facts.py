"""Facts about a whole function that the aliasing pass reads before its flow:
which names hold containers, and which dicts are never changed."""

from __future__ import annotations

import ast

from s2sad.transforms.astutil import anno, walk
from s2sad.transforms.front.activity import is_append


def containers(node: ast.FunctionDef) -> set[str]:
    """Names that hold lists, tuples or dicts (literals, or appended to)."""
    out = set()
    for s in walk(node):
        if (
            isinstance(s, ast.Assign)
            and isinstance(s.targets[0], ast.Name)
            and isinstance(s.value, (ast.List, ast.Tuple, ast.Dict))
        ):
            out.add(s.targets[0].id)
        if isinstance(s, ast.Expr) and is_append(s):
            out.add(s.value.func.value.id)
    return out


def frozen_dicts(node: ast.FunctionDef) -> set[str]:
    """Names bound once, to a dict display with constant keys, and only ever read
    as ``d["key"]`` after: nothing changes their items."""
    uses: dict[str, list] = {}
    for n in walk(node):
        if isinstance(n, ast.Name):
            uses.setdefault(n.id, []).append(n)
    made = {
        s.targets[0].id: s
        for s in walk(node)
        if isinstance(s, ast.Assign)
        and isinstance(s.targets[0], ast.Name)
        and isinstance(s.value, ast.Dict)
        and all(isinstance(k, ast.Constant) for k in s.value.keys)
    }
    reads = {
        id(n.value)
        for n in walk(node)
        if isinstance(n, ast.Subscript)
        and isinstance(n.value, ast.Name)
        and isinstance(n.slice, ast.Constant)
        and isinstance(n.ctx, ast.Load)
    }
    return {
        d
        for d, s in made.items()
        if all(n is s.targets[0] or id(n) in reads for n in uses[d])
    }


def plain_lists(node: ast.FunctionDef) -> set[str]:
    """Names bound only to list displays and used only as ``lst.append(v)``,
    ``lst[i]``, ``lst[i] = v`` and ``len(lst)``: nothing else changes them."""
    allowed: set[int] = set()
    for n in walk(node):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.List):
            allowed.update(id(t) for t in n.targets if isinstance(t, ast.Name))
        elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
            allowed.add(id(n.value))
        elif isinstance(n, ast.Expr) and is_append(n):
            allowed.add(id(n.value.func.value))
        elif isinstance(n, ast.Call) and _is_len(n):
            allowed.add(id(n.args[0]))
    uses: dict[str, list] = {}
    for n in walk(node):
        if isinstance(n, ast.Name):
            uses.setdefault(n.id, []).append(n)
    return {k for k, ns in uses.items() if all(id(n) in allowed for n in ns)}


def int_constant(index: ast.expr) -> int | None:
    if isinstance(index, ast.Constant) and type(index.value) is int:
        return index.value
    if (
        isinstance(index, ast.UnaryOp)
        and isinstance(index.op, ast.USub)
        and isinstance(index.operand, ast.Constant)
        and type(index.operand.value) is int
    ):
        return -index.operand.value
    return None


def _is_len(call: ast.Call) -> bool:
    info = anno(call).get("call")
    return getattr(info, "target", None) is len and len(call.args) == 1
