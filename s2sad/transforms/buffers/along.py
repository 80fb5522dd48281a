"""A max or min along a short axis: ``max_along``/``min_along``.

NumPy reduces a short axis in the middle of an array slowly (many tiny inner
loops), and a short last axis of many rows too (one loop per row); the
runtime's :func:`~s2sad.runtime.extrema.max_along` takes the comparisons as
ufunc calls over the slices along it, and calls the method itself where that
would not pay or could differ.  The ``methods`` pass has this module rewrite,
in emitted code::

    pooled = reshape.max(axis=2, out=ws["pooled"])
        -> pooled = max_along(reshape, 2, out=ws["pooled"])
    m = np.min(a4, 1, keepdims=True)  ->  m = min_along(a4, 1, keepdims=True)
    max_1 = z.max(axis=1, keepdims=True)  ->  max_1 = max_along(z, 1, keepdims=True)

where the axis is an integer literal and either the receiver's number of
dimensions is known from the code (every binding of it is a ``reshape`` with
that many sizes) and it has that axis, or the receiver is a NumPy value and the
axis is ``-1`` or ``1`` (the last of a matrix; the runtime checks which axis it
is).  Only ``axis``, ``out`` and ``keepdims`` may be given; ``initial``,
``where`` and anything else leave the call as it is.  The result is the
method's, bit for bit; the adjoint and tangent rules are ``np.max``'s.
"""

from __future__ import annotations

import ast
from typing import Any

from s2sad.runtime.extrema import max_along, min_along
from s2sad.transforms.astutil import walk
from s2sad.transforms.buffers.facts import Facts

KERNELS = {"max": max_along, "amax": max_along, "min": min_along, "amin": min_along}
#: keywords the kernels take, besides the axis
PASSED = ("out", "keepdims")


def rewrite(
    fn: ast.FunctionDef, module: Any, facts: Facts, values: set, calls=None, nodes=None
) -> None:
    """Turn max/min calls along a literal axis into kernels: of a reshape whose
    number of dimensions the code tells, along any axis it has; of another NumPy
    value, along the last (``axis=-1``, or ``axis=1`` of what may be a matrix).
    ``calls`` and ``nodes``: ``fn``'s calls and nodes, when the caller has
    walked it (methods.py)."""
    nodes = list(walk(fn)) if nodes is None else nodes
    ranks = known_ranks(fn, facts, nodes)
    receivers = values | ranks.keys()  # once: a union per call was quadratic
    if calls is None:
        calls = [n for n in nodes if isinstance(n, ast.Call)]
    for node in calls:
        form = _form(node, facts, receivers)
        if form is None:
            continue
        kernel, x, axis, keywords = form
        r = ranks.get(x)
        if r is None:
            if x not in values or axis not in (-1, 1):
                continue
        elif not (0 <= axis < r - 1 or -r <= axis < -1 or axis in (-1, r - 1)):
            continue
        node.func = module.rule_ref(kernel)
        node.args = [ast.Name(x, ast.Load()), ast.Constant(axis)]
        node.keywords = keywords


def known_ranks(fn: ast.FunctionDef, facts: Facts, nodes=None) -> dict[str, int]:
    """The names every binding of which is a reshape to the same number of sizes."""
    stores: dict[str, int] = {}
    for n in walk(fn) if nodes is None else nodes:
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            stores[n.id] = stores.get(n.id, 0) + 1
        elif isinstance(n, ast.arg):  # a nested function's parameter
            stores[n.arg] = stores.get(n.arg, 0) + 1
    ranks = {}
    for n, defs in facts.defs.items():
        if n in facts.params or stores.get(n) != len(defs):
            continue  # bound elsewhere too (a parameter, a loop, a tuple target, ...)
        found = {_reshape_rank(v, facts) for v, _ in defs}
        if len(found) == 1 and None not in found:
            ranks[n] = found.pop()
    return ranks


def _reshape_rank(v: Any, facts: Facts) -> int | None:
    """``a.reshape(n, m, k)``, ``a.reshape((n, m, k))``, ``np.reshape(a, (n, m, k))``: 3."""
    if not isinstance(v, ast.Call) or v.keywords:
        return None
    if not (isinstance(v.func, ast.Attribute) and v.func.attr == "reshape"):
        return None
    owner = v.func.value
    if facts.np_func(v) == "reshape":
        args = v.args[1:]
    elif isinstance(owner, ast.Name) and facts._static(owner.id):
        return None  # another module's reshape function
    else:
        args = v.args
    if any(isinstance(a, ast.Starred) for a in args) or not args:
        return None
    if len(args) >= 2:
        return len(args)  # several sizes: each one an integer
    shape = args[0]
    if isinstance(shape, ast.Tuple) and not any(
        isinstance(e, ast.Starred) for e in shape.elts
    ):
        return len(shape.elts)
    if isinstance(shape, ast.Constant) and type(shape.value) is int:
        return 1
    return None


def _form(node: ast.Call, facts: Facts, values: set):
    """(kernel, receiver, axis, keywords) of ``x.max(k, ...)`` or ``np.max(x, k, ...)``."""
    f = node.func
    name = facts.np_func(node)
    if name in KERNELS:
        if not node.args or not isinstance(node.args[0], ast.Name):
            return None
        if node.args[0].id not in values:
            return None  # maybe a list: the fallback calls its method
        x, rest = node.args[0].id, node.args[1:]
    elif (
        isinstance(f, ast.Attribute)
        and f.attr in ("max", "min")
        and isinstance(f.value, ast.Name)
        and name is None
    ):
        x, rest = f.value.id, node.args
        name = f.attr
    else:
        return None
    keywords = {k.arg: k for k in node.keywords}
    if None in keywords or any(k not in PASSED + ("axis",) for k in keywords):
        return None
    if len(rest) > 1 or any(isinstance(a, ast.Starred) for a in rest):
        return None
    if rest and "axis" in keywords:
        return None
    axis = _literal(rest[0] if rest else getattr(keywords.get("axis"), "value", None))
    if axis is None:
        return None
    kept = [keywords[k] for k in PASSED if k in keywords]
    return KERNELS[name], x, axis, kept


def _literal(e: Any) -> int | None:
    """The integer ``e`` writes (``2``, ``-2``), else None."""
    sign = 1
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        e, sign = e.operand, -1
    if isinstance(e, ast.Constant) and type(e.value) is int:
        return sign * e.value
    return None
