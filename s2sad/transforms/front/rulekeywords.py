"""Differentiated keyword arguments of rule calls, moved to their positions.

A rule returns one cotangent per *positional* argument, so a differentiated
value passed by keyword (``stats.t.logpdf(r, 4.0, loc=0.0, scale=s)``) must
first find its position, as Python binds it: by the primal's signature where
it can be read, and by the rule's parameters (after ``g`` and ``ans``) beyond
that (SciPy's distribution methods take ``x, *args, **kwds``; their rules name
``df``, ``loc``, ``scale`` as SciPy documents them).  A position left empty
before the last moved keyword takes its default, only when that is a plain
literal.  Called only for calls whose
keyword carries a differentiated value (the other calls keep their text), by
both modes' activity passes, which then solve again: the moved value is an
operand now.  What cannot be bound stays a keyword, refused as before.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from s2sad.runtime import registry
from s2sad.transforms.astutil import anno
from s2sad.transforms.front.arguments import _default_expr


def bind_active_keywords(calls: list[ast.Call], active: set[str]) -> bool:
    """Rewrite in place each rule call of ``calls`` with a differentiated keyword
    value whose position the rule's signature gives; True if any changed."""
    changed = False
    for c in calls:
        info = anno(c).get("call")
        if info is None or info.kind != "rule":
            continue
        if not any(_active(k, active) for k in c.keywords):
            continue
        changed |= _bind(c, info.target, active)
    return changed


def _active(k: ast.keyword, active: set[str]) -> bool:
    return k.arg is not None and isinstance(k.value, ast.Name) and k.value.id in active


def _positional(fn: Any) -> list[inspect.Parameter] | None:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    out = []
    for p in params:
        if p.kind not in kinds:
            break
        out.append(p)
    return out


def _bind(c: ast.Call, primal: Any, active: set[str]) -> bool:
    rule = registry.lookup(primal)
    if rule is None or rule.adjoint is None:
        return False
    rule_params = _positional(rule.adjoint)
    if rule_params is None or len(rule_params) < 2:
        return False
    # the positions as Python binds them: the primal's signature where it can be
    # read, the rule's (after g and ans) beyond it (SciPy's x, *args, **kwds)
    params = list(_positional(primal) or [])
    params += rule_params[2 + len(params) :]
    names = [p.name for p in params]
    given = {k.arg: k for k in c.keywords if k.arg is not None}
    last = max(
        (
            names.index(k.arg)
            for k in c.keywords
            if _active(k, active) and k.arg in names
        ),
        default=-1,
    )
    if last < len(c.args) or last >= len(rule_params) - 2:
        return False  # nothing to move, or a position the rule has no cotangent for
    args = list(c.args)
    if any(isinstance(a, ast.Starred) for a in args):
        return False
    moved = []
    for i in range(len(args), last + 1):
        if names[i] in given:
            args.append(given[names[i]].value)
            moved.append(names[i])
            continue
        if params[i].default is inspect.Parameter.empty:
            return False
        default = _default_expr(params[i].default)
        if default is None:
            return False
        args.append(ast.copy_location(default, c))
    c.args = args
    c.keywords = [k for k in c.keywords if k.arg not in moved]
    return True
