"""The ``losses`` pass's matching: two written-out losses get closed-form cotangents.

The Bernoulli log-likelihood of a sigmoid (after normalize)::

    n = -z                          # or np.negative(z)
    e = np.exp(n)
    d = 1.0 + e                     # or e + 1, np.add
    p = 1.0 / d                     # or np.divide, np.reciprocal(d); or p = sigmoid(z)
    l1 = np.log(p)
    a = y * l1                      # either order, or np.multiply
    s = 1.0 - y
    s1 = 1.0 - p
    l2 = np.log(s1)                 # or m = -p; l2 = np.log1p(m)
    b = s * l2                      # either order
    t = a + b                       # either order, or np.add
    r = np.mean(t)                  # optional: t.mean(), np.sum(t), t.sum()

becomes ``r = sigmoid_log_likelihood_as_written(z, y, p, a, b, reduce="mean")``
(``t = ...(z, y, p, a, b)`` without the reduction; ``y`` read twice as two
names is fine when both read one item, ``ys[t]``).  The negative spelled out,
``a = (-y) * l1`` or ``a = -(y * l1)`` and ``t = a - b``, becomes the same call
with ``negated=True`` (the value ``a - b``).  And the integer-label
negative log-likelihood after a log-softmax::

    logp = log_softmax_as_written(x, axis=1)     # fuse.py's, or nn.log_softmax
    i = logp[rows, cols]
    r = np.mean(i)                               # or i.mean(), np.sum(i), i.sum()

becomes ``r = picked_log_softmax_as_written(x, logp, rows, cols, axis=1)``
(``s2sad/runtime/losses.py``).  Every other statement stays: the calls compute
the last step from the user's own intermediates, so values are the same to the
bit.  Their rules send the cotangent to ``z`` (and ``y``) or ``x`` straight, so
the pass (``fuse.run_losses``) redoes the activity with those operands only: intermediates that
nothing else differentiable reads (``p``, ``l1``...; ``logp``) lose their
backward statements, and ones that something else reads keep theirs.

It fires only when every name the chain defines is assigned once in the
function, its statements sit in one statement list in that order, and nothing
between them rebinds or writes into ``z``, ``y``, ``x`` or the values the call
reads; the reduction takes no axis, and ``t``/``i`` are read by it alone.
Anything else is left as written.
"""

from __future__ import annotations

import ast
import copy
import sys

import numpy as np

from s2sad.transforms.astutil import anno, walk
from s2sad.transforms.front.calls import CallInfo
from s2sad.transforms.front.shifts import _assigned


def rule_target(value) -> object:
    """The function a rule call calls (``None`` for anything else)."""
    if not isinstance(value, ast.Call):
        return None
    info: CallInfo = anno(value).get("call", CallInfo("unknown"))
    return info.target if info.kind == "rule" else None


def names(args) -> list[str] | None:
    if all(isinstance(a, ast.Name) for a in args):
        return [a.id for a in args]
    return None


def _call_args(value, fns, n: int) -> list[str] | None:
    """The names passed to ``fn(a, ...)`` (``n`` positional names, no keywords)."""
    if (
        any(rule_target(value) is f for f in fns)
        and len(value.args) == n
        and not value.keywords
    ):
        return names(value.args)
    return None


