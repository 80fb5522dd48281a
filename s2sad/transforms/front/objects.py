"""Objects: attribute assignment (``self.x = v``) and the check that keeps it sound.

Normalize rewrites ``obj.attr = value`` (``obj`` a local name) into a call that
does what Python does, so the object holds the value after the differentiated
call (ML-From-Scratch's ``Dense.forward_pass`` caching its input)::

    self.layer_input = X    ->    store_attribute(self, "layer_input", X)

The write contributes nothing to a gradient.  A read of it in the same
function reads a local instead (front/attributes.py; objects built inside the
function have only locals: front/instances.py).  A read elsewhere in the
differentiated call would carry one through the object, which s2sad does not
follow: the ``objects`` pass (both modes, after ``bind``) records,
for the whole module, every attribute written with a value that depends on the
differentiated arguments and every attribute read from a local object, and
refuses a name found in both, pointing at the read and the write.
"""

from __future__ import annotations

import ast
import copy
import inspect
import textwrap
from typing import Any

import numpy as np

from s2sad.errors import UnsupportedSyntaxError
from s2sad.runtime.objects import read_attribute, store_attribute, store_items
from s2sad.runtime.support import globals_changed
from s2sad.transforms.astutil import (
    anno,
    assign,
    call,
    const,
    copy_loc,
    name,
    stores,
    walk,
)
from s2sad.transforms.front import activity as activity_pass
from s2sad.transforms.front.calls import CallInfo, example_of

_PLAIN = (np.ndarray, np.generic, float, int, bool, complex, str, bytes, type(None))


def store(target: ast.Attribute, value: ast.expr) -> ast.stmt:
    """The statement writing ``value`` into ``obj.<target.attr>``."""
    fn = store_items if anno(target).get("items") else store_attribute
    func = name(fn.__name__)
    anno(func)["bind"] = (fn, ["module", "s2sad.runtime.objects", fn.__name__])
    obj = name(target.value.id)
    node = ast.Call(func=func, args=[obj, const(target.attr), value], keywords=[])
    copy_loc(node, target)
    anno(node)["call"] = CallInfo("rule", fn)
    anno(node)["attribute_store"] = target.attr
    return copy_loc(ast.Expr(value=node), target)


def _stores(node: ast.FunctionDef):
    for sub in walk(node):
        if isinstance(sub, ast.Call) and "attribute_store" in anno(sub):
            yield sub


def _attributes_read(fn, receiver) -> set[str]:
    """Attribute names a function called as plain Python reads (and, for a method,
    every method of its class: it may call them through ``self``)."""
    fns = [fn]
    if receiver is not None:
        fns += [v for v in vars(type(receiver)).values() if callable(v)]
    out = set()
    for f in fns:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
        except (OSError, TypeError, SyntaxError):
            continue
        out |= {
            s.attr
            for s in walk(tree)
            if isinstance(s, ast.Attribute) and isinstance(s.ctx, ast.Load)
        }
    return out


def _opaque_reader(site: ast.Call, given: list[str], written: dict, source) -> list:
    """A call s2sad cannot look into that gets an object this function set an
    attribute of to a differentiated value: it may read it, without gradient."""
    func = site.func
    names = list(given)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        names.append(func.value.id)
    hit = next((n for n in names if n in written), None)
    if hit is None:
        return []
    return [
        source.problem(
            site,
            f"'{ast.unparse(site)}' gets '{hit}', whose attribute '{written[hit]}' "
            "this function set to a differentiated value, and s2sad cannot see "
            "whether it reads it (gradients do not flow through attributes)",
            "pass the value as an argument instead of storing it on the object",
        )
    ]


