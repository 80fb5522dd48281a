"""Fuse: log-softmax written out becomes one rule (reverse mode).

A log-softmax (or the log-probabilities of a cross-entropy) is usually written
out, after the max shift that ``shifts.py`` handles::

    e = np.exp(a)
    s = np.sum(e, axis=1, keepdims=True)       # or e.sum(...)
    l = np.log(s)
    r = a - l                                  # or np.subtract(a, l)

Differentiated statement by statement this is nine backward statements (two
unbroadcasts, a negation, a division, a spread of the sum, a product, an
accumulation) where ``g - exp(r) * sum(g)`` does it in four NumPy calls and
needs nothing from the tape but ``r``.  This pass replaces the four statements
by ``r = log_softmax_as_written(a, axis)`` (``s2sad/runtime/activations.py``),
which computes the same operations in the same order, so the values are the
same to the bit; its adjoint is ``d_log_softmax``'s.

It fires only when ``e``, ``s`` and ``l`` are each assigned once and read once
(by the next statement of the chain) and the four sit in one statement list in
that order with ``a`` not rebound between them; the sum has a constant axis
(or none) and ``keepdims=True``.  Anything else is left as written.

Then two loss heads get their closed-form cotangents (``fuse_losses.py``): the
Bernoulli log-likelihood of a sigmoid, and the mean of log-probabilities picked
by integer labels after a log-softmax.
"""

from __future__ import annotations

import ast

import numpy as np

from s2sad.transforms.astutil import anno
from s2sad.transforms.front import fuse_losses
from s2sad.transforms.front.calls import CallInfo
from s2sad.transforms.front.shifts import (
    _assigned,
    _blocks,
    _rebinds,
    _reduction,
    _store_counts,
)


def run(job, module) -> None:
    """Replace every written-out log-softmax of ``job``'s function by one call."""
    from s2sad.runtime.activations import log_softmax_as_written

    stores = _store_counts(job.node)
    loads = _load_counts(job.node)
    for block in _blocks(job.node.body):
        i = 0
        while i < len(block):
            found = _chain(block, i, stores, loads)
            if found is None:
                i += 1
                continue
            (j_sum, j_log, j_sub), a, axis = found
            last = block[j_sub]
            call = ast.Call(
                func=module.rule_ref(log_softmax_as_written),
                args=[ast.Name(id=a, ctx=ast.Load())],
                keywords=[ast.keyword(arg="axis", value=axis)],
            )
            anno(call)["call"] = CallInfo("rule", log_softmax_as_written)
            last.value = ast.copy_location(call, last.value)
            for j in sorted((i, j_sum, j_log), reverse=True):
                del block[j]
            i += 1
    fuse_losses.run(job, module)


def _chain(block, i, stores, loads):
    """``((j_sum, j_log, j_sub), a, axis)`` when ``block[i]`` starts the idiom."""
    e, a = _unary(block[i], np.exp)
    if e is None or not _once(e, stores, loads):
        return None
    j_sum, s = _next_reader(block, i, e)
    if s is None or not _once(s, stores, loads):
        return None
    red = _reduction(block[j_sum].value, (np.sum,), "sum")
    if red is None or red.array != e or not red.keepdims:
        return None
    j_log, l = _next_reader(block, j_sum, s)
    if (
        l is None
        or _unary(block[j_log], np.log) != (l, s)
        or not _once(l, stores, loads)
    ):
        return None
    j_sub, r = _next_reader(block, j_log, l)
    if r is None or not _is_sub(block[j_sub].value, a, l):
        return None
    if any(_rebinds(stmt, a) for stmt in block[i + 1 : j_sub]):
        return None
    return (j_sum, j_log, j_sub), a, _axis(block[j_sum].value)


def _unary(stmt, fn):
    """``(target, arg)`` for ``target = fn(arg)`` with ``arg`` a name."""
    target, value = _assigned(stmt)
    if target is None or not isinstance(value, ast.Call):
        return None, None
    info: CallInfo = anno(value).get("call", CallInfo("unknown"))
    if (
        info.kind == "rule"
        and info.target is fn
        and len(value.args) == 1
        and not value.keywords
        and isinstance(value.args[0], ast.Name)
    ):
        return target, value.args[0].id
    return None, None


def _is_sub(value, a: str, l: str) -> bool:
    def names(x, y):
        return (
            isinstance(x, ast.Name)
            and x.id == a
            and isinstance(y, ast.Name)
            and y.id == l
        )

    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Sub):
        return names(value.left, value.right)
    if isinstance(value, ast.Call) and not value.keywords and len(value.args) == 2:
        info: CallInfo = anno(value).get("call", CallInfo("unknown"))
        return info.kind == "rule" and info.target is np.subtract and names(*value.args)
    return False


def _next_reader(block, i, name):
    """``(j, target)`` of the first statement after ``i`` reading ``name``."""
    for j in range(i + 1, len(block)):
        if _reads(block[j], name):
            target, _ = _assigned(block[j])
            return (j, target) if target is not None else (None, None)
    return None, None


def _axis(value: ast.Call) -> ast.expr:
    args = list(value.args)
    info: CallInfo = anno(value).get("call", CallInfo("unknown"))
    if info.kind == "rule":
        args.pop(0)
    axis = args[0] if args else None
    for kw in value.keywords:
        if kw.arg == "axis":
            axis = kw.value
    return axis if axis is not None else ast.Constant(value=None)


def _once(name: str, stores, loads) -> bool:
    return stores.get(name) == 1 and loads.get(name) == 1


def _reads(stmt, name: str) -> bool:
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        for n in ast.walk(stmt)
    )


def _load_counts(node) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            counts[n.id] = counts.get(n.id, 0) + 1
    return counts
