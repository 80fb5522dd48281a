"""Shrinking a failing program to a minimal reproduction, and writing it out.

Greedy delta debugging on the module's AST: every candidate is one small edit
(drop a chunk of statements, replace an ``if``/``for``/``while`` by its body,
replace an expression by one of its sub-expressions or by a constant, drop an
argument of ``target``); a candidate is kept when :func:`check.check` gives it
the same :meth:`Result.key` (same class, same phase, same exception type), so
the reproduction still shows the *same* defect.  Invalid candidates (syntax
errors, NumPy errors, kinks) are simply rejected by the check.
"""

from __future__ import annotations

import ast
import copy
import time
from dataclasses import replace
from typing import Callable, Iterator

import numpy as np

from s2sad.fuzz.check import Result, check
from s2sad.fuzz.grammar import Program

_BLOCKS = ("body", "orelse")


def _stmt_lists(tree: ast.AST) -> list[list]:
    out = []
    for node in ast.walk(tree):
        for f in _BLOCKS:
            body = getattr(node, f, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                out.append(body)
    return out


def _exprs(tree: ast.AST) -> list[tuple[ast.AST, str, int | None]]:
    """(parent, field, index) of every expression that may be replaced."""
    out = []
    for parent in ast.walk(tree):
        for f, value in ast.iter_fields(parent):
            if isinstance(parent, ast.Call) and f == "func":
                continue
            items = value if isinstance(value, list) else [value]
            for i, node in enumerate(items):
                if not isinstance(node, ast.expr) or isinstance(node, ast.Constant):
                    continue
                if isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
                    continue
                if isinstance(node, ast.Name) and node.id in ("np", "math"):
                    continue
                out.append((parent, f, i if isinstance(value, list) else None))
    return out


def _set(parent, field, index, new) -> None:
    if index is None:
        setattr(parent, field, new)
    else:
        getattr(parent, field)[index] = new


def _get(parent, field, index):
    return getattr(parent, field) if index is None else getattr(parent, field)[index]


def candidates(tree: ast.Module) -> Iterator[Callable[[ast.Module], None]]:
    """Edits (functions applied to a deep copy of ``tree``), biggest first."""

    lists = _stmt_lists(tree)
    for li, body in enumerate(lists):  # 1. drop chunks of statements, halves first
        n = len(body)
        size = n
        while size >= 1:
            for start in range(0, n, size):
                if not all(_kept(s) for s in body[start : start + size]):
                    yield _drop(li, start, size)
            size //= 2
    for li, body in enumerate(lists):  # 2. a compound statement becomes its body
        for si, stmt in enumerate(body):
            if isinstance(stmt, (ast.If, ast.For, ast.While)):
                yield _unwrap(li, si, "body")
                if getattr(stmt, "orelse", None):
                    yield _unwrap(li, si, "orelse")
    for ei, (parent, f, i) in enumerate(_exprs(tree)):  # 3. simpler expressions
        node = _get(parent, f, i)
        for ci, child in enumerate(
            c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)
        ):
            yield _replace_child(ei, ci)
        yield _replace_const(ei)
    target = next(
        (s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "target"),
        None,
    )
    if target is not None:  # 4. fewer arguments
        for a in list(target.args.args):
            yield ("droparg", a.arg)


def _kept(stmt: ast.stmt) -> bool:
    """Imports stay: without ``import numpy as np`` a program fails for a reason
    of its own (a NameError), not the defect being shrunk."""
    return isinstance(stmt, (ast.Import, ast.ImportFrom))


def _drop(li, start, size):
    def edit(t):
        body = _stmt_lists(t)[li]
        body[start : start + size] = [s for s in body[start : start + size] if _kept(s)]
        if not body:
            body.append(ast.Pass())

    return edit


def _unwrap(li, si, field):
    def edit(t):
        body = _stmt_lists(t)[li]
        stmt = body[si]
        inner = getattr(stmt, field)
        if isinstance(stmt, ast.For) and field == "body":
            inner = [
                ast.Assign([copy.deepcopy(stmt.target)], ast.Constant(0), lineno=0)
            ] + inner
        body[si : si + 1] = inner

    return edit


def _replace_child(ei, ci):
    def edit(t):
        parent, f, i = _exprs(t)[ei]
        node = _get(parent, f, i)
        child = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)][ci]
        if isinstance(getattr(child, "ctx", None), ast.Store) or (
            isinstance(child, ast.Name) and child.id in ("np", "math")
        ):
            raise ValueError
        _set(parent, f, i, child)

    return edit


