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

Calls are classified (``anno(call)["call"]``) as ``rule``, ``user``, ``local``
(a lifted nested function), ``method`` or ``unknown``; activity analysis and the
reverse pass decide from that what each call needs.
"""

from __future__ import annotations

import ast
import inspect
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from s2sad.errors import UnsupportedSyntaxError
from s2sad.runtime import registry
from s2sad.transforms.astutil import anno, assign, call, const, copy_loc, loads, name, stores
from s2sad.transforms.parse import ParsedFunction, _MISSING, lambda_to_def

_OP_NAMES = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.MatMult: "matmul",
    ast.Pow: "pow", ast.Mod: "mod", ast.FloorDiv: "floordiv", ast.USub: "neg",
    ast.UAdd: "pos", ast.Not: "not_", ast.Invert: "invert", ast.BitAnd: "and_",
    ast.BitOr: "or_", ast.BitXor: "xor", ast.LShift: "lshift", ast.RShift: "rshift",
}


@dataclass
class CallInfo:
    kind: str  # rule | user | local | method | unknown
    target: Any = None  # the resolved object, local function name, or method name
    extra: dict = field(default_factory=dict)


@dataclass
class LocalFunction:
    node: ast.FunctionDef
    freevars: list[str]


class Normalizer:
    """Rewrites one parsed function into the normal form described above."""

    def __init__(self, parsed: ParsedFunction, namer):
        self.parsed = parsed
        self.namer = namer
        self.env = parsed.env
        node = parsed.node
        self.params = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        self.locals = set(self.params) | stores(node) | {
            s.name for s in ast.walk(node) if isinstance(s, ast.FunctionDef) and s is not node
        }
        self.nonsimple = self._compound_stores(node.body)
        self.local_functions: dict[str, LocalFunction] = {}
        self.problems = []
        self.depth = 0  # > 0 inside if/for/while: names bound there may be re-bound

    # ------------------------------------------------------------------ helpers
    def _compound_stores(self, body: list[ast.stmt]) -> set[str]:
        out: set[str] = set()
        for stmt in body:
            if isinstance(stmt, (ast.If, ast.For, ast.While)):
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

    def is_static(self, expr: ast.expr) -> bool:
        """A name or attribute chain rooted at a non-local name (module, global...)."""
        while isinstance(expr, ast.Attribute):
            expr = expr.value
        return isinstance(expr, ast.Name) and expr.id not in self.locals

    def resolve(self, expr: ast.expr) -> Any:
        if isinstance(expr, ast.Name):
            return self.env.lookup(expr.id)
        base = self.resolve(expr.value)
        if base is _MISSING:
            return _MISSING
        return getattr(base, expr.attr, _MISSING)

    # ------------------------------------------------------------------ blocks
    def block(self, stmts: list[ast.stmt], in_loop: bool = False, nested: bool = False) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        self.depth += nested
        for stmt in stmts:
            self.stmt(stmt, out, in_loop)
        self.depth -= nested
        return out

    def stmt(self, s: ast.stmt, out: list[ast.stmt], in_loop: bool) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            self.error(s, f"unsupported construct: {type(s).__name__} statement",
                       "rewrite it with assignments, if and for")
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
        if (len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                and isinstance(s.value, ast.Lambda)):
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
            self.assign_to(target, ast.BinOp(left=name(target.id), op=s.op, right=s.value), out)
            return
        index = self.index(target.slice, out)
        old = self.temp(f"{target.value.id}_item")
        out.append(assign(old, ast.Subscript(value=name(target.value.id), slice=index,
                                             ctx=ast.Load())))
        new = self.atom(ast.BinOp(left=name(old), op=s.op, right=s.value), out, "value")
        self._setitem(target.value.id, index, new, out)

    def assign_to(self, target: ast.expr, value: ast.expr, out: list[ast.stmt]) -> None:
        if isinstance(target, ast.Name) and isinstance(value, (ast.IfExp, ast.BoolOp)):
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
            index = self.index(target.slice, out)
            self._setitem(target.value.id, index, self.atom(value, out, "value"), out)
        else:  # validated earlier
            self.error(target, "unsupported assignment target", "assign to a name")

    def _setitem(self, base: str, index: ast.expr, value: ast.expr, out) -> None:
        node = assign(ast.Subscript(value=name(base), slice=index, ctx=ast.Store()), value)
        anno(node)["setitem"] = True
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

    def stmt_While(self, s, out, in_loop):
        cond = self.temp("cond", nonsimple=True)
        self.assign_to(name(cond, store=True), s.test, out)
        count = self.temp("n_iter", nonsimple=True)
        out.append(assign(count, const(0)))
        body = [self._increment(count)] + self.block(s.body, True, nested=True)
        self.depth += 1
        self.assign_to(name(cond, store=True), s.test, body)
        self.depth -= 1
        loop = ast.While(test=name(cond), body=body, orelse=[])
        anno(loop)["count"] = count
        out.append(loop)

    def _increment(self, count: str) -> ast.stmt:
        inc = ast.AugAssign(target=name(count, store=True), op=ast.Add(), value=const(1))
        anno(inc)["counter"] = True
        return inc

    def stmt_For(self, s, out, in_loop):
        rng, prologue_for = self._iteration(s.iter, s.target, out)
        index = s.target.id if prologue_for is None else self.temp("i", nonsimple=True)
        self.nonsimple.add(index)
        body: list[ast.stmt] = []
        self.depth += 1
        if prologue_for is not None:
            prologue_for(index, body)
        self.depth -= 1
        body += self.block(s.body, True, nested=True)
        loop = ast.For(target=name(index, store=True), iter=name(rng), body=body or [ast.Pass()],
                       orelse=[])
        anno(loop)["range"] = rng
        if _has_break(body):
            count = self.temp("n_iter", nonsimple=True)
            out.append(assign(count, const(0)))
            loop.body.insert(0, self._increment(count))
            anno(loop)["count"] = count
        out.append(loop)

    def _iteration(self, it: ast.expr, target: ast.expr, out):
        """(name of a range object, callback emitting the target assignments or None)."""
        fn = self.resolve(it.func) if isinstance(it, ast.Call) and self.is_static(it.func) else None
        if fn is range and isinstance(target, ast.Name):
            rng = self.temp("r")
            out.append(assign(rng, self.value(it, out)))
            return rng, None
        seqs, bind = self._sequences(it, fn, target, out)
        length: ast.expr = call("len", seqs[0])
        if len(seqs) > 1:
            length = call("min", *[call("len", q) for q in seqs])
        rng = self.temp("r")
        out.append(assign(rng, self.value(call("range", self.atom(length, out, "n")), out)))
        return rng, bind

    def _sequences(self, it, fn, target, out):
        """Sequences indexed by the loop counter, and how to bind the target from them."""
        if fn is enumerate and isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
            seq = self.atom(it.args[0], out, "seq")
            start = it.args[1] if len(it.args) > 1 else None

            def bind(i, body):
                first = name(i) if start is None else ast.BinOp(left=name(i), op=ast.Add(), right=start)
                self.assign_to(target.elts[0], first, body)
                self.assign_to(target.elts[1], ast.Subscript(value=seq, slice=name(i), ctx=ast.Load()), body)
            return [seq], bind
        if fn is zip and isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == len(it.args):
            seqs = [self.atom(a, out, "seq") for a in it.args]

            def bind(i, body):
                for elt, q in zip(target.elts, seqs):
                    self.assign_to(elt, ast.Subscript(value=q, slice=name(i), ctx=ast.Load()), body)
            return seqs, bind
        dict_view = _dict_view(it, self)
        if dict_view is not None:
            return self._dict_items(dict_view, it.func.attr, target, out)
        if isinstance(it, ast.Call):
            it = call("list", it)
        seq = self.atom(it, out, "seq")

        def bind(i, body):
            self.assign_to(target, ast.Subscript(value=seq, slice=name(i), ctx=ast.Load()), body)
        return [seq], bind

    def _dict_items(self, d, kind, target, out):
        """``for k, v in d.items()`` -> loop over ``list(d.keys())`` reading ``d[k]``."""
        keys = self.temp("keys")
        keys_call = ast.Call(func=ast.Attribute(value=d, attr="keys", ctx=ast.Load()), args=[],
                             keywords=[])
        out.append(assign(keys, self.value(call("list", keys_call), out)))

        def bind(i, body):
            key = self.temp("key", nonsimple=True)
            body.append(assign(key, ast.Subscript(value=name(keys), slice=name(i), ctx=ast.Load())))
            item = ast.Subscript(value=d, slice=name(key), ctx=ast.Load())
            if kind == "items":
                self.assign_to(target.elts[0], name(key), body)
                self.assign_to(target.elts[1], item, body)
            elif kind == "values":
                self.assign_to(target, item, body)
            else:
                self.assign_to(target, name(key), body)
        return [name(keys)], bind

    # ------------------------------------------------------------------ nested functions
    def _lift(self, fname: str, node: ast.FunctionDef) -> None:
        inner_locals = {a.arg for a in node.args.args} | stores(node)
        free = sorted((loads(node) - inner_locals) & (self.locals - {fname}))
        free = [v for v in free if v not in self.local_functions]
        for v in free:
            node.args.args.append(ast.arg(arg=v, annotation=None))
        self.local_functions[fname] = LocalFunction(node, free)

    # ------------------------------------------------------------------ expressions
    def atom(self, e: ast.expr, out: list[ast.stmt], hint: str = "t") -> ast.expr:
        """Flatten ``e`` and return a name, constant or static reference for it."""
        if isinstance(e, ast.Constant) or (isinstance(e, ast.Name) and e.id not in self.local_functions):
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

    def value(self, e: ast.expr, out: list[ast.stmt], hint: str = "t",
              into: str | None = None) -> ast.expr:
        """Flatten the operands of ``e``; return one operation over atoms."""
        if into is not None:
            return getattr(self, "expr_" + type(e).__name__)(e, out, hint, into)
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            if isinstance(e, (ast.Constant, ast.Name, ast.JoinedStr)):
                return e
            self.error(e, f"unsupported expression: {type(e).__name__}",
                       "split it into simpler statements")
            return const(None)
        return method(e, out, hint)

    def expr_Name(self, e, out, hint):
        if e.id in self.local_functions:
            self.error(e, f"local function '{e.id}' used as a value",
                       "call it directly, or define it at module level")
        return e

    def expr_Attribute(self, e, out, hint):
        if self.is_static(e):
            return e
        return ast.Attribute(value=self.atom(e.value, out, hint), attr=e.attr, ctx=ast.Load())

    def expr_BinOp(self, e, out, hint):
        return ast.BinOp(left=self.atom(e.left, out), op=e.op, right=self.atom(e.right, out))

    def expr_UnaryOp(self, e, out, hint):
        return ast.UnaryOp(op=e.op, operand=self.atom(e.operand, out))

    def expr_Compare(self, e, out, hint):
        if len(e.ops) == 1:
            return ast.Compare(left=self.atom(e.left, out), ops=e.ops,
                               comparators=[self.atom(e.comparators[0], out)])
        lefts = [e.left] + e.comparators[:-1]
        pairs = [ast.Compare(left=l, ops=[op], comparators=[r])
                 for l, op, r in zip(lefts, e.ops, e.comparators)]
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
            parts = {k: (self.atom(getattr(idx, k), out, "bound") if getattr(idx, k) is not None else None)
                     for k in ("lower", "upper", "step")}
            return ast.Slice(**parts)
        if isinstance(idx, ast.Tuple):
            return ast.Tuple(elts=[self.index(x, out) for x in idx.elts], ctx=ast.Load())
        return self.atom(idx, out, "index")

    def expr_Tuple(self, e, out, hint):
        return ast.Tuple(elts=[self.atom(x, out) for x in e.elts], ctx=ast.Load())

    def expr_List(self, e, out, hint):
        return ast.List(elts=[self.atom(x, out) for x in e.elts], ctx=ast.Load())

    def expr_Dict(self, e, out, hint):
        if any(k is None for k in e.keys):
            self.error(e, "unsupported construct: dict unpacking ('**')", "build the dict key by key")
        return ast.Dict(keys=[self.atom(k, out) for k in e.keys if k is not None],
                        values=[self.atom(v, out) for k, v in zip(e.keys, e.values) if k is not None])

    def expr_Lambda(self, e, out, hint):
        tmp = self.temp("lambda_fn")
        self._lift(tmp, lambda_to_def(e, tmp))
        return name(tmp)

    def expr_Call(self, e, out, hint):
        info = self.classify(e)
        if info.kind in ("user", "local"):
            e = self._bind_arguments(e, info)
        args = [self.atom(a, out) for a in e.args]
        keywords = [ast.keyword(arg=k.arg, value=self.atom(k.value, out)) for k in e.keywords]
        func = e.func
        if info.kind == "method":
            func = ast.Attribute(value=self.atom(e.func.value, out), attr=e.func.attr, ctx=ast.Load())
        elif info.kind == "local":
            args += [name(v) for v in self.local_functions[info.target].freevars]
        elif not self.is_static(func) and not (isinstance(func, ast.Name) and func.id in self.local_functions):
            func = self.atom(func, out, "fn")
        node = ast.Call(func=func, args=args, keywords=keywords)
        if info.kind == "user" and info.extra.get("self") is not None:
            node.args.insert(0, info.extra["self"])
        anno(node)["call"] = info
        return node

    def _bind_arguments(self, e: ast.Call, info: CallInfo) -> ast.Call:
        """Rewrite a call to a user function with every argument positional."""
        if info.kind == "local":
            params, defaults = _def_params(self.local_functions[info.target].node)
            params = params[: len(params) - len(self.local_functions[info.target].freevars)]
        else:
            params, defaults = _object_params(info.target, e.func)
        if info.extra.get("self") is not None:
            params = params[1:]
        given = {k.arg: k.value for k in e.keywords}
        unknown = set(given) - set(params)
        if unknown or len(e.args) > len(params):
            self.error(e, f"call does not match the signature of '{ast.unparse(e.func)}'",
                       "check the argument names and count")
            return e
        args = list(e.args)
        for p in params[len(e.args):]:
            if p in given:
                args.append(given[p])
            elif p in defaults and defaults[p] is None:
                self.error(e, f"the default of parameter '{p}' of '{ast.unparse(e.func)}' is not "
                           "a literal", f"pass {p}=... explicitly in this call")
                return e
            elif p in defaults:
                args.append(defaults[p])
            else:
                self.error(e, f"missing argument '{p}' in call to '{ast.unparse(e.func)}'",
                           "pass every parameter that has no default")
                return e
        return ast.Call(func=e.func, args=args, keywords=[])

    def classify(self, e: ast.Call) -> CallInfo:
        func = e.func
        if isinstance(func, ast.Name) and func.id in self.local_functions:
            return CallInfo("local", func.id)
        if self.is_static(func):
            obj = self.resolve(func)
            if obj is _MISSING:
                self.error(func, f"unresolved name '{ast.unparse(func)}'",
                           "define it at module level before calling the gradient")
                return CallInfo("unknown")
            self_expr = func.value if isinstance(func, ast.Attribute) else None
            return classify_object(obj, self_expr)
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if isinstance(receiver, ast.Name) and receiver.id in self.parsed.example_args:
                obj = getattr(self.parsed.example_args[receiver.id], func.attr, _MISSING)
                if isinstance(obj, types.MethodType) and _has_source(obj.__func__):
                    return CallInfo("user", obj.__func__, {"self": name(receiver.id)})
            return CallInfo("method", func.attr)
        return CallInfo("unknown")


def classify_object(obj: Any, self_expr: ast.expr | None = None) -> CallInfo:
    """How a call to the Python object ``obj`` is differentiated."""
    if registry.lookup(obj) is not None:
        return CallInfo("rule", obj)
    if isinstance(obj, types.MethodType):
        if registry.lookup(obj.__func__) is not None:
            return CallInfo("rule", obj.__func__, {"self": self_expr})
        if _has_source(obj.__func__):
            return CallInfo("user", obj.__func__, {"self": self_expr})
    if isinstance(obj, types.FunctionType) and _has_source(obj):
        return CallInfo("user", obj)
    return CallInfo("unknown", obj)


def _has_source(fn: Any) -> bool:
    mod = getattr(fn, "__module__", "") or ""
    if mod.startswith(("numpy", "s2sad.runtime")):
        return False
    try:
        inspect.getsourcefile(fn)
        return inspect.getsourcelines(fn) is not None
    except (OSError, TypeError):
        return False


def _def_params(node: ast.FunctionDef) -> tuple[list[str], dict[str, ast.expr]]:
    params = [a.arg for a in node.args.args]
    defaults = dict(zip(params[len(params) - len(node.args.defaults):], node.args.defaults))
    return params, defaults


def _object_params(fn: Any, func_expr: ast.expr) -> tuple[list[str], dict[str, ast.expr]]:
    """Parameter names of a Python function, and its defaults as expressions."""
    sig = inspect.signature(fn)
    params, defaults = [], {}
    for i, p in enumerate(sig.parameters.values()):
        params.append(p.name)
        if p.default is not inspect.Parameter.empty:
            defaults[p.name] = _default_expr(fn, p.name, p.default)
    return params, defaults


def _default_expr(fn: Any, pname: str, value: Any) -> ast.expr | None:
    """A literal default as a constant; None when it is some other object."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return const(value)
    if isinstance(value, tuple) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return ast.Tuple(elts=[const(v) for v in value], ctx=ast.Load())
    return None


def _hint(v: ast.expr) -> str:
    """A readable base name for a temporary holding ``v``."""
    if isinstance(v, ast.BinOp) or isinstance(v, ast.UnaryOp):
        return _OP_NAMES.get(type(v.op), "t")
    if isinstance(v, ast.Call):
        f = v.func
        return f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "t")
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
        return isinstance(e.operand, ast.Constant) and isinstance(e.operand.value, (int, float))
    if isinstance(e, ast.Tuple):
        return all(_is_literal(x) for x in e.elts)
    return False


def _dict_view(it: ast.expr, norm: "Normalizer") -> ast.expr | None:
    """The dict of ``d.items()`` / ``d.values()`` / ``d.keys()`` on a local, else None."""
    if (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args
            and it.func.attr in ("items", "values", "keys")
            and isinstance(it.func.value, ast.Name) and it.func.value.id in norm.locals):
        return it.func.value
    return None


def _has_break(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.If) and isinstance(body[-1].body[0], ast.Break)


def ssa_rename(node: ast.FunctionDef, nonsimple: set[str], namer, skip: set[str]) -> None:
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
    for sub in ast.walk(stmt):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in current:
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
