"""Hoist: a loop's per-step products with a loop-invariant array become one product.

A recurrence reads one step of its input per iteration and multiplies it by a
weight that the loop never changes::

    for t in r:                      # r = range(...)
        xs_item = xs[:, t, :]
        matmul = xs_item @ Wx

Each iteration then runs one small matrix product forward and one backward.
This pass computes every step's product before the loop, in one call, and
reads step ``t`` of it in the loop::

    xs_at_Wx = stepwise_matmul(xs, Wx, 1, r)
    for t in r:
        matmul = xs_at_Wx[:, t]

``stepwise_matmul`` (``s2sad/runtime/steps.py``) gives the same values for
any dimensions of ``xs`` and ``Wx`` (one BLAS product when ``Wx`` is a matrix,
else the per-step products stacked), and its adjoint rule takes all steps'
cotangents at once, so the backward sweep runs one ``xs.T @ g`` after the loop
instead of one product per step.

Where ``xs`` is no differentiated value (the usual case: the data), the loop
reads ``matmul = step_product(xs_at_Wx, xs, Wx, 1, t)`` of ``xs_at_Wx =
stepwise_ahead(xs, Wx, 1, r)`` instead (``s2sad/runtime/stepreads.py``): the
same entries, computed ahead where a step's product is small or ``xs``'s
steps are one matrix without a copy, and
differentiated as ``xs``'s step ``@ Wx`` one step at a time, so no cotangent
of the stacked product is built a step at a time and summed after the loop.

The pass runs in reverse mode only, after normalize (one operation per
statement), on a ``for`` over a ``range`` whose body, at its top level, holds
``a = A[i]`` and later ``m = a @ W`` (or ``np.matmul(a, W)``), where

* ``i`` is the loop variable, or a tuple of full slices ``:`` with the loop
  variable in one place (that place is the axis);
* ``A`` and ``W`` are names the loop never assigns, and the loop changes no
  array in place (no item or attribute assignment, no augmented assignment,
  no ``out=``, no in-place method such as ``fill`` or ``sort``), so both keep
  their values through every iteration;
* ``A`` is a NumPy array for sure: it is assigned once, before the loop, by a
  NumPy function or an array method (``reshape``, ``transpose``...), or the
  index is a tuple (which no list or dict accepts);
* ``a`` is not assigned again in the loop.

A product inside an ``if`` of the loop, in a ``while`` loop, or reading an
index other than the loop variable is left as it was.
"""

from __future__ import annotations

import ast
import copy
import types

import numpy as np

from s2sad.transforms.astutil import anno, const, name, walk
from s2sad.transforms.front import activity, invariants
from s2sad.transforms.front.calls import CallInfo

#: methods that change their array in place
MUTATORS = frozenset(
    [
        "fill",
        "sort",
        "resize",
        "put",
        "itemset",
        "setfield",
        "partition",
        "byteswap",
        "setflags",
        "copyto",
        "place",
        "putmask",
        "fill_diagonal",
        "at",
        "__setitem__",
        "__iadd__",
    ]
)
#: array methods whose result is an array
ARRAY_METHODS = frozenset(
    [
        "reshape",
        "transpose",
        "swapaxes",
        "astype",
        "copy",
        "ravel",
        "flatten",
        "squeeze",
    ]
)


def run(job, module) -> None:
    """Hoist every per-step product of every ``for`` loop of ``job``'s function."""
    counts = _store_counts(job.node)
    arrays = _known_arrays(job.node, counts)
    loads = _load_counts(job.node)
    for block, looped in _blocks(job.node.body, False):
        i = 0
        while i < len(block):
            stmt = block[i]
            if isinstance(stmt, ast.For) and "range" in anno(stmt):
                added = _hoist(stmt, block, i, job, module, arrays, loads, counts)
                block[i:i] = added
                i += len(added)
                for new in added:  # a local; assigned again when a loop holds this one
                    for sub in walk(new):
                        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                            job.norm.locals.add(sub.id)
                            if looped or isinstance(new, ast.For):
                                job.norm.nonsimple.add(sub.id)
            i += 1


def _hoist(loop, block, i, job, module, arrays, loads, counts) -> list[ast.stmt]:
    """What goes before ``loop``: its invariant reads, then its per-step products
    (in a one-step loop over the range's first step when the reads may fail
    and the range may be empty)."""
    from s2sad.runtime.steps import stepwise_matmul

    reads = []
    if (
        isinstance(loop.target, ast.Name)
        and not loop.orelse
        and not _changes_arrays(loop)
    ):
        reads = invariants.invariant_reads(loop, job.node, counts)
    products = _hoist_loop(loop, job, module, arrays, loads, stepwise_matmul)
    rng = anno(loop)["range"]
    if not reads or invariants.surely_runs(block, i, rng):
        return reads + products
    return invariants.one_step_loop(loop, job.namer, rng, reads + products)


