"""The user's line of a running emitted frame: the ``_s2sad_lines`` table.

Emitted modules bind the table made by ``s2sad.transforms.lines``; these few
functions read it, for :mod:`s2sad.locate` (errors after the fact) and for the
runtime's own refusals while the code runs (``backend``: a pull to the driver).
"""

from __future__ import annotations

import linecache
import sys
from typing import Any

#: the emitted module constant (``s2sad.transforms.lines.NAME``)
TABLE = "_s2sad_lines"

#: the table's parser, set by :mod:`s2sad.locate` (the runtime imports no parser)
PARSE: list = []

PHASES = {"f": "forward pass of ", "b": "backward pass of ", "t": "at "}


def lookup(table: dict, function: str, line: int) -> tuple | None:
    """``(module, qualname, user line, phase, source text)`` for line ``line`` of the
    emitted ``function`` (counted from its ``def``, which is 0); None if unknown."""
    entry = table.get(function)
    if entry is None:
        return None
    module, qualname, def_line, runs = entry
    line += def_line
    found = None
    for start, mark in runs.items():  # in the order of emitted lines
        if start > line:
            break
        found = mark
    if found is None:
        return None
    lineno, phase = found
    return module, qualname, lineno, phase, table.get((module, lineno), "")


def frame_location(frame: Any) -> str | None:
    """``"forward pass of file.py:12: h = x @ w"`` for a running emitted frame
    (None when it is not emitted code or the line is not in its table)."""
    table = frame.f_globals.get(TABLE)
    if isinstance(table, str) and PARSE:  # as the cache keeps it: read on first use
        table = frame.f_globals[TABLE] = PARSE[0](table)
    if not isinstance(table, dict):
        return None
    code = frame.f_code
    hit = lookup(table, code.co_name, frame.f_lineno - code.co_firstlineno)
    if hit is None:
        return None
    module, _, lineno, phase, text = hit
    filename = getattr(sys.modules.get(module), "__file__", None) or f"{module}.py"
    lineno = current_line(filename, lineno, text)
    return f"{PHASES.get(phase, '')}{filename}:{lineno}: {text}"


def current_line(filename: str, lineno: int, text: str) -> int:
    """``lineno``, or where ``text`` moved to when lines were added above it."""
    if not text or linecache.getline(filename, lineno).strip() == text:
        return lineno
    hits = [
        i + 1
        for i, line in enumerate(linecache.getlines(filename))
        if line.strip() == text
    ]
    return min(hits, key=lambda i: abs(i - lineno)) if hits else lineno
