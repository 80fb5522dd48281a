"""Callees known only at run time: function arguments, ``map``, ``functools.partial``
and ``functools.reduce``.

Runs in desugar, before the comprehensions become loops.

**Function arguments.**  A parameter whose value in this call is a function
(``func`` in ``odeint(func, y0, ts)``, ``activation=np.tanh`` given to ``grad``,
a callee's default ``nonlinearity=np.tanh``) is specialised on that function:
normalize resolves ``func(y, t)`` on the value (``calls.example_of``) and the
callee job is keyed on which function it got (``binding.object_key``), so two
call sites passing different functions get two compiled callees.  The function
first checks that it still has the function it was compiled for::

    def loss(W, x, activation):         if activation is not tanh:
        ...                     ->          globals_changed("activation (compiled for numpy.tanh)")
                                        ...

and ``grad`` compiles again (``GlobalsChangedError``) rather than run code
specialised on another function.

**Higher-order builtins** become forms the later passes know::

    sum(map(f, xs, ys))              ->  sum([f(v, w) for v, w in zip(xs, ys)])
    map(partial(f, p), data)         ->  [f(p, v) for v in data]
    partial(f, a)(x)                 ->  f(a, x)
    g = partial(f, a); g(x)          ->  f(a, x)        (g only ever called)
    y = functools.reduce(f, xs)      ->  seq = xs
                                         acc = seq[0]
                                         for v in seq[1:]:
                                             acc = f(acc, v)
                                         y = acc
    (lambda a, b: a * b)(acc, v)     ->  acc * v        (arguments that are names)
    vf = np.vectorize(f); vf(x)      ->  np.vectorize(f)(x), then as callee_forms writes it

A lambda passed to a user function specialises a local copy of that function
(``front/lambda_args.py``).
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import sys
import types
from typing import Any

import numpy as np

from s2sad.runtime.support import globals_changed
from s2sad.transforms.astutil import (
    Namer,
    anno,
    assign,
    const,
    copy_loc,
    name,
    stores,
    without_docstring,
)
from s2sad.transforms.front import lambda_args, parse
from s2sad.transforms.front.callee_forms import Exprs, heads
from s2sad.transforms.front.calls import CallInfo
from s2sad.transforms.front.parse import MISSING

#: values a function parameter is specialised on (compared by identity)
ROUTINES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    np.ufunc,
    functools.partial,
)


def is_routine(v: Any) -> bool:
    return isinstance(v, ROUTINES)


def routine_name(v: Any) -> str:
    if isinstance(v, functools.partial):
        return f"partial({routine_name(v.func)}, ...)"
    mod = getattr(v, "__module__", None) or ""
    if isinstance(v, np.ufunc):
        mod = "numpy"
    what = getattr(v, "__qualname__", None) or getattr(v, "__name__", "?")
    return f"{mod}.{what}" if mod else what


def run(node: ast.FunctionDef, examples: dict, namer: Namer, env) -> None:
    """Guards for the function parameters; ``map``/``partial``/``reduce`` rewritten."""
    rebound = stores(node)
    params = [a.arg for a in node.args.args]
    _Rewriter(env, set(params) | rebound, namer).rewrite(node)
    guards = [
        _guard(p, examples[p])
        for p in params
        if p in examples and is_routine(examples[p]) and p not in rebound
    ]
    node.body[0:0] = [copy_loc(g, node.body[0]) for g in guards] if node.body else []


def _origin(v: Any) -> list | None:
    """Where a later process finds ``v`` again: its module's attribute."""
    mod = "numpy" if isinstance(v, np.ufunc) else getattr(v, "__module__", None)
    attr = getattr(v, "__name__", None)
    if mod and attr and getattr(sys.modules.get(mod), attr, None) is v:
        return ["module", mod, attr]
    return None


def _bound(wanted: str, obj: Any) -> ast.Name:
    node = name(wanted)
    anno(node)["bind"] = (obj, _origin(obj))
    return node


def _guard(param: str, value: Any) -> ast.stmt:
    """``if param is not <value>: globals_changed(...)``."""
    wanted = getattr(value, "__name__", None) or "fn"
    if not wanted.isidentifier():  # <lambda>
        wanted = f"{param}_fn"
    test = ast.Compare(
        left=name(param), ops=[ast.IsNot()], comparators=[_bound(wanted, value)]
    )
    fail = ast.Call(
        func=_bound("globals_changed", globals_changed),
        args=[const(f"{param} (compiled for {routine_name(value)})")],
        keywords=[],
    )
    anno(fail)["call"] = CallInfo("rule", globals_changed)
    return ast.If(test=test, body=[ast.Expr(value=fail)], orelse=[])


