"""Errors raised inside emitted code, told in terms of the user's source.

Modules loaded through the cache have the ``_s2sad_lines`` table bound (made
by ``s2sad.transforms.lines``, kept as the last line of the cached file).  When the emitted function raises, :func:`add_note`
finds the innermost emitted frame of the traceback, looks its line up in that
table and adds a note to the exception (same type, same message)::

    ValueError: matmul: Input operand 1 has a mismatch in its core dimension 0 ...
    in the gradient of loss, forward pass of model.py:12: h = x @ w

Nothing here runs unless something failed.  Light on purpose: no compiler.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from s2sad.runtime import located
from s2sad.runtime.located import PHASES, TABLE, frame_location, lookup
from s2sad.runtime.located import current_line as _current_line

located.PARSE[:] = [ast.literal_eval]

__all__ = [
    "PHASES",
    "TABLE",
    "add_note",
    "frame_location",
    "into_message",
    "lookup",
    "note",
    "user_location",
]


def user_location(exc: BaseException) -> tuple | None:
    """Where in the user's source the innermost emitted frame of ``exc`` was."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        table = frame.f_globals.get(TABLE)
        if isinstance(table, str):  # as the cache keeps it: read on first use
            table = frame.f_globals[TABLE] = ast.literal_eval(table)
        if isinstance(table, dict):
            code = frame.f_code
            hit = lookup(table, code.co_name, tb.tb_lineno - code.co_firstlineno)
            if hit is not None:
                found = hit
        tb = tb.tb_next
    return found


def _filename(module: str, qualname: str, fun: Any) -> str:
    code = getattr(fun, "__code__", None)
    if code is not None and (fun.__module__, fun.__qualname__) == (module, qualname):
        return code.co_filename
    return getattr(sys.modules.get(module), "__file__", None) or f"{module}.py"


def note(exc: BaseException, fun: Any, what: str = "gradient") -> str | None:
    """The note for ``exc`` raised by the gradient of ``fun`` (None: not located)."""
    where = user_location(exc)
    if where is None:
        return None
    module, qualname, lineno, phase, text = where
    filename = _filename(module, qualname, fun)
    lineno = _current_line(filename, lineno, text)
    name = getattr(fun, "__qualname__", getattr(fun, "__name__", "?"))
    inside = "" if qualname == name else f" (in {qualname})"
    return (
        f"in the {what} of {name}, {PHASES.get(phase, '')}"
        f"{filename}:{lineno}{inside}: {text}"
    )


def add_note(exc: BaseException, fun: Any, what: str = "gradient") -> None:
    """Add :func:`note` to ``exc`` (once); never raises."""
    try:
        text = note(exc, fun, what)
        if text is None or text in getattr(exc, "__notes__", ()):
            return
        if hasattr(exc, "add_note"):
            exc.add_note(text)
        else:  # Python 3.10: kept where 3.11's traceback would print it
            exc.__notes__ = [*getattr(exc, "__notes__", []), text]
    except Exception:  # noqa: BLE001 - a failed note must not hide the error
        pass


def into_message(exc: BaseException, fun: Any) -> BaseException:
    """``exc`` with :func:`note` appended to its message (not as a note): for
    errors whose message must name the user's line (ForeignArrayError,
    UnsupportedOperationError); other exceptions come back unchanged."""
    if type(exc).__name__ not in ("ForeignArrayError", "UnsupportedOperationError"):
        return exc
    try:
        text = note(exc, fun)
        found = user_location(exc)
        if found is not None and exc.args:
            filename = _filename(found[0], found[1], fun)
            lineno = _current_line(filename, found[2], found[4])
            if f"{filename}:{lineno}:" in str(exc.args[0]):
                return exc  # the message names the line already
        if text and exc.args and text not in str(exc.args[0]):
            exc.args = (f"{exc.args[0]}\n{text}", *exc.args[1:])
    except Exception:  # noqa: BLE001 - a failed note must not hide the error
        pass
    return exc
