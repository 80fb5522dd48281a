"""Comprehensions and generator expressions become explicit loops.

Runs at the start of desugar, on the user's tree (hygiene has already renamed
the names the emitted code needs).  Each list comprehension, generator
expression or dict comprehension is computed, before the statement that holds
it, into a fresh list (or dict) by a loop whose variables get fresh names
(Python gives a comprehension its own scope: its variables neither leak nor
clobber outer names), and the statement reads that name::

    s = sum(f(v) for v in xs if v > 0)        gen = []
                                              for v_1 in xs:
                                      ->          if v_1 > 0:
                                                      gen.append(f(v_1))
                                              s = sum(gen)

A generator consumed by ``sum``, ``max``, ``tuple``, ``np.stack``... gives the
same values as the list.  Nested ``for`` clauses become nested loops and
``if`` clauses nested ``if`` statements; a comprehension inside another is
hoisted into the outer loop's body.  A ``while`` test holding one is
recomputed on every iteration (``while True:`` ... ``if not test: break``).

Refused (with a hint): a comprehension that Python might not evaluate (a
branch of ``a if c else b``, an operand of ``and``/``or`` after the first, a
``lambda`` body), set comprehensions and ``async`` comprehensions.
"""

from __future__ import annotations

import ast

from s2sad.errors import UnsupportedSyntaxError
from s2sad.transforms.astutil import Namer, copy_loc, name, walk

_COMPS = (ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)
_STMT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")


def run(node: ast.FunctionDef, namer: Namer, source) -> ast.FunctionDef:
    """Rewrite ``node`` in place; raise :class:`UnsupportedSyntaxError` for the
    comprehensions that cannot be hoisted."""
    if not any(isinstance(sub, _COMPS) for sub in walk(node)):
        return node
    rewriter = _Rewriter(namer, source)
    node.body = rewriter.block(node.body)
    if rewriter.problems:
        raise UnsupportedSyntaxError(rewriter.problems)
    return node


class _Rewriter:
    def __init__(self, namer: Namer, source):
        self.namer, self.source = namer, source
        self.problems: list = []

    def problem(self, node: ast.AST, what: str, hint: str) -> None:
        self.problems.append(
            self.source.problem(node, f"unsupported construct: {what}", hint)
        )

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            out.extend(self.stmt(stmt))
        return out

    def stmt(self, stmt: ast.stmt) -> list[ast.stmt]:
        for field in _STMT_LISTS:
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                setattr(stmt, field, self.block(inner))
        if isinstance(stmt, ast.While) and _has_comp(stmt.test):
            return self.while_loop(stmt)
        hoister = _Hoister(self)
        for field, value in ast.iter_fields(stmt):
            if field in _STMT_LISTS:
                continue
            if isinstance(value, ast.AST):
                setattr(stmt, field, hoister.visit(value))
            elif isinstance(value, list):
                setattr(
                    stmt,
                    field,
                    [hoister.visit(v) if isinstance(v, ast.AST) else v for v in value],
                )
        return [*hoister.before, stmt]

    def while_loop(self, stmt: ast.While) -> list[ast.stmt]:
        """``while test:`` -> ``while True:`` computing the test first each time."""
        hoister = _Hoister(self)
        test = hoister.visit(stmt.test)
        leave = copy_loc(
            ast.If(
                test=ast.UnaryOp(op=ast.Not(), operand=test),
                body=[ast.Break()],
                orelse=[],
            ),
            stmt.test,
        )
        stmt.test = copy_loc(ast.Constant(value=True), stmt.test)
        stmt.body = [*hoister.before, leave, *stmt.body]
        return [stmt]

    def expand(self, comp: ast.expr) -> tuple[list[ast.stmt], str]:
        """The statements computing ``comp`` into a fresh name, and the name."""
        kind = "table" if isinstance(comp, ast.DictComp) else "items"
        result = self.namer.fresh(kind)
        bound = sorted(
            {
                n.id
                for gen in comp.generators
                for n in walk(gen.target)
                if isinstance(n, ast.Name)
            }
        )
        mapping = {old: self.namer.fresh(old) for old in bound}
        first = comp.generators[0]
        for gen in comp.generators:
            gen.target = _rename(gen.target, mapping)
            gen.ifs = [_rename(c, mapping) for c in gen.ifs]
            if gen is not first:
                gen.iter = _rename(gen.iter, mapping)
        if isinstance(comp, ast.DictComp):
            init: ast.expr = ast.Dict(keys=[], values=[])
            key, value = _rename(comp.key, mapping), _rename(comp.value, mapping)
            inner: ast.stmt = ast.Assign(
                targets=[ast.Subscript(value=name(result), slice=key, ctx=ast.Store())],
                value=value,
                lineno=None,
            )
        else:
            init = ast.List(elts=[], ctx=ast.Load())
            append = ast.Attribute(value=name(result), attr="append", ctx=ast.Load())
            elt = _rename(comp.elt, mapping)
            inner = ast.Expr(value=ast.Call(func=append, args=[elt], keywords=[]))
        body: list[ast.stmt] = [copy_loc(inner, comp)]
        for gen in reversed(comp.generators):
            for cond in reversed(gen.ifs):
                body = [copy_loc(ast.If(test=cond, body=body, orelse=[]), cond)]
            loop = ast.For(
                target=_store(gen.target), iter=gen.iter, body=body, orelse=[]
            )
            loop.type_comment = None
            body = [copy_loc(loop, gen.iter)]
        start = copy_loc(
            ast.Assign(targets=[name(result, store=True)], value=init, lineno=None),
            comp,
        )
        return [start, *self.block(body)], result