class _Rewriter:
    def __init__(self, env, locals_: set[str], namer: Namer):
        self.env, self.locals, self.namer = env, locals_, namer
        self.partials: dict[str, ast.Call] = {}  # g = partial(f, a), g only called
        self.vectorized: dict[str, ast.Call] = (
            {}
        )  # vf = np.vectorize(f), vf only called

    def resolve(self, expr: ast.expr) -> Any:
        path = []
        while isinstance(expr, ast.Attribute):
            path.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name) or expr.id in self.locals:
            return MISSING
        value = self.env.lookup(expr.id)
        if value is MISSING:
            value = getattr(builtins, expr.id, MISSING)
        for attr in reversed(path):
            value = getattr(value, attr, MISSING)
        return value

    def is_(self, expr: ast.expr, obj: Any) -> bool:
        try:
            return self.resolve(expr) is obj
        except (AttributeError, TypeError, ValueError, RuntimeError):
            return False  # a property raising on getattr

    def is_partial(self, e: ast.expr) -> bool:
        return (
            isinstance(e, ast.Call)
            and self.is_(e.func, functools.partial)
            and bool(e.args)
            and not any(isinstance(a, ast.Starred) for a in e.args)
            and all(k.arg is not None for k in e.keywords)
        )

    # -- the function
    def rewrite(self, node: ast.FunctionDef) -> None:
        self.find_partials(node)
        counts: dict[str, int] = {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                counts[sub.id] = counts.get(sub.id, 0) + 1
        self.local_fns = lambda_args.local_lambdas(node.body, counts)
        node.body = self.block(node.body)

    def find_partials(self, node: ast.FunctionDef) -> None:
        """``g = partial(f, a)`` assigned once, ``g`` only ever called or mapped,
        ``a`` names never rebound: calls of ``g`` become calls of ``f``."""
        counts: dict[str, int] = {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                counts[sub.id] = counts.get(sub.id, 0) + 1
        called = {
            id(sub.func)
            for sub in ast.walk(node)
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)
        }
        for stmt in node.body:
            if self.vectorize_alias(node, stmt, counts, called):
                continue
            if not (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and counts.get(stmt.targets[0].id) == 1
                and self.is_partial(stmt.value)
            ):
                continue
            var = stmt.targets[0].id
            fixed = [a for a in ast.walk(stmt.value) if isinstance(a, ast.Name)]
            if any(counts.get(n.id, 0) > 0 for n in fixed):
                continue  # its arguments may change after the partial is made
            uses = [
                sub
                for sub in ast.walk(node)
                if isinstance(sub, ast.Name)
                and sub.id == var
                and isinstance(sub.ctx, ast.Load)
            ]
            mapped = {
                id(sub.args[0])
                for sub in ast.walk(node)
                if isinstance(sub, ast.Call)
                and sub.args
                and (
                    self.is_(sub.func, builtins.map)
                    or self.is_(sub.func, functools.reduce)
                )
            }
            if all(id(u) in called or id(u) in mapped for u in uses):
                self.partials[var] = stmt.value
                anno(stmt)["partial_alias"] = True

    def vectorize_alias(self, node, stmt, counts: dict, called: set) -> bool:
        """``vf = np.vectorize(f)`` assigned once, ``vf`` only ever called, ``f``
        never rebound: each ``vf(x)`` becomes ``np.vectorize(f)(x)`` (callee_forms)."""
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and counts.get(stmt.targets[0].id) == 1
            and isinstance(stmt.value, ast.Call)
            and self.is_(stmt.value.func, np.vectorize)
            and len(stmt.value.args) == 1
            and not stmt.value.keywords
        ):
            return False
        var = stmt.targets[0].id
        if any(
            isinstance(a, ast.Name) and counts.get(a.id, 0) > 0
            for a in ast.walk(stmt.value.args[0])
        ):
            return False
        uses = [
            sub
            for sub in ast.walk(node)
            if isinstance(sub, ast.Name)
            and sub.id == var
            and isinstance(sub.ctx, ast.Load)
        ]
        if not all(id(u) in called for u in uses):
            return False
        self.vectorized[var] = stmt.value
        anno(stmt)["partial_alias"] = True
        return True

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            if anno(stmt).get("partial_alias"):
                continue
            made = self.factory(stmt)
            if made is None and not isinstance(stmt, ast.FunctionDef):
                # f(lambda v: v * w, x): f specialised on the lambda (a local copy)
                exprs = [v for _, v in heads(stmt)]
                out.extend(lambda_args.specialise(self, stmt, exprs, self.local_fns))
            out.extend(made if made is not None else self.statement(stmt))
        return out

    def factory(self, stmt: ast.stmt) -> list[ast.stmt] | None:
        """``act = make_act(2.0)`` where ``make_act`` only returns a lambda: its
        parameters become fresh locals and ``act`` that lambda (a local function,
        whose calls normalize resolves)::

            def make_act(k):                    k_1 = 2.0
                return lambda z: np.tanh(k * z) act = lambda z: np.tanh(k_1 * z)
        """
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
            and not stmt.value.keywords
            and not any(isinstance(a, ast.Starred) for a in stmt.value.args)
        ):
            return None
        fn = self.resolve(stmt.value.func)
        if not isinstance(fn, types.FunctionType) or fn.__closure__:
            return None
        try:
            node = parse.parse_function(fn).node
        except Exception:  # noqa: BLE001  (no source: not a factory s2sad reads)
            return None
        body = without_docstring(node.body)
        a = node.args
        if (
            len(body) != 1
            or not isinstance(body[0], ast.Return)
            or not isinstance(body[0].value, ast.Lambda)
            or a.vararg
            or a.kwarg
            or a.kwonlyargs
            or a.posonlyargs
            or a.defaults
            or len(a.args) != len(stmt.value.args)
        ):
            return None
        lam = body[0].value
        inner = {p.arg for p in lam.args.args}
        outer = [p.arg for p in a.args]
        free = {
            n.id
            for n in ast.walk(lam.body)
            if isinstance(n, ast.Name) and n.id not in inner and n.id not in outer
        }
        for var in free:  # the lambda's globals must mean the same here
            if var in self.locals or self.env.lookup(var) is not fn.__globals__.get(
                var, getattr(builtins, var, MISSING)
            ):
                return None
        table = {p: self.namer.fresh(p) for p in outer if p not in inner}
        out = [
            copy_loc(assign(table[p], arg), stmt)
            for p, arg in zip(outer, stmt.value.args)
            if p in table
        ]
        lam.body = _Rename(table).visit(lam.body)
        out.append(copy_loc(assign(stmt.targets[0].id, lam), stmt))
        return out

    def statement(self, stmt: ast.stmt) -> list[ast.stmt]:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            return [stmt]
        for field in ("body", "orelse", "finalbody"):
            if isinstance(getattr(stmt, field, None), list):
                setattr(stmt, field, self.block(getattr(stmt, field)))
        for handler in getattr(stmt, "handlers", []):
            handler.body = self.block(handler.body)
        before: list[ast.stmt] = []
        for field, value in heads(stmt):
            new = Exprs(self, before, hoist=not isinstance(stmt, ast.While)).visit(
                value
            )
            setattr(stmt, field, new)
        return [*before, stmt]

    # -- calls
    def apply(self, f: ast.expr, args: list, at: ast.AST, keywords=()) -> ast.expr:
        """The expression calling ``f`` with ``args`` (and ``keywords``)."""
        if isinstance(f, ast.Name) and f.id in self.partials:
            f = copy.deepcopy(self.partials[f.id])
        if self.is_partial(f):
            kws = [*f.keywords, *keywords]
            return self.apply(f.args[0], [*f.args[1:], *args], at, kws)
        return self.plain(f, args, at, keywords)

    def plain(self, f, args, at, keywords=()) -> ast.expr:
        if (
            isinstance(f, ast.Lambda)
            and not keywords
            and all(isinstance(a, ast.Name) for a in args)
            and _simple_lambda(f, len(args))
        ):
            table = {p.arg: a.id for p, a in zip(f.args.args, args)}
            return _Rename(table).visit(copy.deepcopy(f.body))
        return copy_loc(ast.Call(func=f, args=list(args), keywords=list(keywords)), at)


def _simple_lambda(f: ast.Lambda, n: int) -> bool:
    a = f.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
        return False
    if len(a.args) != n:
        return False
    params = {p.arg for p in a.args}
    for sub in ast.walk(f.body):  # an inner scope could rebind a parameter
        if isinstance(sub, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp)):
            return False
        if isinstance(sub, (ast.GeneratorExp, ast.NamedExpr)):
            return False
        if (
            isinstance(sub, ast.Name)
            and sub.id in params
            and not isinstance(sub.ctx, ast.Load)
        ):
            return False
    return True


class _Rename(ast.NodeTransformer):
    def __init__(self, table: dict[str, str]):
        self.table = table

    def visit_Name(self, node: ast.Name):
        if node.id in self.table:
            return copy_loc(name(self.table[node.id]), node)
        return node
