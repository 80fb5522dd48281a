"""Tangent expressions: what one normalized operation adds to its output's tangent.

An operation ``x = f(a, b)`` is described by an :class:`Op` (the primal ``f``
the tangent rules know, its positional operands, keywords, and how to rebuild
the primal expression with other operands).  Each operand with a tangent gives
one contribution, chosen by the rule's kind (:mod:`s2sad.runtime.tangents`)::

    x = W @ h            linear in each operand      t_x = t_W @ h + W @ t_h
    y = np.tanh(x)       elementwise: adjoint, g:=t  t_y = t_x * (1.0 - y * y)
    m = np.max(x, 1)     reduction                   t_m = jvp_reduction(d_max, t_x, m, x, 1)
    z = x ** 3           constant power (folded)     t_z = t_x * (3 * x ** 2)

One-expression rules are inlined as source; others are called by name.
"""

from __future__ import annotations

import ast
import copy
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from s2sad.options import FOREIGN
from s2sad.runtime import shapes, support, tangents
from s2sad.runtime.tangents import TangentRule
from s2sad.transforms.astutil import call, const, name, walk
from s2sad.transforms.front.activity import INDEX_KEYWORDS
from s2sad.transforms.front.arguments import unpacked_active, unpacked_problem
from s2sad.transforms.inline import bool_arithmetic, inline_single, instantiate
from s2sad.transforms.lattice import MAYBE, NONE, SET

#: linear primals that accept a container tangent with None entries as it is
HOLES_OK = {operator.getitem, list, tuple}
#: none-accepting helpers whose result may be None even for a non-None tangent
MAYBE_RESULT = {support.item_of}
#: primals linear in x plus a constant added to every output entry, the constant's
#: parameter (name, position): x's tangent call reads it as 0, and the constant's
#: own tangent is broadcast to the output (np.sum's initial=)
OFFSETS = {np.sum: ("initial", 5)}


@dataclass
class Op:
    """One normalized operation, as the tangent rules see it."""

    fn: Any
    args: list[ast.expr]
    rebuild: Callable[[list[ast.expr]], ast.expr]
    kwargs: dict[str, ast.expr] = field(default_factory=dict)
    node: ast.AST | None = None


@dataclass
class Tangent:
    """The tangent expression of an operation's result, with what is known of it."""

    expr: ast.expr
    state: str = SET  # SET: never None at run time; MAYBE: may be None
    holey: bool = False  # a container whose entries may be None
    alias: bool = False  # the expression is an operand's tangent itself (no new array)


def op_tangent(
    ff, rule: TangentRule, op: Op, ans: str, pre: list[ast.stmt]
) -> Tangent | None:
    """The tangent of ``ans = op`` (None: zero), materializing operand tangents in ``pre``."""
    active = [
        i
        for i, a in enumerate(op.args)
        if isinstance(a, ast.Name) and ff.st(a.id) != NONE and rule.differentiable_in(i)
    ]
    if not active:
        return None
    if rule.kind == "additive":
        return _additive(ff, rule, op, active)
    parts: list[Tangent] = []
    names = [i for i, a in enumerate(op.args) if isinstance(a, ast.Name)]
    every = len(active) > 1 and active == names  # the sum has the broadcast shape
    for i in active:
        part = _contribution(
            ff, rule, op, i, _operand(ff, rule, op, i, pre), ans, every
        )
        if part is not None:
            parts.append(part)
    tangent = combine(ff, parts, rule.container)
    if tangent is not None and _casts(rule, op):
        expr = call(ff.rule_ref(shapes.float_part), tangent.expr, name(ans))
        tangent = Tangent(expr, tangent.state, tangent.holey)
    return tangent


