"""A loop-invariant operand's cotangent summed down once after the loop.

A bias added every step of a loop (``h = tanh(x[:, t] @ W + h @ U + b)``)
gets, in the loop's backward sweep, one sum over the broadcast axes a step::

    for t in reversed(r):
        ...
        g_b = accumulate(g_b, unbroadcast(g_z, b))

The sum of the steps' sums is the sum of the steps' cotangents summed down
once.  When ``b`` is bound nowhere in the loop (its shape is the same every
step) and ``g_b`` is read nowhere else in it, the pass writes::

    g_b_steps = None
    for t in reversed(r):
        ...
        g_b_steps = sum_steps(g_b_steps, g_z, b)
    g_b = accumulate(g_b, unbroadcast(g_b_steps, b))

``runtime.stepreads.sum_steps`` adds the steps' ``g_z`` entry by entry into an
array of its own (one elementwise add a step instead of a reduction and an
add) and falls back to summing a step down at once where its shape or dtype
differs.  Only for buffered NumPy code (``Options.buffers``): the plain
module that ``hvp`` differentiates again keeps the per-step form.
"""

from __future__ import annotations

import ast
from typing import Any

from s2sad.options import BUFFERED
from s2sad.runtime import stepreads
from s2sad.transforms.astutil import anno, assign, call, const, name


def run(job: Any, module: Any) -> None:
    """The pipeline's ``loopsums`` pass (reverse mode, NumPy code with buffers)."""
    if module.options.buffers != BUFFERED:
        return
    for fn in job.functions:
        if isinstance(fn, ast.FunctionDef):
            _blocks(fn.body, module)


def _blocks(stmts: list[ast.stmt], module: Any) -> None:
    """Rewrite the loops of ``stmts`` (innermost first), at every depth."""
    i = 0
    while i < len(stmts):
        stmt = stmts[i]
        for field in ("body", "orelse"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                _blocks(inner, module)
        if isinstance(stmt, ast.For) and not stmt.orelse:
            before, after = _rewrite(stmt, module)
            stmts[i:i] = before
            i += len(before)
            stmts[i + 1 : i + 1] = after
            i += len(after)
        i += 1


def _helper(node: ast.expr, which: str) -> bool:
    return isinstance(node, ast.Name) and anno(node).get("helper") == which


def _summed(stmt: ast.stmt) -> tuple[str, str, str] | None:
    """``(g_b, g_z, b)`` of ``g_b = accumulate(g_b, unbroadcast(g_z, b))``."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Call)
        and _helper(stmt.value.func, "accumulate")
        and len(stmt.value.args) == 2
        and not stmt.value.keywords
    ):
        return None
    acc, part = stmt.value.args
    target = stmt.targets[0].id
    if not (isinstance(acc, ast.Name) and acc.id == target):
        return None
    if not (
        isinstance(part, ast.Call)
        and _helper(part.func, "unbroadcast")
        and len(part.args) == 2
        and not part.keywords
        and all(isinstance(a, ast.Name) for a in part.args)
    ):
        return None
    return target, part.args[0].id, part.args[1].id


def _candidates(body: list[ast.stmt]):
    """(block, index) of the statements of ``body`` and of its ``if`` blocks
    (not of nested loops: each loop is rewritten on its own)."""
    for k, stmt in enumerate(body):
        yield body, k
        if isinstance(stmt, ast.If):
            yield from _candidates(stmt.body)
            yield from _candidates(stmt.orelse)


def _rewrite(loop: ast.For, module: Any) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """Rewrite ``loop``'s sums down; the statements to put before and after it."""
    stored: dict[str, int] = {}
    loaded: dict[str, int] = {}
    for node in ast.walk(loop):
        if isinstance(node, ast.Name):
            seen = stored if isinstance(node.ctx, ast.Store) else loaded
            seen[node.id] = seen.get(node.id, 0) + 1
    found = []
    for block, k in list(_candidates(loop.body)):
        parts = _summed(block[k])
        if parts is None:
            continue
        g_b, g_z, b = parts
        # g_b: bound and read by this statement alone; b: bound nowhere in the loop
        if stored.get(g_b) != 1 or loaded.get(g_b) != 1 or b in stored or g_z == b:
            continue
        found.append((block, k, g_b, g_z, b))
    before: list[ast.stmt] = []
    after: list[ast.stmt] = []
    for block, k, g_b, g_z, b in found:
        steps_name = module.namer.fresh(f"{g_b}_steps")
        helper = module.rule_ref(stepreads.sum_steps)
        old = block[k]
        new = call(helper, name(steps_name), name(g_z), name(b))
        block[k] = assign(steps_name, new, like=old)
        before.append(assign(steps_name, const(None), like=loop))
        total = call(
            module.helper("accumulate"),
            name(g_b),
            call(module.helper("unbroadcast"), name(steps_name), name(b)),
        )
        after.append(assign(g_b, total, like=old))
    return before, after
