"""The per-function state of forward mode, and how operations find their rules.

:class:`FunctionForward` holds what is known about each tangent while one
normalized function is transformed (none / set / maybe at run time, and which
containers may hold None entries), names tangents (``t_`` + the name), emits
``# tangent of:`` comments and collects problems.  The statements themselves
are handled in :mod:`forward_stmts`; one operation's tangent expression in
:mod:`tangent_exprs`.  For ``x = W @ h`` with both operands differentiated::

    op_of_value(ff, W @ h)        ->  Op(np.matmul, [W, h], rebuild)
    rule_tangent(ff, op, "x", pre) ->  Tangent(t_W @ h + W @ t_h, state=SET)
"""

from __future__ import annotations

import ast
import copy
import functools
import operator
from typing import Any

import numpy as np

from s2sad.errors import MissingRuleError, UnsupportedSyntaxError
from s2sad.runtime import pytrees, registry, support, tangents
from s2sad.transforms import inline
from s2sad.transforms.astutil import Namer, anno, assign, call, const, index_value, name
from s2sad.transforms.forward.exprs import Op, Tangent, op_tangent
from s2sad.transforms.front import activity, properties
from s2sad.transforms.front.calls import builtin_hint
from s2sad.transforms.lattice import MAYBE, NONE, SET
from s2sad.transforms.ops import BINOPS, UNARYOPS

#: calls that change their first argument in place: f -> position of the new value
MUTATORS = {support.restore_item: 2, tangents.set_item: 2, tangents.restore_tangent: 2}
INACTIVE_METHODS = activity.INACTIVE_METHODS | {"keys", "index", "count"}


def mutator_position(fn: Any) -> int | None:
    """For a call that changes its first argument in place, the new value's position."""
    try:
        return MUTATORS.get(fn)
    except TypeError:  # unhashable callee
        return None


