"""Which line of the user's source each emitted statement comes from.

The reverse and forward passes stamp the statements they emit for a user
statement with ``anno(stmt)["user_line"] = (source, lineno, phase)``; after emit
has formatted the module, :func:`table` pairs the stamps with the final line
numbers.  ``pipeline.compile_function(..., line_table=True)`` hands the table
to the cache, which keeps it as the last line of the cached file (the emitted
source is unchanged) and binds it as ``_s2sad_lines``; ``s2sad.locate`` reads
it when the emitted code raises.  Statements without a stamp take their
enclosing statement's.
"""

from __future__ import annotations

import ast
from typing import Any

from s2sad.transforms import comments
from s2sad.transforms.astutil import anno

#: the phases, as the table spells them
FORWARD, BACKWARD, TANGENT = "forward", "backward", "tangent"


def stamp(stmts: list[ast.stmt], source: Any, lineno: int | None, phase: str) -> None:
    """Mark ``stmts`` (not their bodies) as made for ``source``'s line ``lineno``."""
    if lineno is None:
        return
    for s in stmts:
        anno(s).setdefault("user_line", (source, lineno, phase))


def _walk(body: list[ast.stmt], inherited, out: list) -> None:
    """Pre-order over statements (comment markers and nested functions left out)."""
    for s in body:
        if comments.is_marker(s):
            continue
        mark = getattr(s, "_s2sad", {}).get("user_line", inherited)
        out.append((s, mark))
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(s, field, None)
            if isinstance(inner, list):
                _walk(inner, mark, out)


def marks(functions: list[ast.stmt]) -> list[list]:
    """Per emitted function: the stamps of its statements, in pre-order.

    Other module statements (``f.buffer_results = {...}`` of the buffered
    form) have no entry: the table pairs these with the text's functions."""
    out = []
    for f in functions:
        if isinstance(f, ast.FunctionDef):
            stmts: list = []
            _walk(f.body, None, stmts)
            out.append([m for _, m in stmts])
    return out


def table(functions: list[ast.stmt], text: str) -> dict | None:
    """The line table of the formatted module ``text`` (None when nothing maps)::

        {
            "f_value_and_grad": ("model", "f", 10, {14: (8, "f"), 16: None, ...}),
            ("model", 8): "h = x @ w",  # the user's source lines, by module and line
        }

    Per emitted function: the user function's module and qualname, the emitted
    ``def`` line, and from which emitted line on each user line (and phase: "f"
    forward sweep, "b" backward sweep, "t" forward mode) runs.  Black keeps the
    AST, so the statements of ``text`` pair up one by one with the stamped
    ones; there is no table if they do not.
    """
    before = marks(functions)
    tree = ast.parse(text)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(defs) != len(before):
        return None
    out: dict = {}
    texts: dict[tuple, str] = {}
    for f, stamps in zip(defs, before):
        stmts: list = []
        _walk(f.body, None, stmts)
        if len(stmts) != len(stamps):
            return None
        runs: dict[int, Any] = {}
        last: Any = None
        owner = None
        for (s, _), mark in zip(stmts, stamps):
            here = None
            if mark is not None:
                source, lineno, phase = mark
                owner = owner or (source.module, source.qualname)
                if (source.module, source.qualname) == owner:
                    here = (lineno, phase[0])
                    texts.setdefault(
                        (source.module, lineno), source.line(lineno).strip()
                    )
            if here != last:
                runs[s.lineno] = here
                last = here
        if owner is not None:
            out[f.name] = (*owner, f.lineno, runs)
    return {**out, **texts} if out else None


#: the name the table is bound to in the emitted module (``s2sad.locate`` reads it)
NAME = "_s2sad_lines"
