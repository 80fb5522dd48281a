"""Reductions of NumPy values as methods: ``np.sum(e)`` -> ``e.sum()``.

``np.sum``, ``np.mean``, ``np.max``, ``np.min`` and ``np.prod`` are Python
functions that look up the array's method or ufunc after argument dispatch,
which costs about 0.7 us a call on top of the reduction itself: at small sizes
(a 10-vector's logsumexp) that is a quarter of a gradient.  The method of a
NumPy value runs the very same reduction (same ufunc, same order, same
results), so where the receiver is known to hold a NumPy value the call
becomes its method, with the remaining arguments in the same order::

    exp = np.exp(sub)                    exp = np.exp(sub)
    sum_1 = np.sum(exp)           ->     sum_1 = exp.sum()
    m = np.max(x)                 ->     m = x.max()            (x: an array argument)
    mean = np.mean(a)             ->     mean = a.sum() / a.size   (a: float64)

A name holds a NumPy value when every binding of it is a NumPy call
(``np.<f>(...)``, a ufunc bound in the module) or an operator with such a name
among its operands (NumPy's result, or a Dask array's, which has the same
methods), over a fixpoint; rule results and runtime helpers' results are not
assumed to.  An argument of the top-level function is, when the call's value
for it is an ``np.ndarray`` (exactly: the cache key tells arrays apart,
``binding.array_key``) and the function never binds it again.  A full mean
of a float64 value (reverse/likes.py) is its sum over its size: ``np.mean``
computes exactly that, behind 1.5 us of Python at small sizes.  Calls that write into a buffer (``out=``) and
scalar code (Python floats: ``math`` functions) are left alone, and so are the
plain form (``optimize=False``); calls with arrays of other libraries never run
it (``pipeline.NUMPY_ONLY``: an Array API array has no methods).  A max or
min along a literal axis, one known not to be the last or the last of a NumPy
value, becomes ``max_along``/``min_along`` first (``buffers/along.py``).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from s2sad.options import SCALAR
from s2sad.transforms.astutil import walk
from s2sad.transforms.buffers import along
from s2sad.transforms.buffers.facts import Facts
from s2sad.transforms.reverse.likes import F64

#: the NumPy reductions whose method takes the same arguments after the array
METHODS = ("sum", "mean", "max", "min", "prod")


def run(job: Any, module: Any) -> None:
    """The pipeline's ``methods`` pass, over every function the job emitted."""
    if not module.options.optimize or module.options.buffers == SCALAR:
        return
    examples = job.parsed.example_args if job.top else {}
    likes = getattr(job.state, "likes", {}) if job.top else {}
    for fn in job.functions:
        if isinstance(fn, ast.FunctionDef):
            rewrite(fn, module, examples, likes)


def rewrite(
    fn: ast.FunctionDef, module: Any, examples: dict | None = None, likes=None
) -> None:
    """Turn ``np.<reduction>(a, ...)`` into ``a.<reduction>(...)`` in ``fn``."""
    params = {a.arg: False for a in fn.args.args + fn.args.kwonlyargs}
    facts = Facts(module, params)
    facts.collect(fn.body)
    # one walk for all three rewrites: none makes a node another one rewrites
    # (``a.sum() / a.size``, ``max_along(x, 1)``), and the calls they replace
    # are skipped (a long function has over 100,000 nodes)
    nodes = list(walk(fn))
    values = numpy_values(facts, array_params(fn, examples or {}, nodes))
    replaced = set()
    for node in nodes:
        if isinstance(node, ast.Assign) and _float64_mean(node.value, facts, likes):
            replaced.add(id(node.value))
            node.value = _sum_over_size(node.value.args[0].id)
    calls = [n for n in nodes if isinstance(n, ast.Call) and id(n) not in replaced]
    along.rewrite(fn, module, facts, values, calls, nodes)
    for node in calls:
        if _rewritable(node, facts, values):
            node.func = ast.Attribute(
                value=ast.Name(node.args[0].id, ast.Load()),
                attr=facts.np_func(node),
                ctx=ast.Load(),
            )
            node.args = node.args[1:]


def numpy_values(facts: Facts, arrays: set[str] = frozenset()) -> set[str]:
    """The names every binding of which gives a NumPy value (greatest fixpoint);
    ``arrays``: parameters known to hold arrays (never bound again)."""
    known = (set(facts.defs) - facts.params.keys()) | set(arrays)
    changed = True
    while changed:
        changed = False
        for n, defs in facts.defs.items():
            if n in known and not all(_numpy_value(v, known, facts) for v, _ in defs):
                known.discard(n)
                changed = True
    return known


def array_params(fn: ast.FunctionDef, examples: dict, nodes=None) -> set[str]:
    """The parameters of ``fn`` given an ``np.ndarray`` and never bound again
    (``nodes``: ``fn``'s, when the caller has walked it)."""
    nodes = list(walk(fn)) if nodes is None else nodes
    stored = {
        n.id
        for n in nodes
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    stored |= {a.arg for a in nodes if isinstance(a, ast.arg)} - {
        a.arg for a in fn.args.args + fn.args.kwonlyargs
    }  # names of nested functions' parameters
    return {
        a.arg
        for a in fn.args.args
        if type(examples.get(a.arg)) is np.ndarray and a.arg not in stored
    }


def _float64_mean(v: Any, facts: Facts, likes: Any) -> bool:
    """``np.mean(a)`` of a float64 value (reverse/likes.py)."""
    return (
        bool(likes)
        and isinstance(v, ast.Call)
        and facts.np_func(v) == "mean"
        and len(v.args) == 1
        and not v.keywords
        and isinstance(v.args[0], ast.Name)
        and likes.get(v.args[0].id, ("", ""))[1] == F64
    )


def _sum_over_size(a: str) -> ast.expr:
    """``a.sum() / a.size``: what ``np.mean`` computes for a float64 ``a`` (the
    same sum divided by the same count), without its Python-level checks."""
    total = ast.Call(
        func=ast.Attribute(value=ast.Name(a, ast.Load()), attr="sum", ctx=ast.Load()),
        args=[],
        keywords=[],
    )
    size = ast.Attribute(value=ast.Name(a, ast.Load()), attr="size", ctx=ast.Load())
    return ast.BinOp(left=total, op=ast.Div(), right=size)


def _numpy_value(v: Any, known: set[str], facts: Facts) -> bool:
    if isinstance(v, ast.Name):
        return v.id in known
    if isinstance(v, ast.Call):
        return facts.np_func(v) is not None
    if isinstance(v, ast.BinOp):
        return _numpy_value(v.left, known, facts) or _numpy_value(v.right, known, facts)
    if isinstance(v, ast.UnaryOp):
        return _numpy_value(v.operand, known, facts)
    return False  # for targets, rule results, helpers, subscripts, constants


def _rewritable(node: ast.Call, facts: Facts, values: set[str]) -> bool:
    if facts.np_func(node) not in METHODS or not node.args:
        return False
    first = node.args[0]
    if not (isinstance(first, ast.Name) and first.id in values):
        return False
    if any(isinstance(a, ast.Starred) for a in node.args):
        return False
    return all(kw.arg is not None and kw.arg != "out" for kw in node.keywords)