class FunctionForward:
    """Emits the primal and tangent statements of one normalized function."""

    def __init__(self, module, parsed, namer: Namer, norm, act, params):
        self.module = module
        self.parsed = parsed
        self.namer = namer
        self.norm = norm
        self.act = act
        self.params = set(params)
        self.local_functions = {
            **parsed.local_functions,
            **norm.local_functions,
        }
        self.state: dict[str, str] = {}
        self.holey: set[str] = set()
        self.tnames: dict[str, str] = {}
        self.problems: list = []
        self.missing: list = []
        self.last_origin: int | None = None
        self.never: set[str] = act.never  # loop counters

    # .................................................................. names and state
    def t(self, x: str) -> str:
        """Name of the tangent variable of ``x``."""
        if x not in self.tnames:
            self.tnames[x] = self.namer.fresh("t_" + x.lstrip("_"))
        return self.tnames[x]

    def st(self, x: str) -> str:
        return self.state.get(x, NONE)

    def rule_ref(self, fn: Any) -> ast.expr:
        node = self.module.rule_ref(fn)
        anno(node)["rule_ref"] = True
        return node

    def bind_np(self, expr: ast.expr) -> None:
        """Point ``np`` in an inlined rule at the module's binding of NumPy."""
        inline.bind_np(expr, self.module)

    def np_attr(self, attr: str) -> ast.expr:
        alias = self.module.bind("np", np, ["module", "numpy", "np"])
        return ast.Attribute(value=name(alias), attr=attr, ctx=ast.Load())

    def useful(self, x: str) -> bool:
        return x in self.act.useful

    def materialize(self, x: str, out: list[ast.stmt]) -> None:
        """Make ``t_x`` a real value: ``or_zeros(t_x, x)`` (or zeros when it has none)."""
        if self.st(x) == SET:
            return
        if self.st(x) == NONE:
            value = call(self.module.helper("zeros_like"), name(x))
            self.holey.discard(x)
        else:
            value = call(self.rule_ref(tangents.or_zeros), name(self.t(x)), name(x))
        out.append(assign(self.t(x), value))
        self.state[x] = SET

    def set_tangent(self, x: str, tan: Tangent | None, out: list[ast.stmt]) -> None:
        """Record (and emit) ``t_x`` after an assignment to ``x``."""
        if tan is None:  # a NONE state means t_x is None or not yet bound
            if self.st(x) != NONE:
                out.append(assign(self.t(x), const(None)))
            self.state[x] = NONE
            self.holey.discard(x)
            return
        expr = tan.expr
        if tan.alias and x in self.mutated:  # x changes in place: t_x must be its own
            expr = call(self.np_attr("copy"), expr)
        out.append(assign(self.t(x), expr))
        self.state[x] = tan.state
        if tan.holey:
            self.holey.add(x)
        else:
            self.holey.discard(x)

    @functools.cached_property
    def mutated(self) -> set[str]:
        """Names changed in place somewhere in the function (their tangents are too)."""
        stmts = activity.simple_statements(self.parsed.node.body)
        return {t for t in map(_mutation_target, stmts) if t}

    def tangent_of_atom(self, e: ast.expr, out: list[ast.stmt]) -> ast.expr:
        if isinstance(e, ast.Name) and self.st(e.id) != NONE:
            return name(self.t(e.id))
        return const(None)

    # .................................................................. problems
    def fail(
        self, node: ast.AST, message: str, hint: str = "", missing: bool = False
    ) -> None:
        problem = self.parsed.source.problem(node, message, hint)
        target = self.missing if missing else self.problems
        if problem not in target:
            target.append(problem)

    def raise_problems(self) -> None:
        if self.missing:
            raise MissingRuleError(self.missing)
        if self.problems:
            raise UnsupportedSyntaxError(self.problems)

    def comment_for(self, s: ast.stmt, out: list[ast.stmt]) -> None:
        origin = anno(s).get("origin")
        if origin is not None and origin != self.last_origin:
            out.append(
                self.module.origin_comment("tangent", self.parsed.source, origin)
            )
            self.last_origin = origin

    def emit(
        self,
        s: ast.stmt,
        primal: list[ast.stmt],
        tangent: list[ast.stmt],
        out: list[ast.stmt],
        pre: list[ast.stmt] = (),
    ) -> None:
        """``pre`` (tangents made non-None before the statement changes anything), the
        primal statements, then the tangent ones, under a ``# tangent of:`` comment."""
        if tangent or pre:
            self.comment_for(s, out)
        out.extend(pre)
        out.extend(primal)
        out.extend(tangent)

    # .................................................................. dry runs
    def snapshot(self) -> tuple:
        return (
            dict(self.state),
            set(self.holey),
            dict(self.tnames),
            set(self.namer.used),
            len(self.problems),
            len(self.missing),
            self.last_origin,
            self.module.snapshot(),
        )

    def restore(self, snap: tuple) -> None:
        (
            self.state,
            self.holey,
            self.tnames,
            used,
            n_problems,
            n_missing,
            self.last_origin,
            module,
        ) = snap
        self.namer.used = used
        del self.problems[n_problems:]
        del self.missing[n_missing:]
        self.module.restore(module)


def _mutation_target(s: ast.stmt) -> str | None:
    """The name a statement changes in place (item assignment, append, pop...)."""
    if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Subscript):
        base = s.targets[0].value
        return base.id if isinstance(base, ast.Name) else None
    call_ = s.value if isinstance(s, (ast.Assign, ast.Expr)) else None
    if isinstance(call_, ast.Call):
        info = anno(call_).get("call")
        if (
            info is not None
            and info.kind == "method"
            and isinstance(call_.func.value, ast.Name)
            and info.target in ("append", "pop")
        ):
            return call_.func.value.id
        if (
            info is not None
            and mutator_position(info.target) is not None
            and call_.args
            and isinstance(call_.args[0], ast.Name)
        ):
            return call_.args[0].id
    return None


