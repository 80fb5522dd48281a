"""Classes and functions that inlined objects hold, and the calls made through them.

Nielsen's ``network2.py`` keeps its cost as a class in an attribute::

    class Network:
        def __init__(self, sizes, cost=CrossEntropyCost):
            self.cost = cost
        def loss(self, a, y):
            return self.cost.fn(a, y)          # fn a staticmethod

When front/instances.py inlines such an object, its parameters and attributes
become locals (``cost_1 = Network___init___cost_default``, ``net_cost = cost_1``)
and the call becomes ``net_cost.fn(a, y)``: a method of a local, which the later
passes cannot resolve.  :func:`resolve_calls` writes it on the class itself
(``Network___init___cost_default.fn(a, y)``) where every store of the local, in
the whole function, is a plain assignment of one and the same class or function,
named by a global (guarded by the bind pass, so it is read when the code runs),
by a default (below), or by another such local.  A local stored any other way
(unpacked, a loop target, a parameter, ``+=``, set to another value) is left
alone and the call refused later, as before.

A parameter's default that is a class or a function (not a literal) is the
object Python fixed when it defined the method, bound as it is (a name in
``Env.cells``; no other process loads such code from the disk cache, whose key
does not say which object a default is), and the entry checks the method's
``__defaults__`` still holds it (``globals_changed`` otherwise, so s2sad
compiles again rather than run code made for the old default).
"""

from __future__ import annotations

import ast
import copy
import inspect
import types
from typing import Any

import numpy as np

from s2sad.runtime.support import globals_changed
from s2sad.transforms.astutil import anno, assign, const, copy_loc, name
from s2sad.transforms.front.calls import CallInfo
from s2sad.transforms.front.instance_parts import PLAIN, Obj
from s2sad.transforms.front.objects import _bound
from s2sad.transforms.front.parse import MISSING

#: values a local may be known to hold: the compiler specialises on which one
HELD = (type, types.FunctionType, types.BuiltinFunctionType, np.ufunc)


def bind_arguments(inl, method, params, args, kws, where, renamed, pre) -> None:
    """The assignments of an inlined method's parameters from the call's
    arguments (``cost_1 = QuadraticCost``) and defaults, in ``pre``; an object
    built here is passed as itself (``inner.scope``)."""
    fn, owner, node = method
    site, ctx, inner = where
    what = f"'{fn.__qualname__}'"
    stored_count: dict[str, int] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            stored_count[n.id] = stored_count.get(n.id, 0) + 1
    for a in ast.walk(node.args):
        if isinstance(a, ast.arg) and a.arg in renamed:
            stored_count[renamed[a.arg]] = stored_count.get(renamed[a.arg], 0) + 1
    if len(args) > len(params):
        inl.refuse(ctx, site, f"too many arguments for {what}", "")
    given = dict(zip([p.name for p in params], args))
    for k, v in kws:
        if k not in {p.name for p in params} or k in given:
            inl.refuse(ctx, site, f"bad keyword argument '{k}' for {what}", "")
        given[k] = v
    inner.nones = set()
    for p in params:
        if p.name in given:
            value = given[p.name]
        elif p.default is not p.empty and isinstance(p.default, PLAIN):
            value = const(p.default)
        elif p.default is p.empty:
            inl.refuse(ctx, site, f"{what} needs the argument '{p.name}'", "")
        else:
            value = default_value(inl, fn, owner, p)
            if value is None:
                inl.refuse(
                    ctx,
                    site,
                    f"{what} needs the argument '{p.name}': its default "
                    f"{type(p.default).__name__} is not a number, a string, None, "
                    "a class or a function",
                    f"pass '{p.name}' in the call",
                )
        if isinstance(value, Obj):
            inner.scope[renamed[p.name]] = value
            continue
        if (  # a parameter given None and never set again
            isinstance(value, ast.Constant)
            and value.value is None
            and stored_count.get(renamed[p.name], 0) == 1
        ):
            inner.nones.add(renamed[p.name])
        pre.append(assign(renamed[p.name], value, site))


def default_value(inl, fn: Any, owner: type | None, p: inspect.Parameter):
    """The expression for the default of ``fn``'s parameter ``p`` when it is a
    class or a function: a name bound to that object, with a guard in the entry
    on ``owner.<fn>.__defaults__``; None for any other default."""
    value = p.default
    if not isinstance(value, HELD) or owner is None:
        return None
    if vars(owner).get(fn.__name__) is not fn:  # not reached as owner.<name>
        return None
    if p.kind is p.KEYWORD_ONLY:
        index: Any = p.name
        where = "__kwdefaults__"
    else:
        positional = [
            q
            for q in inspect.signature(fn).parameters.values()
            if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)
        ]
        index = positional.index(p) - (len(positional) - len(fn.__defaults__ or ()))
        where = "__defaults__"
    if index_of(fn, where, index) is not value:
        return None
    wanted = f"{fn.__qualname__}_{p.name}_default".replace(".", "_")
    var = next(
        (k for k, v in inl.env.cells.items() if v is value and k.startswith(wanted)),
        None,
    )
    if var is None:
        var = inl.namer.fresh(wanted)
        inl.env.cells[var] = value
        # not found again by another process: the disk cache's key does not say
        # which object the default was, and the guard compares with this one
        inl.env.defaults[var] = None
    inl.entries.append(_guard(owner, fn, where, index, var, p.name))
    return name(var)