def combine(ff, parts: list[Tangent], container: bool) -> Tangent | None:
    """The sum of contributions (``+``, or ``add`` where one may be None or a container)."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    expr = parts[0].expr
    careful = container or any(p.state != SET for p in parts)
    for p in parts[1:]:
        if careful:
            expr = call(ff.module.helper("add"), expr, p.expr)
        elif isinstance(p.expr, ast.UnaryOp) and isinstance(p.expr.op, ast.USub):
            expr = ast.BinOp(left=expr, op=ast.Sub(), right=p.expr.operand)
        else:
            expr = ast.BinOp(left=expr, op=ast.Add(), right=p.expr)
    state = SET if any(p.state == SET for p in parts) else MAYBE
    return Tangent(expr, state, container or any(p.holey for p in parts))


def _operand(ff, rule: TangentRule, op: Op, i: int, pre: list[ast.stmt]) -> Tangent:
    """Operand i's tangent as the rule needs it: never None unless the rule allows it."""
    a = op.args[i].id
    if ff.st(a) == MAYBE and not rule.none_ok:
        ff.materialize(a, pre)
    expr: ast.expr = name(ff.t(a))
    holey = a in ff.holey
    # (ufuncs read arrays and floats, whose tangents have no None entries)
    needs_fill = rule.kind not in ("linear", "elementwise") or (
        rule.kind == "linear" and rule.primal not in HOLES_OK and not rule.none_ok
    )
    if holey and needs_fill:
        expr = call(ff.rule_ref(tangents.filled), expr, op.args[i])
        holey = False
    return Tangent(expr, ff.st(a), holey)


def _replaced(args: list[ast.expr], i: int, t: ast.expr) -> list[ast.expr]:
    return [t if k == i else copy.deepcopy(a) for k, a in enumerate(args)]


def _contribution(
    ff, rule: TangentRule, op: Op, i: int, t: Tangent, ans: str, every: bool = False
) -> Tangent | None:
    """Operand i's contribution ``J_i t`` to the tangent of ``ans``."""
    kind = rule.kind
    if kind == "linear":
        if OFFSETS.get(rule.primal, (None, None))[1] == i:
            expr = call(ff.rule_ref(tangents.broadcast_like), t.expr, name(ans))
            return Tangent(expr, SET, alias=True)
        expr = op.rebuild(_replaced(op.args, i, t.expr))
        _zero_offset(rule, op, expr)
        _layout_order(ff, rule, op, expr)
        maybe = rule.none_ok and (t.state != SET or rule.primal in MAYBE_RESULT)
        if rule.primal in HOLES_OK:
            maybe = maybe or t.holey
        holey = rule.container or (
            (rule.primal in HOLES_OK or rule.none_ok) and t.holey
        )
        return Tangent(expr, MAYBE if maybe else SET, holey)
    if kind == "elementwise":
        power = _constant_power(op, i, t.expr)
        if power is not None:
            return power
        return _elementwise(ff, rule, op, i, t.expr, ans, every)
    if kind == "adjoint_of_multilinear":
        if i == 1:
            return None
        expr = op.rebuild(_replaced(op.args, i, t.expr))
        if i >= 2:
            expr = call(ff.rule_ref(tangents.zero_entry), expr, const(i - 2))
        return Tangent(expr, SET, True)
    rest = _kw(op)
    if kind == "scalar":
        expr = call(
            ff.rule_ref(tangents.jvp_scalar),
            ff.rule_ref(rule.adjoint),
            const(i),
            t.expr,
            name(ans),
            *op.args,
        )
    elif kind == "reduction":
        if i != 0:
            return None
        expr = call(
            ff.rule_ref(tangents.jvp_reduction),
            ff.rule_ref(rule.adjoint),
            t.expr,
            name(ans),
            *op.args,
        )
    else:  # written
        return _written(ff, rule, op, i, t.expr, ans)
    expr.keywords = rest
    return Tangent(expr, SET, rule.container)


