"""Numbers read back from the text of a differentiated value: refused.

``str``, ``repr``, ``format`` and f-strings have no derivative (their results
are text), so the activity analysis does not follow a value into them; but
``float(str(x))`` or ``float(f"{x:.6f}")`` is ``x`` again, and a gradient that
counted it as a constant would be silently wrong.  This check follows
differentiated values into text (through those calls, f-strings, ``+`` and
string methods) and refuses a conversion back to a number whose result reaches
the output, with its line.  Text that is only printed or logged is fine."""

from __future__ import annotations

import ast
import builtins
from typing import Any

import numpy as np

from s2sad.transforms.astutil import anno, loads, walk

#: calls whose result is the text of their arguments
_TO_TEXT = (builtins.str, builtins.repr, builtins.format, builtins.ascii)
#: calls that read a number (or an array of them) back from text
_TO_NUMBER = (
    builtins.float,
    builtins.complex,
    builtins.eval,
    np.float64,
    np.float32,
    np.float16,
    np.longdouble,
    np.array,
    np.asarray,
    np.fromstring,
)


def _target(info: Any) -> Any:
    return getattr(info, "target", None) if info is not None else None


def _is(fn: Any, group: tuple) -> bool:
    return any(fn is f for f in group)


def _texty(e: ast.expr, carriers: set[str], texts: set[str]) -> bool:
    """Whether ``e`` is text made from a differentiated value: ``texts`` are
    names holding such text, ``carriers`` those and the active names."""
    if isinstance(e, ast.Name):
        return e.id in texts
    if isinstance(e, ast.JoinedStr):
        return any(
            isinstance(v, ast.FormattedValue) and bool(loads(v.value) & carriers)
            for v in e.values
        )
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Mod)):
        if isinstance(e.op, ast.Mod) and _is_text(e.left):  # "%.6f" % x
            return bool(loads(e.right) & carriers) or _texty(e.right, carriers, texts)
        return _texty(e.left, carriers, texts) or _texty(e.right, carriers, texts)
    if isinstance(e, ast.Call):
        if _is(_target(anno(e).get("call")), _TO_TEXT):
            return any(loads(a) & carriers for a in e.args)
        func = e.func  # a method of text: s.strip(), s.replace(...), "{}".format(x)
        if not isinstance(func, ast.Attribute):
            return False
        if func.attr == "format" and _is_text(func.value):
            values = [*e.args, *(k.value for k in e.keywords)]
            return any(loads(a) & carriers for a in values)
        return _texty(func.value, carriers, texts)
    return False


def _is_text(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and isinstance(e.value, str)


def _parses(c: ast.AST, carriers: set[str], texts: set[str]) -> bool:
    """Whether ``c`` reads a number back from such text (``float(s)``)."""
    return (
        isinstance(c, ast.Call)
        and _is(_target(anno(c).get("call")), _TO_NUMBER)
        and any(_texty(a, carriers, texts) for a in c.args)
    )


def problems(stmts: list[ast.stmt], active: set[str], useful: set[str], source):
    """Located problems for numbers read back from differentiated text whose
    result reaches the output (``useful``)."""
    texts: set[str] = set()
    changed = True
    while changed:
        changed = False
        carriers = set(active) | texts
        for s in stmts:
            if (
                isinstance(s, ast.Assign)
                and isinstance(s.targets[0], ast.Name)
                and s.targets[0].id not in texts
                and _texty(s.value, carriers, texts)
            ):
                texts.add(s.targets[0].id)
                changed = True
    carriers = set(active) | texts
    found = []
    for s in stmts:
        target = s.targets[0] if isinstance(s, ast.Assign) else None
        if not (isinstance(target, ast.Name) and target.id in useful):
            continue
        for c in walk(s):
            if _parses(c, carriers, texts):
                found.append(
                    source.problem(
                        c,
                        "a number read back from the text of a differentiated "
                        f"value ('{ast.unparse(c.func)}' of str, repr, format or "
                        "an f-string): its gradient would be lost",
                        "use the value itself (float(x), np.round(x, 6)); text "
                        "is fine for printing and logging",
                    )
                )
    return found
