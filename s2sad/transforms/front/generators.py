"""Generator functions become functions that return the list of what they yield.

Runs first, before validation, on every callee: a function whose body (not a
nested function's) holds ``yield`` or ``yield from`` is rewritten to collect
its values into a fresh list and return it::

    def unpack_layers(params):        def unpack_layers(params):
        for W, b in params:               yielded = []
            yield W, b           ->       for W, b in params:
                                              yielded.append((W, b))
                                          return yielded

The caller then iterates a list instead of a generator: ``for``, ``list()``,
``zip``, ``sum`` and unpacking see the same values in the same order, and
the list is differentiated like any other.  The generator runs to its end
when it is called, not step by step as its consumer asks; so these are
refused, each at its line and with a rewrite: the differentiated function
itself being a generator (its output must be a scalar), ``yield`` used as a
value (``x = yield v``, sent values), and a ``while True`` loop with no
``break`` or ``return`` (an endless generator that only an early ``break``
of its consumer stops).
"""

from __future__ import annotations

import ast
import inspect

from s2sad.errors import UnsupportedSyntaxError
from s2sad.transforms.astutil import walk, without_docstring
from s2sad.transforms.front import parse

_YIELDS = (ast.Yield, ast.YieldFrom)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _own_nodes(node: ast.AST):
    """The nodes of ``node``'s body, not descending into nested scopes."""
    for child in ast.iter_child_nodes(node):
        yield child
        if not isinstance(child, _SCOPES):
            yield from _own_nodes(child)


def is_generator(node: ast.FunctionDef) -> bool:
    return any(isinstance(sub, _YIELDS) for sub in _own_nodes(node))


def materialize_calls(parsed) -> None:
    """Wrap each call of a generator function in ``list(...)``.

    A compiled generator callee returns a list, but a call the compiler leaves
    to Python (its arguments carry no derivative) would return a lazy
    generator, which the emitted code indexes (``zip``, unpacking); both give a
    list this way, with the same values.
    """
    local = {
        n.id
        for n in walk(parsed.node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    local |= {a.arg for a in walk(parsed.node) if isinstance(a, ast.arg)}

    def resolve(func: ast.expr):
        if isinstance(func, ast.Name):
            return parse.MISSING if func.id in local else parsed.env.lookup(func.id)
        if isinstance(func, ast.Attribute):
            root = resolve(func.value)
            return getattr(root, func.attr, parse.MISSING)
        return parse.MISSING

    class Wrap(ast.NodeTransformer):
        def visit_Call(self, call: ast.Call) -> ast.expr:
            self.generic_visit(call)
            if not inspect.isgeneratorfunction(resolve(call.func)):
                return call
            wrapped = ast.Call(ast.Name("list", ast.Load()), [call], [])
            return ast.copy_location(wrapped, call)

    Wrap().visit(parsed.node)


def run(parsed, top: bool) -> None:
    """Rewrite ``parsed.node`` in place when it is a generator function, and
    calls of generator functions in it as lists."""
    materialize_calls(parsed)
    node = parsed.node
    if not is_generator(node):
        return
    problems = []
    if top:
        first = next(sub for sub in _own_nodes(node) if isinstance(sub, _YIELDS))
        problems.append(
            parsed.source.problem(
                first,
                f"the differentiated function '{node.name}' is a generator",
                "differentiate a function that returns a scalar, e.g. "
                f"sum({node.name}(...)) written in a function of its own",
            )
        )
    statements = {
        id(stmt.value)
        for stmt in _own_nodes(node)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, _YIELDS)
    }
    for sub in _own_nodes(node):
        if isinstance(sub, _YIELDS) and id(sub) not in statements:
            problems.append(
                parsed.source.problem(
                    sub,
                    "unsupported construct: 'yield' used as a value",
                    "s2sad runs a generator function to its end when it is "
                    "called, so no value can be sent into it; pass the value "
                    "as an argument instead",
                )
            )
        if isinstance(sub, ast.While) and _endless(sub):
            problems.append(
                parsed.source.problem(
                    sub,
                    "unsupported construct: an endless generator "
                    "('while True' with no break or return)",
                    "s2sad runs a generator function to its end when it is "
                    "called; give the loop an end (a count or a condition)",
                )
            )
    if problems:
        raise UnsupportedSyntaxError(problems)
    out = _fresh(node, "yielded")
    body = _Rewriter(out).block(node.body)
    start = len(node.body) - len(without_docstring(node.body))
    init = ast.Assign(
        targets=[ast.Name(out, ast.Store())], value=ast.List([], ast.Load())
    )
    body.insert(start, init)
    body.append(ast.Return(ast.Name(out, ast.Load())))
    node.body = body
    for stmt in walk(node):
        if not hasattr(stmt, "lineno") and isinstance(stmt, (ast.stmt, ast.expr)):
            ast.copy_location(stmt, node)
    ast.fix_missing_locations(node)


def _endless(loop: ast.While) -> bool:
    if not (isinstance(loop.test, ast.Constant) and loop.test.value is True):
        return False
    exits = (ast.Break, ast.Return)
    return not any(isinstance(sub, exits) for sub in _own_nodes(loop))


def _fresh(node: ast.FunctionDef, base: str) -> str:
    used = {n.id for n in walk(node) if isinstance(n, ast.Name)}
    used |= {a.arg for a in walk(node) if isinstance(a, ast.arg)}
    name, k = base, 0
    while name in used:
        k += 1
        name = f"{base}_{k}"
    return name


class _Rewriter:
    """``yield v`` -> ``out.append(v)``; ``yield from xs`` -> a loop of appends;
    ``return`` (with or without a value) -> ``return out``."""

    def __init__(self, out: str):
        self.out = out

    def append(self, value: ast.expr, at: ast.AST) -> ast.stmt:
        call = ast.Call(
            func=ast.Attribute(ast.Name(self.out, ast.Load()), "append", ast.Load()),
            args=[value],
            keywords=[],
        )
        return ast.copy_location(ast.Expr(call), at)

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            out.extend(self.statement(stmt))
        return out

    def statement(self, stmt: ast.stmt) -> list[ast.stmt]:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Yield):
            value = stmt.value.value or ast.Constant(None)
            return [self.append(value, stmt)]
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.YieldFrom):
            item = _fresh_item(stmt)
            loop = ast.For(
                target=ast.Name(item, ast.Store()),
                iter=stmt.value.value,
                body=[self.append(ast.Name(item, ast.Load()), stmt)],
                orelse=[],
            )
            return [ast.copy_location(loop, stmt)]
        if isinstance(stmt, ast.Return):  # a copy: appends after it never run
            copy = ast.Call(
                ast.Name("list", ast.Load()), [ast.Name(self.out, ast.Load())], []
            )
            return [ast.copy_location(ast.Return(copy), stmt)]
        if isinstance(stmt, _SCOPES):
            return [stmt]
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                setattr(stmt, field, self.block(inner))
        for handler in getattr(stmt, "handlers", []) or []:
            handler.body = self.block(handler.body)
        for case in getattr(stmt, "cases", []) or []:
            case.body = self.block(case.body)
        return [stmt]


def _fresh_item(stmt: ast.stmt) -> str:
    return f"yielded_item_{stmt.lineno}_{stmt.col_offset}"