def run(job, module) -> None:
    """Record this function's attribute writes and reads; refuse a read of an
    attribute that some function of the module writes a differentiated value to."""
    stmts = list(activity_pass.simple_statements(job.node.body))
    flows = [activity_pass.flow(s) for s in stmts]
    varied = activity_pass.solve(job.node, job.wrt, flows, False).active
    source = job.parsed.source
    if job.top:
        module.top_parsed = job.parsed
    writes, reads = module.attribute_writes, module.attribute_reads
    problems = []
    written: dict[str, str] = {}  # object -> an attribute set to a differentiated value
    for site in _stores(job.node):
        obj, value = site.args[0], site.args[2]
        if isinstance(obj, ast.Name) and obj.id in varied:
            problems.append(
                source.problem(
                    site,
                    f"attribute assignment on the differentiated value '{obj.id}'",
                    "keep differentiated values in local variables, lists or dicts",
                )
            )
        if isinstance(value, ast.Name) and value.id in varied:
            writes.setdefault(site.args[1].value, (source, site))
            module.attribute_writers.setdefault(site.args[1].value, set()).add(
                id(job.parsed)
            )
            if isinstance(obj, ast.Name):
                written[obj.id] = site.args[1].value
    funcs = {id(c.func) for c in walk(job.node) if isinstance(c, ast.Call)}
    for sub in walk(job.node):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.ctx, ast.Load)
            and id(sub) not in funcs
        ):
            reads.setdefault(sub.attr, (source, sub))
    for site in (c for c in walk(job.node) if isinstance(c, ast.Call)):
        info = anno(site).get("call")
        if info is not None and info.target is read_attribute and not job.top:
            # a callee's entry value: a differentiated one an earlier call left
            # there would lose its gradient (front/attributes.py); checked once
            # every function is compiled (check_entry_reads)
            module.entry_reads.append((site.args[1].value, source, site, job.parsed))
        given = [a.id for a in site.args if isinstance(a, ast.Name)]
        if info is not None and info.kind in ("method", "unknown"):
            problems += _opaque_reader(site, given, written, source)
        if info is None or info.kind != "user" or set(given) & varied:
            continue
        # runs as plain Python: what it reads, it reads from the object as is
        for attr in _attributes_read(info.target, info.extra.get("receiver")):
            reads.setdefault(attr, (source, site))
    for attr in sorted(set(writes) & set(reads)):
        (rsrc, rnode), (wsrc, wnode) = reads[attr], writes[attr]
        what = ast.unparse(rnode if isinstance(rnode, ast.Attribute) else rnode.func)
        problems.append(
            rsrc.problem(
                rnode,
                f"'{what}' reads the attribute '{attr}', which the "
                f"differentiated call sets to a differentiated value (at line "
                f"{wnode.lineno} of {wsrc.filename}); s2sad does not carry "
                "gradients through attributes",
                "pass the value as an argument or return it, instead of reading it "
                "back from the object",
            )
        )
        del reads[attr]
    if problems:
        raise UnsupportedSyntaxError(problems)


def _runs(module) -> dict[int, float]:
    """How many times each compiled function may run in one differentiated call
    (by ``id`` of its ParsedFunction): 1, or ``inf`` when a call to it sits in a
    loop, it is called from two places or from a function that may run more
    than once, or recursively."""
    callers: dict[int, list] = {}
    for job, caller, looped in module.call_sites.values():
        callers.setdefault(id(job.parsed), []).append((id(caller), looped))
    memo: dict[int, float] = {}

    def runs(p: int, seen: frozenset) -> float:
        if p in memo:
            return memo[p]
        if module.top_parsed is not None and p == id(module.top_parsed):
            return 1
        sites = callers.get(p, [])
        if p in seen or not sites:
            return float("inf") if p in seen else 0
        n = 0.0
        for c, looped in sites:
            k = runs(c, seen | {p})
            n += float("inf") if looped and k else k
        memo[p] = n
        return n

    return {p: runs(p, frozenset()) for p in callers}


def check_entry_reads(module) -> None:
    """A callee's entry read (``self_m = read_attribute(self, "m")``) of an
    attribute the differentiated call sets to a differentiated value is sound
    when that value cannot be there yet: only this function writes it (after
    the read) and it runs once per differentiated call (ML-From-Scratch's
    ``BatchNormalization.forward_pass`` updating ``self.running_mean``).
    Otherwise an earlier run would have left a value whose gradient is lost:
    refused, at the read."""
    if not module.entry_reads:
        return
    runs = _runs(module)
    problems = []
    seen = set()
    for attr, rsrc, rnode, parsed in module.entry_reads:
        writers = module.attribute_writers.get(attr)
        if not writers or attr in seen:
            continue
        if writers == {id(parsed)} and runs.get(id(parsed), float("inf")) <= 1:
            continue
        seen.add(attr)
        wsrc, wnode = module.attribute_writes[attr]
        what = f"{ast.unparse(rnode.args[0])}.{attr}"
        why = (
            "another function of the differentiated call sets it"
            if writers != {id(parsed)}
            else "this method may run more than once in the differentiated call "
            "(a loop, two calls), and it sets it"
        )
        info = anno(rnode)["call"]
        if info.extra.get("item_write"):
            problems.append(
                rsrc.problem(
                    rnode,
                    f"item assignment into the attribute '{what}', which holds "
                    f"the array it had when this method started, and {why} to "
                    "differentiated values (at line "
                    f"{wnode.lineno} of {wsrc.filename}): what an earlier run left "
                    "there would lose its gradient",
                    f"build the array in a local and store it whole: {attr} = "
                    f"np.zeros(...); {attr}[...] = ...; {what} = {attr}",
                )
            )
            continue
        problems.append(
            rsrc.problem(
                rnode,
                f"'{what}' is read as it is when this method starts, and {why} to "
                f"a differentiated value (at line {wnode.lineno} of "
                f"{wsrc.filename}): what an earlier run left there would lose its "
                "gradient",
                "set the attribute in the method before reading it, call the "
                "method once, or pass the value as an argument",
            )
        )
    if problems:
        raise UnsupportedSyntaxError(problems)


