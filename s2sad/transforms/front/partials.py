"""Calls to a global ``functools.partial`` of a function, as Python makes them.

``act = partial(leaky, alpha=0.2)`` at module level, ``act(z)`` in the code:
the call becomes ``act.func(z, alpha=act.keywords["alpha"])``, so the
function (resolved when the code compiles) is compiled like any callee and
the stored arguments are read from the object when the code runs.  The cache
key tells partials of other shapes apart (``cache._identity``), and the
entry guard sees a rebound ``act``.  A partial of anything but a function or
a ufunc (a bound method would get the partial object as its ``self``) stays
a call s2sad refuses.
"""

from __future__ import annotations

import ast
import copy
import functools
import types
from typing import Any

import numpy as np


def unwrap(norm: Any, e: ast.Call) -> ast.Call:
    """``act(x)`` where the global ``act`` is ``functools.partial(f, *a,
    **k)``: the call Python makes, ``act.func(act.args[0], ..., x,
    k=act.keywords['k'])``.  ``f`` is resolved when the code compiles (a
    rebound ``act`` compiles again, as any global does); the stored
    arguments are read from the object when it runs."""
    func = e.func
    if not norm.is_static(func) or any(isinstance(a, ast.Starred) for a in e.args):
        return e
    obj = norm.resolve(func)
    if (
        type(obj) is not functools.partial
        or any(k.arg is None for k in e.keywords)
        # a function or a ufunc: a bound method would get the partial
        # object as its self (such a partial stays refused)
        or not isinstance(
            obj.func, (types.FunctionType, types.BuiltinFunctionType, np.ufunc)
        )
    ):
        return e

    def part(attr: str, key: Any) -> ast.expr:
        held = ast.Attribute(value=copy.deepcopy(func), attr=attr, ctx=ast.Load())
        return ast.Subscript(value=held, slice=ast.Constant(key), ctx=ast.Load())

    given = {k.arg for k in e.keywords}
    call = ast.Call(
        func=ast.Attribute(value=copy.deepcopy(func), attr="func", ctx=ast.Load()),
        args=[part("args", i) for i in range(len(obj.args))] + list(e.args),
        keywords=[
            ast.keyword(arg=k, value=part("keywords", k))
            for k in obj.keywords
            if k not in given
        ]
        + list(e.keywords),
    )
    for n in ast.walk(call):
        if isinstance(n, (ast.expr, ast.keyword)) and not hasattr(n, "lineno"):
            ast.copy_location(n, e)
    return call
