"""Validate: reject Python that s2sad cannot differentiate, all problems at once.

Runs before any rewriting, on the user's own tree, so every problem points at
the user's file, line and column::

    def f(x):                        model.py:2:5: unsupported construct: 'try' statement
        try:                 ->          try:
            ...                          ^
                                     hint: move error handling outside the
                                     differentiated function
"""

from __future__ import annotations

import ast

from s2sad.errors import Problem, UnsupportedSyntaxError
from s2sad.transforms.front.parse import ParsedFunction

# node type -> (construct name, hint)
_UNSUPPORTED: dict[type, tuple[str, str]] = {
    ast.Try: (
        "'try' statement",
        "move error handling outside the differentiated function",
    ),
    ast.With: (
        "'with' statement",
        "move the context manager outside the differentiated function",
    ),
    ast.AsyncWith: ("'async with' statement", "differentiate synchronous code"),
    ast.AsyncFor: ("'async for' loop", "differentiate synchronous code"),
    ast.Await: ("'await' expression", "differentiate synchronous code"),
    ast.Yield: ("generator ('yield')", "return a list instead of yielding values"),
    ast.YieldFrom: (
        "generator ('yield from')",
        "return a list instead of yielding values",
    ),
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

    def report(self, node: ast.AST, what: str, hint: str) -> None:
        self.problems.append(
            self.parsed.source.problem(node, f"unsupported construct: {what}", hint)
        )

    def generic_visit(self, node: ast.AST) -> None:
        entry = _UNSUPPORTED.get(type(node))
        if entry:
            self.report(node, *entry)
        super().generic_visit(node)

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
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                self.report(
                    arg,
                    "star-argument in a call ('*args')",
                    "pass the arguments one by one",
                )
        for kw in node.keywords:
            if kw.arg is None:
                self.report(
                    kw.value,
                    "keyword unpacking in a call ('**kwargs')",
                    "pass the keyword arguments one by one",
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
        if args.vararg is not None:
            self.report(node, "'*args' parameter", "list the parameters explicitly")
        if args.kwarg is not None:
            self.report(node, "'**kwargs' parameter", "list the parameters explicitly")

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
            if not isinstance(target.value, ast.Name):
                self.report(
                    target,
                    "assignment into a nested item (a[i][j] = ...)",
                    "index with a tuple (a[i, j] = ...) or assign to a local first",
                )


def run(parsed: ParsedFunction) -> ParsedFunction:
    """Raise :class:`UnsupportedSyntaxError` listing every problem, or return unchanged."""
    validator = _Validator(parsed)
    for stmt in parsed.node.body:
        validator.visit(stmt)
    validator._check_signature(parsed.node.args, parsed.node)
    if validator.problems:
        raise UnsupportedSyntaxError(validator.problems)
    return parsed