def _origin(obj: Any) -> list | None:
    """Where another process finds ``obj`` (a module-level class or function)."""
    qual, module = getattr(obj, "__qualname__", ""), getattr(obj, "__module__", None)
    if not module or not qual or "." in qual or "<" in qual:
        return None
    return ["module", module, qual]


def index_of(fn: Any, where: str, index: Any) -> Any:
    try:
        return getattr(fn, where)[index]
    except (TypeError, KeyError, IndexError):
        return MISSING


def _guard(owner: type, fn, where: str, index, var: str, pname: str) -> ast.stmt:
    """``if Network.__init__.__defaults__[0] is not <default>: globals_changed(...)``."""
    ref = _bound(owner.__name__, owner, _origin(owner))
    held = ast.Attribute(
        value=ast.Attribute(value=ref, attr=fn.__name__, ctx=ast.Load()),
        attr=where,
        ctx=ast.Load(),
    )
    item = ast.Subscript(value=held, slice=const(index), ctx=ast.Load())
    test = ast.Compare(left=item, ops=[ast.IsNot()], comparators=[name(var)])
    fail = ast.Call(
        func=_bound("globals_changed", globals_changed, None),
        args=[const(f"the default of '{pname}' of {fn.__qualname__}")],
        keywords=[],
    )
    anno(fail)["call"] = CallInfo("rule", globals_changed)
    node = ast.If(test=test, body=[ast.Expr(value=fail)], orelse=[])
    for n in ast.walk(node):
        if isinstance(n, (ast.expr, ast.stmt)):
            n.lineno, n.col_offset = 1, 0
    return node


def resolve_calls(node: ast.FunctionDef, made: set[str], env) -> None:
    """``L.m(...)`` and ``L(...)`` for ``L`` a local front/instances.py made that
    surely holds one class or function: written on the name that holds it."""
    stores: dict[str, list[ast.expr | None]] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.arg):
            stores.setdefault(n.arg, []).append(None)
        elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            stores.setdefault(n.id, []).append(None)
    for n in ast.walk(node):  # plain assignments: their value, not None
        if not isinstance(n, ast.Assign) or len(n.targets) != 1:
            continue
        pairs = [(n.targets[0], n.value)]
        if isinstance(n.value, ast.Tuple) and isinstance(n.targets[0], ast.Tuple):
            pairs = list(zip(n.targets[0].elts, n.value.elts))  # a, b = f, g
            if len(n.targets[0].elts) != len(n.value.elts) or any(
                isinstance(e, ast.Starred) for e in n.value.elts + n.targets[0].elts
            ):
                pairs = []
        for target, value in pairs:
            if isinstance(target, ast.Name):
                found = stores[target.id]
                found[found.index(None)] = value
    known: dict[str, ast.expr] = {}  # local -> the static expression it holds

    def static(e: ast.expr | None) -> ast.expr | None:
        """A global name (its value guarded by the bind pass) or a module's
        attribute (``np.tanh``) holding a class or a function, or a known local:
        the expression naming it."""
        if isinstance(e, ast.Name) and e.id in known:
            return known[e.id]
        return e if isinstance(value_of(e, stores, env), HELD) else None

    changed = True
    while changed:  # a local is known once every store of it is
        changed = False
        for var in sorted(made):
            if var in known or var not in stores:
                continue
            values = [static(v) for v in stores[var]]
            if values and all(v is not None for v in values):
                objs = {id(value_of(v, stores, env)) for v in values}
                if len(objs) == 1:
                    known[var] = values[0]
                    changed = True
    if not known:
        return
    for n in ast.walk(node):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Name) and f.id in known:
            n.func = _located(known[f.id], f)
        elif (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id in known
        ):
            f.value = _located(known[f.value.id], f.value)


def value_of(e: ast.expr | None, stores: dict, env) -> Any:
    """The object a global name, or an attribute of a module reached from one,
    names (MISSING for anything else: a local, an attribute of data)."""
    if isinstance(e, ast.Name):
        return MISSING if e.id in stores else env.lookup(e.id)
    if isinstance(e, ast.Attribute):
        base = value_of(e.value, stores, env)
        if isinstance(base, types.ModuleType):
            return getattr(base, e.attr, MISSING)
    return MISSING


def _located(e: ast.expr, where: ast.AST) -> ast.expr:
    new = copy.deepcopy(e)
    for n in ast.walk(new):
        copy_loc(n, where)
    return new
