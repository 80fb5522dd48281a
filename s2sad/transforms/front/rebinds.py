"""``v6 = v4; v6 *= 0.5``: an augmented assignment that rebinds a number.

front/aliasing.py refuses reading ``v4`` after ``v6 *= 0.5`` changed in place
the array both names hold, unless it knows ``v6`` holds an immutable number (a
NumPy scalar, a float), which ``*=`` rebinds: then nothing is shared.  Where
it cannot know (``v4`` an element of the tuple a user function returns), the
emitted code, which rebinds, gives Python's result for a number and a wrong
one for an array.  :func:`run` checks again with the augmented assignments
the refusals name taken as rebinding; if that leaves no problem, each gets a
run-time check in front (``check_rebinds(v6, ...)``, runtime/iteration.py),
which raises the refusal the first check made, at the same place, when ``v6``
holds anything but a number when it runs::

    v6 = v4                            v6 = v4
    v6 *= 0.5                 ->       check_rebinds(v6, (("m.py", 14, 19, "'v4' shares ...", ...),))
    return 1.35 * v4                   v6_1 = v6 * 0.5
                                       return 1.35 * v4

Otherwise the first check's refusal stands, and nothing is changed.
"""

from __future__ import annotations

import ast
import re

from s2sad.errors import AliasingError
from s2sad.runtime.iteration import check_rebinds
from s2sad.transforms.astutil import anno, const, copy_loc, name
from s2sad.transforms.front.calls import CallInfo

_LINE = re.compile(r"modified in place at line (\d+)")
_LISTS = ("body", "orelse", "finalbody")


def run(module, check, node: ast.FunctionDef, *args) -> None:
    """``check(node, *args)`` (front/aliasing.py's ``run``), taking the augmented
    assignments its refusals name as rebinding when that clears them all."""
    try:
        check(node, *args)
        return
    except AliasingError as exc:
        first = exc
    culprits: dict[int, tuple[ast.Assign, list]] = {}  # with the problems it made
    for problem in first.problems:
        found = _LINE.search(problem.message)
        line = int(found.group(1)) if found else None
        for s in ast.walk(node):
            if (
                isinstance(s, ast.Assign)
                and anno(s).get("augassign")
                and s.lineno == line
            ):
                culprits.setdefault(id(s), (s, []))[1].append(problem)
    if not culprits:
        raise first
    for s, _ in culprits.values():
        anno(s)["rebinds"] = True
    try:
        check(node, *args)
    except AliasingError:
        for s, _ in culprits.values():
            anno(s).pop("rebinds", None)
        raise first from None
    for s, problems in culprits.values():
        _insert_before(node, s, _check(module, s, problems))


def _check(module, s: ast.Assign, problems: list) -> ast.stmt:
    """``check_rebinds(v, problems)`` for ``s``: ``v = v * t`` (``v += t``
    normalized; the target may be a new SSA name)."""
    v = s.value
    changed = (
        v.left.id
        if isinstance(v, ast.BinOp) and isinstance(v.left, ast.Name)
        else s.targets[0].id
    )
    fields = tuple((p.filename, p.line, p.col, p.message, p.hint) for p in problems)
    func = module.rule_ref(check_rebinds)
    anno(func)["rule_ref"] = True  # forward mode renames it with its import
    call = ast.Call(func=func, args=[name(changed), const(fields)], keywords=[])
    anno(call)["call"] = CallInfo("rule", check_rebinds)
    stmt = ast.Expr(value=call)
    for n in ast.walk(stmt):
        copy_loc(n, s)
    return stmt


def _insert_before(root: ast.AST, s: ast.stmt, new: ast.stmt) -> None:
    for n in ast.walk(root):
        for field in _LISTS:
            body = getattr(n, field, None)
            if isinstance(body, list) and any(x is s for x in body):
                k = next(i for i, x in enumerate(body) if x is s)
                body.insert(k, new)
                return
