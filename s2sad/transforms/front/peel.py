"""Peel: a loop's first iteration runs apart when its carried state starts at zeros.

A recurrence usually starts from a zero state and multiplies it first thing::

    h = np.zeros(items, dtype=dtype)
    r = range(4)
    for t in r:
        matmul_1 = h @ Wh            # zeros @ Wh at t = 0
        ...
        h = np.tanh(add_1)

At ``t = 0`` that product is zeros forward, and backward it costs two more
products for cotangents that are zero (``h`` starts as a constant).  This pass
(reverse mode, after ``hoist``) runs the first iteration in a loop of its own,
where the product is ``matmul_zeros(h, Wh, 0)``, zeros of the product's shape
(``s2sad/runtime/steps.py``; the product itself when ``Wh`` holds an inf or a
nan; ``0``: the operand that is zeros, so only the other one is checked), with
no gradient, then the other iterations as written::

    r_first = r[:1]
    for t in r_first:
        matmul_1 = matmul_zeros(h, Wh, 0)
        ...
    r_rest = r[1:]
    for t in r_rest:
        matmul_1 = h @ Wh
        ...

It applies to a ``for`` over a ``range`` (no ``else``) that changes no array in
place, where the zeros come from ``np.zeros(...)`` in the same block before the
loop, with no statement in between reading or writing that name, and the
product (``h @ W``, ``W @ h``, ``np.matmul``) is at the top level of the body,
before any assignment to ``h`` there.
"""

from __future__ import annotations

import ast

import numpy as np

from s2sad.transforms.astutil import anno, name, walk
from s2sad.transforms.front.calls import CallInfo
from s2sad.transforms.front.hoist import _blocks, _changes_arrays


def run(job, module) -> None:
    """Peel the first iteration of each loop whose zero initial state it multiplies."""
    from s2sad.runtime.steps import matmul_zeros

    for block, looped in _blocks(job.node.body, False):
        i = 0
        while i < len(block):
            stmt = block[i]
            sites = _zero_products(block, i) if isinstance(stmt, ast.For) else []
            if not sites:
                i += 1
                continue
            new = _peel(stmt, sites, job, module, matmul_zeros)
            block[i : i + 1] = new
            for s in new:
                if isinstance(s, ast.Assign):
                    job.norm.locals.add(s.targets[0].id)
                    if looped:
                        job.norm.nonsimple.add(s.targets[0].id)
            i += len(new)


def _zero_products(block: list[ast.stmt], i: int) -> list[tuple[int, int]]:
    """``(k, j)`` for each product of a zero state in the loop ``block[i]``'s
    body: ``k`` its index there, ``j`` which of its operands is the zeros."""
    loop = block[i]
    if (
        "range" not in anno(loop)
        or "count" in anno(loop)
        or not isinstance(loop.target, ast.Name)
        or loop.orelse
        or _changes_arrays(loop)
    ):
        return []
    zeros = _zero_names(block, i)
    sites = []
    assigned: set[str] = {loop.target.id}
    for k, s in enumerate(loop.body):
        zero = [
            j
            for j, o in enumerate(_matmul_operands(s))
            if isinstance(o, ast.Name) and o.id in zeros and o.id not in assigned
        ]
        if zero:
            sites.append((k, zero[0]))
        for sub in walk(s):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                assigned.add(sub.id)
    return sites


def _zero_names(block: list[ast.stmt], i: int) -> set[str]:
    """Names ``block`` sets to ``np.zeros(...)`` before ``block[i]``, untouched since."""
    out = set()
    for j in range(i - 1, -1, -1):
        s = block[j]
        if (
            isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and isinstance(s.value, ast.Call)
            and getattr(anno(s.value).get("call"), "target", None) is np.zeros
            and not any(
                isinstance(n, ast.Name) and n.id == s.targets[0].id
                for later in block[j + 1 : i]
                for n in walk(later)
            )
        ):
            out.add(s.targets[0].id)
    return out


def _matmul_operands(s: ast.stmt) -> list[ast.expr]:
    if not (
        isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
    ):
        return []
    v = s.value
    if isinstance(v, ast.BinOp) and isinstance(v.op, ast.MatMult):
        return [v.left, v.right]
    info = anno(v).get("call") if isinstance(v, ast.Call) else None
    if (
        info is not None
        and info.kind == "rule"
        and info.target is np.matmul
        and len(v.args) == 2
        and not v.keywords
    ):
        return list(v.args)
    return []


def _peel(loop: ast.For, sites: list[tuple], job, module, fn) -> list[ast.stmt]:
    rng = anno(loop)["range"]
    first, rest = job.namer.fresh(f"{rng}_first"), job.namer.fresh(f"{rng}_rest")
    out = []
    parts = ((first, ast.Slice(upper=ast.Constant(1))),
             (rest, ast.Slice(lower=ast.Constant(1))))  # fmt: skip
    for new_name, part in parts:
        assign = ast.Assign(
            targets=[name(new_name, store=True)],
            value=ast.Subscript(value=name(rng), slice=part, ctx=ast.Load()),
        )
        ast.copy_location(assign, loop)
        anno(assign).update({k: v for k, v in anno(loop).items() if k == "origin"})
        out.append(assign)
    body = [_clone(s) for s in loop.body]
    for k, zero in sites:
        operands = _matmul_operands(body[k])
        value = ast.Call(
            func=module.rule_ref(fn), args=[*operands, ast.Constant(zero)], keywords=[]
        )
        anno(value)["call"] = CallInfo("rule", fn)
        body[k].value = ast.copy_location(value, body[k].value)
    peeled = ast.For(target=_clone(loop.target), iter=name(first), body=body, orelse=[])
    ast.copy_location(peeled, loop)
    anno(peeled).update(anno(loop), range=first)
    loop.iter = name(rest)
    anno(loop)["range"] = rest
    return [out[0], peeled, out[1], loop]


def _clone(node):
    """A copy of ``node``'s tree; each copied node gets a copy of its annotations
    (their values, such as a call's resolved function, are shared, not copied)."""
    if isinstance(node, list):
        return [_clone(n) for n in node]
    if not isinstance(node, ast.AST):
        return node
    new = type(node)(
        **{f: _clone(getattr(node, f)) for f in node._fields if hasattr(node, f)}
    )
    for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
        if hasattr(node, attr):
            setattr(new, attr, getattr(node, attr))
    if getattr(node, "_s2sad", None) is not None:
        new._s2sad = dict(node._s2sad)
    return new
