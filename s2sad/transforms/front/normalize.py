"""Normalize: desugar and flatten every expression to A-normal form, then SSA-rename.

After this pass each statement does one thing to atoms (names, constants, or
static references such as ``np.pi``), every ``if``/``while`` tests a name, every
``for`` loops over a range object held in a name, and a name assigned only at
the top level of the function gets a fresh version at each assignment::

    def f(x, W):                         def f(x, W):
        h = np.tanh(W @ x + 1.0)             matmul = W @ x
        h = h * 2                 ->         add = matmul + 1.0
        for row in W:                        h = np.tanh(add)
            h = h + row                      h_1 = h * 2
        return h.sum()                       seq = W
                                             r = range(len(seq))
                                             for i in r:
                                                 row = seq[i]
                                                 add_1 = h_1 + row  ...

Calls are classified (``anno(call)["call"]``) as ``rule``, ``user``, ``local`` (a
lifted nested function), ``method`` or ``unknown``: what later passes go by.
"""

from __future__ import annotations

import ast
import copy

from s2sad.errors import UnsupportedSyntaxError
from s2sad.transforms import astutil, ops
from s2sad.transforms.astutil import anno, assign, const, copy_loc, loads, name, stores
from s2sad.transforms.front import lambda_args, objects, properties, setitems
from s2sad.transforms.front.calls import CallNormalizer, LocalFunction
from s2sad.transforms.front.loops import LoopNormalizer
from s2sad.transforms.front.parse import ParsedFunction, lambda_to_def