def op_of_value(ff: FunctionForward, v: ast.expr) -> Op | None:
    """The :class:`Op` of a non-call value (operators, indexing, attributes)."""
    if isinstance(v, ast.BinOp) and type(v.op) in BINOPS:
        op = v.op
        return Op(
            BINOPS[type(op)],
            [v.left, v.right],
            lambda a: ast.BinOp(left=a[0], op=op, right=a[1]),
            node=v,
        )
    if isinstance(v, ast.UnaryOp) and type(v.op) in UNARYOPS:
        op = v.op
        return Op(
            UNARYOPS[type(op)],
            [v.operand],
            lambda a: ast.UnaryOp(op=op, operand=a[0]),
            node=v,
        )
    if isinstance(v, ast.Subscript):
        sl = v.slice
        return Op(
            operator.getitem,
            [v.value, index_value(sl)],
            lambda a: ast.Subscript(
                value=a[0], slice=copy.deepcopy(sl), ctx=ast.Load()
            ),
            node=v,
        )
    if isinstance(v, ast.Attribute) and v.attr not in activity.INACTIVE_ATTRS:
        fn = registry.lookup_attribute(v.attr)
        attr, recv = v.attr, v.value

        def build(a: list) -> ast.Attribute:
            r = a[0]  # the value, or its tangent (a linear attribute's J t)
            primal = isinstance(r, ast.Name) and r.id == getattr(recv, "id", None)
            if isinstance(recv, ast.Name) and not primal:  # see _method_tangent
                r = call(ff.rule_ref(tangents.method_receiver), r, copy.deepcopy(recv))
            return ast.Attribute(value=r, attr=attr, ctx=ast.Load())

        return Op(fn, [v.value], build, node=v)
    return None


def field_tangent(ff: FunctionForward, v: ast.expr) -> Tangent | None:
    """``x.W`` of a pytree value ``x`` with a tangent (a namedtuple's or a
    dataclass's field, no array attribute of a rule): its tangent's field
    (``pytrees.field_tangent``, None for a class attribute), else None."""
    if not (
        isinstance(v, ast.Attribute)
        and isinstance(v.value, ast.Name)
        and ff.st(v.value.id) != NONE
        and v.attr not in activity.INACTIVE_ATTRS
        and registry.lookup_attribute(v.attr) is None
    ):
        return None
    if properties.array_view_read(v, ff.parsed.example_args):  # x.flat: refused
        ff.fail(v, *properties.array_view_problem(v))
        return Tangent(const(None), MAYBE)  # (the compile fails)
    if properties.derived_field_read(v, ff.parsed.example_args):  # init=False
        ff.fail(v, *properties.derived_field_problem(v))
        return Tangent(const(None), MAYBE)  # (the compile fails)
    helper = ff.rule_ref(pytrees.field_tangent)
    t = call(helper, name(ff.t(v.value.id)), name(v.value.id), const(v.attr))
    return Tangent(t, MAYBE)


def rule_tangent(
    ff: FunctionForward, op: Op, x: str, pre: list[ast.stmt]
) -> Tangent | None:
    """The tangent of ``x = op`` from the tangent rule of ``op.fn`` (loud if none)."""
    rule = tangents.lookup(op.fn) if op.fn is not None else None
    if rule is None:
        if any(isinstance(a, ast.Name) and ff.st(a.id) != NONE for a in op.args):
            what = (
                registry.display_name(op.fn)
                if op.fn is not None
                else ast.unparse(op.node)
            )
            ff.fail(
                op.node,
                f"no forward (tangent) rule for {what}",
                builtin_hint(op.fn)
                or "register one: @s2sad.runtime.tangents.tangent(fn, argnum=i) on "
                "def jvp_fn(t, ans, *args): return <J_i t>",
                missing=True,
            )
        return None
    _untangented(ff, rule, op)
    return op_tangent(ff, rule, op, x, pre)


def _untangented(ff: FunctionForward, rule: tangents.TangentRule, op: Op) -> None:
    """Refuse a differentiated operand after a reduction's first (np.prod's and
    np.max's initial): the reduction rule pushes only the first's tangent, so the
    other's would be dropped.  (Written rules' other positions are mostly shapes
    and indices that emitted code passes along with the values they came from.)"""
    for i, a in enumerate(op.args):
        if not (isinstance(a, ast.Name) and ff.st(a.id) != NONE):
            continue
        if rule.kind != "reduction" or i == 0:
            continue
        ff.fail(
            op.node,
            f"no tangent rule for argument {i + 1} of {rule.name}, which depends "
            f"on the differentiated inputs ('{a.id}')",
            "compute it from constants, or register a tangent rule for that "
            "argument: @s2sad.runtime.tangents.tangent(fn, argnum=i)",
            missing=True,
        )
