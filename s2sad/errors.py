"""Exceptions raised by s2sad.

Every error that concerns the user's code carries one or more :class:`Problem`
records.  Each renders as ``file:line:col: message``, followed by the offending
source line, a caret under the column, and a hint saying what to do instead::

    model.py:12:8: unsupported construct: 'try' statement
        try:
        ^
    hint: move the try/except outside the differentiated function
"""

from __future__ import annotations

import os
from dataclasses import dataclass


def full_tracebacks() -> bool:
    """``S2SAD_TRACEBACK_FILTERING=off``: keep s2sad's own frames in tracebacks of
    compile errors (by default they start at the call of the gradient function)."""
    return os.environ.get("S2SAD_TRACEBACK_FILTERING", "").lower() == "off"


@dataclass(frozen=True)
class Problem:
    """One located problem in the user's source."""

    filename: str
    line: int
    col: int
    message: str
    hint: str = ""
    source_line: str = ""

    def render(self) -> str:
        text = f"{self.filename}:{self.line}:{self.col}: {self.message}"
        if self.source_line:
            stripped = self.source_line.rstrip()
            indent = len(stripped) - len(stripped.lstrip())
            caret = " " * max(self.col - 1 - indent, 0)
            text += f"\n    {stripped.lstrip()}\n    {caret}^"
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class S2SADError(Exception):
    """Base class of every s2sad error."""


class LocatedError(S2SADError):
    """An error about specific places in the user's code (all reported at once)."""

    def __init__(self, problems: list[Problem] | Problem):
        if isinstance(problems, Problem):
            problems = [problems]
        self.problems = list(problems)
        super().__init__(self._render())

    def _render(self) -> str:
        head = ""
        if len(self.problems) > 1:
            head = f"{len(self.problems)} problems found:\n"
        return head + "\n\n".join(p.render() for p in self.problems)

    @property
    def filename(self) -> str:
        return self.problems[0].filename

    @property
    def line(self) -> int:
        return self.problems[0].line

    @property
    def col(self) -> int:
        return self.problems[0].col


class UnsupportedSyntaxError(LocatedError):
    """The function uses Python that s2sad cannot differentiate."""


class MissingRuleError(LocatedError):
    """A called function has neither Python source nor a registered adjoint rule."""


class UnresolvedNameError(LocatedError):
    """A name or callee could not be resolved when compiling."""


class NotRowwiseError(LocatedError):
    """``s2sad.data_parallel`` cannot show that the loss is a sum (or a mean) over
    the rows of its batch arguments; the problem names the line that mixes rows."""


class AliasingError(LocatedError):
    """An array is mutated while another name still refers to (a view of) it."""


class UnsupportedOperationError(S2SADError, ValueError):
    """The gradient code reached, while it ran, an operation s2sad does not
    differentiate (its note names the user's line): e.g. a tuple of
    differentiated values concatenated with ``+``."""


class SourceUnavailableError(S2SADError):
    """The function has no Python source that s2sad can read."""


class NonDifferentiableArgumentError(S2SADError, TypeError):
    """A gradient was requested with respect to an int, bool or other non-float value."""


class NonScalarOutputError(S2SADError, TypeError):
    """``grad`` needs a function that returns a scalar."""


class RuleError(S2SADError):
    """A rule was registered or used incorrectly."""


class ArgnumsError(S2SADError, IndexError):
    """``argnums`` names an argument the function does not have."""


class MissingDependencyError(S2SADError, ImportError):
    """A package s2sad needs for this step is not installed."""


class NonFiniteCotangentError(S2SADError, FloatingPointError):
    """``debug_nans``: a cotangent became NaN or infinite in the backward sweep.

    Raised at the first backward block whose result is not finite, naming the
    user's file, line and source line the block differentiates, and the operand
    whose cotangent went bad::

        model.py:12: the cotangent of 'a' is not finite: inf at index (0,) (1 of 3
        entries non-finite), in the gradient of:
            h = np.log(a)
    """

    def __init__(
        self, filename: str, line: int, source_line: str, operand: str, what: str
    ):
        import re

        self.filename, self.line = filename, line
        self.source_line, self.operand = source_line, operand
        label = repr(operand)
        if operand not in re.findall(r"[A-Za-z_]\w*", source_line):
            label += " (an intermediate value of this line)"
        super().__init__(
            f"{filename}:{line}: the cotangent of {label} is not finite: {what}, "
            f"in the gradient of:\n    {source_line}\n"
            "hint: the derivative of this line is infinite or undefined at these "
            "values (log or division at 0, sqrt at 0, overflow...), or a NaN came "
            "from the forward values it reads"
        )


class ForeignArrayError(S2SADError):
    """A gradient over Dask (or another library's) arrays would differ from NumPy's.

    Raised where a rule would pull a data-sized array to the driver (Dask's
    ``__array__``, or its fallback that computes a NumPy copy for a function Dask
    lacks), where a function means something else in that library, and for
    libraries s2sad has not verified.  The message names the NumPy function, the
    rule that called it and the user's line.
    """


class GlobalsChangedError(S2SADError):
    """A global that emitted code was specialised on was rebound since it was compiled.

    ``s2sad.grad`` (and the other transforms) catch it and compile again; a module
    written by ``s2sad compile`` raises it to say the file must be regenerated.
    """


class GradientCheckError(S2SADError, AssertionError):
    """``s2sad.check_grads`` found derivatives that disagree with finite differences."""
