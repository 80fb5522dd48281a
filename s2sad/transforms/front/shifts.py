"""Shifts: a max subtracted only for stability needs no cotangent (reverse mode).

Log-softmax, logsumexp, softmax and cross-entropy are usually written with the
max shift that keeps ``exp`` from overflowing::

    m = np.max(z, axis=1, keepdims=True)     # or z.max(...), np.amax(...)
    s = z - m
    lse = np.log(np.sum(np.exp(s), axis=1, keepdims=True))
    logp = s - lse                            # or m + lse, or exp(s) / sum

The result does not depend on ``m`` at all: replace ``m`` by any array of its
shape and ``logp`` is the same.  So the cotangent that reaches ``m`` is exactly
zero (in floating point it is ``g * (1 - sum(softmax))``, rounding noise), and
computing it, then spreading it over the max's arg-max mask, is wasted work.
This pass proves that invariance for each such ``m`` and then treats ``m`` as a
constant: the reverse pass emits no cotangent for it and no ``d_max``.

The proof is a small algebra over the values computed from ``m``.  Each one is
``base + c*m`` ("add c") or ``base * exp(c*m)`` ("mul c"), with ``base`` free of
``m``; ``z`` (the array the max reads) is "add 0" and ``m`` is "add 1":

* ``a + b``, ``a - b``, ``-a`` on "add" values add, subtract, negate ``c``;
  ``a * b``, ``a / b`` on "mul" values do the same, and ``a + b``, ``a - b``
  of two "mul c" values stay "mul c";
* ``np.exp`` turns "add c" into "mul c", ``np.log`` "mul c" into "add c";
* ``np.sum`` keeps "mul c" when ``m`` is constant along what it sums: any sum
  when the max reduced everything (``m`` is one number), otherwise only a sum
  over the max's very ``axis`` (written the same) with ``keepdims=True``.

A value with ``c == 0`` no longer depends on ``m`` and may be used anywhere;
so may ``.shape``, ``.dtype`` and the like of any of them.
Every other value (``m`` included) must be assigned exactly once, used only by
statements of this algebra, later in the same block as the max, and ``z`` must
not be rebound there; the max must reduce everything or keep its dimensions.
Anything else (``m`` returned or used elsewhere, another axis, no
``keepdims``, ``x - m`` for an ``x`` other than the max's own argument, a
constant in between) leaves the function as it was.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from s2sad.transforms.astutil import anno, loads, walk
from s2sad.transforms.front import activity as activity_pass
from s2sad.transforms.front.calls import CallInfo

MAXES = (np.max, np.amax)
ALL = "all"  # the axis of a reduction over every element


@dataclass(frozen=True)
class Reduction:
    """One ``np.max``/``np.sum`` call: the array it reads and how it reduces."""

    array: str
    axis: str  # ALL, or ast.dump of the constant axis
    keepdims: bool


def run(job, module) -> None:
    """Mark each provably shift-only max inactive, then redo the activity."""
    stopped = set()
    stores = _store_counts(job.node)
    for block in _blocks(job.node.body):
        for i, stmt in enumerate(block):
            target, red = _max_site(stmt)
            if (
                target is not None
                and target in job.act.active
                and _shift_only(job.node, block, i, target, red, stores)
            ):
                stopped.add(target)
    if not stopped:
        return
    flows = [
        (None, []) if target in stopped else (target, ops)
        for target, ops in (
            activity_pass.flow(s)
            for s in activity_pass.simple_statements(job.node.body)
        )
    ]
    act = activity_pass.solve(job.node, job.wrt, flows, useful_needs_active=True)
    act.never = job.act.never
    job.act = act


# ----------------------------------------------------------------------------
# Finding the max and reading reductions
# ----------------------------------------------------------------------------


def _blocks(body: list[ast.stmt]):
    """Every statement list of the function, the body first."""
    yield body
    for stmt in body:
        for field in ("body", "orelse"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from _blocks(inner)


def _store_counts(node: ast.FunctionDef) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in walk(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            counts[n.id] = counts.get(n.id, 0) + 1
    for a in node.args.args + node.args.posonlyargs + node.args.kwonlyargs:
        counts[a.arg] = counts.get(a.arg, 0) + 1
    return counts


def _assigned(stmt: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return stmt.targets[0].id, stmt.value
    return None, None


def _max_site(stmt: ast.stmt) -> tuple[str | None, Reduction | None]:
    target, value = _assigned(stmt)
    red = _reduction(value, MAXES, "max") if value is not None else None
    if red is None or (red.axis != ALL and not red.keepdims):
        return None, None
    return target, red


def _reduction(value: ast.expr, functions, method: str) -> Reduction | None:
    """``np.f(a, axis, keepdims=k)`` or ``a.f(axis, keepdims=k)`` with constants."""
    if not isinstance(value, ast.Call):
        return None
    info: CallInfo = anno(value).get("call", CallInfo("unknown"))
    args = list(value.args)
    if info.kind == "rule" and any(info.target is f for f in functions):
        if not args:
            return None
        array = args.pop(0)
    elif info.kind == "method" and info.target == method:
        array = value.func.value
    else:
        return None
    axis: ast.expr | None = args.pop(0) if args else None
    keepdims: ast.expr | None = None
    if args or not isinstance(array, ast.Name):
        return None
    for kw in value.keywords:
        if kw.arg == "axis" and axis is None:
            axis = kw.value
        elif kw.arg == "keepdims" and keepdims is None:
            keepdims = kw.value
        else:
            return None  # out=, initial=, where=, dtype=: not this idiom
    if axis is not None and not _constant(axis):
        return None
    if keepdims is not None and not (
        isinstance(keepdims, ast.Constant) and isinstance(keepdims.value, bool)
    ):
        return None
    none_axis = axis is None or (isinstance(axis, ast.Constant) and axis.value is None)
    return Reduction(
        array.id,
        ALL if none_axis else ast.dump(axis),
        bool(keepdims is not None and keepdims.value),
    )


def _constant(e: ast.expr) -> bool:
    """None, an int (``-1`` included) or a tuple of ints, written out."""
    if isinstance(e, ast.Constant) and e.value is None:
        return True
    if isinstance(e, ast.Tuple):
        return bool(e.elts) and all(_int(x) for x in e.elts)
    return _int(e)


def _int(e: ast.expr) -> bool:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        e = e.operand
    return isinstance(e, ast.Constant) and type(e.value) is int


# ----------------------------------------------------------------------------
# The shift algebra
# ----------------------------------------------------------------------------


def _shift_only(node, block, i, m: str, red: Reduction, stores) -> bool:
    """Whether every use of ``m`` ends in values that do not depend on it."""
    z = red.array
    if stores.get(m) != 1 or stores.get(z, 0) > 1 or m == z:
        return False
    if any(_rebinds(s, z) for s in block[i:]):
        return False
    state: dict[str, tuple[str, int]] = {m: ("add", 1)}
    accepted: list[ast.stmt] = []
    for stmt in block[i + 1 :]:
        read = loads(stmt) & set(state)
        if not read:
            continue
        target, value = _assigned(stmt)
        if target is None or stores.get(target) != 1 or target == z:
            return False
        new = _apply(value, state, z, red)
        if new is None:
            return False
        accepted.append(stmt)
        if new[1] != 0:
            state[target] = new
    # no read of a tracked name anywhere else (before the max in a loop, nested
    # blocks, the return statement, other blocks)
    tracked = set(state)
    inside = sum(_load_count(s, tracked) for s in accepted)
    return inside == _load_count(node, tracked)


def _apply(value: ast.expr, state, z: str, red: Reduction) -> tuple[str, int] | None:
    """The state of ``value`` computed from tracked names, or None if unknown."""

    def of(e: ast.expr) -> tuple[str, int] | None:
        if not isinstance(e, ast.Name):
            return None
        if e.id in state:
            return state[e.id]
        return ("add", 0) if e.id == z else None

    if isinstance(value, ast.BinOp):
        a, b = of(value.left), of(value.right)
        if a is None or b is None or a[0] != b[0]:
            return None
        kind, op = a[0], value.op
        if kind == "add" and isinstance(op, ast.Add):
            return ("add", a[1] + b[1])
        if kind == "add" and isinstance(op, ast.Sub):
            return ("add", a[1] - b[1])
        if kind == "mul" and isinstance(op, ast.Mult):
            return ("mul", a[1] + b[1])
        if kind == "mul" and isinstance(op, ast.Div):
            return ("mul", a[1] - b[1])
        if kind == "mul" and isinstance(op, (ast.Add, ast.Sub)) and a[1] == b[1]:
            return a
        return None
    if (
        isinstance(value, ast.Attribute)
        and value.attr in activity_pass.INACTIVE_ATTRS
        and of(value.value) is not None
    ):
        return ("add", 0)  # x.shape, x.dtype...: the same whatever m is
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        a = of(value.operand)
        return ("add", -a[1]) if a is not None and a[0] == "add" else None
    if not isinstance(value, ast.Call):
        return None
    info: CallInfo = anno(value).get("call", CallInfo("unknown"))
    if info.kind == "rule" and len(value.args) == 1 and not value.keywords:
        a = of(value.args[0])
        if a is not None and info.target is np.exp and a[0] == "add":
            return ("mul", a[1])
        if a is not None and info.target is np.log and a[0] == "mul":
            return ("add", a[1])
    total = _reduction(value, (np.sum,), "sum")
    if total is not None:
        a = of(ast.Name(id=total.array, ctx=ast.Load()))
        if a is None or a[0] != "mul":
            return None
        if red.axis == ALL or (total.axis == red.axis and total.keepdims):
            return a
    return None


def _load_count(tree: ast.AST, names: set[str]) -> int:
    return sum(
        1
        for n in walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names
    )


def _rebinds(stmt: ast.stmt, name: str) -> bool:
    return any(
        isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
        for n in walk(stmt)
    )
