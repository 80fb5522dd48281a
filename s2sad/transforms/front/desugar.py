"""Desugar jumps: early ``return``, ``break`` and ``continue`` become flags.

After this pass a function has a single ``return`` at its end, and a loop body
leaves the loop only through one ``if <flag>: break`` as its last statement.
That shape is what the backward pass needs: every loop iteration runs its
(guarded) body to the end, so replaying the iterations backwards is exact::

    def f(x):                            def f(x):
        for i in range(5):                   result = None
            if x > 10:                       returned = False
                return x                     stop = False
            x = x * 2                        for i in range(5):
        return x                                 if x > 10:
                                                     result = x
                                  ->                 returned = True
                                                 if not returned:
                                                     x = x * 2
                                                 if returned:
                                                     break
                                             if not returned:
                                                 result = x
                                             return result
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from s2sad.transforms.astutil import (
    Namer,
    any_of,
    assign,
    const,
    copy_loc,
    name,
    not_any,
    walk,
)


@dataclass
class _Loop:
    brk: str
    cnt: str
    used: set[str]


@dataclass
class _Ctx:
    ret: tuple[str, str] | None  # (result variable, returned flag)
    loop: _Loop | None
    final: ast.stmt | None = None  # the function's last statement, when it is a return


def run(node: ast.FunctionDef, namer: Namer) -> ast.FunctionDef:
    """Rewrite ``node`` in place so it has one final return and flag-guarded loops."""
    body = node.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    ):
        body = body[1:]  # docstring
    if _needs_flags(body):
        result, returned = namer.fresh("result"), namer.fresh("returned")
        final = body[-1] if isinstance(body[-1], ast.Return) else None
        new, _ = _block(body, _Ctx((result, returned), None, final), namer)
        first = body[0] if body else node
        node.body = [
            assign(result, const(None), first),
            assign(returned, const(False), first),
            *new,
            copy_loc(ast.Return(value=name(result)), body[-1] if body else node),
        ]
    else:
        new, _ = _block(body, _Ctx(None, None), namer)
        if not new or not isinstance(new[-1], ast.Return):
            last = body[-1] if body else node
            new.append(copy_loc(ast.Return(value=const(None)), last))
        node.body = new
    return node


def _needs_flags(body: list[ast.stmt]) -> bool:
    """True when some ``return`` is not the function's last top-level statement."""
    for i, stmt in enumerate(body):
        for sub in walk(stmt):
            if isinstance(sub, ast.Return) and not (sub is stmt and i == len(body) - 1):
                if not _in_nested_def(stmt, sub):
                    return True
    return False


def _in_nested_def(root: ast.AST, target: ast.AST) -> bool:
    for sub in walk(root):
        if isinstance(sub, (ast.FunctionDef, ast.Lambda)) and sub is not root:
            if any(n is target for n in walk(sub)):
                return True
    return False


def _block(
    stmts: list[ast.stmt], ctx: _Ctx, namer: Namer
) -> tuple[list[ast.stmt], set[str]]:
    """Desugar a statement list; return it and the flags that may skip what follows."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        new, flags = _stmt(stmt, ctx, namer)
        out.extend(new)
        if flags is None:  # unconditional jump: the rest is unreachable
            return out, _jump_flags(stmt, ctx)
        if flags:
            rest, rest_flags = _block(stmts[i + 1 :], ctx, namer)
            if rest:
                out.append(
                    copy_loc(
                        ast.If(test=not_any(sorted(flags)), body=rest, orelse=[]),
                        stmts[i + 1],
                    )
                )
            return out, flags | rest_flags
    return out, set()


def _jump_flags(stmt: ast.stmt, ctx: _Ctx) -> set[str]:
    if isinstance(stmt, ast.Return):
        return {ctx.ret[1]} if ctx.ret else set()
    if isinstance(stmt, ast.Break):
        return {ctx.loop.brk}
    return {ctx.loop.cnt}


def _stmt(
    stmt: ast.stmt, ctx: _Ctx, namer: Namer
) -> tuple[list[ast.stmt], set[str] | None]:
    """(replacement statements, flags that may be set; None for an unconditional jump)."""
    if isinstance(stmt, ast.Return):
        if ctx.ret is None:
            return [stmt], None
        result, returned = ctx.ret
        value = stmt.value if stmt.value is not None else const(None)
        if stmt is ctx.final:  # nothing runs after the last statement: no flag needed
            return [assign(result, value, stmt)], None
        return [assign(result, value, stmt), assign(returned, const(True), stmt)], None
    if isinstance(stmt, (ast.Break, ast.Continue)):
        flag = ctx.loop.brk if isinstance(stmt, ast.Break) else ctx.loop.cnt
        ctx.loop.used.add(flag)
        return [assign(flag, const(True), stmt)], None
    if isinstance(stmt, ast.If):
        stmt.body, f1 = _block(stmt.body, ctx, namer)
        stmt.orelse, f2 = _block(stmt.orelse, ctx, namer)
        if not stmt.body:
            stmt.body = [copy_loc(ast.Pass(), stmt)]
        return [stmt], f1 | f2
    if isinstance(stmt, (ast.For, ast.While)):
        return _loop(stmt, ctx, namer)
    return [stmt], set()


def _loop(
    stmt: ast.For | ast.While, ctx: _Ctx, namer: Namer
) -> tuple[list[ast.stmt], set[str]]:
    loop = _Loop(namer.fresh("stop"), namer.fresh("skip"), set())
    body, flags = _block(stmt.body, _Ctx(ctx.ret, loop, ctx.final), namer)
    new_body: list[ast.stmt] = []
    if loop.cnt in loop.used:
        new_body.append(assign(loop.cnt, const(False), stmt))
    new_body.extend(body)
    exits = sorted(flags - {loop.cnt})
    if exits:
        brk = copy_loc(ast.If(test=any_of(exits), body=[ast.Break()], orelse=[]), stmt)
        new_body.append(brk)
    stmt.body = new_body or [copy_loc(ast.Pass(), stmt)]
    before = [assign(loop.brk, const(False), stmt)] if loop.brk in loop.used else []
    outer = {f for f in flags if ctx.ret and f == ctx.ret[1]}
    return [*before, stmt], outer