def _binop(value, op, fn) -> tuple[ast.expr, ast.expr] | None:
    """The operands of ``a <op> b`` or ``fn(a, b)``."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, op):
        return value.left, value.right
    if rule_target(value) is fn and len(value.args) == 2 and not value.keywords:
        return value.args[0], value.args[1]
    return None


def _is_one(e) -> bool:
    return (
        isinstance(e, ast.Constant) and type(e.value) in (int, float) and e.value == 1
    )


def _one_minus(value) -> str | None:
    """``x`` for ``1 - x`` (``1.0 - x``, ``np.subtract(1, x)``)."""
    ops = _binop(value, ast.Sub, np.subtract)
    if ops and _is_one(ops[0]) and isinstance(ops[1], ast.Name):
        return ops[1].id
    return None


def _negated(value) -> str | None:
    """``x`` for ``-x`` or ``np.negative(x)``."""
    if (
        isinstance(value, ast.UnaryOp)
        and isinstance(value.op, ast.USub)
        and isinstance(value.operand, ast.Name)
    ):
        return value.operand.id
    args = _call_args(value, (np.negative,), 1)
    return args[0] if args else None


def _sigmoids() -> tuple:
    from s2sad.runtime.activations import sigmoid

    special = sys.modules.get("scipy.special")
    expit = getattr(special, "expit", None)
    return (sigmoid,) if expit is None else (sigmoid, expit)


class Chain:
    """The definitions of one statement list: ``name -> (index, value)`` for the
    names assigned once in the function, and what each statement touches."""

    def __init__(self, block, stores):
        self.block = block
        self.defs: dict[str, tuple[int, ast.expr]] = {}
        for i, stmt in enumerate(block):
            target, value = _assigned(stmt)
            if target is not None and stores.get(target) == 1:
                self.defs[target] = (i, value)
        self.used: list[int] = []  # the indices of the chain's statements

    def value(self, name: str, before: int) -> ast.expr | None:
        """The value assigned to ``name`` by a statement before index ``before``."""
        found = self.defs.get(name)
        if found is None or found[0] >= before:
            return None
        self.used.append(found[0])
        return found[1]

    def same(self, a: str, b: str, before: int) -> bool:
        """``a`` and ``b`` hold one value: one name, or two reads of one item or
        attribute (``ys[t]`` written twice) that nothing between them changes."""
        if a == b:
            return True
        da, db = self.defs.get(a), self.defs.get(b)
        if da is None or db is None or max(da[0], db[0]) >= before:
            return False
        va, vb = da[1], db[1]
        if not (
            isinstance(va, (ast.Subscript, ast.Attribute))
            and ast.dump(va) == ast.dump(vb)
            and all(
                isinstance(n, (ast.Name, ast.Load, ast.Tuple, ast.Slice, ast.Constant))
                or n is va
                for n in walk(va)
            )
        ):
            return False
        names = [n.id for n in walk(va) if isinstance(n, ast.Name)]
        lo, hi = sorted((da[0], db[0]))
        if not self.untouched(names, lo, hi + 1):
            return False
        self.used.extend((da[0], db[0]))
        return True

    def index(self, name: str) -> int:
        return self.defs[name][0]

    def untouched(self, names, start: int, stop: int) -> bool:
        """No statement of ``block[start:stop]`` but the chain's own rebinds, writes
        into, or calls a method or ``out=`` on one of ``names``."""
        names, own = set(names), set(self.used)
        return not any(
            _touches(self.block[j], names) for j in range(start, stop) if j not in own
        )


def _touches(stmt, names: set[str]) -> bool:
    for n in walk(stmt):
        if (
            isinstance(n, ast.Name)
            and n.id in names
            and not isinstance(n.ctx, ast.Load)
        ):
            return True
        if (
            isinstance(n, (ast.Subscript, ast.Attribute))
            and not isinstance(n.ctx, ast.Load)
            and any(isinstance(m, ast.Name) and m.id in names for m in walk(n))
        ):
            return True
        if isinstance(n, ast.Call):
            if (
                isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Name)
                and n.func.value.id in names
            ):
                return True  # a method may change its array in place
            for k in n.keywords:
                if k.arg == "out" and any(
                    isinstance(m, ast.Name) and m.id in names for m in walk(k.value)
                ):
                    return True
    return False


# ----------------------------------------------------------------------------
# The Bernoulli log-likelihood of a sigmoid
# ----------------------------------------------------------------------------


def sigmoid_of(chain: Chain, p: str, before: int) -> str | None:
    """``z`` when ``p`` is ``1 / (1 + exp(-z))`` (or ``sigmoid(z)``) as written."""
    value = chain.value(p, before)
    if value is None:
        return None
    args = _call_args(value, _sigmoids(), 1)
    if args:
        return args[0]
    ops = _binop(value, ast.Div, np.divide)
    if ops and _is_one(ops[0]) and isinstance(ops[1], ast.Name):
        d = ops[1].id
    else:
        args = _call_args(value, (np.reciprocal,), 1)
        if not args:
            return None
        d = args[0]
    ops = _binop(chain.value(d, before), ast.Add, np.add)
    if not ops:
        return None
    e = next(
        (b.id for a, b in (ops, ops[::-1]) if _is_one(a) and isinstance(b, ast.Name)),
        None,
    )
    args = _call_args(chain.value(e, before), (np.exp,), 1) if e else None
    if not args:
        return None
    n = chain.value(args[0], before)
    return _negated(n) if n is not None else None


def _log_term(chain: Chain, a: str, before: int, negated: bool = False):
    """``(y, p)`` for ``a = y * np.log(p)`` (either order); with ``negated``, for
    ``a = (-y) * np.log(p)`` or ``a = -(y * np.log(p))``."""
    value = chain.value(a, before)
    inner = _negated(value) if negated and value is not None else None
    if inner is not None:
        return _log_term(chain, inner, before)
    ops = _binop(value, ast.Mult, np.multiply)
    if not ops or names(ops) is None:
        return None
    for f, other in (ops, ops[::-1]):
        found = chain.defs.get(f.id, (before, None))
        args = _call_args(found[1], (np.log,), 1) if found[0] < before else None
        y = other.id
        if args and negated:
            neg = chain.defs.get(y, (before, None))
            y = _negated(neg[1]) if neg[0] < before else None
            if y is not None:
                chain.used.append(neg[0])
        if args and y is not None:
            chain.used.append(found[0])
            return y, args[0]
    return None


def _complement_term(chain: Chain, b: str, before: int):
    """``(y, p)`` for ``b = (1 - y) * np.log(1 - p)`` or ``... * np.log1p(-p)``."""
    ops = _binop(chain.value(b, before), ast.Mult, np.multiply)
    if not ops or names(ops) is None:
        return None
    for s, l2 in (ops, ops[::-1]):
        sv = chain.defs.get(s.id, (before, None))
        lv = chain.defs.get(l2.id, (before, None))
        if sv[0] >= before or lv[0] >= before:
            continue
        y = _one_minus(sv[1])
        log = _call_args(lv[1], (np.log,), 1)
        log1p = _call_args(lv[1], (np.log1p,), 1)
        inner = (log or log1p or [None])[0]
        iv = chain.defs.get(inner, (before, None)) if inner else (before, None)
        if y is None or iv[0] >= before:
            continue
        p = _one_minus(iv[1]) if log else _negated(iv[1])
        if p is not None:
            chain.used.extend((sv[0], lv[0], iv[0]))
            return y, p
    return None


def log_likelihood(chain: Chain, t_value, at: int):
    """``(z, y, p, a, b, negated)`` when ``t_value`` (at index ``at``) adds the
    two terms, or subtracts the second from the first negated (``-y * log(p) -
    (1 - y) * log(1 - p)``)."""
    ops = _binop(t_value, ast.Add, np.add)
    orders, negated = ((ops, ops[::-1]) if ops else ()), False
    if not ops:
        ops = _binop(t_value, ast.Sub, np.subtract)
        orders, negated = ((ops,) if ops else ()), True
    if not ops or names(ops) is None:
        return None
    for a, b in orders:
        chain.used = []
        first = _log_term(chain, a.id, at, negated)
        second = _complement_term(chain, b.id, at) if first else None
        if (
            first
            and second
            and first[1] == second[1]
            and chain.same(first[0], second[0], at)
        ):
            y, p = first
            z = sigmoid_of(chain, p, at)
            if z is None or y in (p, a.id, b.id) or z == p:
                continue
            if chain.untouched([z, y, p, a.id, b.id], min(chain.used), at):
                return z, y, p, a.id, b.id, negated
    return None


# ----------------------------------------------------------------------------
# Picked log-probabilities
# ----------------------------------------------------------------------------


def log_softmax_of(chain: Chain, logp: str, before: int):
    """``(x, axis)`` when ``logp`` is a log-softmax of ``x`` (a rule call)."""
    from s2sad.runtime.activations import log_softmax, log_softmax_as_written

    value = chain.value(logp, before)
    if rule_target(value) not in (log_softmax, log_softmax_as_written):
        return None
    args = list(value.args)
    if not args or not isinstance(args[0], ast.Name) or len(args) > 2:
        return None
    axis = args[1] if len(args) == 2 else None
    for k in value.keywords:
        if k.arg != "axis" or axis is not None:
            return None
        axis = k.value
    if axis is None:
        axis = ast.Constant(value=-1)
    if (
        isinstance(axis, ast.UnaryOp)
        and isinstance(axis.op, ast.USub)
        and isinstance(axis.operand, ast.Constant)
        and type(axis.operand.value) is int
    ):
        axis = ast.Constant(value=-axis.operand.value)
    if not isinstance(axis, ast.Constant):
        return None
    return args[0].id, copy.deepcopy(axis)


def picked(chain: Chain, i: str, before: int):
    """``(x, logp, rows, cols, axis)`` for ``i = logp[rows, cols]`` of a log-softmax."""
    value = chain.value(i, before)
    if not (
        isinstance(value, ast.Subscript)
        and isinstance(value.value, ast.Name)
        and isinstance(value.slice, ast.Tuple)
        and len(value.slice.elts) == 2
    ):
        return None
    index = names(value.slice.elts)
    logp = value.value.id
    at = chain.index(i)
    found = log_softmax_of(chain, logp, at)
    if index is None or found is None or logp in index:
        return None
    x, axis = found
    if chain.untouched([x, logp], chain.index(logp), before) and chain.untouched(
        index, at, before
    ):
        return x, logp, index[0], index[1], axis
    return None
