"""Parse: a Python function object -> an ``ast.FunctionDef`` plus where it came from.

The source is read with :mod:`inspect`, parsed with gast (which smooths over the
differences between Python versions) and converted to the standard library's
``ast`` for the later passes.  Line and column numbers are shifted so they point
into the user's file, and decorators are dropped::

    @s2sad.grad                      def loss(w, x):
    def loss(w, x):         ->           return np.sum(w * x)
        return np.sum(w * x)

Free names are resolved lazily through :class:`Env` (closure cells, then the
function's globals, then builtins).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import linecache
import textwrap
from dataclasses import dataclass, field
from typing import Any

import gast

from s2sad.errors import Problem, SourceUnavailableError, UnsupportedSyntaxError
from s2sad.transforms.astutil import walk

MISSING = object()


class Env:
    """Resolves the free names of one function to Python objects."""

    def __init__(self, fn: Any = None, extra: dict[str, Any] | None = None):
        self.cells: dict[str, Any] = {}
        self.cell_objects: dict[str, Any] = {}  # where the emitted code reads them
        self.globals: dict[str, Any] = {}
        # names given to callees' default objects: where a later process finds
        # each again (["default", module, qualname, parameter], arguments.py)
        self.defaults: dict[str, list | None] = {}
        #: globals of another module that inlined code reads (front/instances.py),
        #: under a fresh name: name -> (value, module name, name there)
        self.foreign: dict[str, tuple[Any, str, str]] = {}
        if fn is not None:
            code = fn.__code__
            for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
                try:
                    self.cells[name] = cell.cell_contents
                    self.cell_objects[name] = cell
                except ValueError:  # cell not yet filled
                    pass
            self.globals = fn.__globals__
        if extra:
            self.cells.update(extra)

    def lookup(self, name: str) -> Any:
        """The object bound to ``name``, or the module-private ``MISSING`` marker."""
        if name in self.cells:
            return self.cells[name]
        if name in self.foreign:
            return self.foreign[name][0]
        if name in self.globals:
            return self.globals[name]
        return getattr(builtins, name, MISSING)

    def has(self, name: str) -> bool:
        return self.lookup(name) is not MISSING


@dataclass
class SourceInfo:
    """Where a function's source lives, for error messages and comments."""

    filename: str
    qualname: str
    module: str

    def line(self, lineno: int) -> str:
        return linecache.getline(self.filename, lineno).rstrip("\n")

    def problem(self, node: ast.AST, message: str, hint: str = "") -> Problem:
        line = getattr(node, "lineno", 0)
        col = getattr(node, "col_offset", 0) + 1
        return Problem(self.filename, line, col, message, hint, self.line(line))


@dataclass
class ParsedFunction:
    node: ast.FunctionDef
    source: SourceInfo
    env: Env
    fn: Any = None
    example_args: dict[str, Any] = field(default_factory=dict)
    #: parameters every call passes an immutable scalar (a callee: from its call
    #: site's static facts, see front/aliasing.py); the key of its job says so
    scalar_params: set[str] = field(default_factory=set)
    #: parameters every call passes a new array that nothing else holds or reads
    #: again (front/returns.py ``fresh_temps``): changed in place, unseen
    fresh_params: set[str] = field(default_factory=set)
    #: a local function compiled as a callee: the enclosing function's local functions
    local_functions: dict[str, Any] = field(default_factory=dict)


def function_source(fn: Any) -> tuple[str, int]:
    """(dedented source, first line number in its file) of a Python function."""
    try:
        # the code that runs: a decorated function's wrapper, never what its
        # __wrapped__ points to (which inspect follows for a function object)
        lines, first = inspect.getsourcelines(getattr(fn, "__code__", fn))
    except (OSError, TypeError) as exc:
        name = getattr(fn, "__qualname__", repr(fn))
        raise SourceUnavailableError(
            f"cannot read the source of {name}{_no_source_why(fn, exc)}.\n"
            "hint: s2sad needs functions defined in a .py file: put it in one "
            "and import it (IPython and Jupyter keep the source too, a plain "
            "`python` prompt does not); for a compiled function, register a rule "
            "with @s2sad.adjoint(fn)"
        ) from None
    return "".join(lines), max(first, 1)


