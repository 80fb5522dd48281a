"""Whether a loss is a sum (or a mean) over the rows of its batch arguments.

:func:`s2sad.data_parallel` runs a loss's gradient on each row block of the
data and adds the blocks' results; that is the gradient of the whole only when
the loss is ``sum_i f(row_i)`` (or its mean) plus, for a mean, terms that do
not depend on the rows.  This module shows it from the source, or says where
it cannot, with a small abstract interpretation over the function's AST.

Each expression gets a :class:`Val` of one kind:

- ``const``: does not depend on the batch arguments (parameters, numbers);
- ``row``: an array whose axis 0 is the batch rows, each row computed from the
  same row of the batch arguments only (elementwise math, ``@`` with a
  parameter on the right, reductions over other axes, ``x[:, ...]``);
- ``sum`` / ``mean``: a sum or mean over rows of a ``row`` value, and linear
  combinations of them (a mean may add row-free terms: the blocks' weights
  add up to one);
- ``nrows``: the number of rows (``len(X)``, ``X.shape[0]``, ``X.size``), only
  good for dividing a sum into a mean;
- ``mixed``: anything else, with the node and the reason, for the error.

Anything not recognised is ``mixed``: the check refuses rather than guesses.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from s2sad.errors import NotRowwiseError
from s2sad.rowcalls import (
    CONST,
    ELEMENTWISE_BINOPS,
    Val,
    _mixed,
    _rank_of,
    call,
)

HINT = (
    "s2sad.data_parallel needs the loss to be np.mean (or np.sum, with "
    "reduce='sum') over rows of per-row terms; for any other loss use "
    "s2sad.grad / s2sad.value_and_grad on the Dask arrays (one compute per call)"
)


def check(fn: Any, batch: dict[int, int], args: list, reduce: str) -> None:
    """Raise :class:`NotRowwiseError` unless ``fn(*args)`` is a ``reduce`` over
    rows of the arguments at the positions of ``batch`` (position -> rank)."""
    from s2sad.transforms.front.parse import parse_function

    parsed = parse_function(fn)
    params = []
    for i, value in enumerate(args):
        if i in batch:
            params.append(Val("row", rank=batch[i]))
        else:
            params.append(Val("const", rank=_rank_of(value), obj=value))
    result, node = _Checker(parsed, 0).run(params)
    source = parsed.source
    where = node if node is not None else parsed.node
    if result.kind == "mixed":
        raise NotRowwiseError(
            source.problem(
                result.node or where,
                f"cannot show that {fn.__qualname__} is a {reduce} over rows: "
                + result.why,
                HINT,
            )
        )
    if result.kind == reduce and result.rank in (0, None):
        return
    if result.kind in ("sum", "mean") and result.kind != reduce:
        why = (
            f"the loss is a {result.kind} over rows, but reduce={reduce!r}: pass "
            f"reduce={result.kind!r}"
        )
    elif result.kind in ("sum", "mean"):
        why = f"the loss is a {result.kind} over rows but not a scalar"
    elif result.kind == "row":
        why = "it returns per-row values, not their sum or mean"
    else:
        why = "the returned value does not sum or average over the batch rows"
    raise NotRowwiseError(source.problem(where, why, HINT))


class _Checker:
    def __init__(self, parsed: Any, depth: int):
        self.parsed = parsed
        self.env = parsed.env
        self.depth = depth
        self.names: dict[str, Val] = {}

    # ---------------------------------------------------------------- statements
    def run(self, params: list[Val]) -> tuple[Val, Any]:
        node = self.parsed.node
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs:
            return (
                _mixed(node, "it takes *args, **kwargs or keyword-only arguments"),
                None,
            )
        names = [p.arg for p in a.posonlyargs + a.args]
        if len(params) > len(names):
            return _mixed(node, "it is called with more arguments than it takes"), None
        for name, val in zip(names, params):
            self.names[name] = val
        for name in names[len(params) :]:
            self.names[name] = CONST  # defaults: fixed values
        return self.block(node.body)

    def block(self, body: list) -> tuple[Val, Any]:
        for k, stmt in enumerate(body):
            if isinstance(stmt, ast.Return):
                if k != len(body) - 1:
                    return _mixed(stmt, "code after a return"), stmt
                if stmt.value is None:
                    return _mixed(stmt, "it returns None"), stmt
                return self.expr(stmt.value), stmt
            bad = self.statement(stmt)
            if bad is not None:
                return bad, stmt
        return _mixed(body[-1] if body else None, "no return at the end"), None

    def statement(self, stmt: Any) -> Val | None:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            return None  # docstring
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            return self.assign(stmt.targets[0], self.expr(stmt.value), stmt)
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            old = self.names.get(stmt.target.id)
            if old is None:
                return _mixed(stmt, f"'{stmt.target.id}' is not assigned before")
            new = self.binop(stmt.op, old, self.expr(stmt.value), stmt)
            self.names[stmt.target.id] = new
            return None
        if isinstance(stmt, ast.For) and not stmt.orelse:
            return self.loop(stmt)
        if isinstance(stmt, ast.Pass):
            return None
        what = type(stmt).__name__.lower()
        return _mixed(
            stmt,
            f"a '{what}' statement (only assignments, for loops "
            "over fixed ranges and one final return are followed)",
        )

    def assign(self, target: Any, val: Val, stmt: Any) -> Val | None:
        if isinstance(target, ast.Name):
            self.names[target.id] = val
            return None
        if isinstance(target, (ast.Tuple, ast.List)):
            if val.kind not in ("const", "mixed"):
                return _mixed(stmt, "it unpacks a row-wise value")
            for t in target.elts:  # unpacking parameters: each part is fixed
                bad = self.assign(t, CONST if val.kind == "const" else val, stmt)
                if bad is not None:
                    return bad
            return None
        return _mixed(stmt, "it writes into an item or an attribute")

    def loop(self, stmt: ast.For) -> Val | None:
        it = self.expr(stmt.iter)
        if it.kind != "const" or not isinstance(stmt.target, ast.Name):
            return _mixed(
                stmt,
                "a for loop over the rows (or over something " "computed from them)",
            )
        for _ in range(4):  # to a fixed point of the kinds
            before = dict(self.names)
            self.names[stmt.target.id] = INDEX if _is_range(stmt.iter) else CONST
            for s in stmt.body:
                if isinstance(s, (ast.Break, ast.Continue, ast.Return)):
                    return _mixed(s, "break, continue or return in a loop")
                bad = self.statement(s)
                if bad is not None:
                    return bad
            if all(k in before and before[k].same(v) for k, v in self.names.items()):
                return None
        return _mixed(stmt, "a loop whose values keep changing kind")

    # ---------------------------------------------------------------- expressions
    def expr(self, node: Any) -> Val:
        method = getattr(self, "e_" + type(node).__name__, None)
        if method is None:
            return _mixed(node, f"a {type(node).__name__} expression is not followed")
        return method(node)

    def e_Constant(self, node: ast.Constant) -> Val:
        return Val("const", rank=_rank_of(node.value), obj=node.value)

    def e_Name(self, node: ast.Name) -> Val:
        if node.id in self.names:
            return self.names[node.id]
        obj = self.env.lookup(node.id)
        from s2sad.transforms.front.parse import MISSING

        if obj is MISSING:
            return _mixed(node, f"the name '{node.id}' is not defined")
        return Val("const", rank=_rank_of(obj), obj=obj)

    def e_Tuple(self, node: Any) -> Val:
        vals = [self.expr(e) for e in node.elts]
        for v in vals:
            if v.kind != "const":
                return (
                    v if v.kind == "mixed" else _mixed(node, "a tuple or list of rows")
                )
        try:
            obj = tuple(v.obj for v in vals)
        except Exception:  # noqa: BLE001 (not a plain container)
            obj = None
        return Val("const", obj=obj)

    e_List = e_Tuple

    def e_UnaryOp(self, node: ast.UnaryOp) -> Val:
        v = self.expr(node.operand)
        if isinstance(node.op, (ast.USub, ast.UAdd)):
            if v.kind != "const":
                return v
            obj = None
            if isinstance(v.obj, (int, float, np.number)):
                obj = -v.obj if isinstance(node.op, ast.USub) else v.obj
            return Val("const", rank=v.rank, obj=obj)
        return v if v.kind in ("const", "mixed") else _mixed(node, "a logical operator")

    def e_Compare(self, node: ast.Compare) -> Val:
        vals = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        return self.elementwise(vals, node)

    def e_BinOp(self, node: ast.BinOp) -> Val:
        return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)

    def binop(self, op: Any, a: Val, b: Val, node: Any) -> Val:
        if isinstance(op, ast.MatMult):
            return self.matmul(a, b, node)
        if not isinstance(op, ELEMENTWISE_BINOPS):
            return self.elementwise([a, b], node)
        for v in (a, b):
            if v.kind == "mixed":
                return v
        kinds = {a.kind, b.kind}
        if kinds <= {"sum", "mean", "const", "nrows"} and kinds & {"sum", "mean"}:
            return self.linear(op, a, b, node)
        return self.elementwise([a, b], node)

    def linear(self, op: Any, a: Val, b: Val, node: Any) -> Val:
        """Arithmetic with sums or means over rows: what stays linear in them."""
        red = a if a.kind in ("sum", "mean") else b
        other = b if red is a else a
        if isinstance(op, (ast.Add, ast.Sub)):
            if other.kind == red.kind:
                return Val(red.kind, rank=_join_rank(a.rank, b.rank))
            if other.kind == "const" and red.kind == "mean":
                return red  # block weights add up to one: the term survives once
            if other.kind == "const":
                return _mixed(
                    node,
                    "it adds a term that does not depend on the rows "
                    "to a sum over rows (each block would add it again): "
                    "use np.mean and reduce='mean', or add it outside",
                )
            return _mixed(node, "it adds a sum over rows to a mean over rows")
        if isinstance(op, ast.Mult) and other.kind == "const":
            return red
        if isinstance(op, ast.Div) and red is a:
            if b.kind == "const":
                return red
            if b.kind == "nrows" and a.kind == "sum":
                return Val("mean", rank=a.rank)
        return _mixed(node, f"a nonlinear function of a {red.kind} over rows")

    def elementwise(self, vals: list[Val], node: Any) -> Val:
        """Elementwise math of rows and fixed values (broadcasting checked)."""
        rows = [v for v in vals if v.kind == "row"]
        for v in vals:
            if v.kind == "mixed":
                return v
            if v.kind in ("sum", "mean"):
                if rows:
                    return _mixed(
                        node,
                        f"it combines each row with a {v.kind} over "
                        "rows (a batch statistic)",
                    )
                return _mixed(node, f"a nonlinear function of a {v.kind} over rows")
            if v.kind in ("nrows", "shape"):
                return _mixed(node, "it uses the number of rows in the math")
        if not rows:
            ranks = [v.rank for v in vals]
            rank = None if None in ranks else max(ranks, default=0)
            return Val("const", rank=rank)
        rank = rows[0].rank
        if rank is None or any(r.rank != rank for r in rows):
            return _mixed(
                node,
                "it broadcasts row-wise values of different ranks "
                "(rows would meet other axes)",
            )
        for v in vals:
            if v.kind == "const" and not _fits_rows(v, rank):
                return _mixed(
                    node,
                    "a fixed array of the same rank as the rows "
                    "could broadcast along the rows",
                )
        return Val("row", rank=rank)

    def matmul(self, a: Val, b: Val, node: Any) -> Val:
        for v in (a, b):
            if v.kind == "mixed":
                return v
        if a.kind == "row" and b.kind == "const":
            if a.rank is not None and a.rank >= 2 and b.rank in (1, 2):
                return Val("row", rank=a.rank - 1 if b.rank == 1 else a.rank)
            if a.rank == 1:
                return _mixed(
                    node, "'@' of a row vector contracts the rows with a " "fixed array"
                )
            return _mixed(node, "'@' with a parameter of unknown rank")
        if a.kind == "row" and b.kind == "row" and a.rank == 1 and b.rank in (1, 2):
            return Val("sum", rank=b.rank - 1)  # sum over rows of a_i * b_i
        if a.kind == "const" and b.kind == "const":
            return Val("const")
        return _mixed(node, "'@' contracts the rows (e.g. X.T @ X): it mixes rows")

    def e_Attribute(self, node: ast.Attribute) -> Val:
        v = self.expr(node.value)
        if v.kind == "const":
            try:  # a module's function, a parameter object's array
                obj = None if v.obj is None else getattr(v.obj, node.attr)
            except Exception:  # noqa: BLE001 (a property that raises: unknown)
                obj = None
            return Val("const", rank=_rank_of(obj), obj=obj)
        if v.kind == "row":
            if node.attr == "T":
                if v.rank == 1:
                    return v
                return _mixed(node, "'.T' moves the rows away from axis 0")
            if node.attr == "shape":
                return Val("shape")
            if node.attr == "size":
                return Val("nrows")
            if node.attr in ("ndim", "dtype"):
                return CONST
        if v.kind in ("sum", "mean") and node.attr in ("ndim", "dtype", "shape"):
            return CONST
        if v.kind == "mixed":
            return v
        return _mixed(node, f"the attribute '.{node.attr}' of a row-wise value")

    def e_Subscript(self, node: ast.Subscript) -> Val:
        v = self.expr(node.value)
        index = node.slice
        if v.kind == "mixed":
            return v
        if v.kind == "shape":
            if isinstance(index, ast.Constant) and index.value == 0:
                return Val("nrows")
            if isinstance(index, ast.Constant) and isinstance(index.value, int):
                return CONST
            return _mixed(node, "a slice of the shape that holds the rows")
        items = list(index.elts) if isinstance(index, ast.Tuple) else [index]
        idx = [self.expr(i) if not isinstance(i, ast.Slice) else None for i in items]
        for i in idx:
            if i is not None and i.kind != "const":
                return (
                    i
                    if i.kind == "mixed"
                    else _mixed(node, "indexing with " "row-wise values")
                )
        if v.kind == "const":
            return _item(v, idx, items)
        if v.kind in ("sum", "mean"):
            return Val(v.kind)  # a part of a linear result stays linear
        first = items[0]
        keeps = _full_slice(first) or (
            _is_ellipsis(first) and len(items) <= (v.rank or 0)
        )
        if not keeps:
            return _mixed(
                node,
                "indexing that selects or moves rows (keep ':' "
                "first, as in x[:, j])",
            )
        rank = v.rank
        for item, val in zip(items, idx):
            if _is_none(item):
                rank += 1
            elif val is not None and val.kind == "const" and _is_integer(val):
                rank -= 1
            elif not (isinstance(item, ast.Slice) or _is_ellipsis(item)):
                return _mixed(node, "fancy indexing of a row-wise value")
        return Val("row", rank=rank)

    # ---------------------------------------------------------------- calls
    def e_Call(self, node: ast.Call) -> Val:
        return call(self, node)

    def spawn(self, parsed: Any) -> _Checker:
        """A checker for a callee's source, one level deeper."""
        return _Checker(parsed, self.depth + 1)


