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
differs.  The two loops of a peeled loop's backward sweep (``peel.py``)
share one sum: the second starts from the first's, and one sum down follows
both (``_merge``, as for the stacks below).

A loop's ``step_product`` (the ``hoist`` pass) gets, for its weight ``w``,
``g_w = accumulate(g_w, d_step_product_rhs(g_m, m, R, x, w, axis, t)[0])``:
one ``x_t.T @ g_m`` product a step.  Under the same conditions (``g_w`` bound
and read by that statement alone, ``R`` bound nowhere in the loop) the pass
writes::

    g_w_steps = None
    for t in reversed(r):
        ...
        g_w_steps = stack_step(g_w_steps, g_m, R, x, w, axis, t)
    g_w = accumulate(g_w, stacked_product(g_w_steps, R))

``runtime.stepstacks.stack_step`` copies each step's ``g_m`` into a time-major stack (a
contiguous slab a step) and ``stacked_product`` sums them with one
``x.T @ stack`` after the loop, over the time-major copy of ``x`` that
``stepwise_ahead`` made; a step it cannot stack is differentiated at once.

Only for buffered NumPy code (``Options.buffers``): the plain
module that ``hvp`` differentiates again keeps the per-step form.
"""

from __future__ import annotations

import ast
from typing import Any

from s2sad.options import BUFFERED
from s2sad.runtime import stepreads, stepstacks
from s2sad.transforms.astutil import anno, assign, call, const, name, walk


def run(job: Any, module: Any) -> None:
    """The pipeline's ``loopsums`` pass (reverse mode, NumPy code with buffers)."""
    if module.options.buffers != BUFFERED:
        return
    for fn in job.functions:
        if isinstance(fn, ast.FunctionDef):
            _blocks(fn.body, module)


def _blocks(stmts: list[ast.stmt], module: Any) -> None:
    """Rewrite the loops of ``stmts`` (innermost first), at every depth."""
    pending: dict = {}  # (g_w, R) -> (the sum after an earlier loop, its stack)
    i = 0
    while i < len(stmts):
        stmt = stmts[i]
        for field in ("body", "orelse"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                _blocks(inner, module)
        if isinstance(stmt, ast.For) and not stmt.orelse:
            stacks: list = []
            before, after = _rewrite(stmt, module, stacks)
            stmts[i:i] = before
            i += len(before)
            stmts[i + 1 : i + 1] = after
            i -= _merge(stmts, i, stacks, pending)
            i += len(after)
        i += 1


def _merge(stmts: list[ast.stmt], i: int, stacks: list, pending: dict) -> int:
    """Continue the stack (or the ``sum_steps`` sum) of an earlier loop of
    ``stmts`` (the loops of a peeled loop's backward sweep) in the loop at
    ``i``: its sum after that loop is dropped and this loop's stack starts as
    that loop's, so that one product (one sum down) covers both loops'
    steps.  Only when nothing between the two loops names ``g_w``, ``R`` (the
    summed-down ``b``) or the stack.  How many statements before ``i`` were
    removed."""
    removed = 0
    for g_w, prod, steps_name, start, total, kind in stacks:
        earlier = pending.get((g_w, prod, kind))
        pending[(g_w, prod, kind)] = (total, steps_name)
        if earlier is None:
            continue
        total_before, steps_before = earlier
        at = next((k for k, s in enumerate(stmts) if s is total_before), None)
        here = next((k for k, s in enumerate(stmts) if s is start), None)
        if at is None or here is None or at > here:
            continue
        names = {g_w, prod, steps_before, steps_name}
        between = stmts[at + 1 : here]
        if any(
            isinstance(node, ast.Name) and node.id in names
            for stmt in between
            for node in walk(stmt)
        ):
            continue
        start.value = name(steps_before)
        del stmts[at]
        removed += 1
    return removed


def _helper(node: ast.expr, which: str) -> bool:
    return isinstance(node, ast.Name) and anno(node).get("helper") == which


def _accumulated(stmt: ast.stmt) -> tuple[str, ast.expr] | None:
    """``(g, part)`` of ``g = accumulate(g, part)``."""
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
    return target, part


def _summed(stmt: ast.stmt) -> tuple[str, str, str] | None:
    """``(g_b, g_z, b)`` of ``g_b = accumulate(g_b, unbroadcast(g_z, b))``."""
    found = _accumulated(stmt)
    if found is None:
        return None
    target, part = found
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


def _rewrite(
    loop: ast.For, module: Any, stacks: list
) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """Rewrite ``loop``'s sums down; the statements to put before and after it."""
    stored: dict[str, int] = {}
    loaded: dict[str, int] = {}
    for node in walk(loop):
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
    _stacks(loop, module, stored, loaded, before, after, stacks)
    for block, k, g_b, g_z, b in found:
        steps_name = module.namer.fresh(f"{g_b}_steps")
        helper = module.rule_ref(stepreads.sum_steps)
        old = block[k]
        new = call(helper, name(steps_name), name(g_z), name(b))
        block[k] = assign(steps_name, new, like=old)
        start = assign(steps_name, const(None), like=loop)
        before.append(start)
        total = call(
            module.helper("accumulate"),
            name(g_b),
            call(module.helper("unbroadcast"), name(steps_name), name(b)),
        )
        summed = assign(g_b, total, like=old)
        after.append(summed)
        stacks.append((g_b, b, steps_name, start, summed, "sum"))
    return before, after


def _stacked(stmt: ast.stmt) -> tuple[str, ast.Call] | None:
    """``(g_w, the d_step_product_rhs call)`` of ``g_w = accumulate(g_w,
    d_step_product_rhs(...)[0])``."""
    found = _accumulated(stmt)
    if found is None:
        return None
    target, part = found
    if not (
        isinstance(part, ast.Subscript)
        and isinstance(part.slice, ast.Constant)
        and part.slice.value == 0
        and isinstance(part.value, ast.Call)
        and anno(part.value.func).get("rule") is stepreads.d_step_product_rhs
        and 7 <= len(part.value.args) <= 8
        and not part.value.keywords
        and not any(isinstance(a, ast.Starred) for a in part.value.args)
    ):
        return None
    return target, part.value


def _stacks(loop: ast.For, module: Any, stored, loaded, before, after, stacks) -> None:
    """Rewrite ``loop``'s per-step ``w`` cotangents of ``step_product`` into
    one stacked product after it (see the module's docstring)."""
    for block, k in list(_candidates(loop.body)):
        parts = _stacked(block[k])
        if parts is None:
            continue
        g_w, rule = parts
        prod = rule.args[2]
        if (
            stored.get(g_w) != 1
            or loaded.get(g_w) != 1
            or not isinstance(prod, ast.Name)
            or prod.id in stored
        ):
            continue
        steps_name = module.namer.fresh(f"{g_w}_steps")
        if isinstance(rule.func, ast.Name):  # (its import: only if still called)
            module.maybe_unused.add(rule.func.id)
        old = block[k]
        args = [name(steps_name)] + [a for i, a in enumerate(rule.args) if i != 1]
        step = call(module.rule_ref(stepstacks.stack_step), *args)
        block[k] = assign(steps_name, step, like=old)
        start = assign(steps_name, const(None), like=loop)
        before.append(start)
        total = call(
            module.rule_ref(stepstacks.stacked_product),
            name(steps_name),
            name(prod.id),
        )
        summed = assign(
            g_w, call(module.helper("accumulate"), name(g_w), total), like=old
        )
        after.append(summed)
        stacks.append((g_w, prod.id, steps_name, start, summed, "stack"))
