"""Objects built inside the differentiated function, replaced by their attributes.

A user class known at compile time (a global, guarded like the others) whose
instance the function builds and only uses through its attributes and methods
is never built (the entry checks the global still names the class, through
``Job.inlined_classes``): ``__init__`` and the methods called are inlined, and each
attribute becomes a local variable (scalar replacement of aggregates)::

    layer = Dense(W, b)                    layer_W = W
    out = layer.forward_pass(X)     ->     layer_b = b
                                           X_1 = X
                                           layer_layer_input = X_1
                                           forward_pass_out = X_1 @ layer_W + layer_b
                                           out = forward_pass_out

so gradients flow through attributes like through any local.  ``Sigmoid()(z)``
and ``Linear(W).forward(x)`` are handled the same way.  Methods reach each
other through ``self`` and ``super()`` (resolved along the MRO), properties
are inlined, class attributes give defaults, attributes may hold objects
built the same way (``self.activation = Sigmoid()``).

An object used otherwise (returned, passed to a function, stored in a list,
aliased) is left to Python when the function binds it to a name (it is built
as written); reached through an attribute or ``self``, it is refused with the
place and a hint.  So are classes with ``__getattr__``, ``__setattr__`` or
``__new__``, methods with ``*args`` or nested functions, and properties set.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import types
from typing import Any

from s2sad.errors import UnsupportedSyntaxError
from s2sad.transforms.astutil import assign, const, copy_loc, name
from s2sad.transforms.front import comprehensions, held_values, instance_args
from s2sad.transforms.front import desugar as desugar_pass
from s2sad.transforms.front.instance_parts import (
    DEPTH,
    ESCAPE_HINT,
    PLAIN,
    Ctx,
    ExprRewriter,
    Obj,
    Refused,
    Rename,
    buildable,
    fold,
    lookup,
    plain_class,
    set_attributes,
)
from s2sad.transforms.front.parse import MISSING, parse_function


class Inliner:
    def __init__(self, job):
        self.job, self.namer, self.env = job, job.namer, job.parsed.env
        self.top = job.parsed.source
        self.caller_names = {
            n.id
            for n in ast.walk(job.node)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        } | {a.arg for a in ast.walk(job.node) if isinstance(a, ast.arg)}
        self.classes: dict[str, type] = {}  # for the guards
        self.depth = 0
        self.nest = 0  # inside an if or a loop
        self.aug = False  # the statement is an augmented assignment
        self.entries: list[ast.stmt] = []  # argument objects' values on entry
        self.stores: list[ast.stmt] = []  # their writes, after the statement
        self.made: set[str] = set()  # attributes' and parameters' locals

    # ------------------------------------------------------------ errors, names
    def refuse(self, ctx: Ctx, node: ast.AST, msg: str, hint: str = ESCAPE_HINT):
        where = ctx.here if ctx.here is not None else node
        raise Refused(ctx.source.problem(where, msg, hint))

    def resolve_class(self, func: ast.expr, ctx: Ctx) -> Any:
        """The plain user class a constructor call names (a global), or None."""
        path = []
        while isinstance(func, ast.Attribute):
            path.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name) or func.id in ctx.scope:
            return None
        if func.id in getattr(ctx, "locals", set()):
            return None
        obj = self.env.lookup(func.id)
        for step in reversed(path):
            obj = getattr(obj, step, MISSING)
        if obj is MISSING or not plain_class(obj):
            return None
        return obj

    def constructs(self, e: ast.expr, ctx: Ctx) -> type | None:
        if isinstance(e, ast.Call) and not any(
            isinstance(a, ast.Starred) for a in e.args
        ):
            return self.resolve_class(e.func, ctx)
        return None

    def handle(self, e: ast.expr, ctx: Ctx) -> Obj | None:
        if isinstance(e, ast.Name) and isinstance(e.ctx, ast.Load):
            return ctx.scope.get(e.id)
        if isinstance(e, ast.Attribute):
            base = self.handle(e.value, ctx)
            if base is not None and isinstance(base.attrs.get(e.attr), Obj):
                return base.attrs[e.attr]
        return None

    def fold(self, test: ast.expr, ctx: Ctx) -> bool | None:
        return fold(test, self.handle(getattr(test, "left", test), ctx), ctx)

    def real_read(self, obj: Obj, attr: str, node: ast.AST) -> ast.expr:
        """An attribute of an argument object: its local, or its value on
        entry, or the object's attribute itself (front/instance_args.py)."""
        if isinstance(obj.attrs.get(attr), str):
            return copy_loc(name(obj.attrs[attr]), node)
        if instance_args.keeps_real(obj, attr):
            return instance_args.real(obj, attr, node)
        local = self.attr_local(obj, attr)
        copy = attr in obj.items
        self.entries.append(instance_args.entry(obj, attr, local, node, copy))
        return copy_loc(name(local), node)

    def attr_local(self, obj: Obj, attr: str) -> str:
        cur = obj.attrs.get(attr)
        if isinstance(cur, str):
            return cur
        obj.attrs[attr] = self.namer.fresh(f"{obj.label}_{attr}")
        self.made.add(obj.attrs[attr])
        return obj.attrs[attr]

    # ------------------------------------------------------------ statements
    def block(self, body: list[ast.stmt], ctx: Ctx) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            out.extend(self.stmt(stmt, ctx))
        return out

    def nested(self, body: list[ast.stmt], ctx: Ctx) -> list[ast.stmt]:
        self.nest += 1
        try:
            return self.block(body, ctx)
        finally:
            self.nest -= 1

    def stmt(self, s: ast.stmt, ctx: Ctx) -> list[ast.stmt]:
        pre: list[ast.stmt] = []
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if any(isinstance(n, ast.Name) and n.id in ctx.scope for n in ast.walk(s)):
                self.refuse(ctx, s, "a nested function uses an object built here")
            return [s]
        if isinstance(s, ast.If) and self.fold(s.test, ctx) is not None:
            return self.block(s.body if self.fold(s.test, ctx) else s.orelse, ctx)
        while isinstance(getattr(s, "value", None), ast.IfExp):
            known = self.fold(s.value.test, ctx)
            if known is None:
                break
            s.value = s.value.body if known else s.value.orelse
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            tgt, cls = s.targets[0], self.constructs(s.value, ctx)
            if cls is not None and isinstance(tgt, ast.Name) and tgt.id in ctx.ok:
                ctx.scope[tgt.id] = self.build(cls, s.value, tgt.id, ctx, pre)
                return pre
            owner = (
                self.handle(tgt.value, ctx) if isinstance(tgt, ast.Attribute) else None
            )
            held = self.handle(s.value, ctx) if owner is not None else None
            if owner is not None and (cls is not None or held is not None):
                if tgt.attr in owner.attrs:
                    self.refuse(
                        ctx, s, f"the attribute '{tgt.attr}' set twice to an object"
                    )
                owner.attrs[tgt.attr] = held or self.build(
                    cls, s.value, f"{owner.label}_{tgt.attr}", ctx, pre
                )
                return pre
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            if isinstance(s, ast.AnnAssign) and s.value is None:
                return []
            value = self.expr(s.value, ctx, pre)
            self.aug = isinstance(s, ast.AugAssign)
            if self.aug:  # layer.acc += x reads it first, changes it in place
                instance_args.aug_read(self, s.target, ctx)
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            new_targets = [self.target(t, ctx, pre) for t in targets]
            if isinstance(s, ast.AnnAssign):
                s = copy_loc(ast.Assign(targets=new_targets, value=value), s)
            elif isinstance(s, ast.Assign):
                s.targets, s.value = new_targets, value
            else:
                s.target, s.value = new_targets[0], value
            stores, self.stores = self.stores, []
            return pre + [s] + stores
        if isinstance(s, ast.Return):
            if s.value is not None:
                if self.handle(s.value, ctx) is not None:
                    self.refuse(
                        ctx, s, "the function returns an object built inside it"
                    )
                s.value = self.expr(s.value, ctx, pre)
            return pre + [s]
        if isinstance(s, (ast.If, ast.While)):
            if isinstance(s, ast.While):
                test_pre: list[ast.stmt] = []
                s.test = self.expr(s.test, ctx, test_pre)
                if test_pre:
                    self.refuse(
                        ctx,
                        s,
                        "a method of an object built here called in a while test",
                        "call it before the loop and at the end of its body",
                    )
            else:
                s.test = self.expr(s.test, ctx, pre)
            s.body, s.orelse = self.nested(s.body, ctx), self.nested(s.orelse, ctx)
            return pre + [s]
        if isinstance(s, ast.For):
            s.iter = self.expr(s.iter, ctx, pre)
            s.target = self.target(s.target, ctx, pre)
            s.body, s.orelse = self.nested(s.body, ctx), self.nested(s.orelse, ctx)
            return pre + [s]
        if isinstance(s, ast.Expr):
            s.value = self.expr(s.value, ctx, pre)
            if isinstance(s.value, ast.Name):
                return pre  # an inlined call whose value is not used
            return pre + [s]
        for sub in ast.walk(s):
            if isinstance(sub, ast.Name) and sub.id in ctx.scope:
                self.refuse(
                    ctx, s, f"'{sub.id}' (an object built here) used in this statement"
                )
        return [s]

    def target(self, t: ast.expr, ctx: Ctx, pre: list) -> ast.expr:
        if isinstance(t, ast.Attribute):
            owner = self.handle(t.value, ctx)
            if owner is not None:
                if isinstance(owner.attrs.get(t.attr), Obj):
                    self.refuse(
                        ctx,
                        t,
                        f"the attribute '{t.attr}' holding an object is set again",
                    )
                if isinstance(lookup(owner.cls, t.attr)[0], property):
                    self.refuse(
                        ctx,
                        t,
                        f"the property '{t.attr}' is set",
                        "set a plain attribute",
                    )
                new = t.attr not in owner.attrs
                local = self.attr_local(owner, t.attr)
                if owner.real is not None:
                    if new and self.nest and hasattr(owner.example, t.attr):
                        self.entries.append(
                            instance_args.entry(owner, t.attr, local, t)
                        )
                    store = instance_args.store(owner, t.attr, local, t, self.aug)
                    self.stores.append(store)
                return copy_loc(name(local, store=True), t)
        if isinstance(t, (ast.Tuple, ast.List)):
            t.elts = [self.target(e, ctx, pre) for e in t.elts]
            return t
        if isinstance(t, ast.Starred):
            t.value = self.target(t.value, ctx, pre)
            return t
        if isinstance(t, ast.Subscript):
            t.value = self.target_base(t.value, ctx, pre)
            t.slice = self.expr(t.slice, ctx, pre)
            return t
        if isinstance(t, ast.Name) and t.id in ctx.scope:
            self.refuse(ctx, t, f"'{t.id}' (an object built here) assigned again")
        return t

    def target_base(self, e: ast.expr, ctx: Ctx, pre: list) -> ast.expr:
        """``self.states[:, t] = h``: the array written into is the local."""
        if isinstance(e, ast.Subscript):
            e.value = self.target_base(e.value, ctx, pre)
            e.slice = self.expr(e.slice, ctx, pre)
            return e
        owner = self.handle(e.value, ctx) if isinstance(e, ast.Attribute) else None
        if owner is not None and owner.real is not None:  # layer.states[t] = h
            owner.written.add(e.attr)
            owner.items.add(e.attr)
            local = self.real_read(owner, e.attr, e)
            self.stores.append(instance_args.store(owner, e.attr, local.id, e, True))
            return local
        return self.expr(e, ctx, pre)

    # ------------------------------------------------------------ expressions
    def expr(self, e: ast.expr, ctx: Ctx, pre: list) -> ast.expr:
        return ExprRewriter(self, ctx, pre).visit(e)

    def argument(self, e: ast.expr, ctx: Ctx, pre: list) -> ast.expr | Obj:
        """An argument of an inlined call: an object built here (or built in
        the argument list: ``Activation(TanH())``) is passed as itself."""
        obj = self.handle(e, ctx)
        if obj is not None:
            return obj
        cls = self.constructs(e, ctx)
        if cls is not None:
            return self.build(cls, e, cls.__name__.lower(), ctx, pre)
        return self.expr(e, ctx, pre)

    def build(self, cls: type, site: ast.Call, label: str, ctx, pre) -> Obj:
        """Run ``cls.__init__`` inline on a new object that is never built."""
        obj = Obj(cls, label)
        if isinstance(site.func, ast.Name):
            self.classes[site.func.id] = cls
        # class attributes that methods set on the instance start from the class value
        written = set_attributes(cls)
        for k in reversed(cls.__mro__[:-1]):
            for attr, v in vars(k).items():
                if attr in written and isinstance(v, PLAIN):
                    local = self.attr_local(obj, attr)
                    pre.append(assign(local, const(v), site))
        init, owner = lookup(cls, "__init__")
        args = [self.argument(a, ctx, pre) for a in site.args]
        kws = [(k.arg, self.argument(k.value, ctx, pre)) for k in site.keywords]
        if init is object.__init__:
            if args or kws:
                self.refuse(ctx, site, f"{cls.__name__}() takes no arguments", "")
            return obj
        self.inline(init, owner, obj, args, kws, site, ctx, pre)
        return obj

    def inline(self, fn, owner, obj, args, kws, site, ctx, pre) -> ast.expr:
        """Inline ``fn`` (a method of ``owner``, ``obj`` its self, or a static one):
        its statements go to ``pre``; returns the expression of its result."""
        where = f"'{fn.__qualname__}'"
        if self.depth >= DEPTH:
            self.refuse(
                ctx, site, f"{where} inlined too deeply (recursive methods)", ""
            )
        if not isinstance(fn, types.FunctionType) or set(fn.__code__.co_freevars) - {
            "__class__"  # the cell super() reads
        }:
            self.refuse(ctx, site, f"{where} is not a plain Python method", "")
        if any(k is None for k, _ in kws):
            self.refuse(
                ctx, site, f"'**' in a call to {where}", "pass the arguments by name"
            )
        parsed = parse_function(fn)
        node = parsed.node
        here = ctx.here
        if parsed.source.filename != self.top.filename and here is None:
            here = site  # errors and lines point at the call in the user's function
        inner = Ctx(parsed.source if here is None else ctx.source, {}, owner, here)
        if any(
            isinstance(n, (ast.Lambda, ast.FunctionDef, ast.ClassDef, ast.Yield))
            for n in ast.walk(ast.Module(body=node.body, type_ignores=[]))
        ):
            self.refuse(inner, node, f"{where} defines a function or yields", "")
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
            self.refuse(ctx, site, f"{where} takes *args or **kwargs", "")
        own = {p.name for p in params}
        local_names = own | {
            n.id
            for n in ast.walk(node)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        foreign: dict[str, str] = {}
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id not in local_names:
                mine = fn.__globals__.get(n.id, getattr(builtins, n.id, MISSING))
                if n.id in self.caller_names or self.env.lookup(n.id) is not mine:
                    if n.id not in fn.__globals__:
                        self.refuse(
                            inner,
                            n,
                            f"{where} reads '{n.id}', which the differentiated "
                            "function defines as a local",
                            "rename one of them",
                        )
                    if (
                        n.id not in foreign
                    ):  # another module's global: a name of its own
                        foreign[n.id] = self.namer.fresh(n.id)
                        self.env.foreign[foreign[n.id]] = (
                            mine,
                            fn.__globals__.get("__name__", "__main__"),
                            n.id,
                        )
        Rename(foreign).visit(node)
        comprehensions.run(node, self.namer, inner.source)
        desugar_pass.run(node, self.namer)
        self_name = params[0].name if obj is not None else None
        if obj is not None:
            inner.scope[self_name] = obj
            inner.self_name = self_name
            params = params[1:]
        stored = {
            n.id
            for n in ast.walk(node)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        renamed = {
            v: self.namer.fresh(v) for v in sorted(own | stored) if v != self_name
        }
        Rename(renamed).visit(node)
        inner.locals = set(renamed.values())
        self.made |= inner.locals
        inner.ok = buildable(node, set())
        held_values.bind_arguments(
            self, (fn, owner, node), params, args, kws, (site, ctx, inner), renamed, pre
        )
        self.depth += 1
        try:
            body = self.block(node.body[:-1], inner)
            ret = node.body[-1]
            value = (
                self.expr(ret.value, inner, body)
                if ret.value is not None
                else const(None)
            )
            if (
                self.handle(ret.value, inner) is not None
                if ret.value is not None
                else False
            ):
                self.refuse(inner, ret, f"{where} returns an object built inside it")
        finally:
            self.depth -= 1
        if here is not None:
            for stmt in body:
                for n in ast.walk(stmt):
                    copy_loc(n, here)
        pre.extend(body)
        if isinstance(value, (ast.Name, ast.Constant)):
            return value
        out = self.namer.fresh(f"{fn.__name__.strip('_')}_out")
        pre.append(copy_loc(assign(out, value), here if here is not None else ret))
        return name(out)


def run(job) -> None:
    """Take apart the objects of plain user classes the function builds (see the
    module docstring); raise UnsupportedSyntaxError where one escapes."""
    node = job.node
    inl = Inliner(job)
    params = {a.arg for a in node.args.args}
    ctx = Ctx(job.parsed.source, {})
    ctx.locals = inl.caller_names
    given = instance_args.candidates(node, job.parsed.example_args)
    if not given and not any(
        isinstance(c, ast.Call) and inl.constructs(c, ctx) is not None
        for c in ast.walk(node)
    ):
        return
    ctx.ok = buildable(node, params)
    ctx.scope.update(given)
    try:
        body = inl.block(node.body, ctx)
    except Refused as exc:
        raise UnsupportedSyntaxError([exc.problem]) from None
    first = node.body[0]
    guards = [instance_args.guard(obj, first) for _, obj in sorted(given.items())]
    node.body = guards + inl.entries + body
    held_values.resolve_calls(node, inl.made, job.parsed.env)
    job.inlined_classes = sorted(inl.classes)
