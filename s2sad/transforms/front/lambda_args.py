"""A lambda (or a one-expression local function) of the caller passed to a callee.

``apply(lambda v: v * w, x)`` with ``def apply(f, x): return f(x)``: the callee
is specialised on the lambda.  A copy of it, with the lambda's body written
where it calls ``f``, becomes a local function of the caller, defined just
before the statement, and the call goes to that copy::

    def loss(w, x):                          def loss(w, x):
        return np.sum(apply(lambda v: v * w,      def apply_1(x_1):
                            x))             ->          return x_1 * w
                                                  return np.sum(apply_1(x))

so the lambda's free variables (``w``) are read from the caller, as Python
reads them, and local-function lifting (normalize) passes them to the copy as
extra arguments.  The lambda is written at the call, so the call cannot get
another function; the global naming the callee (``apply``) is checked on entry
like any other global the code was compiled for.  The copy's names are fresh
(the callee's own locals never capture the lambda's names), and its statements
point at the call's line.

Specialised only when it is safe: the callee is a module-level Python function
without ``*args``, ``**kwargs``, keyword-only or positional-only parameters, it
does not name itself, reads the same globals as the caller, and uses the
function parameter only by calling it with arguments it can evaluate first
(names, constants, or expressions hoisted out of plain statements).  Any other
case stays a call, refused as before with a located error.
"""

from __future__ import annotations

import ast
import builtins
import copy
import inspect
import types
from typing import Any

from s2sad.transforms.astutil import anno, assign, const, copy_loc, name
from s2sad.transforms.front import parse
from s2sad.transforms.front.parse import MISSING

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def specialise(rw, stmt: ast.stmt, exprs: list[ast.expr], local_fns: dict) -> list:
    """Copies of callees for the calls in ``exprs`` (the statement's head
    expressions) that pass a lambda; each such call is redirected to its copy
    in place.  ``local_fns``: the caller's one-expression local functions and
    lambdas assigned once (name -> Lambda)."""
    made: list[ast.stmt] = []
    for e in exprs:
        for sub in _calls_outside_lambdas(e):
            copy_def = _specialise_call(rw, sub, local_fns)
            if copy_def is not None:
                for n in ast.walk(copy_def):
                    if isinstance(n, (ast.expr, ast.stmt)):
                        ast.copy_location(n, sub)
                made.append(copy_def)
    return made


def local_lambdas(body: list[ast.stmt], counts: dict[str, int]) -> dict:
    """``f = lambda v: ...`` and ``def f(v): return ...`` at the caller's top
    level, ``f`` bound once: name -> an equivalent Lambda."""
    out = {}
    for s in body:
        if (
            isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and isinstance(s.value, ast.Lambda)
            and counts.get(s.targets[0].id) == 1
        ):
            out[s.targets[0].id] = s.value
        elif (
            isinstance(s, ast.FunctionDef)
            and not s.decorator_list
            and len(s.body) == 1
            and isinstance(s.body[0], ast.Return)
            and s.body[0].value is not None
            and counts.get(s.name, 0) == 0
        ):
            out[s.name] = ast.Lambda(args=s.args, body=s.body[0].value)
    return out


def _calls_outside_lambdas(e: ast.expr):
    todo = [e]
    while todo:
        sub = todo.pop()
        if isinstance(sub, (ast.Lambda, *_COMPS)):
            continue
        if isinstance(sub, ast.Call):
            yield sub
        todo.extend(ast.iter_child_nodes(sub))


def _simple(lam: ast.Lambda) -> bool:
    """Positional parameters only, and no scope in its body that could rebind one."""
    a = lam.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
        return False
    return not any(
        isinstance(n, (*_SCOPES, *_COMPS, ast.NamedExpr)) for n in ast.walk(lam.body)
    )