def _hoist_loop(loop, job, module, arrays, loads, fn) -> list[ast.stmt]:
    if not isinstance(loop.target, ast.Name) or loop.orelse or _changes_arrays(loop):
        return []
    t = loop.target.id
    stored = _store_counts(loop)
    if stored.get(t, 0) != 1:  # the loop variable is assigned in the body
        return []
    added = []
    body = loop.body
    for k, s1 in enumerate(body):
        site = _step_read(s1, t, stored, arrays, loop)
        if site is None:
            continue
        a, A, axis, tiles = site
        if stored.get(a, 0) != 1:
            continue
        for s2 in body[k + 1 :]:
            W = _product_with(s2, a)
            if W is None or stored.get(W, 0) or W == t:
                continue
            hoisted = job.namer.fresh(f"{A}_at_{W}")
            func = module.rule_ref(fn)
            args = [name(A), name(W), const(axis), name(anno(loop)["range"])]
            if tiles is not None:  # step t: a slice of A whose bounds are affine in t
                args.append(ast.Tuple(elts=copy.deepcopy(list(tiles)), ctx=ast.Load()))
            value = ast.Call(func=func, args=args, keywords=[])
            anno(value)["call"] = CallInfo("rule", fn)
            new = ast.Assign(targets=[name(hoisted, store=True)], value=value)
            ast.copy_location(new, s2)
            for key in ("origin",):
                if key in anno(s2):
                    anno(new)[key] = anno(s2)[key]
            added.append(new)
            s2.value = ast.copy_location(
                _read_step(job, module, value, hoisted, args, axis, t), s2.value
            )
            loads[a] = loads.get(a, 0) - 1
    # a step read that nothing reads any more goes, then the index arithmetic
    # only it read (``mul = t * C``)
    dropped = [
        s
        for s in loop.body
        if _step_read(s, t, stored, arrays, loop) is not None
        and loads.get(s.targets[0].id, 0) <= 0
    ]
    while dropped:
        loop.body[:] = [s for s in loop.body if s not in dropped] or [ast.Pass()]
        for s in dropped:
            for sub in walk(s.value):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                    loads[sub.id] = loads.get(sub.id, 0) - 1
        dropped = [s for s in loop.body if _dead_arithmetic(s, loads, stored)]
    return added


def _read_step(job, module, product, hoisted: str, args: list, axis: int, t: str):
    """Step ``t`` of the hoisted product.  Where the stepped array is no
    differentiated value, ``step_product(R, A, W, axis, t[, tiles])``: the
    same entries, differentiated as ``A``'s step ``@ W`` (one ``A_t.T @ g`` a
    step for ``W``; ``R`` no operand, so it gets no cotangent and nothing is
    scattered into one).  Else ``R[:, t]``: its cotangent is added into ``R``'s
    a step and ``stepwise_matmul``'s rule takes all steps at once (one
    ``g @ W.T`` for ``A``, not a zero array of ``A``'s shape a step)."""
    from s2sad.runtime.stepreads import step_product, stepwise_ahead

    if args[0].id not in _active(job):
        ahead = module.rule_ref(stepwise_ahead)
        product.func = ahead
        anno(product)["call"] = CallInfo("rule", stepwise_ahead)
        extra = [copy.deepcopy(a) for a in args[4:]]
        read_args = [name(hoisted), name(args[0].id), name(args[1].id)]
        read_args += [const(axis), name(t), *extra]
        value = ast.Call(
            func=module.rule_ref(step_product), args=read_args, keywords=[]
        )
        anno(value)["call"] = CallInfo("rule", step_product)
        return value
    if axis == 0:
        index = name(t)
    else:  # R[:, t]: step t along the axis, everything after it
        parts = [ast.Slice(lower=None, upper=None, step=None) for _ in range(axis)]
        index = ast.Tuple(elts=[*parts, name(t)], ctx=ast.Load())
    return ast.Subscript(value=name(hoisted), slice=index, ctx=ast.Load())


def _active(job) -> set[str]:
    """Names that may depend on the differentiated parameters (the activity
    pass's forward fixpoint, on the code as it is now)."""
    flows = [activity.flow(s) for s in activity.simple_statements(job.node.body)]
    return activity.solve(job.node, list(job.wrt), flows, True).active