class Normalizer(LoopNormalizer, CallNormalizer):
    """Rewrites one parsed function into the normal form described above.

    Loops are canonicalized in :mod:`loops`, calls classified in :mod:`calls`.
    """

    def __init__(self, parsed: ParsedFunction, namer):
        self.parsed = parsed
        self.namer = namer
        self.env = parsed.env
        node = parsed.node
        self.params = [
            a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        ]
        self.locals = set(self.params) | stores(node) | astutil.nested_defs(node)
        self.nonsimple = self._compound_stores(node.body)
        self.module_aliases = self._module_aliases(node)
        self.local_functions: dict[str, LocalFunction] = {}
        self.problems = []
        self.depth = 0  # > 0 inside if/for/while: names bound there may be re-bound

    # ------------------------------------------------------------------ helpers
    def _compound_stores(self, body: list[ast.stmt]) -> set[str]:
        """Names bound on some paths only: in compound statements, and by an
        assignment whose value is a conditional expression or ``and``/``or``
        (normalize writes those into the target inside an ``if``)."""
        out: set[str] = set()
        for stmt in body:
            if isinstance(stmt, (ast.If, ast.For, ast.While)):
                out |= stores(stmt)
            elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
                isinstance(n, (ast.IfExp, ast.BoolOp)) for n in astutil.walk(stmt)
            ):
                out |= stores(stmt)
        return out

    def temp(self, base: str, nonsimple: bool = False) -> str:
        t = self.namer.fresh(base)
        self.locals.add(t)
        if nonsimple or self.depth > 0:
            self.nonsimple.add(t)
        return t

    def error(self, node: ast.AST, what: str, hint: str) -> None:
        self.problems.append(self.parsed.source.problem(node, what, hint))

    # ------------------------------------------------------------------ blocks
    def block(
        self, stmts: list[ast.stmt], in_loop: bool = False, nested: bool = False
    ) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        self.depth += nested
        for stmt in stmts:
            self.stmt(stmt, out, in_loop)
        self.depth -= nested
        return out

    def stmt(self, s: ast.stmt, out: list[ast.stmt], in_loop: bool) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            self.error(
                s,
                f"unsupported construct: {type(s).__name__} statement",
                "rewrite it with assignments, if and for",
            )
            return
        start = len(out)
        method(s, out, in_loop)
        for new in out[start:]:
            copy_loc(new, s)
            anno(new).setdefault("origin", s.lineno)

    def stmt_Pass(self, s, out, in_loop):
        pass

    def stmt_Break(self, s, out, in_loop):
        out.append(s)

    def stmt_Expr(self, s, out, in_loop):
        if isinstance(s.value, ast.Call):
            out.append(ast.Expr(value=self.value(s.value, out)))

    def stmt_Assert(self, s, out, in_loop):
        out.append(ast.Assert(test=self.atom(s.test, out, "cond"), msg=s.msg))

    def stmt_Raise(self, s, out, in_loop):
        out.append(s)

    def stmt_Return(self, s, out, in_loop):
        value = s.value if s.value is not None else const(None)
        if not isinstance(value, (ast.Name, ast.Constant)):
            v = self.value(value, out, "out")
            if not isinstance(v, (ast.Name, ast.Constant)):
                tmp = self.temp("out")
                out.append(assign(tmp, v))
                v = name(tmp)
            value = v
        out.append(ast.Return(value=value))

    def stmt_FunctionDef(self, s, out, in_loop):
        self._lift(s.name, s)

    def stmt_AnnAssign(self, s, out, in_loop):
        self.stmt_Assign(ast.Assign(targets=[s.target], value=s.value), out, in_loop)

    def stmt_Assign(self, s, out, in_loop):
        if (
            len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and isinstance(s.value, ast.Lambda)
        ):
            self._lift(s.targets[0].id, lambda_to_def(s.value, s.targets[0].id))
            return
        if len(s.targets) == 1:
            self.assign_to(s.targets[0], s.value, out)
            return
        tmp = self.atom(s.value, out, "value")
        for target in s.targets:
            self.assign_to(target, tmp, out)

    def stmt_AugAssign(self, s, out, in_loop):
        target = s.target
        if isinstance(target, ast.Name):
            self.assign_to(
                target, ast.BinOp(left=name(target.id), op=s.op, right=s.value), out
            )
            # Python changes an array in place here; the aliasing pass checks that no
            # other name still refers to it (then rebinding is the same thing).
            anno(out[-1])["augassign"] = True
            return
        chain = setitems.Chain(self, target, out)
        base, index = chain.base, chain.index[-1]
        old = self.temp(f"{base}_item")
        item = ast.Subscript(value=name(base), slice=index, ctx=ast.Load())
        out.append(assign(old, item))
        new = self.atom(ast.BinOp(left=name(old), op=s.op, right=s.value), out, "value")
        self._setitem(base, copy.deepcopy(index), new, out, chain.names[0])
        chain.write_back(out)

    def assign_to(self, target: ast.expr, value: ast.expr, out: list[ast.stmt]) -> None:
        if (
            isinstance(target, ast.Name)
            and isinstance(value, (ast.IfExp, ast.BoolOp))
            # x = c and x or y: the first operand written into x would clobber x
            and not (isinstance(value, ast.BoolOp) and target.id in loads(value))
        ):
            # expand the branches straight into the target: no copy afterwards
            self.nonsimple.add(target.id)
            self.value(value, out, hint=target.id, into=target.id)
        elif isinstance(target, ast.Name):
            v = self.value(value, out, hint=target.id)
            if target.id in self.nonsimple and target.id in loads(v):
                tmp = self.temp(_hint(v) or "value")
                out.append(assign(tmp, v))
                v = name(tmp)
            out.append(assign(target.id, v))
        elif isinstance(target, (ast.Tuple, ast.List)):
            whole = self.atom(value, out, "values")
            for i, elt in enumerate(target.elts):
                item = ast.Subscript(value=whole, slice=const(i), ctx=ast.Load())
                self.assign_to(elt, item, out)
        elif isinstance(target, ast.Subscript):
            setitems.assign_item(self, target, value, out)
        else:  # obj.x = v, obj a name: validate refuses every other target
            out.append(objects.store(target, self.atom(value, out, target.attr)))

    def _setitem(self, base: str, index: ast.expr, value: ast.expr, out, root=None):
        node = assign(
            ast.Subscript(value=name(base), slice=index, ctx=ast.Store()), value
        )
        anno(node)["setitem"] = True
        anno(node)["root"] = root or base  # the name a[i][j] = v changes: a
        out.append(node)

    # ------------------------------------------------------------------ control flow
    def stmt_If(self, s, out, in_loop):
        test = self.atom(s.test, out, "cond")
        if not isinstance(test, ast.Name) or test.id in stores(s):
            tmp = self.temp("cond", nonsimple=True)
            out.append(assign(tmp, test))
            test = name(tmp)
        body = self.block(s.body, in_loop, nested=True) or [ast.Pass()]
        orelse = self.block(s.orelse, in_loop, nested=True)
        out.append(ast.If(test=test, body=body, orelse=orelse))

    # ------------------------------------------------------------------ nested functions
    def _lift(self, fname: str, node: ast.FunctionDef) -> None:
        # functions defined inside ``node`` are its own names, not the caller's
        inner = stores(node) | astutil.nested_defs(node)
        inner_locals = {a.arg for a in node.args.args} | inner
        free = sorted((loads(node) - inner_locals) & (self.locals - {fname}))
        free = [v for v in free if v not in self.local_functions]
        for v in free:
            node.args.args.append(ast.arg(arg=v, annotation=None))
        self.local_functions[fname] = LocalFunction(node, free)

    # ------------------------------------------------------------------ expressions
    def atom(self, e: ast.expr, out: list[ast.stmt], hint: str = "t") -> ast.expr:
        if isinstance(e, ast.Starred):  # f(*xs) with xs not a literal: kept
            return ast.Starred(value=self.atom(e.value, out, hint), ctx=ast.Load())
        """Flatten ``e`` and return a name, constant or static reference for it."""
        if isinstance(e, ast.Constant) or (
            isinstance(e, ast.Name) and e.id not in self.local_functions
        ):
            return e
        if isinstance(e, ast.Attribute) and self.is_static(e):
            return e
        if isinstance(e, ast.JoinedStr) or _is_literal(e):
            return e  # -1, (0, 2, 1): constants stay inline
        v = self.value(e, out, hint)
        if isinstance(v, (ast.Name, ast.Constant)):
            return v
        tmp = self.temp(_hint(v) or hint)
        out.append(assign(tmp, v))
        return name(tmp)

    def value(
        self, e: ast.expr, out: list[ast.stmt], hint: str = "t", into: str | None = None
    ) -> ast.expr:
        """Flatten the operands of ``e``; return one operation over atoms."""
        if into is not None:
            return getattr(self, "expr_" + type(e).__name__)(e, out, hint, into)
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            if isinstance(e, (ast.Constant, ast.Name, ast.JoinedStr)):
                return e
            self.error(
                e,
                f"unsupported expression: {type(e).__name__}",
                "split it into simpler statements",
            )
            return const(None)
        return method(e, out, hint)

    def expr_Name(self, e, out, hint):
        if e.id in self.local_functions:
            self.error(
                e,
                f"local function '{e.id}' used as a value",
                "call it directly, or define it at module level",
            )
        return e

    def expr_Attribute(self, e, out, hint):
        if self.is_static(e):
            return e
        if (getter := properties.getter_call(self, e)) is not None:
            return self.value(getter, out, hint)  # a property's getter, called
        return ast.Attribute(
            value=self.atom(e.value, out, hint), attr=e.attr, ctx=ast.Load()
        )

    def expr_BinOp(self, e, out, hint):
        return ast.BinOp(
            left=self.atom(e.left, out), op=e.op, right=self.atom(e.right, out)
        )

    def expr_UnaryOp(self, e, out, hint):
        return ast.UnaryOp(op=e.op, operand=self.atom(e.operand, out))

    def expr_Compare(self, e, out, hint):
        if len(e.ops) == 1:
            return ast.Compare(
                left=self.atom(e.left, out),
                ops=e.ops,
                comparators=[self.atom(e.comparators[0], out)],
            )
        lefts = [e.left] + e.comparators[:-1]
        pairs = [
            ast.Compare(left=left, ops=[op], comparators=[right])
            for left, op, right in zip(lefts, e.ops, e.comparators)
        ]
        return self.expr_BoolOp(ast.BoolOp(op=ast.And(), values=pairs), out, hint)

    def expr_BoolOp(self, e, out, hint, into=None):
        # a and b  ->  r = a; cond = r; if cond: r = b   (short-circuit kept)
        result = into or self.temp(hint if hint != "t" else "cond", nonsimple=True)
        self.assign_to(name(result, store=True), e.values[0], out)
        for operand in e.values[1:]:
            cond = self.temp("cond", nonsimple=True)
            test = name(result)
            if isinstance(e.op, ast.Or):
                test = ast.UnaryOp(op=ast.Not(), operand=name(result))
            out.append(assign(cond, test))
            branch: list[ast.stmt] = []
            self.depth += 1
            self.assign_to(name(result, store=True), operand, branch)
            self.depth -= 1
            out.append(ast.If(test=name(cond), body=branch, orelse=[]))
        return name(result)

    def expr_IfExp(self, e, out, hint, into=None):
        result = into or self.temp(hint if hint != "t" else "value", nonsimple=True)
        test = self.atom(e.test, out, "cond")
        if not isinstance(test, ast.Name):
            cond = self.temp("cond", nonsimple=True)
            out.append(assign(cond, test))
            test = name(cond)
        body: list[ast.stmt] = []
        orelse: list[ast.stmt] = []
        self.depth += 1
        self.assign_to(name(result, store=True), e.body, body)
        self.assign_to(name(result, store=True), e.orelse, orelse)
        self.depth -= 1
        out.append(ast.If(test=test, body=body, orelse=orelse))
        return name(result)

    def expr_Subscript(self, e, out, hint):
        base = self.atom(e.value, out, hint)
        return ast.Subscript(value=base, slice=self.index(e.slice, out), ctx=ast.Load())

    def index(self, idx: ast.expr, out) -> ast.expr:
        if isinstance(idx, ast.Slice):
            parts = {
                k: (
                    self.atom(getattr(idx, k), out, "bound")
                    if getattr(idx, k) is not None
                    else None
                )
                for k in ("lower", "upper", "step")
            }
            return ast.Slice(**parts)
        if isinstance(idx, ast.Tuple):
            return ast.Tuple(
                elts=[self.index(x, out) for x in idx.elts], ctx=ast.Load()
            )
        return self.atom(idx, out, "index")

    def expr_Tuple(self, e, out, hint):
        return ast.Tuple(elts=[self.atom(x, out) for x in e.elts], ctx=ast.Load())

    def expr_List(self, e, out, hint):
        return ast.List(elts=[self.atom(x, out) for x in e.elts], ctx=ast.Load())

    def expr_Dict(self, e, out, hint):
        if any(k is None for k in e.keys):
            self.error(
                e,
                "unsupported construct: dict unpacking ('**')",
                "build the dict key by key",
            )
        return ast.Dict(
            keys=[self.atom(k, out) for k in e.keys if k is not None],
            values=[
                self.atom(v, out) for k, v in zip(e.keys, e.values) if k is not None
            ],
        )

    def expr_Lambda(self, e, out, hint):
        tmp = self.temp("lambda_fn")
        self._lift(tmp, lambda_to_def(e, tmp))
        return name(tmp)

    def expr_Call(self, e, out, hint):
        e = self.specialise_unpacking(self.unwrap_partial(e), out)
        info = self.classify(e)
        e = self.without_super(e, info)
        if (rewritten := self.builtin_form(e, info)) is not None:
            return self.value(rewritten, out, hint)
        if info.kind in ("user", "local"):
            e = self._bind_arguments(e, info, out)
        args = [self.atom(a, out) for a in e.args]
        keywords = [
            ast.keyword(arg=k.arg, value=self.atom(k.value, out)) for k in e.keywords
        ]
        if info.kind in ("rule", "method"):
            lambda_args.refuse_values(self, e)
        func = e.func
        if info.kind == "method":
            func = ast.Attribute(
                value=self.atom(e.func.value, out), attr=e.func.attr, ctx=ast.Load()
            )
        elif info.kind == "local":
            args += [name(v) for v in self.local_functions[info.target].freevars]
        elif not self.is_static(func) and not (
            isinstance(func, ast.Name) and func.id in self.local_functions
        ):
            func = self.atom(func, out, "fn")
        node = ast.Call(func=func, args=args, keywords=keywords)
        if info.kind == "user" and info.extra.get("self") is not None:
            node.args.insert(0, self.receiver_atom(e, info, func, out))
        anno(node)["call"] = info
        return node


