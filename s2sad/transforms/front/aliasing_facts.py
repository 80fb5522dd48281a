"""Facts about a whole function that the aliasing pass reads before its flow:
which names hold containers, and which dicts are never changed."""

from __future__ import annotations

import ast

from s2sad.transforms.front.activity import is_append


def containers(node: ast.FunctionDef) -> set[str]:
    """Names that hold lists, tuples or dicts (literals, or appended to)."""
    out = set()
    for s in ast.walk(node):
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
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            uses.setdefault(n.id, []).append(n)
    made = {
        s.targets[0].id: s
        for s in ast.walk(node)
        if isinstance(s, ast.Assign)
        and isinstance(s.targets[0], ast.Name)
        and isinstance(s.value, ast.Dict)
        and all(isinstance(k, ast.Constant) for k in s.value.keys)
    }
    reads = {
        id(n.value)
        for n in ast.walk(node)
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