def _dead_arithmetic(stmt, loads: dict, stored: dict) -> bool:
    """``n = a * b`` (names, integers, attributes of names) that nothing reads."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and stored.get(stmt.targets[0].id) == 1
        and loads.get(stmt.targets[0].id, 0) <= 0
        and isinstance(stmt.value, (ast.BinOp, ast.UnaryOp))
    ):
        return False
    leaves = [stmt.value.operand] if isinstance(stmt.value, ast.UnaryOp) else []
    if isinstance(stmt.value, ast.BinOp):
        leaves = [stmt.value.left, stmt.value.right]
    return all(
        isinstance(e, ast.Name)
        or isinstance(e, ast.Constant)
        and type(e.value) is int
        or isinstance(e, ast.Attribute)
        and isinstance(e.value, ast.Name)
        for e in leaves
    )


def _step_read(stmt, t: str, stored: dict, arrays: set, loop=None):
    """``(a, A, axis, tiles)`` for ``a = A[..., t, ...]`` (``tiles`` None) or
    ``a = A[..., lo:hi, ...]`` with bounds affine in ``t`` (``tiles``: their
    coefficients), ``A`` loop-invariant."""
    if loop is not None:
        site = invariants.slice_step(stmt, loop, stored, arrays)
        if site is not None:
            return site
    read = invariants.invariant_read(stmt, t, stored)
    if read is None:
        return None
    a, A, idx = read
    if isinstance(idx, ast.Name) and idx.id == t:
        return (a, A, 0, None) if A in arrays else None
    if not isinstance(idx, ast.Tuple):
        return None
    places = [j for j, e in enumerate(idx.elts) if isinstance(e, ast.Name)]
    full = all(
        isinstance(e, ast.Slice)
        and e.lower is None
        and e.upper is None
        and e.step is None
        for j, e in enumerate(idx.elts)
        if j not in places
    )
    if len(places) != 1 or not full or idx.elts[places[0]].id != t:
        return None
    return a, A, places[0], None


def _product_with(stmt, a: str) -> str | None:
    """``W`` when ``stmt`` is ``m = a @ W`` or ``m = np.matmul(a, W)``."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return None
    v = stmt.value
    if isinstance(v, ast.BinOp) and isinstance(v.op, ast.MatMult):
        left, right = v.left, v.right
    elif (
        isinstance(v, ast.Call)
        and getattr(anno(v).get("call"), "target", None) is np.matmul
        and anno(v)["call"].kind == "rule"
        and len(v.args) == 2
        and not v.keywords
    ):
        left, right = v.args
    else:
        return None
    if isinstance(left, ast.Name) and left.id == a and isinstance(right, ast.Name):
        return right.id
    return None


def _changes_arrays(loop: ast.For) -> bool:
    """Whether the loop may change an array in place (any array: names may share)."""
    for sub in walk(loop):
        if isinstance(sub, (ast.AugAssign, ast.Delete)):
            return True
        if isinstance(sub, ast.Assign) and not all(
            _plain_target(tg) for tg in sub.targets
        ):
            return True
        if isinstance(sub, ast.keyword) and sub.arg == "out":
            return True
        if isinstance(sub, ast.Call):
            func = sub.func
            if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
                return True
            info = anno(sub).get("call")
            if info is not None and info.kind not in ("rule", "method"):
                return True  # a user function or an unknown callable
    return False


def _plain_target(target) -> bool:
    if isinstance(target, ast.Name):
        return True
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_plain_target(e) for e in target.elts)
    return False


def _known_arrays(fn: ast.FunctionDef, counts: dict) -> set[str]:
    """Names assigned once, by a NumPy function or an array method."""
    out = set()
    for sub in walk(fn):
        if not (
            isinstance(sub, ast.Assign)
            and len(sub.targets) == 1
            and isinstance(sub.targets[0], ast.Name)
            and counts.get(sub.targets[0].id) == 1
            and isinstance(sub.value, ast.Call)
        ):
            continue
        info = anno(sub.value).get("call")
        if info is None:
            continue
        if (
            info.kind == "method"
            and info.target in ARRAY_METHODS
            or info.kind == "rule"
            and _numpy_function(info.target)
        ):
            out.add(sub.targets[0].id)
    return out


def _numpy_function(obj) -> bool:
    if isinstance(obj, np.ufunc):
        return True
    mod = getattr(obj, "__module__", None) or ""
    return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)) and (
        mod == "numpy" or mod.startswith("numpy.")
    )


def _store_counts(node) -> dict[str, int]:
    counts: dict[str, int] = {}
    for sub in walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            counts[sub.id] = counts.get(sub.id, 0) + 1
        elif isinstance(sub, (ast.For, ast.comprehension)) and isinstance(
            sub.target, ast.Name
        ):
            pass  # counted through the target's Store context
    return counts


def _load_counts(node) -> dict[str, int]:
    counts: dict[str, int] = {}
    for sub in walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            counts[sub.id] = counts.get(sub.id, 0) + 1
    return counts


def _blocks(body: list[ast.stmt], looped: bool):
    """Every statement list of the function (nested bodies too), outer first,
    with whether a loop holds it."""
    yield body, looped
    for stmt in body:
        inside = looped or isinstance(stmt, (ast.For, ast.While))
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from _blocks(inner, inside)
        for handler in getattr(stmt, "handlers", []) or []:
            yield from _blocks(handler.body, inside)
