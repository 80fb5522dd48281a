"""The reverse mode's passes, and the assembly of the functions they emit.

The top-level function becomes one ``<f>_value_and_grad(*params, g_out=1.0)``
returning ``(value, (gradients...))``; a called user function becomes a pair
``<g>_forward(*params) -> (value, saved)`` and ``<g>_backward(g_out, saved) ->
(one cotangent per parameter)``, so that recursion and repeated calls work::

    def f(x):                    def f_value_and_grad(x, g_out=1.0):
        return np.sum(g(x))  ->      g_1, saved_g = g_forward(x)
                                     out = np.sum(g_1)
                                     # grad of: return np.sum(g(x))
                                     g_g_1 = d_sum(g_out, out, g_1)[0]
                                     g_x, = g_backward(g_g_1, saved_g)
                                     return out, (finalize(g_x, x),)
"""

from __future__ import annotations

import ast

from s2sad.errors import UnsupportedSyntaxError
from s2sad.transforms.astutil import (
    anno,
    assign,
    call,
    const,
    function_def,
    name,
    stores,
)
from s2sad.transforms.front import activity as activity_pass
from s2sad.transforms.front import aliasing as aliasing_pass
from s2sad.transforms.front import setitems
from s2sad.transforms.lattice import NONE, SET
from s2sad.transforms.reverse import cleanup as cleanup_pass
from s2sad.transforms.reverse import masks, scalars
from s2sad.transforms.reverse.statements import FunctionReverser
from s2sad.transforms.reverse.tape import FunctionCompiler


def activity(job, module) -> None:
    """Which names depend on the differentiated parameters and reach the output."""
    params = {a.arg for a in job.node.args.args}
    shared = set() if job.top else setitems.aliases(job.node, params) - params
    job.act = activity_pass.run(
        job.node, job.wrt, job.parsed.source, top=job.top, shared=shared
    )


def aliasing(job, module) -> None:
    """Refuse reads of a view whose base was changed in place."""
    aliasing_pass.run(
        job.node,
        job.act,
        job.parsed.source,
        job.parsed.example_args,
        job.parsed.scalar_params,
        {**job.parsed.local_functions, **job.norm.local_functions},
        getattr(job.parsed.fn, "__globals__", {}),
    )


def differentiate(job, module) -> None:
    """The forward sweep (with saves) and the backward sweep of the function."""
    norm = job.norm
    fc = FunctionCompiler(
        module,
        job.parsed,
        job.namer,
        norm.nonsimple,
        norm.locals,
        module_locals={**job.parsed.local_functions, **norm.local_functions},
    )
    rv = FunctionReverser(fc, job.act)
    if job.top:  # items written into the caller's objects are kept (keep_item)
        rv.escaping = setitems.aliases(job.node, set(job.params))
    rv.masked = masks.masked_names(job.node)
    if scalars.applies(job, module):
        rv.numbers = scalars.number_names(job.node, job.parsed.example_args)
    starts = scalars.zero_started(job, rv)
    ret = job.node.body[-1].value
    if isinstance(ret, ast.Name) and ret.id not in job.params:
        rv.gnames[ret.id] = "g_out"  # the seed parameter is the output's cotangent
    fwd, backward = rv.forward_and_backward(job.node.body[:-1], False)
    if isinstance(ret, ast.Name) and rv.needs(ret):
        rv.state[rv.g(ret.id)] = SET
    job.bwd = starts + backward()
    if fc.problems:
        raise UnsupportedSyntaxError(fc.problems)
    job.fwd, job.state = fwd, rv


def cleanup(job, module) -> None:
    """Drop saves and restores of values the backward sweep never reads."""
    rv = job.state
    keep = {rv.g(p) for p in job.params}  # read by the final return
    job.fwd, job.bwd = cleanup_pass.run(job.fwd, job.bwd, rv.fc, module.options, keep)


def assemble(job, module) -> None:
    """The emitted function(s): the top-level value-and-grad or a forward/backward pair."""
    if job.top:
        job.functions = [_top_level(job, module)]
    else:
        job.functions = list(_pair(job, module))


def _seed(rv, ret: ast.expr) -> list[ast.stmt]:
    """``g_y = g_out`` when the returned name's cotangent has a name of its own."""
    if isinstance(ret, ast.Name) and rv.needs(ret) and rv.g(ret.id) != "g_out":
        return [assign(rv.g(ret.id), name("g_out"))]
    return []


