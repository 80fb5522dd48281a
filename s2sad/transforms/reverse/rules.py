"""Applying adjoint rules in the backward sweep (a part of the reverse pass).

For ``x = f(a, b)`` the rule registered for ``f`` gives each active operand's
contribution.  A one-expression rule is inlined; any other is called, and its
tuple unpacked straight into a cotangent variable when nothing has accumulated
there yet::

    # grad of: y = np.tanh(h)               # grad of: z = np.linalg.solve(A, b)
    g_h = g_y * (1.0 - y * y)               g_A, g_b = d_solve(g_z, z, A, b)

When only one operand needs a cotangent and the rule has a partial form
(``x @ W`` with ``x`` constant), only that one is computed.  The rule function
is annotated on the name that calls it (see ``ModuleBuilder.rule_ref``).

A cotangent that may come from a mask (``masked``, see :mod:`masks`) gets the
rule's masked form where it has one, which keeps exact zeros zero::

    # grad of: h = np.sqrt(x)       (h selected by np.where)
    g_x = 0.5 * g_h / np.where(g_h == 0, 1.0, h)
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from s2sad.options import BUFFERED, FOREIGN, PLAIN
from s2sad.runtime import indexing, registry
from s2sad.transforms.astutil import anno, call, const, name
from s2sad.transforms.inline import (
    bind_np,
    bool_arithmetic,
    definite_positions,
    instantiate,
    shortest_return,
)
from s2sad.transforms.lattice import MAYBE, NONE, SET
from s2sad.transforms.reverse.likes import F64


class RuleCalls:
    """The rule-application half of :class:`FunctionReverser` (a mixin: it uses
    the reverser's ``state``, ``g``, ``accumulate``, ``helper`` and ``fc``)."""

    #: names whose cotangent may come from a mask (set by the reverse pass)
    masked: frozenset[str] | set[str] = frozenset()
    #: names that hold Python numbers (scalar code only: reverse/scalars.py)
    numbers: frozenset[str] | set[str] = frozenset()
    #: the name the statement being reversed assigns
    output: str | None = None
    #: shape-and-float64 classes of names (reverse/likes.py)
    likes: Mapping[str, tuple[str, str]] = MappingProxyType({})

    def apply_rule(self, fn, x: str, args: list[ast.expr], kwargs, out, node) -> None:
        wanted = [i for i, a in enumerate(args) if self.needs(a)]
        if not wanted:
            return
        rule = registry.lookup(fn) if fn is not None else None
        if rule is None or rule.adjoint is None:
            if rule is None:
                self.fc.fail(
                    node, f"no adjoint rule for {ast.unparse(node)}", _hint(node)
                )
            return
        gx, ans = name(self.g(x)), name(x)
        self.output = x
        if x in self.masked and registry.lookup_masked(fn) is not None:
            rule = registry.lookup_masked(fn)  # keeps a mask's zeros exactly zero
        elif len(wanted) == 1 and len(args) > 1:
            partial = registry.lookup_partial(fn, wanted[0])
            if (
                partial is not None
            ):  # only this cotangent is needed: skip the others' work
                self._apply_partial(partial, wanted[0], gx, ans, args, kwargs, out)
                return
        exprs = instantiate(rule.adjoint, gx, ans, args, kwargs, self.kernels(x))
        if self.fc.module.options.buffers == FOREIGN and bool_arithmetic(exprs):
            exprs = None  # g * (x > 0): called by name (Array API: no bool products)
        definite = set(range(len(args)))
        self.direct_assigned = {}
        for e in exprs or ():
            if e is not None:
                bind_np(e, self.fc.module)
        if exprs is None:
            exprs = self.called_rule(rule, gx, ans, args, kwargs, wanted, out)
            definite = definite_positions(rule.adjoint)
        merged: dict[str, tuple[ast.expr, bool, int]] = {}  # x * x: one sum per name
        for i in wanted:
            e = exprs[i] if i < len(exprs) else None
            if e is None:
                continue
            if i in self.direct_assigned:
                self.state[self.direct_assigned[i]] = SET if i in definite else MAYBE
                continue
            x_name = args[i].id
            if (
                x_name in merged
                and exprs is not None
                and merged[x_name][1]
                and i in definite
            ):
                prev, _, first = merged[x_name]
                merged[x_name] = (
                    ast.BinOp(left=prev, op=ast.Add(), right=e),
                    True,
                    first,
                )
            else:
                merged.setdefault(x_name, (e, i in definite, i))
                if merged[x_name][0] is not e:  # cannot merge: accumulate separately
                    self._accumulate_rule(rule, args, i, e, out, i in definite)
        for e, is_definite, i in merged.values():
            self._accumulate_rule(rule, args, i, e, out, is_definite)

    def kernels(self, x: str) -> bool:
        """Whether rules may be written as their fused kernels (runtime/fused.py):
        NumPy array code (not scalar code, not another library's arrays)."""
        options = self.fc.module.options
        return (
            options.optimize
            and options.buffers in (BUFFERED, PLAIN)
            and x not in self.numbers
        )

    def indexed_sum(self, gx: str, contribution: ast.expr) -> ast.expr | None:
        """``add_at_index(g_x, g, x, idx)`` for ``g_x + d_getitem(g, ans, x, idx)[0]``:
        the runtime adds ``g`` into the indexed part of ``g_x`` alone (a basic
        index), instead of scattering it into zeros added whole."""
        c = contribution.value if isinstance(contribution, ast.Subscript) else None
        if (
            not isinstance(c, ast.Call)
            or anno(c.func).get("rule") is not indexing.d_getitem
            or len(c.args) != 4
            or c.keywords
            or not (
                isinstance(contribution.slice, ast.Constant)
                and contribution.slice.value == 0
            )
        ):
            return None
        g, _, x, idx = c.args
        if isinstance(idx, ast.Constant) and isinstance(idx.value, str):
            return None  # a dict key (params["W"]): nothing to add in place
        return call(self.fc.module.rule_ref(indexing.add_at_index), name(gx), g, x, idx)

    def _accumulate_rule(self, rule, args, i, e, out, definite) -> None:
        if rule.broadcasts and not self.same_shape(args[i], e):
            e = call(self.helper("unbroadcast"), e, args[i])
        self.accumulate(args[i].id, e, out, definite=definite)

    def same_shape(self, operand: ast.expr, e: ast.expr | None = None) -> bool:
        """No broadcasting to undo: the operand and the statement's output are both
        numbers (scalar code, s2sad/transforms/reverse/scalars.py), or arrays of
        one shape and float dtype (reverse/likes.py): float64, or float32 where
        the cotangent ``e`` is the output's own (``g``, ``-g``: ``x + y``,
        ``x - y``), as a product's may be a double (``g * np.where(...)``)."""
        if not isinstance(operand, ast.Name):
            return False
        if operand.id in self.numbers and self.output in self.numbers:
            return True
        c = self.likes.get(operand.id)
        if c is None or c[0] == "()" or c != self.likes.get(self.output):
            return False
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            e = e.operand
        return c[1] == F64 or (isinstance(e, ast.Name) and e.id == self.g(self.output))

    def _apply_partial(self, rule, i: int, gx, ans, args, kwargs, out) -> None:
        """Accumulate argument ``i``'s cotangent from a partial rule."""
        exprs = instantiate(rule.adjoint, gx, ans, args, kwargs)
        if exprs is not None:
            e = exprs[0]
        else:
            keywords = [ast.keyword(arg=k, value=v) for k, v in kwargs.items()]
            call_ = ast.Call(
                func=self.fc.module.rule_ref(rule.adjoint),
                args=[gx, ans, *args],
                keywords=keywords,
            )
            e = ast.Subscript(value=call_, slice=const(0), ctx=ast.Load())
            anno(e)["cotangent_of"] = args[i].id  # a partial rule's only result
        if rule.broadcasts and not self.same_shape(args[i], e):
            e = call(self.helper("unbroadcast"), e, args[i])
        self.accumulate(
            args[i].id, e, out, definite=0 in definite_positions(rule.adjoint)
        )

    def called_rule(
        self, rule, gx, ans, args, kwargs, wanted, out
    ) -> list[ast.expr | None]:
        """Call a rule that cannot be inlined; return expressions for its cotangents."""
        fn_ref = self.fc.module.rule_ref(rule.adjoint)
        keywords = [ast.keyword(arg=k, value=v) for k, v in kwargs.items()]
        rule_call: ast.expr = ast.Call(
            func=fn_ref, args=[gx, ans, *args], keywords=keywords
        )
        n = len(args)
        if len(wanted) == 1:
            # every rule returns at least one cotangent per named parameter
            if wanted[0] >= _named_params(rule.adjoint):
                rule_call = call(self.helper("pad"), rule_call, const(n))
            exprs: list = [None] * n
            exprs[wanted[0]] = ast.Subscript(
                value=rule_call, slice=const(wanted[0]), ctx=ast.Load()
            )
            return exprs
        short = shortest_return(rule.adjoint)
        if n > _named_params(rule.adjoint) or (short is not None and short < n):
            rule_call = call(self.helper("pad"), rule_call, const(n))
        cts, self.direct_assigned = self._unpack_names(args, wanted, rule.broadcasts)
        kept = cts
        if short is None:  # a rule's own length unknown: unpack up to the last wanted
            kept = cts[: max(wanted) + 1]
        target = ast.Tuple(elts=[name(c, store=True) for c in kept], ctx=ast.Store())
        if (
            len(kept) < n
            or len(cts) > _named_params(rule.adjoint)
            or n < _named_params(rule.adjoint)
        ):
            target.elts.append(
                ast.Starred(value=name("_", store=True), ctx=ast.Store())
            )
        out.append(ast.Assign(targets=[target], value=rule_call, type_comment=None))
        return [name(c) if c != "_" else None for c in cts]

    def _unpack_names(self, args, wanted, broadcasts: bool) -> tuple[list[str], dict]:
        """Names to unpack a cotangent tuple into: straight into ``g_x`` where nothing
        has accumulated yet, else a ``ct_x`` temporary to accumulate from."""
        names = [args[i].id for i in wanted]
        cts, direct = [], {}
        for i, a in enumerate(args):
            if i not in wanted:
                cts.append("_")
            elif (
                not broadcasts
                and names.count(a.id) == 1
                and self.state.get(self.g(a.id), NONE) == NONE
            ):
                cts.append(self.g(a.id))
                direct[i] = self.g(a.id)
            else:
                cts.append(self.fc.namer.fresh("ct_" + a.id.lstrip("_")))
        return cts, direct


def _named_params(rule_fn) -> int:
    """Number of named positional parameters after (g, ans)."""
    code = rule_fn.__code__
    return max(code.co_argcount - 2, 0)


def _hint(node: ast.AST) -> str:
    """What to do about ``obj.method(x)`` that has no rule (objects.py's resolution
    reaches only objects the differentiated call is given)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return ""
    recv, meth = ast.unparse(node.func.value), node.func.attr
    own = (
        f"if '{recv}' is an object of your own made in this function, pass it in as "
        "an argument instead: s2sad resolves the methods of the objects a call is given"
    )
    if hasattr(np, meth):
        return f"if '{recv}' is an array, call np.{meth}({recv}, ...); {own}"
    return own