# ---------------------------------------------------------------- lists of objects


def _is_object(v: Any) -> bool:
    return not isinstance(v, _PLAIN) and not callable(getattr(v, "__array__", None))


def _bound(name_: str, obj: Any, origin: list | None) -> ast.Name:
    node = name(name_)
    anno(node)["bind"] = (obj, origin)
    return node


def _class_guard(it: ast.expr, objs: list, where: str) -> ast.stmt:
    """``if len(it) != n or type(it[0]) is not C0 ...: globals_changed(...)``: the
    unrolled loop holds only for the classes it was compiled for."""
    tests: list[ast.expr] = [
        ast.Compare(
            left=call("len", copy.deepcopy(it)),
            ops=[ast.NotEq()],
            comparators=[const(len(objs))],
        )
    ]
    for i, v in enumerate(objs):
        cls = type(v)
        item = ast.Subscript(value=copy.deepcopy(it), slice=const(i), ctx=ast.Load())
        tests.append(
            ast.Compare(
                left=call("type", item),
                ops=[ast.IsNot()],
                comparators=[
                    _bound(
                        cls.__name__, cls, ["module", cls.__module__, cls.__qualname__]
                    )
                ],
            )
        )
    names = ", ".join(type(v).__name__ for v in objs)
    fail = ast.Call(
        func=_bound("globals_changed", globals_changed, None),
        args=[const(f"the classes in {where} (compiled for [{names}])")],
        keywords=[],
    )
    anno(fail)["call"] = CallInfo("rule", globals_changed)
    test = ast.BoolOp(op=ast.Or(), values=tests)
    return ast.If(test=test, body=[ast.Expr(value=fail)], orelse=[])


class _Unroll(ast.NodeTransformer):
    """``for layer in self.layers: x = layer.forward_pass(x)`` over a list of objects
    known at call time: one copy of the body per object, ``layer`` replaced by
    ``self.layers[i]`` (whose methods then resolve on that object), after a
    check that the list still holds the same classes (else: compile again)."""

    def __init__(self, examples: dict, rebound: set):
        self.examples, self.rebound = examples, rebound

    def visit_FunctionDef(self, node):
        return node  # nested functions keep their loops

    def visit_For(self, node: ast.For):
        self.generic_visit(node)
        objs = example_of(node.iter, self.examples, self.rebound)
        if (
            not isinstance(objs, (list, tuple))
            or not objs
            or not any(_is_object(v) for v in objs)
            or not isinstance(node.target, ast.Name)
            or node.orelse
            or any(isinstance(s, (ast.Break, ast.Continue)) for s in walk(node))
            or node.target.id in stores_in(node.body)
        ):
            return node
        var = node.target.id
        out = [
            copy_loc(_class_guard(node.iter, list(objs), ast.unparse(node.iter)), node)
        ]
        for i in range(len(objs)):
            item = ast.Subscript(value=node.iter, slice=const(i), ctx=ast.Load())
            for stmt in node.body:
                out.append(_Replace(var, item).visit(copy.deepcopy(stmt)))
        last = ast.Subscript(
            value=node.iter, slice=const(len(objs) - 1), ctx=ast.Load()
        )
        out.append(copy_loc(assign(var, copy.deepcopy(last)), node))
        return out


class _Replace(ast.NodeTransformer):
    def __init__(self, var: str, expr: ast.expr):
        self.var, self.expr = var, expr

    def visit_Name(self, node: ast.Name):
        if node.id == self.var and isinstance(node.ctx, ast.Load):
            return copy_loc(copy.deepcopy(self.expr), node)
        return node


def unroll(node: ast.FunctionDef, examples: dict) -> None:
    """Unroll the loops over lists of objects given in this call (see _Unroll)."""
    if examples:
        rebound = stores(node)
        node.body = [
            s
            for stmt in node.body
            for s in _listify(_Unroll(examples, rebound).visit(stmt))
        ]


def _listify(x):
    return x if isinstance(x, list) else [x]


def stores_in(body: list[ast.stmt]) -> set[str]:
    return {
        n.id
        for s in body
        for n in walk(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