def _zero_offset(rule: TangentRule, op: Op, expr: ast.expr) -> None:
    """Read a linear primal's additive constant (``OFFSETS``) as 0 in ``expr``."""
    offset = OFFSETS.get(rule.primal)
    if offset is None or not isinstance(expr, ast.Call):
        return
    keyword, position = offset
    for k in expr.keywords:
        if k.arg == keyword:
            k.value = const(0)
    # the method form (x.sum(...)) has the receiver outside its positional arguments
    position -= len(op.args) - len(expr.args)
    if 0 <= position < len(expr.args):
        expr.args[position] = const(0)


#: primals taking a dtype, at this position among the operands (a method's
#: receiver first) or as a keyword: one that is no float makes the result
#: piecewise constant (np.asarray(x, dtype=int), np.sum(x, dtype=int))
DTYPE_AT = {
    np.array: 1, np.asarray: 1, np.asanyarray: 1, np.ascontiguousarray: 1,
    np.asfortranarray: 1, np.asarray_chkfinite: 1, np.sum: 2, np.mean: 2,
    np.nansum: 2, np.nanmean: 2, np.prod: 2, np.cumsum: 2, np.cumprod: 2,
    np.trace: 4, np.full: 2, np.full_like: 2, np.linspace: 5, np.arange: 3,
}  # fmt: skip
if hasattr(np, "cumulative_sum"):
    DTYPE_AT[np.cumulative_sum] = 9  # dtype= by keyword only


def _casts(rule: TangentRule, op: Op) -> bool:
    """Whether the call passes a dtype that may be no float: its tangent is then
    zero where the result is not float (shapes.float_part), not t cast."""
    at = DTYPE_AT.get(rule.primal)
    return at is not None and ("dtype" in op.kwargs or len(op.args) > at)


def _layout_order(ff, rule: TangentRule, op: Op, expr: ast.expr) -> None:
    """order='A' or 'K' of a reshape/ravel reads x in the order of x's layout,
    which its tangent need not share: the tangent is read in x's order."""
    if rule.primal not in (np.reshape, np.ravel) or not isinstance(expr, ast.Call):
        return
    values = [*expr.args, *(k.value for k in expr.keywords)]
    for v in values:
        if isinstance(v, ast.Constant) and v.value in ("A", "K"):
            resolved = call(
                ff.rule_ref(shapes.memory_order),
                copy.deepcopy(op.args[0]),
                const(v.value),
            )
            for k in expr.keywords:
                if k.value is v:
                    k.value = resolved
            expr.args = [resolved if a is v else a for a in expr.args]


def _kw(op: Op) -> list[ast.keyword]:
    return [ast.keyword(arg=k, value=copy.deepcopy(v)) for k, v in op.kwargs.items()]


def _additive(ff, rule: TangentRule, op: Op, active: list[int]) -> Tangent:
    """``f(t_a, t_b)`` for a jointly linear ``f`` that reads None as zero."""
    ts = [
        name(ff.t(a.id)) if i in active else const(None) for i, a in enumerate(op.args)
    ]
    maybe = all(ff.st(op.args[i].id) != SET for i in active)
    holey = any(op.args[i].id in ff.holey for i in active)
    if len(active) == 1:  # add(t, None) is t itself
        return Tangent(ts[active[0]], MAYBE if maybe else SET, holey)  # add aliases too
    return Tangent(op.rebuild(ts), MAYBE if maybe else SET, holey or rule.container)


