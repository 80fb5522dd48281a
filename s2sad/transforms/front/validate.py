"""Validate: reject Python that s2sad cannot differentiate, all problems at once.

Runs before any rewriting, on the user's own tree, so every problem points at
the user's file, line and column::

    def f(x):                        model.py:2:5: unsupported construct: 'try' statement
        try:                 ->          try:
            ...                          ^
                                     hint: move error handling outside the
                                     differentiated function

A problem inside a branch of an ``if`` only matters if the branch runs: given
``helper`` (how a pass names a runtime helper), ``run`` replaces the innermost
statement holding it with ``raise refused(...)``, which raises the same
located error when that statement is reached.  A ``with`` of a context manager
that changes no value (``np.errstate``, ``warnings.catch_warnings``...) is
replaced by its body.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from s2sad.errors import Problem, UnsupportedSyntaxError
from s2sad.transforms.astutil import const, walk
from s2sad.transforms.front.parse import MISSING, ParsedFunction

#: context managers that change no value: ``with cm(...):`` is differentiated as
#: its body (the forward computation does not enter them: floating-point error
#: states and warning filters are not applied inside the differentiated code)
NEUTRAL_CONTEXTS = (
    np.errstate,
    np.printoptions,
    warnings.catch_warnings,
    contextlib.nullcontext,
)

# node type -> (construct name, hint)
_UNSUPPORTED: dict[type, tuple[str, str]] = {
    ast.Try: (
        "'try' statement",
        "move error handling outside the differentiated function",
    ),
    ast.With: (
        "'with' statement",
        (
            "move the context manager outside the differentiated function (only "
            "np.errstate, np.printoptions, warnings.catch_warnings and "
            "contextlib.nullcontext, without 'as', are accepted)"
        ),
    ),
    ast.AsyncWith: ("'async with' statement", "differentiate synchronous code"),
    ast.AsyncFor: ("'async for' loop", "differentiate synchronous code"),
    ast.Await: ("'await' expression", "differentiate synchronous code"),
    # yield: generator functions are rewritten first (front/generators.py); one
    # in a nested function is rewritten when that function is compiled
    ast.Global: (
        "'global' statement",
        "pass the value in as an argument and return the result",
    ),
    ast.Nonlocal: (
        "'nonlocal' statement",
        "pass the value in as an argument and return the result",
    ),
    ast.ClassDef: ("class definition", "define the class at module level"),
    ast.Import: ("import statement", "import at module level"),
    ast.ImportFrom: ("import statement", "import at module level"),
    ast.Delete: ("'del' statement", "rebind the name instead of deleting it"),
    ast.NamedExpr: ("assignment expression (':=')", "assign on a separate line"),
    ast.SetComp: (
        "set comprehension",
        "sets are unordered: build a list (a list comprehension) instead",
    ),
    ast.Set: ("set literal", "use a list or tuple"),
    ast.Match: ("'match' statement", "use if/elif/else"),
    ast.AsyncFunctionDef: ("async function", "differentiate a plain function"),
}


class _Validator(ast.NodeVisitor):
    def __init__(self, parsed: ParsedFunction):
        self.parsed = parsed
        self.problems: list[Problem] = []
        self.loop_depth = 0
        self.branch_depth = 0  # > 0 inside a branch of an if
        self.stmts: list[ast.stmt] = []  # the statements around the node visited
        #: id(statement) -> (statement, its first problem), for branch statements
        self.deferred: dict[int, tuple[ast.stmt, Problem]] = {}
        #: the accepted 'with' statements, by id
        self.neutral: dict[int, ast.With] = {}

    def report(self, node: ast.AST, what: str, hint: str) -> None:
        problem = self.parsed.source.problem(
            node, f"unsupported construct: {what}", hint
        )
        if self.branch_depth > 0 and self.stmts:
            stmt = self.stmts[-1]
            self.deferred.setdefault(id(stmt), (stmt, problem))
        else:
            self.problems.append(problem)

    def visit(self, node: ast.AST) -> None:
        if not isinstance(node, ast.stmt):
            return super().visit(node)
        self.stmts.append(node)
        try:
            super().visit(node)
        finally:
            self.stmts.pop()

    def generic_visit(self, node: ast.AST) -> None:
        entry = _UNSUPPORTED.get(type(node))
        if entry:
            self.report(node, *entry)
        super().generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        self.branch_depth += 1
        for stmt in node.body + node.orelse:
            self.visit(stmt)
        self.branch_depth -= 1

    def visit_With(self, node: ast.With) -> None:
        if all(self._neutral(item) for item in node.items):
            self.neutral[id(node)] = node
            for stmt in node.body:
                self.visit(stmt)
            return
        self.generic_visit(node)

    def _neutral(self, item: ast.withitem) -> bool:
        """``np.errstate(...)`` and the like, read from the function's globals."""
        expr = item.context_expr
        if item.optional_vars is not None or not isinstance(expr, ast.Call):
            return False
        for sub in walk(expr):
            if isinstance(sub, (ast.Starred, ast.Lambda)):
                return False
        func, chain = expr.func, []
        while isinstance(func, ast.Attribute):
            chain.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name) or func.id in _local_names(self.parsed):
            return False
        obj = self.parsed.env.lookup(func.id)
        for attr in reversed(chain):
            obj = getattr(obj, attr, MISSING)
        return any(obj is cm for cm in NEUTRAL_CONTEXTS)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in (
            "exec",
            "eval",
            "compile",
        ):
            self.report(
                node,
                f"call to {node.func.id}()",
                "write the code out; s2sad differentiates source it can read",
            )
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            self.report(node, "annotation without a value", "assign a value")
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._check_target(node.target)
        if node.orelse:
            self.report(
                node, "'else' clause of a for loop", "use a flag variable instead"
            )
        self._loop(node)

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            self.report(
                node, "'else' clause of a while loop", "use a flag variable instead"
            )
        self._loop(node)

    def _loop(self, node: ast.AST) -> None:
        self.loop_depth += 1
        self.generic_visit(node)
        self.loop_depth -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._check_signature(node.args, node)
        outer, self.loop_depth = self.loop_depth, 0
        self.generic_visit(node)
        self.loop_depth = outer

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._check_signature(node.args, node)
        self.generic_visit(node)

    def _check_signature(self, args: ast.arguments, node: ast.AST) -> None:
        hint = (
            "list the parameters explicitly (a function the differentiated one "
            "calls may take *args and **kwargs)"
        )
        if args.vararg is not None:
            self.report(node, "'*args' parameter", hint)
        if args.kwarg is not None:
            self.report(node, "'**kwargs' parameter", hint)

    def _check_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Attribute):
            if not isinstance(target.value, ast.Name):  # obj.x = v: front/objects.py
                self.report(
                    target,
                    "assignment to an attribute of an expression",
                    "assign the object to a local first: o = a.b; o.x = ...",
                )
        elif isinstance(target, ast.Starred):
            self.report(target, "starred assignment target", "unpack by index instead")
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_target(elt)
        elif isinstance(target, ast.Subscript):
            if isinstance(target.value, (ast.Subscript, ast.Attribute)):
                # a[i][j] = v, self.x[i] = v: lowered by front/setitems.py
                self._check_target(target.value)
            elif not isinstance(target.value, ast.Name):
                self.report(
                    target,
                    "assignment into an item of an expression (f(x)[i] = ...)",
                    "assign the container to a local first: c = f(x); c[i] = ...",
                )