def _specialise_call(rw, c: ast.Call, local_fns: dict) -> ast.FunctionDef | None:
    lambdas = {}
    for i, a in enumerate(c.args):
        if isinstance(a, ast.Lambda) and _simple(a):
            lambdas[i] = a
        elif isinstance(a, ast.Name) and a.id in local_fns and _simple(local_fns[a.id]):
            lambdas[i] = local_fns[a.id]
    kw_lambdas = {}
    for k in c.keywords:
        v = k.value
        if k.arg is None:
            return None
        if isinstance(v, ast.Lambda) and _simple(v):
            kw_lambdas[k.arg] = v
        elif isinstance(v, ast.Name) and v.id in local_fns and _simple(local_fns[v.id]):
            kw_lambdas[k.arg] = local_fns[v.id]
    if not lambdas and not kw_lambdas:
        return None
    if any(isinstance(a, ast.Starred) for a in c.args):
        return None
    fn = rw.resolve(c.func)
    if not isinstance(fn, types.FunctionType) or fn.__closure__:
        return None
    try:
        node = parse.parse_function(fn).node
    except Exception:  # noqa: BLE001  (no source: not specialised)
        return None
    a = node.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
        return None
    params = [p.arg for p in a.args]
    if len(c.args) > len(params):
        return None
    bound: dict[str, ast.expr] = dict(zip(params, c.args))
    for k in c.keywords:
        if k.arg not in params or k.arg in bound:
            return None
        bound[k.arg] = k.value
    funcs = {params[i]: lam for i, lam in lambdas.items()}
    funcs.update(kw_lambdas)
    sig = inspect.signature(fn)
    for p in params:
        if p in bound:
            continue
        default = sig.parameters[p].default
        if default is inspect.Parameter.empty or not isinstance(
            default, (bool, int, float, str, type(None))
        ):
            return None
        bound[p] = const(default)
    if not _callee_is_plain(rw, node, fn, set(funcs)):
        return None
    table = _fresh_names(rw, node)
    node = _Rename(table).visit(node)
    funcs = {table[p]: lam for p, lam in funcs.items()}
    kept = [table[p] for p in params if table[p] not in funcs]
    node.name = rw.namer.fresh(fn.__name__)
    node.args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=p) for p in kept],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=[],
    )
    node.body = _inline_block(rw, node.body, funcs)
    if node.body is None:
        return None
    # the global that names the function copied is checked like any global the
    # code was compiled for (prepare.bind_statics reads this mark)
    anno(node)["guards"] = [copy.deepcopy(c.func)]
    c.func = name(node.name)
    c.args = [bound[p] for p in params if table[p] not in funcs]
    c.keywords = []
    return node


def _callee_is_plain(rw, node: ast.FunctionDef, fn, funcs: set[str]) -> bool:
    """The callee reads the caller's globals as its own, never names itself, and
    uses each function parameter only as the callee of a call."""
    own = {p.arg for p in node.args.args}
    stored = {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    called = {
        id(sub.func)
        for sub in ast.walk(node)
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)
    }
    for n in ast.walk(node):
        if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)):
            return False
        if isinstance(n, _SCOPES) and n is not node:
            return False  # a nested scope could capture the function parameter
        if not isinstance(n, ast.Name):
            continue
        if n.id in funcs and (id(n) not in called or n.id in stored):
            return False
        if n.id in own or n.id in stored:
            continue
        if n.id == fn.__name__:
            return False
        mine = fn.__globals__.get(n.id, getattr(builtins, n.id, MISSING))
        if n.id in rw.locals or rw.env.lookup(n.id) is not mine:
            return False
    return True


