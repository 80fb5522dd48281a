"""Wiring: which functions get buffers, and how the workspace reaches them.

The pipeline's ``buffers`` pass (per function) and ``connect`` pass (per
module).  Whether a module gets buffers at all was decided once, from the
call's arguments, in ``module.options.buffers`` (s2sad/options.py); here:

* the top-level function takes ``ws`` (default ``NO_WORKSPACE``: the plain
  form), its sites index it (``ws["key"]``), ``finalize(g_x, x)`` writes into
  ``ws.result(i)``, and a ``buffer_shares`` table follows it (sharing.py);
* a callee (``<f>_forward``/``<f>_backward``) enters a workspace of its own per
  shape signature of its arguments, so its sites are fixed by them, whoever
  calls it;
* ``connect`` hands ``ws`` on to every call of a function that takes it::

    def net_value_and_grad(x, W, g_out=1.0):   ->  (x, W, g_out=1.0, ws=NO_WORKSPACE)
        a, saved_cell = cell_forward(x, W)     ->  cell_forward(x, W, ws=ws)
        g_x, _ = cell_backward(g_a, saved_cell)  ->  (g_a, saved_cell, ws=ws)

    def cell_forward(h, W):                    ->  (h, W, ws=NO_WORKSPACE)
                                               +   ws = ws.enter('cell_forward', (h, W))
        matmul = h @ W                         ->  np.matmul(h, W, out=ws.take('matmul'))
"""

from __future__ import annotations

import ast
from typing import Any

from s2sad.options import BUFFERED
from s2sad.transforms.astutil import Namer, anno, assign, name, walk
from s2sad.transforms.buffers import links, outside, sharing
from s2sad.transforms.buffers.facts import helper_of
from s2sad.transforms.buffers.sites import Sites

#: the parameter (and keyword) the runtime passes the workspace as
WS = "ws"


def function_pass(job: Any, module: Any) -> None:
    """The pipeline's ``buffers`` pass: sites in the function(s) a job emitted."""
    if module.options.buffers != BUFFERED:
        return
    if job.top:
        job.functions += top_level(job.functions[0], module, job.namer)
        return
    pair = len(job.functions) == 2 and job.functions[1].name == job.names[1]
    at = links.checks(job.functions[0], module) if pair else None
    for f in job.functions:
        callee(f, module, job.namer)
    if at is not None:
        links.link(job.functions[0], job.functions[1], at)


def connect_pass(module: Any) -> None:
    """The pipeline's ``connect`` pass: ``ws`` handed on to callees with buffers."""
    if module.options.buffers == BUFFERED:
        connect(module.functions, module)
        if outside.reads_outside(module.functions):
            outside.unplace_results(module.functions)


def top_level(fn: ast.FunctionDef, module: Any, namer: Namer) -> list[ast.stmt]:
    """Rewrite the top-level ``fn`` in place; module-level statements to emit after it.

    Ints, bools and strings among the example arguments (none when compiling
    ahead of time) are sizes or flags whose values are part of the workspace's
    shape signature: their values count as fixed.
    """
    examples = module.examples
    params = [a.arg for a in fn.args.args if a.arg != "g_out"]
    fixed = {p: type(examples.get(p)) in (int, bool, str) for p in params}
    sites = _rewritten(fn, module, namer, fixed, callee=False)
    if sites is None:
        return []
    _finalize_into_results(fn)
    _add_ws_param(fn, module)
    for site, donor in sharing.dying_operands(fn, sites.np).items():
        sites.shares.setdefault(site, donor)
    return sharing.table(fn, sites.shares) + sharing.results_table(
        fn, sharing.result_keys(fn)
    )