class _Hoister(ast.NodeTransformer):
    """Replaces the comprehensions of one statement's expressions by names,
    collecting the statements that compute them (``before``)."""

    def __init__(self, rewriter: _Rewriter):
        self.rewriter = rewriter
        self.before: list[ast.stmt] = []
        self.unsafe: str | None = None  # why a comprehension here might not run

    def _comp(self, node: ast.expr) -> ast.expr:
        rw = self.rewriter
        if isinstance(node, ast.SetComp):
            rw.problem(
                node,
                "set comprehension",
                "sets are unordered: build a list (a list comprehension) instead",
            )
            return node
        if any(gen.is_async for gen in node.generators):
            rw.problem(node, "async comprehension", "differentiate synchronous code")
            return node
        if self.unsafe is not None:
            rw.problem(
                node,
                f"comprehension {self.unsafe}",
                "Python may not evaluate it there; compute it on its own line "
                "(inside an 'if' statement when it must not always run)",
            )
            return node
        stmts, result = rw.expand(node)
        self.before.extend(stmts)
        return copy_loc(name(result), node)

    visit_ListComp = visit_GeneratorExp = visit_DictComp = visit_SetComp = _comp

    def _guarded(self, node: ast.AST, why: str) -> ast.AST:
        outer, self.unsafe = self.unsafe, self.unsafe or why
        try:
            return self.visit(node)
        finally:
            self.unsafe = outer

    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        node.test = self.visit(node.test)
        node.body = self._guarded(node.body, "in a branch of 'a if c else b'")
        node.orelse = self._guarded(node.orelse, "in a branch of 'a if c else b'")
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        op = "and" if isinstance(node.op, ast.And) else "or"
        node.values = [self.visit(node.values[0])] + [
            self._guarded(v, f"after '{op}'") for v in node.values[1:]
        ]
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.expr:
        node.args = self.visit(node.args)
        node.body = self._guarded(node.body, "in a lambda body")
        return node


def _has_comp(node: ast.AST) -> bool:
    return any(isinstance(sub, _COMPS) for sub in walk(node))


def _store(target: ast.expr) -> ast.expr:
    for sub in walk(target):
        if isinstance(sub, (ast.Name, ast.Tuple, ast.List, ast.Starred)):
            sub.ctx = ast.Store()
    return target


class _Renamer(ast.NodeTransformer):
    """Renames names by ``mapping``, respecting the scopes of nested
    comprehensions and lambdas that bind the same names."""

    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.mapping:
            node.id = self.mapping[node.id]
        return node

    def _scoped(self, node: ast.AST, bound: set[str], fields: list) -> ast.AST:
        inner = {k: v for k, v in self.mapping.items() if k not in bound}
        sub = _Renamer(inner)
        for owner, field in fields:
            value = getattr(owner, field)
            if isinstance(value, list):
                setattr(owner, field, [sub.visit(v) for v in value])
            else:
                setattr(owner, field, sub.visit(value))
        return node

    def _comp(self, node: ast.expr) -> ast.expr:
        gens = node.generators
        gens[0].iter = self.visit(gens[0].iter)
        bound = {n.id for g in gens for n in walk(g.target) if isinstance(n, ast.Name)}
        fields = [(g, "target") for g in gens] + [(g, "ifs") for g in gens]
        fields += [(g, "iter") for g in gens[1:]]
        if isinstance(node, ast.DictComp):
            fields += [(node, "key"), (node, "value")]
        else:
            fields += [(node, "elt")]
        return self._scoped(node, bound, fields)

    visit_ListComp = visit_GeneratorExp = visit_DictComp = visit_SetComp = _comp

    def visit_Lambda(self, node: ast.Lambda) -> ast.expr:
        node.args = self.visit(node.args)
        bound = {a.arg for a in walk(node.args) if isinstance(a, ast.arg)}
        return self._scoped(node, bound, [(node, "body")])


def _rename(node: ast.AST, mapping: dict[str, str]) -> ast.AST:
    return _Renamer(mapping).visit(node) if mapping else node