def _local_names(parsed: ParsedFunction) -> set[str]:
    node = parsed.node
    names = {a.arg for a in walk(node.args) if isinstance(a, ast.arg)}
    return names | {
        n.id
        for n in walk(node)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }


def run(
    parsed: ParsedFunction,
    helper: Callable[[str], ast.expr] | None = None,
    entry: bool = True,
) -> ParsedFunction:
    """Raise :class:`UnsupportedSyntaxError` listing every problem that always
    matters; rewrite the rest (see the module's docstring).

    Without ``helper``, a problem in a branch is refused like any other.  Only
    the ``entry`` function (the one differentiated) may not take ``*args`` or
    ``**kwargs``: a callee's are bound at each call site (front/calls.py).
    """
    validator = _Validator(parsed)
    for stmt in parsed.node.body:
        validator.visit(stmt)
    if entry:
        validator._check_signature(parsed.node.args, parsed.node)
    problems = validator.problems
    if helper is None:
        problems = problems + [p for _, p in validator.deferred.values()]
        problems.sort(key=lambda p: (p.line, p.col))
    if problems:
        raise UnsupportedSyntaxError(problems)
    replace: dict[int, list[ast.stmt]] = {}
    for key, (stmt, problem) in validator.deferred.items():
        replace[key] = [_refusal(stmt, problem, helper)]
    _Replace(replace, validator.neutral, _local_names(parsed)).visit(parsed.node)
    return parsed


def _refusal(stmt: ast.stmt, problem: Problem, helper) -> ast.stmt:
    """``raise refused(file, line, col, message, hint, source line)``."""
    fields = (
        problem.filename,
        problem.line,
        problem.col,
        problem.message,
        problem.hint,
        problem.source_line,
    )
    exc = ast.Call(func=helper("refused"), args=[const(v) for v in fields], keywords=[])
    return ast.copy_location(ast.Raise(exc=exc, cause=None), stmt)


def _name(var: str, store: bool = False) -> ast.Name:
    return ast.Name(id=var, ctx=ast.Store() if store else ast.Load())


def _method(var: str, method: str, *args: ast.expr) -> ast.stmt:
    func = ast.Attribute(value=_name(var), attr=method, ctx=ast.Load())
    return ast.Expr(value=ast.Call(func=func, args=list(args), keywords=[]))


def _at(stmt: ast.stmt, like: ast.AST) -> ast.stmt:
    for sub in walk(stmt):
        if isinstance(sub, (ast.expr, ast.stmt)) and not hasattr(sub, "lineno"):
            ast.copy_location(sub, like)
    return stmt


class _Replace(ast.NodeTransformer):
    """Statements replaced by ``replace[id(stmt)]``; neutral ``with`` by its body."""

    def __init__(
        self, replace: dict[int, list[ast.stmt]], neutral: set[int], taken: set[str]
    ):
        self.replace, self.neutral = replace, neutral
        count = sum(len(n.items) for n in neutral.values())
        fresh = (f"context_{i}" for i in itertools.count())
        self.names = list(itertools.islice((n for n in fresh if n not in taken), count))

    def visit(self, node: ast.AST) -> Any:
        if id(node) in self.replace:
            return self.replace[id(node)]
        if id(node) in self.neutral:
            contexts = [self.names.pop(0) for _ in node.items]
            out: list[ast.stmt] = [
                _at(ast.Assign(targets=[_name(c, True)], value=item.context_expr), node)
                for c, item in zip(contexts, node.items)
            ]
            out += [_at(_method(c, "__enter__"), node) for c in contexts]
            for stmt in node.body:
                new = self.visit(stmt)
                out.extend(new if isinstance(new, list) else [new])
            out += [
                _at(_method(c, "__exit__", const(None), const(None), const(None)), node)
                for c in reversed(contexts)
            ]
            return out
        return super().visit(node)