def _replace_const(ei):
    def edit(t):
        parent, f, i = _exprs(t)[ei]
        _set(parent, f, i, ast.Constant(0.5))

    return edit


def apply(prog: Program, edit) -> Program | None:
    """The program after one edit, or None when the edit does not apply."""
    tree = ast.parse(prog.source)
    shapes = dict(prog.shapes)
    try:
        if isinstance(edit, tuple):  # ("droparg", name)
            target = next(
                s
                for s in tree.body
                if isinstance(s, ast.FunctionDef) and s.name == "target"
            )
            target.args.args = [a for a in target.args.args if a.arg != edit[1]]
            shapes.pop(edit[1])
            if not shapes:
                return None
        else:
            edit(tree)
        source = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    except (IndexError, ValueError, AttributeError, TypeError, StopIteration):
        return None
    if prog.token and not any(
        ln.strip().startswith(prog.token) for ln in source.splitlines()
    ):
        return None  # an expected refusal keeps the construct that must be refused
    return replace(prog, source=source, shapes=shapes)


def shrink(
    prog: Program,
    result: Result,
    max_checks: int = 400,
    max_seconds: float = 300.0,
    directory: str | None = None,
) -> tuple[Program, Result, int]:
    """The smallest program found with the same failure key, its result, and checks used."""
    key = result.key()
    if key[1] == "forward":
        phases: tuple = ("forward",)
    elif key[1] in ("compile", "plain"):
        phases = ("plain",)
    else:
        phases = ("plain", "buffered")
    seen = {prog.source}
    checks, start = 0, time.monotonic()
    best, best_res = prog, result
    progress = True
    while progress and checks < max_checks and time.monotonic() - start < max_seconds:
        progress = False
        for edit in candidates(ast.parse(best.source)):
            if checks >= max_checks or time.monotonic() - start > max_seconds:
                break
            cand = apply(best, edit)
            if cand is None or cand.source in seen:
                continue
            seen.add(cand.source)
            checks += 1
            res = check(cand, directory, phases=phases)
            if res.key() == key:
                best, best_res, progress = cand, res, True
                break
    best = replace(best, source=ast.unparse(ast.parse(best.source)) + "\n")
    return best, best_res, checks


def reproduction(prog: Program, result: Result) -> str:
    """A standalone script: the program, its inputs, s2sad vs finite differences."""
    args = ", ".join(
        repr(a) if isinstance(a, float) else f"np.array({np.asarray(a).tolist()!r})"
        for a in (result.points[0] if result.points else [])
    )
    detail = "\n".join("    " + ln for ln in result.detail.splitlines()[:12])
    buffered = result.phase.startswith("buffered")
    return f'''"""s2sad fuzzer reproduction: class {result.cls!r}, phase {result.phase!r}{', ' + result.exc if result.exc else ''}.

Found by ``python -m s2sad.fuzz`` (seed {prog.seed}, program {prog.index}), then shrunk.
Run: ``python {{this file}}`` (from a directory where s2sad is importable).

{detail}
"""

{prog.source.rstrip()}


ARGS = [{args}]
BUFFERED = {buffered}  # force the workspace (buffers) as the fuzzer did


if __name__ == "__main__":
    import importlib
    import os
    import sys

    import s2sad
    from s2sad.runtime import workspace

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)  # s2sad reads the function from a real module file
    mod = importlib.import_module(os.path.splitext(os.path.basename(__file__))[0])
    if BUFFERED:
        workspace.SMALL_BYTES = workspace.SPEED_BYTES = 0
    fresh = lambda: [np.array(a) if isinstance(a, np.ndarray) else a for a in ARGS]
    print("plain value:", mod.target(*fresh()))
    dfn = s2sad.value_and_grad(mod.target, argnums=tuple(range(len(ARGS))))
    for call in range(3 if BUFFERED else 1):
        print("s2sad call", call + 1, dfn(*fresh()))
    fd = []
    for k, a in enumerate(ARGS):
        flat = np.array(a, dtype=float).ravel()
        g = np.zeros_like(flat)
        for i in range(flat.size):
            vals = []
            for h in (1e-6, -1e-6):
                b = flat.copy()
                b[i] += h
                args = fresh()
                args[k] = float(b[0]) if isinstance(a, float) else b.reshape(np.shape(a))
                vals.append(mod.target(*args))
            g[i] = (vals[0] - vals[1]) / 2e-6
        fd.append(float(g[0]) if isinstance(a, float) else g.reshape(np.shape(a)))
    print("finite differences", tuple(fd))
'''
