"""The forms ``map``, ``functools.reduce``, ``functools.partial`` and
``np.vectorize`` calls become (see ``front/callees.py``, which runs this over
the head expressions of each statement of the function)."""

from __future__ import annotations

import ast
import builtins
import copy
import functools

import numpy as np

from s2sad.transforms.astutil import assign, const, copy_loc, name


class Exprs(ast.NodeTransformer):
    """The head expressions of one statement: calls rewritten; a ``reduce`` computed
    before the statement (``before``) where Python surely evaluates it."""

    def __init__(self, rw, before: list, hoist: bool):
        self.rw, self.before, self.hoist = rw, before, hoist

    def visit_Lambda(self, node):
        return node  # its body runs later, if at all

    def visit_IfExp(self, node):
        node.test = self.visit(node.test)
        inner = Exprs(self.rw, self.before, hoist=False)
        node.body, node.orelse = inner.visit(node.body), inner.visit(node.orelse)
        return node

    def visit_BoolOp(self, node):
        node.values[0] = self.visit(node.values[0])
        inner = Exprs(self.rw, self.before, hoist=False)
        node.values[1:] = [inner.visit(v) for v in node.values[1:]]
        return node

    def _comp(self, node):
        inner = Exprs(self.rw, self.before, hoist=False)
        return inner.generic_visit(node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comp

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        rw = self.rw
        if isinstance(node.func, ast.Name) and node.func.id in rw.vectorized:
            # vf = np.vectorize(f); vf(x): the call written out
            node.func = copy_loc(copy.deepcopy(rw.vectorized[node.func.id]), node)
        if (
            rw.is_(node.func, builtins.map)
            and len(node.args) >= 2
            and not any(isinstance(a, ast.Starred) for a in node.args)
        ):
            return self.map(node)
        if rw.is_(node.func, functools.reduce) and len(node.args) in (2, 3):
            if self.hoist and not node.keywords:
                return self.reduce(node)
            return node
        if self.vectorized(node):
            return self.vectorize(node)
        if rw.is_partial(node.func) or (
            isinstance(node.func, ast.Name) and node.func.id in rw.partials
        ):  # partial(f, a)(x), g(x) for g = partial(f, a)
            if any(isinstance(a, ast.Starred) for a in node.args):
                return node
            return rw.apply(node.func, node.args, node, node.keywords)
        return node

    def vectorized(self, node: ast.Call) -> bool:
        f = node.func
        return (
            isinstance(f, ast.Call)
            and self.rw.is_(f.func, np.vectorize)
            and len(f.args) == 1
            and not f.keywords
            and len(node.args) >= 1
            and not any(isinstance(a, ast.Starred) for a in node.args)
            and not node.keywords
        )

    def vectorize(self, node: ast.Call) -> ast.expr:
        """``np.vectorize(f)(x)`` -> ``np.reshape(np.array([f(v) for v in
        np.ravel(x)]), np.shape(x))``: ``f`` once per entry, as NumPy runs it."""
        rw = self.rw
        np_name = numpy_name(rw)
        if np_name is None or not self.hoist:
            return node
        if len(node.args) > 1:
            return self.vectorize_many(node, np_name)
        x = node.args[0]
        if not isinstance(x, ast.Name):
            tmp = rw.namer.fresh("vec_arg")
            self.before.append(copy_loc(assign(tmp, x), node))
            x = name(tmp)
        v = rw.namer.fresh("entry")

        def np_attr(attr: str) -> ast.expr:
            return ast.Attribute(value=name(np_name), attr=attr, ctx=ast.Load())

        comp = ast.comprehension(
            target=name(v, True),
            iter=ast.Call(func=np_attr("ravel"), args=[name(x.id)], keywords=[]),
            ifs=[],
            is_async=0,
        )
        values = ast.ListComp(
            elt=rw.apply(node.func.args[0], [name(v)], node), generators=[comp]
        )
        array = ast.Call(func=np_attr("array"), args=[values], keywords=[])
        shape = ast.Call(func=np_attr("shape"), args=[name(x.id)], keywords=[])
        out = ast.Call(func=np_attr("reshape"), args=[array, shape], keywords=[])
        return copy_loc(out, node)

    def vectorize_many(self, node: ast.Call, np_name: str) -> ast.expr:
        """``np.vectorize(f)(a, b)``: ``f`` on each pair of entries of ``a`` and
        ``b`` broadcast together (computed before the statement), as NumPy does."""
        rw = self.rw

        def np_call(attr: str, *args: ast.expr) -> ast.expr:
            func = ast.Attribute(value=name(np_name), attr=attr, ctx=ast.Load())
            return ast.Call(func=func, args=list(args), keywords=[])

        def before(var: str, value: ast.expr) -> None:
            self.before.append(copy_loc(assign(var, value), node))
            for sub in ast.walk(self.before[-1]):
                ast.copy_location(sub, node)

        names = []
        for a in node.args:
            if not isinstance(a, ast.Name):
                tmp = rw.namer.fresh("vec_arg")
                before(tmp, a)
                a = name(tmp)
            names.append(a.id)
        shape = rw.namer.fresh("vec_shape")
        before(
            shape,
            np_call("broadcast_shapes", *[np_call("shape", name(v)) for v in names]),
        )
        spread = []
        for v in names:
            spread.append(rw.namer.fresh(f"{v}_spread"))
            before(spread[-1], np_call("broadcast_to", name(v), name(shape)))
        entries = [rw.namer.fresh("entry") for _ in names]
        comp = ast.comprehension(
            target=ast.Tuple(elts=[name(e, True) for e in entries], ctx=ast.Store()),
            iter=call_("zip", [np_call("ravel", name(v)) for v in spread]),
            ifs=[],
            is_async=0,
        )
        values = ast.ListComp(
            elt=rw.apply(node.func.args[0], [name(e) for e in entries], node),
            generators=[comp],
        )
        out = np_call("reshape", np_call("array", values), name(shape))
        for sub in ast.walk(out):
            if not hasattr(sub, "lineno") and isinstance(sub, ast.expr):
                ast.copy_location(sub, node)
        return copy_loc(out, node)

    def map(self, node: ast.Call) -> ast.expr:
        """``map(f, xs, ys)`` -> ``[f(v, w) for v, w in zip(xs, ys)]``."""
        rw = self.rw
        seqs = node.args[1:]
        vs = [rw.namer.fresh("item") for _ in seqs]
        target = (
            name(vs[0], True)
            if len(vs) == 1
            else ast.Tuple(elts=[name(w, True) for w in vs], ctx=ast.Store())
        )
        it = seqs[0] if len(seqs) == 1 else copy_loc(call_("zip", seqs), node)
        elt = rw.apply(node.args[0], [name(v) for v in vs], node)
        comp = ast.comprehension(target=target, iter=it, ifs=[], is_async=0)
        return copy_loc(ast.ListComp(elt=elt, generators=[comp]), node)

    def reduce(self, node: ast.Call) -> ast.expr:
        """``functools.reduce(f, xs[, init])`` as a loop before the statement."""
        rw = self.rw
        f, xs = node.args[0], node.args[1]
        if not isinstance(xs, ast.Name):
            seq = rw.namer.fresh("seq")
            self.before.append(copy_loc(assign(seq, xs), node))
            xs = name(seq)
        acc, v = rw.namer.fresh("acc"), rw.namer.fresh("item")
        if len(node.args) == 3:
            self.before.append(copy_loc(assign(acc, node.args[2]), node))
            it: ast.expr = name(xs.id)
        else:
            first = ast.Subscript(value=name(xs.id), slice=const(0), ctx=ast.Load())
            self.before.append(copy_loc(assign(acc, first), node))
            it = ast.Subscript(
                value=name(xs.id),
                slice=ast.Slice(lower=const(1), upper=None, step=None),
                ctx=ast.Load(),
            )
        step = assign(acc, rw.apply(f, [name(acc), name(v)], node))
        loop = ast.For(
            target=name(v, True),
            iter=copy_loc(it, node),
            body=[copy_loc(step, node)],
            orelse=[],
        )
        self.before.append(copy_loc(loop, node))
        return copy_loc(name(acc), node)


def numpy_name(rw) -> str | None:
    """A global name the function could use for NumPy (``np``), or None."""
    for var in ("np", "numpy"):
        if var not in rw.locals and rw.env.lookup(var) is np:
            return var
    return None


def call_(fn: str, args: list[ast.expr]) -> ast.Call:
    return ast.Call(func=name(fn), args=list(args), keywords=[])


def heads(stmt: ast.stmt) -> list[tuple[str, ast.expr]]:
    """The expressions a statement evaluates before its body (if any)."""
    fields = {
        ast.If: ("test",),
        ast.While: ("test",),
        ast.For: ("iter",),
        ast.Assign: ("value",),
        ast.AugAssign: ("value",),
        ast.AnnAssign: ("value",),
        ast.Return: ("value",),
        ast.Expr: ("value",),
    }.get(type(stmt), ())
    return [(f, getattr(stmt, f)) for f in fields if getattr(stmt, f) is not None]
