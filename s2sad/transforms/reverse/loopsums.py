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
and read by that statement alone, ``R`` bound nowhere in the loop), where
the sweep writes every step once (``for t in reversed(r)``, no ``break`` or
``continue``, the statement run every step but where ``g_m`` is None:
``_inline``), the pass writes::

    g_w_stack = step_stack(R, x, w, axis, tiles, r)
    for t in reversed(r):
        ...
        if g_m is not None:
            g_w_stack[:, t] = g_m
        else:
            g_w_stack[:, t] = 0
    g_w = stacked_steps(g_w_stack, R, x, w, axis, tiles, g_w)  # g_w plus the sum

``runtime.stepstacks.step_stack`` makes an array of ``R``'s layout (time-major,
or ``x``'s own) where ``R`` holds every step's product as one matrix's rows,
and ``stacked_steps`` sums the steps with one ``rows.T @ stack`` after the
loop (written inline, the copy a step costs what a Python call would not:
session 10 measured the helper calls a step at 2% of rnn_mnist's gradient).
Else the stack is an object that differentiates each step as it is written.

Only for buffered NumPy code (``Options.buffers``): the plain
module that ``hvp`` differentiates again keeps the per-step form.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from s2sad.options import BUFFERED
from s2sad.runtime import stepreads, stepstacks
from s2sad.transforms.astutil import (
    anno,
    assign,
    call,
    const,
    name,
    reversed_name,
    walk,
)


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
        pending[(g_w, prod, kind)] = (total, steps_name, start)
        if earlier is None:
            continue
        total_before, steps_before, first = earlier
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
        if kind == "inline":  # the stack made before the first loop: for
            # this loop's steps too (a step that neither visits is zeroed)
            first.value.args.append(start.value.args[-1])
        pending[(g_w, prod, kind)] = (total, steps_name, first)
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
        if isinstance(rule.func, ast.Name):  # (its import: only if still called)
            module.maybe_unused.add(rule.func.id)
        _inline(loop, block, k, g_w, rule, module, before, after, stacks)


def _guard(loop: ast.For, block: list, k: int, g: ast.expr) -> ast.If | None | bool:
    """Where ``block[k]`` runs every step of ``loop``: at its top level (None)
    or alone in an ``if g is not None:`` there (that ``if``); else False."""
    if block is loop.body:
        return None
    for stmt in loop.body:
        if (
            isinstance(stmt, ast.If)
            and stmt.body is block
            and len(block) == 1
            and not stmt.orelse
            and isinstance(stmt.test, ast.Compare)
            and isinstance(stmt.test.left, ast.Name)
            and isinstance(g, ast.Name)
            and stmt.test.left.id == g.id
            and len(stmt.test.ops) == 1
            and isinstance(stmt.test.ops[0], ast.IsNot)
            and isinstance(stmt.test.comparators[0], ast.Constant)
            and stmt.test.comparators[0].value is None
        ):
            return stmt
    return False


def _inline(loop, block, k, g_w, rule, module, before, after, stacks) -> bool:
    """The stack written inline (``stepstacks.step_stack``): before the loop
    ``S = step_stack(R, x, w, axis, tiles, r)``, in it ``S[:, t] = g`` (``= 0``
    where ``g`` is None), after it ``g_w = accumulate(g_w, stacked_steps(S, R,
    x, w, axis, tiles))``.  Only where the sweep writes every step it visits
    once: ``loop`` is ``for t in reversed(r)`` with no ``break`` or
    ``continue``, the rule's step is ``t`` and its statement runs every step
    (see ``_guard``).  Whether it applied."""
    g, _, prod, x, w, axis, t = rule.args[:7]
    tiles = rule.args[7] if len(rule.args) > 7 else const(None)
    guard = _guard(loop, block, k, g)
    if (
        guard is False
        or not isinstance(loop.target, ast.Name)
        or not (isinstance(t, ast.Name) and t.id == loop.target.id)
        or not (isinstance(axis, ast.Constant) and type(axis.value) is int)
        or not all(isinstance(a, ast.Name) for a in (g, x, w))
        or reversed_name(loop.iter) is None  # (a range: each step once)
        or any(isinstance(n, (ast.Break, ast.Continue)) for n in walk(loop))
    ):
        return False
    stack = module.namer.fresh(f"{g_w}_stack")
    old = block[k]
    at = [ast.Slice(lower=None, upper=None, step=None) for _ in range(axis.value)]
    step = ast.Tuple(elts=[*at, name(t.id)], ctx=ast.Load()) if at else name(t.id)

    def write(value: ast.expr) -> ast.stmt:
        target = ast.Subscript(value=name(stack), slice=step, ctx=ast.Store())
        return ast.copy_location(ast.Assign(targets=[target], value=value), old)

    block[k] = write(name(g.id))
    if guard is not None:  # a step the sweep reaches with no cotangent: zero
        guard.orelse = [write(const(0))]
    made = call(
        module.rule_ref(stepstacks.step_stack),
        name(prod.id),
        name(x.id),
        name(w.id),
        const(axis.value),
        copy.deepcopy(tiles),
        copy.deepcopy(loop.iter.args[0]),
    )
    start = assign(stack, made, like=loop)
    before.append(start)
    total = call(
        module.rule_ref(stepstacks.stacked_steps),
        name(stack),
        name(prod.id),
        name(x.id),
        name(w.id),
        const(axis.value),
        copy.deepcopy(tiles),
        name(g_w),
    )
    summed = assign(g_w, total, like=old)
    after.append(summed)
    stacks.append((g_w, prod.id, stack, start, summed, "inline"))
    return True