def _elementwise(
    ff, rule: TangentRule, op: Op, i: int, t: ast.expr, ans: str, every: bool
) -> Tangent | None:
    """The adjoint rule with g := t (a diagonal Jacobian is symmetric), entry i."""
    exprs = instantiate(rule.adjoint, t, name(ans), op.args, op.kwargs)
    if ff.module.options.buffers == FOREIGN and bool_arithmetic(exprs):
        exprs = None  # t * (x > 0): called by name (Array API: no bool products)
    if exprs is None:
        rule_call = ast.Call(
            func=ff.rule_ref(rule.adjoint),
            args=[t, name(ans), *op.args],
            keywords=_kw(op),
        )
        expr: ast.expr | None = ast.Subscript(
            value=rule_call, slice=const(i), ctx=ast.Load()
        )
    else:
        expr = exprs[i] if i < len(exprs) else None
        if expr is None:
            return None
        ff.bind_np(expr)
    alias = isinstance(expr, ast.Name)
    if rule.broadcasts and not every and not _full_shape(expr, ans, op.args, i):
        expr = call(ff.rule_ref(tangents.broadcast_like), expr, name(ans))
        alias = True  # a read-only view: copied where the name changes in place
    return Tangent(expr, SET, False, alias=alias)


def _full_shape(expr: ast.expr, ans: str, args: list[ast.expr], i: int) -> bool:
    """True when ``expr`` combines the output or every other operand elementwise.

    Then it already has the broadcast shape of the output; otherwise (``g`` alone
    for an add) it may be smaller and is broadcast explicitly.
    """
    used = {n.id for n in walk(expr) if isinstance(n, ast.Name)}
    others = {a.id for k, a in enumerate(args) if k != i and isinstance(a, ast.Name)}
    return (
        ans in used
        or (others <= used and bool(others))
        or not any(isinstance(a, ast.Name) for k, a in enumerate(args) if k != i)
    )


def _constant_power(op: Op, i: int, t: ast.expr) -> Tangent | None:
    """``x ** c`` with a number c: ``t * (c * x ** (c - 1))``, folded for c = 0, 1, 2."""
    if op.fn is not np.power or i != 0 or len(op.args) != 2:
        return None
    c = op.args[1]
    if (
        not isinstance(c, ast.Constant)
        or isinstance(c.value, bool)
        or not isinstance(c.value, (int, float))
    ):
        return None
    x, n = op.args[0], c.value
    if n == 0:
        return None
    if n == 1:
        return Tangent(t, SET, alias=True)
    factor: ast.expr = (
        x if n == 2 else ast.BinOp(left=x, op=ast.Pow(), right=const(n - 1))
    )
    factor = ast.BinOp(left=const(n), op=ast.Mult(), right=factor)
    return Tangent(ast.BinOp(left=t, op=ast.Mult(), right=factor), SET)


def _written(
    ff, rule: TangentRule, op: Op, i: int, t: ast.expr, ans: str
) -> Tangent | None:
    fn = rule.written.get(i)
    extra: list[ast.keyword] = []
    if fn is None:
        fn = rule.written.get(-1)
        extra = [ast.keyword(arg="argnum", value=const(i))]
    if fn is None:
        return None
    expr = None if extra else inline_single(fn, t, name(ans), op.args, op.kwargs)
    if ff.module.options.buffers == FOREIGN and bool_arithmetic([expr]):
        expr = None  # called by name on the Array API path (no bool products)
    if expr is None:
        expr = ast.Call(
            func=ff.rule_ref(fn),
            args=[t, name(ans), *op.args],
            keywords=_kw(op) + extra,
        )
    else:
        ff.bind_np(expr)
    return Tangent(expr, SET, rule.container)


def check_keywords(ff: Any, v: ast.Call) -> None:
    """Refuse a differentiated value passed by keyword (or unpacked) to a call."""
    if unpacked_active(v, ff.act.active):
        ff.fail(v, *unpacked_problem(v))
        return
    for kw in v.keywords:  # (activity, not tangent state: keywords are not operands)
        if kw.arg in INDEX_KEYWORDS:
            continue  # an integer, a flag or a type (see activity.INDEX_KEYWORDS)
        if isinstance(kw.value, ast.Name) and kw.value.id in ff.act.active:
            ff.fail(
                kw.value,
                f"differentiated value '{kw.value.id}' passed as keyword "
                f"argument '{kw.arg}'",
                "pass it as a positional argument",
            )