def _fresh_names(rw, node: ast.FunctionDef) -> dict[str, str]:
    names = {p.arg for p in node.args.args} | {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    return {v: rw.namer.fresh(v) for v in sorted(names)}


def _inline_block(rw, stmts: list[ast.stmt], funcs: dict) -> list[ast.stmt] | None:
    out: list[ast.stmt] = []
    for s in stmts:
        for field in ("body", "orelse"):
            inner = getattr(s, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                new = _inline_block(rw, inner, funcs)
                if new is None:
                    return None
                setattr(s, field, new)
        before: list[ast.stmt] = []
        inliner = _Inliner(rw, funcs, before, s)
        if isinstance(s, (ast.For, ast.While, ast.If)):
            field = "iter" if isinstance(s, ast.For) else "test"
            inliner.hoist = not isinstance(s, ast.While)
            setattr(s, field, inliner.visit(getattr(s, field)))
        else:
            inliner.visit(s)
        if inliner.failed:
            return None
        out.extend(before)
        out.append(s)
    return out


class _Inliner(ast.NodeTransformer):
    """Calls of the function parameters replaced by the lambdas' bodies, their
    arguments first computed into fresh names (where Python surely evaluates
    them: not in a branch of ``a if c else b`` or after ``and``/``or``)."""

    def __init__(self, rw, funcs: dict, before: list, at: ast.stmt):
        self.rw, self.funcs, self.before, self.at = rw, funcs, before, at
        self.hoist, self.failed = True, False

    def visit_IfExp(self, node):
        node.test = self.visit(node.test)
        hoist, self.hoist = self.hoist, False
        node.body, node.orelse = self.visit(node.body), self.visit(node.orelse)
        self.hoist = hoist
        return node

    def visit_BoolOp(self, node):
        node.values[0] = self.visit(node.values[0])
        hoist, self.hoist = self.hoist, False
        node.values[1:] = [self.visit(v) for v in node.values[1:]]
        self.hoist = hoist
        return node

    def _comp(self, node):
        hoist, self.hoist = self.hoist, False  # its variables: no hoisting
        self.generic_visit(node)
        self.hoist = hoist
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comp

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Name) and node.func.id in self.funcs):
            return node
        lam = self.funcs[node.func.id]
        if node.keywords or len(node.args) != len(lam.args.args):
            self.failed = True
            return node
        args = []
        for a in node.args:
            if isinstance(a, (ast.Name, ast.Constant)):
                args.append(a)
                continue
            if not self.hoist:
                self.failed = True
                return node
            tmp = self.rw.namer.fresh("arg")
            self.before.append(copy_loc(assign(tmp, a), self.at))
            args.append(name(tmp))
        table = {p.arg: a for p, a in zip(lam.args.args, args)}
        return _Substitute(table).visit(copy.deepcopy(lam.body))


class _Rename(ast.NodeTransformer):
    def __init__(self, table: dict[str, str]):
        self.table = table

    def visit_Name(self, node: ast.Name):
        if node.id in self.table:
            node.id = self.table[node.id]
        return node

    def visit_arg(self, node: ast.arg):
        if node.arg in self.table:
            node.arg = self.table[node.arg]
        return node


class _Substitute(ast.NodeTransformer):
    """A lambda's parameters replaced by the argument expressions (names or
    constants); nested scopes in the body that rebind them are not looked into."""

    def __init__(self, table: dict[str, ast.expr]):
        self.table = table

    def visit_Name(self, node: ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id in self.table:
            return copy_loc(copy.deepcopy(self.table[node.id]), node)
        return node


def refuse_values(norm: Any, e: ast.Call) -> None:
    """A lambda passed to a function with a rule (``min(a, b, key=lambda v:
    -v)``) is lifted by normalize as a local function, which the emitted module
    defines only where the code calls it: refused here with its line (it was a
    NameError when the gradient ran)."""
    for a in [*e.args, *(k.value for k in e.keywords)]:
        if isinstance(a, ast.Lambda):
            norm.error(
                a,
                f"lambda passed as a value to '{ast.unparse(e.func)}', which s2sad "
                "does not compile",
                "pass a module-level function instead (min(a, b, key=neg)), or "
                "write the choice out (a if -a < -b else b)",
            )
