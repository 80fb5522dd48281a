"""Instantiate adjoint rules: inline a one-expression rule as source, or call it.

A rule whose body is a single ``return (e0, e1, ...)`` that uses nothing but its
parameters and ``np`` is inlined, so the emitted code reads like hand-written
NumPy::

    @adjoint(np.tanh)                      # grad of: y = np.tanh(h)
    def d_tanh(g, ans, x):        ->       g_h = g_y * (1.0 - y * y)
        return (g * (1.0 - ans * ans),)

Any other rule is called by name and its tuple unpacked.
"""

from __future__ import annotations

import ast
import copy
import functools
import inspect
import textwrap
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class InlineForm:
    params: tuple[str, ...]
    defaults: dict
    results: tuple[ast.expr, ...]
    varargs: bool = False  # extra positional arguments are accepted (and unused)
    varkw: bool = False  # extra keyword arguments are accepted (and unused)


@functools.lru_cache(maxsize=None)
def inline_form(rule_fn) -> InlineForm | None:
    """The parsed single-return form of ``rule_fn``, or None if it cannot be inlined."""
    try:
        src = textwrap.dedent(inspect.getsource(rule_fn))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError):
        return None
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        return None
    body = fn.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    ):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    value = body[0].value
    if not isinstance(value, ast.Tuple):
        return None
    args = fn.args
    if args.kwonlyargs or args.posonlyargs:
        return None
    params = tuple(a.arg for a in args.args)
    defaults = {}
    for a, d in zip(args.args[len(args.args) - len(args.defaults) :], args.defaults):
        if not isinstance(d, ast.Constant):
            return None
        defaults[a.arg] = d.value
    used = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    if used - set(params) - {"np"}:
        return None  # uses a helper, a star parameter or a global: call it instead
    if rule_fn.__globals__.get("np") is not np and "np" in used:
        return None
    if any(isinstance(n, (ast.Lambda, ast.NamedExpr)) for n in ast.walk(value)):
        return None
    return InlineForm(
        params,
        defaults,
        tuple(value.elts),
        args.vararg is not None,
        args.kwarg is not None,
    )


class _Substitute(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, ast.expr]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name):
        if node.id in self.mapping:
            return copy.deepcopy(self.mapping[node.id])
        return node


def instantiate(
    rule_fn,
    g: ast.expr,
    ans: ast.expr,
    args: list[ast.expr],
    kwargs: dict[str, ast.expr],
) -> list[ast.expr | None] | None:
    """Cotangent expressions for each positional arg (None: zero), or None if not inlinable."""
    form = inline_form(rule_fn)
    if form is None or (len(form.params) < len(args) + 2 and not form.varargs):
        return None
    mapping: dict[str, ast.expr] = {form.params[0]: g, form.params[1]: ans}
    for p, a in zip(form.params[2:], args):
        mapping[p] = a
    for p in form.params[2 + len(args) :]:
        if p in kwargs:
            mapping[p] = kwargs[p]
        elif p in form.defaults:
            mapping[p] = ast.Constant(value=form.defaults[p])
        else:
            return None
    if set(kwargs) - set(form.params) and not form.varkw:
        return None
    out: list[ast.expr | None] = []
    for i in range(len(args)):
        if i >= len(form.results):
            out.append(None)
            continue
        expr = form.results[i]
        if isinstance(expr, ast.Constant) and expr.value is None:
            out.append(None)
        else:
            out.append(_Substitute(mapping).visit(copy.deepcopy(expr)))
    return out


@functools.lru_cache(maxsize=None)
def definite_positions(rule_fn) -> frozenset[int]:
    """Positions of the rule's result that are never ``None`` at run time.

    Conservative reading of the source: every ``return`` must be a tuple literal,
    and position ``i`` must contain no ``None`` constant (nor be a name that is
    ever assigned something containing ``None``).
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(rule_fn)))
    except (OSError, TypeError, SyntaxError):
        return frozenset()
    fn = tree.body[0]
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    if not returns or not all(isinstance(r.value, ast.Tuple) for r in returns):
        return frozenset()
    maybe_none_names = {
        t.id
        for n in ast.walk(fn)
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name) and n.value is not None and _has_none(n.value)
    }
    width = min(len(r.value.elts) for r in returns)
    out = set()
    for i in range(width):
        elts = [r.value.elts[i] for r in returns]
        if any(
            _has_none(e) or (isinstance(e, ast.Name) and e.id in maybe_none_names)
            for e in elts
        ):
            continue
        out.add(i)
    return frozenset(out)


def _has_none(e: ast.expr) -> bool:
    return any(isinstance(n, ast.Constant) and n.value is None for n in ast.walk(e))