def _item(v: Val, idx: list, items: list) -> Val:
    """An item of a fixed value: ``p["W"]``, ``params[0]`` (the item's own rank),
    ``w[:, None]`` (the rank after basic indexing)."""
    if isinstance(v.obj, (dict, list, tuple)) and len(idx) == 1 and idx[0] is not None:
        try:
            obj = v.obj[idx[0].obj]
        except Exception:  # noqa: BLE001 (no such item: unknown)
            return CONST
        return Val("const", rank=_rank_of(obj), obj=obj)
    rank = v.rank
    if rank is None:
        return CONST
    for item, val in zip(items, idx):
        if _is_none(item):
            rank += 1
        elif val is not None and val.kind == "const" and _is_integer(val):
            rank -= 1
        elif not isinstance(item, ast.Slice):
            return CONST
    return Val("const", rank=rank)


#: a loop counter over a range: a Python int
INDEX = Val("const", rank=0, obj=0)


def _is_range(node: Any) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
    )


def _is_integer(v: Val) -> bool:
    """A fixed value known to be one integer (an index that drops an axis)."""
    return v is INDEX or (
        isinstance(v.obj, (int, np.integer)) and not isinstance(v.obj, bool)
    )


def _join_rank(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(a, b)


def _fits_rows(v: Val, rank: int) -> bool:
    """Whether a fixed array broadcast against rows of ``rank`` stays off axis 0."""
    if v.rank is not None and v.rank < rank:
        return True
    shape = getattr(v.obj, "shape", None)
    return shape is not None and len(shape) == rank and shape[0] == 1


def _full_slice(node: Any) -> bool:
    return (
        isinstance(node, ast.Slice)
        and node.lower is None
        and node.upper is None
        and node.step is None
    )


def _is_ellipsis(node: Any) -> bool:
    return isinstance(node, ast.Constant) and node.value is Ellipsis


def _is_none(node: Any) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