def _no_source_why(fn: Any, exc: Exception) -> str:
    """Where ``fn`` was defined, and why that leaves no source to read."""
    code = getattr(fn, "__code__", None)
    file = getattr(code, "co_filename", "")
    where = f" (defined at {file}:{code.co_firstlineno})" if code else ""
    if file == "<string>":
        return f"{where}: code run by `python -c` or exec() keeps no source text"
    if file == "<stdin>":
        return f"{where}: a plain `python` prompt keeps no source text"
    return f"{where}: {exc}"


def parse_function(fn: Any) -> ParsedFunction:
    """Read, parse and locate ``fn``; resolve its environment."""
    text, first = function_source(fn)
    indent = len(text) - len(text.lstrip(" \t"))
    tree = _parse(textwrap.dedent(text), fn)
    _shift(tree, first - 1, indent)
    code = fn.__code__
    source = SourceInfo(code.co_filename, fn.__qualname__, fn.__module__ or "__main__")
    node = _find_def(tree, fn, source)
    node.decorator_list = []
    return ParsedFunction(node, source, Env(fn), fn)


def _parse(text: str, fn: Any) -> ast.Module:
    try:
        return gast.gast_to_ast(gast.parse(text))
    except SyntaxError:
        # A lambda's source line may be an incomplete statement (e.g. inside a
        # call); parse the smallest suffix that is an expression.
        stripped = text.strip()
        start = stripped.find("lambda")
        while start >= 0:
            for end in range(len(stripped), start, -1):
                try:
                    return gast.gast_to_ast(gast.parse(stripped[start:end]))
                except SyntaxError:
                    continue
            start = stripped.find("lambda", start + 1)
        raise SourceUnavailableError(
            f"cannot parse the source of {fn.__qualname__}"
        ) from None


def _shift(tree: ast.AST, lines: int, cols: int) -> None:
    for node in walk(tree):
        if hasattr(node, "lineno"):
            node.lineno += lines
            node.col_offset += cols
            if getattr(node, "end_lineno", None) is not None:
                node.end_lineno += lines
                node.end_col_offset += cols


def _find_def(tree: ast.Module, fn: Any, source: SourceInfo) -> ast.FunctionDef:
    if fn.__name__ == "<lambda>":
        lambdas = [n for n in walk(tree) if isinstance(n, ast.Lambda)]
        wanted = fn.__code__.co_varnames[: fn.__code__.co_argcount]
        lambdas = [
            lam for lam in lambdas if tuple(a.arg for a in lam.args.args) == wanted
        ]
        if len(lambdas) != 1:
            raise SourceUnavailableError(
                f"{source.filename}:{fn.__code__.co_firstlineno}: cannot tell which lambda "
                "on this line to differentiate.\nhint: give it a name with def"
            )
        return lambda_to_def(lambdas[0], "lambda_fn")
    code = fn.__code__  # functools.wraps copies __name__: the code knows its own
    for node in walk(tree):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name == code.co_name
            and min([node.lineno] + [d.lineno for d in node.decorator_list])
            == code.co_firstlineno
        ):
            if isinstance(node, ast.AsyncFunctionDef):
                raise UnsupportedSyntaxError(
                    source.problem(
                        node,
                        "unsupported construct: async function",
                        "differentiate a plain (non-async) function",
                    )
                )
            return node
    raise SourceUnavailableError(f"cannot find the definition of {fn.__qualname__}")


def lambda_to_def(lam: ast.Lambda, name: str) -> ast.FunctionDef:
    """``lambda a, b: e`` -> ``def name(a, b): return e`` (locations kept)."""
    ret = ast.copy_location(ast.Return(value=lam.body), lam.body)
    node = ast.FunctionDef(
        name=name,
        args=lam.args,
        body=[ret],
        decorator_list=[],
        returns=None,
        type_comment=None,
        type_params=[],
    )
    return ast.copy_location(node, lam)
