"""Comments in emitted code: ``# grad of: ...`` lines travel through the AST as markers.

``ast`` has no comment node, so a pass that wants a comment emits a marker
statement (a string constant naming the comment's index in the module's list)
and :func:`restore` turns each marker line back into ``# text`` after
``ast.unparse``::

    'S2SAD_COMMENT_3'          ->      # grad of: h = np.tanh(x @ W)
"""

from __future__ import annotations

import ast
import re

PREFIX = "S2SAD_COMMENT_"
#: a marker line as ast.unparse writes it (one opening a body looks like a docstring)
_LINE = re.compile(r"^( *)(?:'|\"\"\")" + PREFIX + r"(\d+)(?:'|\"\"\")$", re.M)


def marker(index: int) -> ast.Expr:
    """The statement standing for comment number ``index``."""
    return ast.Expr(value=ast.Constant(value=f"{PREFIX}{index}"))


def is_marker(s: ast.stmt) -> bool:
    return (
        isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Constant)
        and isinstance(s.value.value, str)
        and s.value.value.startswith(PREFIX)
    )


def restore(text: str, comments: list[str]) -> str:
    """Marker lines of unparsed code -> ``# comment`` lines, indentation kept."""
    return _LINE.sub(lambda m: f"{m.group(1)}# {comments[int(m.group(2))]}", text)