def _init_saved(fc: FunctionCompiler, params: list[str], fwd: list[ast.stmt]):
    """``tape = []`` and ``x = None`` for saved names that may be unbound when saved."""
    bound = set(params)
    for s in fwd:  # names the top level binds before any save of them needs them
        if "save" in anno(s) and anno(s)["save"] not in bound:
            break
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
            bound.add(s.targets[0].id)
        elif isinstance(s, (ast.If, ast.For, ast.While)):
            break
    inits = [assign(x, const(None)) for x in sorted(fc.saved_names - bound)]
    for s in inits:
        anno(s)["init"] = s.targets[0].id
    tape = [assign("tape", ast.List(elts=[], ctx=ast.Load()))] if fc.uses_tape else []
    return tape + inits


def _top_level(job, module) -> ast.FunctionDef:
    rv = job.state
    fc, params, ret = rv.fc, job.params, job.node.body[-1].value
    grads = [
        name(rv.g(p)) if rv.state.get(rv.g(p), NONE) != NONE else const(None)
        for p in job.wrt
    ]
    # finalize gives g_p the shape of the argument: an argument the function
    # re-binds (``w = x`` after an early return) is read through a name that
    # keeps the value it was called with
    rebound = stores(ast.Module(body=job.fwd + job.bwd, type_ignores=[]))
    held = {p: fc.namer.fresh(f"{p}_arg") for p in job.wrt if p in rebound}
    finals = [
        scalars.as_float(job, rv, g, p)
        or call(module.helper("finalize"), g, name(held.get(p, p)))
        for g, p in zip(grads, job.wrt)
    ]
    keep = []
    if isinstance(ret, ast.Name) and ret.id in fc.saved_names:
        # the backward sweep restores earlier values of this name: keep the output
        value = fc.namer.fresh("value")
        keep = [assign(value, ret)]
        ret = name(value)
    result = ast.Tuple(
        elts=[ret, ast.Tuple(elts=finals, ctx=ast.Load())], ctx=ast.Load()
    )
    hold = [assign(h, name(p)) for p, h in held.items()]
    body = hold + _init_saved(fc, params, job.fwd) + job.fwd + keep
    body += _seed(rv, job.node.body[-1].value) + job.bwd
    if rv.kept:  # the caller's containers get the items the function wrote
        body.insert(0, assign(rv.kept, ast.List(elts=[], ctx=ast.Load())))
        body.append(ast.Expr(value=call(module.helper("redo_items"), name(rv.kept))))
    body += [ast.Return(value=result)]
    fn = function_def(job.names[0], params + ["g_out"], body)
    fn.args.defaults = [const(1.0)]
    return fn


def _pair(job, module) -> tuple[ast.FunctionDef, ast.FunctionDef]:
    rv = job.state
    fc, params, ret = rv.fc, job.params, job.node.body[-1].value
    fwd, bwd = job.fwd, job.bwd
    assigned = stores(ast.Module(body=fwd, type_ignores=[])) | set(params)
    needed = sorted(
        {
            n.id
            for s in bwd
            for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        & assigned
    )
    saved = (["tape"] if fc.uses_tape else []) + [n for n in needed if n != "tape"]
    residual = ast.Tuple(elts=[name(n) for n in saved], ctx=ast.Load())
    # names bound only on some paths must exist when the residual tuple is built
    partial = [
        assign(n, const(None))
        for n in saved
        if n in fc.reassigned and n not in fc.saved_names and n not in params
    ]
    fwd_body = _init_saved(fc, params, fwd) + partial + fwd
    fwd_body.append(ast.Return(value=ast.Tuple(elts=[ret, residual], ctx=ast.Load())))
    unpack = []
    if saved:
        targets = ast.Tuple(elts=[name(n, store=True) for n in saved], ctx=ast.Store())
        residuals = name("saved")
        anno(residuals)["residuals"] = True  # shapes fixed by the callee's key
        unpack = [ast.Assign(targets=[targets], value=residuals, type_comment=None)]
    wrt = set(job.wrt)
    grads = [
        (
            name(rv.g(p))
            if p in wrt and rv.state.get(rv.g(p), NONE) != NONE
            else const(None)
        )
        for p in params
    ]
    ret_grads = ast.Return(value=ast.Tuple(elts=grads, ctx=ast.Load()))
    bwd_body = unpack + _seed(rv, ret) + bwd + [ret_grads]
    return (
        function_def(job.names[0], params, fwd_body),
        function_def(job.names[1], ["g_out", "saved"], bwd_body),
    )
