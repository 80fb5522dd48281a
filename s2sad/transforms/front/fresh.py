"""New arrays that nothing else holds: a called function may change them in place.

Python's ``p += g`` inside a called function changes the caller's array; the
emitted callee rebinds ``p`` instead.  The two are the same when the caller
passes a new array that no other name holds and nothing reads again
(``f(x * 2.0)``, ``f(np.exp(x))``, ``t = a * b; f(t)`` with ``t`` read nowhere
else): nobody can see the change.  :func:`fresh_temps` finds such arguments;
the call is marked ``"fresh"`` there (``scalar_args`` in reverse mode, from
front/aliasing.py; :func:`fresh_marks` in forward mode), which is part of the
callee's job key and lets front/inplace.py accept the change
(``ParsedFunction.fresh_params``).  Marked only where the callee changes that
parameter (:func:`changed_params`), so other calls keep sharing one job.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from typing import Any

import numpy as np

from s2sad.transforms.astutil import anno, walk
from s2sad.transforms.front.returns import FRESH_FUNCTIONS, _member


def fresh_temps(node: ast.FunctionDef) -> dict[int, set[str]]:
    """Per simple statement (by ``id``), the names it reads that hold a new array
    nothing else holds or reads: assigned once, from arithmetic or a NumPy call
    that makes a new array, earlier in the same block, and read once in the
    whole function, there (never in a loop body other than its own).  A
    called function may change such an argument in place (``p += g``): nobody
    can see the change, so rebinding ``p`` is the same thing."""
    loads: dict[str, int] = {}
    stores: dict[str, int] = {}
    for n in walk(node):
        if isinstance(n, ast.Name):
            counts = loads if isinstance(n.ctx, ast.Load) else stores
            counts[n.id] = counts.get(n.id, 0) + 1
    params = {a.arg for a in walk(node.args) if isinstance(a, ast.arg)}
    out: dict[int, set[str]] = {}
    for body in _blocks(node):
        for j, d in enumerate(body):
            if not (
                isinstance(d, ast.Assign)
                and len(d.targets) == 1
                and isinstance(d.targets[0], ast.Name)
            ):
                continue
            t = d.targets[0].id
            if t in params or stores.get(t) != 1 or loads.get(t) != 1:
                continue
            if not _new_array(d.value):
                continue
            for s in body[j + 1 :]:
                if any(isinstance(n, ast.Name) and n.id == t for n in walk(s)):
                    if not isinstance(s, _COMPOUND):
                        out.setdefault(id(s), set()).add(t)
                    break
    return out


def fresh_marks(
    node: ast.FunctionDef, stmt: ast.stmt, call: ast.Call, local_functions: dict
) -> tuple:
    """Per argument of ``call`` in ``stmt``: ``"fresh"`` (see :func:`fresh_temps`;
    only where the callee changes that parameter in place, so that other calls
    share its job) or False; ``()`` when none is (forward mode: the aliasing pass
    marks them in reverse mode)."""
    if "fresh_temps" not in anno(node):
        anno(node)["fresh_temps"] = fresh_temps(node)
    fresh = anno(node)["fresh_temps"].get(id(stmt), ())
    changed = changed_params(anno(call).get("call"), local_functions)
    marks = tuple(
        isinstance(a, ast.Name) and a.id in fresh and i in changed
        for i, a in enumerate(call.args)
    )
    return tuple("fresh" if m else False for m in marks) if any(marks) else ()


def unseen_change(
    info: Any, call: ast.Call, flags, marks, local_functions, source, used=None
):
    """The error for a call to a user function run as plain Python (its result
    is not used, or ``used`` but carries no derivative to the output) that
    changes a differentiated argument in place (``step(y, 0, v)`` with ``p[i] =
    v`` inside): the change would carry no gradient.  None when no such
    argument, or it is a new array nobody reads again (``marks``: ``"fresh"``
    per argument).  ``flags``: per argument, differentiated or not."""
    if getattr(info, "kind", "") != "user" or not any(flags):
        return None
    from s2sad.errors import UnsupportedSyntaxError

    what = ast.unparse(call.func)
    if used:  # v26, v27 = f(...): assigned, read only where no gradient flows
        why = (
            "its result carries no derivative to the differentiated output (it "
            "is read only where no gradient flows: a test, a count...)"
        )
    else:
        why = "its result is not used"
    # an immutable scalar (marks: True) cannot change: p += g rebinds p
    kept = {i for i, m in enumerate(marks) if m is True}
    changed = changed_params(info, local_functions) - kept
    for i, (a, active) in enumerate(zip(call.args, flags)):
        fresh = i < len(marks) and marks[i] == "fresh"
        if active and i in changed and not fresh and isinstance(a, ast.Name):
            if _written(a.id, source, call):
                arg, assigned = f"the differentiated array '{a.id}'", a.id
            else:  # a temporary for an expression: f({'a': w}, ...)
                arg = f"its argument {i + 1}, which holds differentiated values,"
                assigned = "y"
            return UnsupportedSyntaxError(
                source.problem(
                    call,
                    f"'{what}(...)' changes {arg} in place and {why}: the change "
                    "would carry no gradient",
                    f"make '{what}' return a new array and assign it: "
                    f"{assigned} = {what}(...) (in it: p = p.copy() before "
                    "p[i] = v)",
                )
            )
    reached = changed_params(info, local_functions, reach=True) - kept
    fresh = {i for i, m in enumerate(marks) if m == "fresh"}
    if any(i == -1 or (i < len(call.args) and i not in fresh) for i in reached):
        return UnsupportedSyntaxError(
            source.problem(
                call,
                f"'{what}(...)' is given differentiated values and changes an "
                f"object it is given in place, and {why}: s2sad runs it as plain "
                "Python, so what it writes there would carry no gradient",
                f"make '{what}' return what it computes and assign it here",
            )
        )
    return None


def _written(var: str, source, call: ast.Call) -> bool:
    """Whether the user's line names ``var`` (not a temporary the compiler made
    for an expression)."""
    line = source.line(getattr(call, "lineno", 0)) or ""
    return re.search(rf"(?<![\w.]){re.escape(var)}(?!\w)", line) is not None


def refuse_unseen_change(parsed, stmt, call, active, local_functions) -> None:
    """Forward mode: :func:`unseen_change` raised, marks from :func:`fresh_marks`."""
    flags = [isinstance(a, ast.Name) and a.id in active for a in call.args]
    marks = fresh_marks(parsed.node, stmt, call, local_functions)
    scalars = anno(call).get("scalar_args", ())  # front/aliasing.py: True
    marks = tuple(
        True if i < len(scalars) and scalars[i] is True else m
        for i, m in enumerate(marks or (False,) * len(call.args))
    )
    info = anno(call).get("call")
    used = not isinstance(stmt, ast.Expr)
    err = unseen_change(
        info, call, flags, marks, local_functions, parsed.source, used=used
    )
    if err is not None:
        raise err


def changed_params(info: Any, local_functions: dict, reach=False) -> set[int]:
    """Positions of the call's arguments whose parameter the callee changes in
    place (``p += g``, ``out=p``, ``p[i] = v``), by its source; all when it
    cannot tell.  ``reach``: also through names that hold part of a parameter
    (``a = p["x"]; a[0] = v``), attribute stores and container methods
    (``p.cache = v``, ``p.append(v)``); a method's receiver is position -1."""
    every = set(range(64))
    kind = getattr(info, "kind", "")
    if kind == "local":
        node = getattr(local_functions.get(info.target), "node", None)
        offset = 0
    elif kind == "user":
        target = info.target
        fn = getattr(target, "__func__", target)
        receiver = info.extra.get("self") is not None
        offset = 1 if inspect.ismethod(target) and not receiver else 0
        try:
            code = fn.__code__
            node = ast.parse(textwrap.dedent(inspect.getsource(code))).body[0]
        except (AttributeError, OSError, TypeError, SyntaxError, IndexError):
            return every
    else:
        return every
    if not isinstance(node, ast.FunctionDef):
        return every
    params = [a.arg for a in node.args.args]
    changed = set()
    for sub in walk(node):
        if isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
            changed.add(sub.target.id)
        for t in sub.targets if isinstance(sub, ast.Assign) else []:
            root = t
            while isinstance(root, ast.Subscript):  # p[i] = v, p[i][j] = v
                root = root.value
            if isinstance(root, ast.Name) and root is not t:
                changed.add(root.id)
        out = isinstance(sub, ast.keyword) and sub.arg == "out"
        if out and isinstance(sub.value, ast.Name):
            changed.add(sub.value.id)
    if reach:
        changed |= _reached_changes(node, params)
    return {i - offset for i, p in enumerate(params) if p in changed}