def _hint(v: ast.expr) -> str:
    """A readable base name for a temporary holding ``v``."""
    if isinstance(v, ast.BinOp) or isinstance(v, ast.UnaryOp):
        return ops.label(v.op)
    if isinstance(v, ast.Call):
        f = v.func
        return (
            f.attr
            if isinstance(f, ast.Attribute)
            else (f.id if isinstance(f, ast.Name) else "t")
        )
    if isinstance(v, ast.Subscript):
        base = v.value
        return f"{base.id}_item" if isinstance(base, ast.Name) else "item"
    if isinstance(v, ast.Attribute):
        return v.attr if v.attr != "T" else "transpose"
    if isinstance(v, ast.Compare):
        return "cond"
    if isinstance(v, (ast.Tuple, ast.List)):
        return "items"
    if isinstance(v, ast.Dict):
        return "entries"
    return ""


def _is_literal(e: ast.expr) -> bool:
    """A number (possibly negated), or a tuple of such constants."""
    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        return isinstance(e.operand, ast.Constant) and isinstance(
            e.operand.value, (int, float)
        )
    if isinstance(e, ast.Tuple):
        return all(_is_literal(x) for x in e.elts)
    return False


def ssa_rename(
    node: ast.FunctionDef, nonsimple: set[str], namer, skip: set[str]
) -> None:
    """Give each top-level re-assignment of a simple name a fresh version ``x_1``."""
    params = {a.arg for a in node.args.args}
    current = {p: p for p in params}
    for stmt in node.body:
        _rename_loads(stmt, current)
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            x = stmt.targets[0].id
            if x in nonsimple or x in skip:
                continue
            if x in current:
                new = namer.fresh(x)
                stmt.targets[0].id = new
                current[x] = new
            else:
                current[x] = x


def _rename_loads(stmt: ast.stmt, current: dict[str, str]) -> None:
    for sub in astutil.walk(stmt):
        if (
            isinstance(sub, ast.Name)
            and isinstance(sub.ctx, ast.Load)
            and sub.id in current
        ):
            sub.id = current[sub.id]


def run(parsed: ParsedFunction, namer) -> tuple[ast.FunctionDef, Normalizer]:
    """Normalize ``parsed.node`` in place; raise if anything could not be handled."""
    norm = Normalizer(parsed, namer)
    node = parsed.node
    node.body = norm.block(node.body)
    if norm.problems:
        raise UnsupportedSyntaxError(norm.problems)
    ssa_rename(node, norm.nonsimple, namer, set(norm.local_functions))
    return node, norm