def callee(fn: ast.FunctionDef, module: Any, namer: Namer) -> bool:
    """Sites in a callee's forward or backward function (always ``ws.take``),
    after ``ws = ws.enter("<name>", (<its arguments>))``; whether it has any."""
    params = [a.arg for a in fn.args.args]
    if _rewritten(fn, module, namer, {p: False for p in params}, callee=True) is None:
        return False
    enter = ast.Call(
        func=ast.Attribute(value=name(WS), attr="enter", ctx=ast.Load()),
        args=[
            ast.Constant(fn.name),
            ast.Tuple(elts=[name(p) for p in params], ctx=ast.Load()),
        ],
        keywords=[],
    )
    fn.body.insert(0, assign(WS, enter))
    _add_ws_param(fn, module)
    return True


def _rewritten(
    fn: ast.FunctionDef, module: Any, namer: Namer, fixed: dict, callee: bool
) -> Sites | None:
    """Analyse and rewrite ``fn``'s body; the Sites, or None when there are none.

    A function that uses the name ``ws`` itself keeps the plain form: this is
    about the user's own names, so it is a check of the text.
    """
    names = {n.id for n in walk(fn) if isinstance(n, ast.Name)}
    if WS in names | {a.arg for a in fn.args.args}:
        return None
    sites = Sites(module, fixed, namer, callee=callee)
    sites.collect(fn.body)
    sites.solve()
    fn.body = sites.rewrite(fn.body, False)
    return sites if sites.count else None


def _add_ws_param(fn: ast.FunctionDef, module: Any) -> None:
    """``fn`` takes ``ws=NO_WORKSPACE`` (marked ``anno["workspace"]``)."""
    if WS not in [a.arg for a in fn.args.args]:
        fn.args.args.append(ast.arg(arg=WS))
        fn.args.defaults.append(module.helper("NO_WORKSPACE"))
        anno(fn)["workspace"] = True


def connect(functions: list, module: Any) -> None:
    """After all functions exist: when a callee has buffers, the top-level function
    takes ``ws`` too, and every call to a function taking ``ws`` passes it on."""
    defs = [f for f in functions if isinstance(f, ast.FunctionDef)]
    with_ws = {f.name for f in defs if anno(f).get("workspace")}
    if not with_ws - {defs[0].name}:
        return
    _add_ws_param(defs[0], module)
    with_ws.add(defs[0].name)
    # a function without sites of its own that calls one with buffers takes ws
    # too and hands it on (outer_forward -> inner_forward): without it the
    # callee would run on NO_WORKSPACE, which cannot record
    grew = True
    while grew:
        grew = False
        for f in defs:
            if f.name not in with_ws and _calls_any(f, with_ws):
                _add_ws_param(f, module)
                with_ws.add(f.name)
                grew = True
    for f in defs:
        if f.name in with_ws:
            _pass_ws_on(f, with_ws)


def _calls_any(fn: ast.FunctionDef, names: set[str]) -> bool:
    return any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in names
        for c in walk(fn)
    )


def _pass_ws_on(fn: ast.FunctionDef, with_ws: set[str]) -> None:
    """Calls in ``fn`` of the module's functions that take ``ws`` get ``ws=ws``.

    The module's functions call each other by name (each name is emitted once).
    """
    for c in walk(fn):
        if (
            isinstance(c, ast.Call)
            and isinstance(c.func, ast.Name)
            and c.func.id in with_ws
            and not any(k.arg == WS for k in c.keywords)
        ):
            c.keywords.append(ast.keyword(arg=WS, value=name(WS)))


def _finalize_into_results(fn: ast.FunctionDef) -> None:
    """``finalize(g, x)`` in the return becomes ``finalize(g, x, ws.result(i))``."""
    ret = fn.body[-1]
    if not isinstance(ret, ast.Return) or not isinstance(ret.value, ast.Tuple):
        return
    grads = ret.value.elts[1]
    for i, f in enumerate(getattr(grads, "elts", [])):
        if isinstance(f, ast.Call) and helper_of(f) == "finalize":
            res = ast.Call(
                func=ast.Attribute(value=name(WS), attr="result", ctx=ast.Load()),
                args=[ast.Constant(i)],
                keywords=[],
            )
            f.args.append(res)