_MUTATORS = {"append", "extend", "insert", "update", "setdefault", "pop", "fill"}


def _reached_changes(node: ast.FunctionDef, params: list[str]) -> set[str]:
    """The parameters whose objects the function changes, through the names
    that hold a part of them."""
    owner = {p: p for p in params}  # name -> the parameter it holds part of
    grew = True
    while grew:
        grew = False
        for sub in walk(node):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                t, v = sub.targets[0], sub.value
                while isinstance(v, (ast.Subscript, ast.Attribute)):
                    v = v.value
                if (
                    isinstance(t, ast.Name)
                    and isinstance(v, ast.Name)
                    and v.id in owner
                    and t.id not in owner
                ):
                    owner[t.id] = owner[v.id]
                    grew = True
    out = set()
    for sub in walk(node):
        whole = []  # the name itself changes: p += g, p.append(v), out=p
        parts = sub.targets if isinstance(sub, ast.Assign) else []
        if isinstance(sub, ast.AugAssign):
            whole = [sub.target]
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            whole = [sub.func.value] if sub.func.attr in _MUTATORS else []
        elif isinstance(sub, ast.keyword) and sub.arg == "out":
            whole = [sub.value]
        for t in whole + parts:
            root = t
            while isinstance(root, (ast.Subscript, ast.Attribute)):
                root = root.value
            if not isinstance(root, ast.Name) or root.id not in owner:
                continue
            if root is not t or t in whole:
                out.add(owner[root.id])
    return out


_COMPOUND = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef)


def _blocks(node: ast.AST):
    for n in walk(node):
        for f in ("body", "orelse", "finalbody"):
            body = getattr(n, f, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body


def _new_array(value: ast.expr) -> bool:
    """Arithmetic, or a ufunc or NumPy function that makes a new array."""
    if isinstance(value, (ast.BinOp, ast.UnaryOp)):
        return True
    if not isinstance(value, ast.Call) or value.keywords:
        return False
    info = anno(value).get("call")
    target = getattr(info, "target", None)
    if getattr(info, "kind", "") != "rule":
        return False
    return isinstance(target, np.ufunc) or _member(target, FRESH_FUNCTIONS)
