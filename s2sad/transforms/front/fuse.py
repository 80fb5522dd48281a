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

The ``losses`` pass (:func:`run_losses`, after this one, matching with
``fuse_losses.py``) then gives two loss heads their closed-form cotangents: the
Bernoulli log-likelihood of a sigmoid, and the mean of log-probabilities picked
by integer labels after a log-softmax.
"""

from __future__ import annotations

import ast

import numpy as np

from s2sad.transforms.astutil import anno, walk
from s2sad.transforms.front import activity as activity_pass
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
        for n in walk(stmt)
    )


def _load_counts(node) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            counts[n.id] = counts.get(n.id, 0) + 1
    return counts


# ----------------------------------------------------------------------------
# Loss heads (the matching is fuse_losses.py's)
# ----------------------------------------------------------------------------


def _reduced(value) -> tuple[str, str] | None:
    """``(t, "mean")`` for ``np.mean(t)`` or ``t.mean()`` (``"sum"`` likewise)."""
    if not isinstance(value, ast.Call) or value.keywords:
        return None
    info: CallInfo = anno(value).get("call", CallInfo("unknown"))
    for how, fn in (("mean", np.mean), ("sum", np.sum)):
        if info.kind == "rule" and info.target is fn and len(value.args) == 1:
            args = fuse_losses.names(value.args)
            return (args[0], how) if args else None
        if (
            info.kind == "method"
            and info.target == how
            and not value.args
            and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name)
        ):
            return value.func.value.id, how
    return None


def _call(module, fn, args: list[str], keywords: dict, operands: list[str], like):
    call = ast.Call(
        func=module.rule_ref(fn),
        args=[ast.Name(id=a, ctx=ast.Load()) for a in args],
        keywords=[ast.keyword(arg=k, value=v) for k, v in keywords.items()],
    )
    anno(call)["call"] = CallInfo("rule", fn)
    anno(call)["fused_operands"] = operands
    return ast.copy_location(call, like)


def run_losses(job, module) -> None:
    """The ``losses`` pass, after ``fuse``: the loss heads of ``job``'s function
    (``fuse_losses.py``), then its activity solved again."""
    stores, loads = _store_counts(job.node), _load_counts(job.node)
    fused = False
    for block in _blocks(job.node.body):
        chain, j = fuse_losses.Chain(block, stores), 0
        while j < len(block):
            removed = _fuse_at(module, chain, j, stores, loads)
            if removed is not None:  # the block changed: index it again
                fused, chain = True, fuse_losses.Chain(block, stores)
            j += 0 if removed is not None and 0 <= removed <= j else 1
    if fused:
        _redo_activity(job)


def _fuse_at(module, chain, j: int, stores, loads) -> int | None:
    """Rewrite ``block[j]`` when it ends an idiom; the index of the statement it
    took in (deleted), -1 when none was, None when nothing changed."""
    from s2sad.runtime.losses import (
        picked_log_softmax_as_written,
        sigmoid_log_likelihood_as_written,
    )

    block = chain.block
    stmt = block[j]
    target, value = _assigned(stmt)
    if target is None or not isinstance(value, (ast.Call, ast.BinOp)):
        return None
    chain.used = []
    red = _reduced(value)
    if red is not None and stores.get(red[0]) == 1 and loads.get(red[0]) == 1:
        found = fuse_losses.picked(chain, red[0], j)
        if found is not None:
            x, logp, rows, cols, axis = found
            keywords = {"axis": axis}
            if red[1] != "mean":
                keywords["reduce"] = ast.Constant(value=red[1])
            fn = picked_log_softmax_as_written
            stmt.value = _call(module, fn, [x, logp, rows, cols], keywords, [x], value)
            at = chain.index(red[0])
            del block[at]
            return at
        return None
    found = fuse_losses.log_likelihood(chain, value, j)
    if found is None:
        return None
    *found, negated = found
    z, y = found[:2]
    fn = sigmoid_log_likelihood_as_written
    keywords: dict = {"negated": ast.Constant(value=True)} if negated else {}
    site = j
    if stores.get(target) == 1 and loads.get(target) == 1:
        k = next(
            (k for k in range(j + 1, len(block)) if _reads(block[k], target)), None
        )
        red = _reduced(_assigned(block[k])[1]) if k is not None else None
        if red is not None and red[0] == target and chain.untouched(found, j, k):
            keywords = {"reduce": ast.Constant(value=red[1]), **keywords}
            site = k
    call = _call(module, fn, found, keywords, [z, y], block[site].value)
    block[site].value = call
    if site != j:
        del block[j]
        return j
    return -1


def _redo_activity(job) -> None:
    """Solve the activity again with each fused call's own operands: its value is
    differentiated through those alone.  What was inactive stays so (the shifts
    pass's stopped maxima among them): fusing only takes dependencies away."""
    flows = []
    for s in activity_pass.simple_statements(job.node.body):
        target, ops = activity_pass.flow(s)
        value = s.value if isinstance(s, ast.Assign) else None
        fused = anno(value).get("fused_operands") if value is not None else None
        if fused is not None:
            ops = list(fused)
        if target is not None and target not in job.act.active:
            target, ops = None, []
        flows.append((target, ops))
    act = activity_pass.solve(job.node, job.wrt, flows, useful_needs_active=True)
    act.never = job.act.never
    job.act = act
