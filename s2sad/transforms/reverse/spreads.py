"""Cotangents of full sums and means, multiplied in place of spread out.

The cotangent of ``s = np.sum(x)`` is ``g_s`` everywhere on ``x``'s shape:
``d_sum`` fills a new array with it (about 0.45 us on a small array).  When
that array is read once, as a factor of an elementwise product with a value
of ``x``'s shape and dtype, the number itself does the same job::

    g_exp = d_sum(g_sum_1, sum_1, exp)[0]
    g_sub = g_exp * exp                       ->  g_sub = g_sum_1 * exp

(``d_mean``: ``g / x.size``.)  The product has the other factor's shape, and
its values are the same: the filled array holds ``g`` in ``x``'s dtype,
float64 here, and NumPy multiplies a number into a float64 array in float64.
It applies only where reverse/likes.py proves the shape-and-float64 classes of
``x`` and the other factor equal, ``x`` an array and the sum a number, the
filled array is read nowhere else, both statements are in one block, and
nothing in between binds the names involved.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from s2sad.runtime import reductions
from s2sad.transforms.astutil import anno, walk
from s2sad.transforms.reverse.likes import F64, SCALAR

#: the rules whose full-reduction cotangent is one number over the whole array
_RULES = (reductions.d_sum, reductions.d_mean)


def run(job: Any, module: Any) -> None:
    """The pipeline's ``spreads`` pass (reverse mode, after assemble)."""
    likes = getattr(job.state, "likes", None)
    if not module.options.optimize or not likes:
        return
    for fn in job.functions:
        if isinstance(fn, ast.FunctionDef):
            nodes = list(walk(fn))  # one walk (a long function: 100,000 nodes)
            loads: dict[str, int] = {}
            for n in nodes:
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    loads[n.id] = loads.get(n.id, 0) + 1
            for block in _blocks(nodes):  # _rewrite adds and drops no block
                _rewrite(block, likes, loads, module)
            forward_copies(fn)


def _blocks(nodes: list[ast.AST]) -> list[list[ast.stmt]]:
    """The statement lists (bodies, ``else`` branches) among ``nodes``."""
    out = []
    for node in nodes:
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                out.append(stmts)
    return out


def _rewrite(stmts: list[ast.stmt], likes: dict, loads: dict, module: Any) -> None:
    i = 0
    while i < len(stmts):
        spread = _spread(stmts[i], likes)
        if spread is None or loads.get(spread[0]) != 1:
            i += 1
            continue
        a, g, s, x, rule = spread
        watched = {a, g, s, x}
        for j in range(i + 1, len(stmts)):
            stmt = stmts[j]
            factor = _product_with(stmt, a, likes.get(x), likes)
            if factor is not None:  # a simple statement: it binds after reading
                setattr(factor[0], factor[1], _number(g, x, rule))
                module.maybe_unused.add(stmts[i].value.value.func.id)
                del stmts[i]
                i -= 1
                break
            if _stores(stmt, watched) or _reads(stmt, a):
                break
        i += 1


def _spread(stmt: ast.stmt, likes: dict):
    """``(a, g, s, x, rule)`` for ``a = d_sum(g, s, x)[0]`` of a float64 array."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Subscript)
        and isinstance(stmt.value.slice, ast.Constant)
        and stmt.value.slice.value == 0
        and isinstance(stmt.value.value, ast.Call)
    ):
        return None
    c = stmt.value.value
    rule = anno(c.func).get("rule")
    if rule not in _RULES or c.keywords or len(c.args) != 3:
        return None
    if not all(isinstance(a, ast.Name) for a in c.args):
        return None
    g, s, x = (a.id for a in c.args)
    cx = likes.get(x)
    if cx is None or cx[0] == SCALAR or cx[1] != F64 or likes.get(s) != (SCALAR, F64):
        return None
    return stmt.targets[0].id, g, s, x, rule


def _product_with(stmt: ast.stmt, a: str, cls, likes: dict) -> tuple | None:
    """``(binop, field)`` where ``stmt`` (a simple statement) reads ``a`` as a
    factor of ``a * y`` with ``y`` of class ``cls``."""
    if not isinstance(stmt, (ast.Assign, ast.Expr, ast.Return)) or _stores(stmt, ()):
        return None
    for node in walk(stmt):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for field, other in (("left", node.right), ("right", node.left)):
                mine = getattr(node, field)
                if (
                    isinstance(mine, ast.Name)
                    and mine.id == a
                    and isinstance(other, ast.Name)
                    and other.id != a
                    and cls is not None
                    and cls[0] != SCALAR
                    and cls == likes.get(other.id)
                ):
                    return node, field
    return None


def _number(g: str, x: str, rule) -> ast.expr:
    """The number the filled array holds: ``g``, or ``g / x.size`` for a mean."""
    num = ast.Name(id=g, ctx=ast.Load())
    if rule is reductions.d_mean:
        size = ast.Attribute(value=ast.Name(id=x, ctx=ast.Load()), attr="size")
        size.ctx = ast.Load()
        return ast.BinOp(left=num, op=ast.Div(), right=size)
    return copy.deepcopy(num)


def _stores(stmt: ast.stmt, names) -> bool:
    """Whether ``stmt`` may bind one of ``names`` (or anything, mid-expression)."""
    for node in walk(stmt):
        if (
            isinstance(node, ast.Name)
            and not isinstance(node.ctx, ast.Load)
            and node.id in names
        ):
            return True
        if isinstance(
            node, (ast.NamedExpr, ast.FunctionDef, ast.Lambda, ast.Global, ast.Nonlocal)
        ):
            return True
    return False


def _reads(stmt: ast.stmt, a: str) -> bool:
    return any(
        isinstance(n, ast.Name) and n.id == a and isinstance(n.ctx, ast.Load)
        for n in walk(stmt)
    )


def forward_copies(fn: ast.FunctionDef) -> None:
    """``b = <expr>; ...; a = b`` -> ``a = <expr>; ...`` where ``b`` is bound and
    read only there and ``a`` bound only there, both in one block with no use
    of either in between: without the second name on the array, ``finalize``
    sees a gradient nothing else refers to and returns it without a copy (the
    dropped ``unbroadcast`` leaves such copies: ``g_x = g_sub``)."""
    counts: dict[tuple[str, bool], int] = {}
    params = set()
    nodes = list(walk(fn))
    for n in nodes:
        if isinstance(n, ast.Name):
            key = (n.id, isinstance(n.ctx, ast.Load))
            counts[key] = counts.get(key, 0) + 1
        elif isinstance(n, ast.arg):
            params.add(n.arg)
    for stmts in _blocks(nodes):
        j = 0
        while j < len(stmts):
            copy_ = stmts[j]
            j += 1
            if not (
                isinstance(copy_, ast.Assign)
                and len(copy_.targets) == 1
                and isinstance(copy_.targets[0], ast.Name)
                and isinstance(copy_.value, ast.Name)
            ):
                continue
            a, b = copy_.targets[0].id, copy_.value.id
            if (
                a == b
                or a in params
                or b in params
                or counts.get((a, False)) != 1
                or counts.get((b, False)) != 1
                or counts.get((b, True)) != 1
            ):
                continue
            for i in range(j - 2, -1, -1):
                stmt = stmts[i]
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id == b
                ):
                    if not _reads(stmt, a) and not _stores(stmt, {a}):
                        stmt.targets[0].id = a
                        del stmts[j - 1]
                        j -= 1
                    break
                if _reads(stmt, a) or _reads(stmt, b) or _stores(stmt, {a, b}):
                    break
