"""``out=`` on a NumPy call, written as the item assignment it is.

``np.add(y, x, out=y)`` computes ``y + x`` and writes it into the array ``y``
holds; so does ``y[...] = np.add(y, x)``, which the rest of the compiler
already treats as Python does (validate, before the in-place pass)::

    np.add(y, x, out=y)              y[...] = np.add(y, x)
    z = np.multiply(h, 0.5, out=h)   h[...] = np.multiply(h, 0.5)
                                     z = h

On a local array nothing else holds, the item assignment is differentiated as
any other; one with views or aliases goes through the aliasing checks; on an
argument of the differentiated function, the function works on a copy taken
at entry and writes it back at exit (front/inplace.py); on a callee's
parameter it is refused there.  Only NumPy functions (ufuncs and functions of
the ``numpy`` namespace), ``out=`` a plain name (or a one-name tuple), and no
``where=`` (which leaves some items as they were).  Any other ``out=`` whose
inputs are differentiated is refused by activity (front/activity.py).
"""

from __future__ import annotations

import ast
import copy
from typing import Any

import numpy as np

from s2sad.transforms.astutil import anno, copy_loc, name, walk
from s2sad.transforms.front.calls import CallInfo
from s2sad.transforms.front.parse import MISSING


def _numpy_function(func: ast.expr, env: Any) -> bool:
    obj = _resolve(func, env)
    if isinstance(obj, np.ufunc):
        return True
    module = getattr(obj, "__module__", None) or ""
    return callable(obj) and (module == "numpy" or module.startswith("numpy."))


def _target(call: ast.Call, env: Any, local: set) -> str | None:
    """The name ``out=`` writes into, when this call can be rewritten."""
    outs = [k for k in call.keywords if k.arg == "out"]
    if len(outs) != 1 or any(k.arg in ("where", None) for k in call.keywords):
        return None
    v = outs[0].value
    if isinstance(v, ast.Tuple) and len(v.elts) == 1:
        v = v.elts[0]
    if not isinstance(v, ast.Name) or v.id not in local:
        return None  # a global or a closure's array: refused by activity
    if not _numpy_function(call.func, env):
        return None
    return v.id


def _rewrite(s: ast.stmt, env: Any, local: set) -> list[ast.stmt] | None:
    if isinstance(s, ast.Expr):
        call, rest = s.value, None
    elif (
        isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
    ):
        call, rest = s.value, s.targets[0].id
    else:
        return None
    if not isinstance(call, ast.Call):
        return None
    t = _target(call, env, local)
    if t is None:
        return None
    call.keywords = [k for k in call.keywords if k.arg != "out"]
    into = ast.Subscript(
        value=name(t), slice=ast.Constant(value=Ellipsis), ctx=ast.Store()
    )
    out = [ast.Assign(targets=[into], value=call)]
    if rest is not None:
        out.append(ast.Assign(targets=[name(rest, store=True)], value=name(t)))
    return [copy_loc(stmt, s) for stmt in out]


class _Rewriter(ast.NodeTransformer):
    def __init__(self, env: Any, local: set):
        self.env, self.local = env, local

    def generic_visit(self, node):
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                new: list[ast.stmt] = []
                for s in stmts:
                    done = _rewrite(s, self.env, self.local)
                    new.extend(done if done is not None else [s])
                setattr(node, field, new)
        return node

    def visit_FunctionDef(self, node):  # nested functions: their own compile
        return node if node is not self.root else self.generic_visit(node)

    visit_Lambda = visit_AsyncFunctionDef = visit_FunctionDef


def _drop_default_out(node: ast.AST, env: Any) -> None:
    """``out=None`` (NumPy's default: a new array) dropped from NumPy calls and
    array methods, whose rules take no ``out``: np.tanh(x, out=None)."""
    for call in walk(node):
        if isinstance(call, ast.Call) and _positional_none_out(call, env):
            call.args = call.args[:-1]  # np.add(x, y, None): out given by position
        if not isinstance(call, ast.Call) or not any(
            k.arg == "out"
            and isinstance(k.value, ast.Constant)
            and k.value.value is None
            for k in call.keywords
        ):
            continue
        func = call.func
        method = isinstance(func, ast.Attribute) and hasattr(np.ndarray, func.attr)
        if method or _numpy_function(func, env):
            call.keywords = [
                k
                for k in call.keywords
                if not (k.arg == "out" and isinstance(k.value, ast.Constant))
            ]


def _positional_none_out(call: ast.Call, env: Any) -> bool:
    """A ufunc called with one positional argument more than its inputs, a
    None: its ``out`` (np.tanh(x, None))."""
    last = call.args[-1] if call.args else None
    if not (isinstance(last, ast.Constant) and last.value is None):
        return False
    obj = _resolve(call.func, env)
    return isinstance(obj, np.ufunc) and len(call.args) == obj.nin + 1


#: ufunc keywords that do not change a float result's value
_UFUNC_NEUTRAL = ("casting", "order", "subok")


def _ufunc_keywords(node: ast.AST, env: Any) -> None:
    """A ufunc's own keywords, which its rule takes no part in: ``casting=``,
    ``order=`` and ``subok=`` dropped, and ``dtype=D`` (the loop's type) read
    as the inputs cast to D: ``np.exp(np.asarray(x, dtype=D))``, so an integer
    D has the zero derivative of the cast."""
    for call in walk(node):
        if not (
            isinstance(call, ast.Call)
            and any(k.arg in (*_UFUNC_NEUTRAL, "dtype") for k in call.keywords)
            and isinstance(call.func, ast.Attribute)
            and isinstance(_resolve(call.func, env), np.ufunc)
        ):
            continue
        dtype = [k.value for k in call.keywords if k.arg == "dtype"]
        call.keywords = [
            k for k in call.keywords if k.arg not in (*_UFUNC_NEUTRAL, "dtype")
        ]
        if not dtype:
            continue
        numpy = call.func.value  # np of np.exp: the module the ufunc came from
        if _resolve(numpy, env) is not np:
            call.keywords.append(ast.keyword(arg="dtype", value=dtype[0]))
            continue  # (its rule refuses the keyword)
        call.args = [
            copy_loc(
                ast.Call(
                    func=ast.Attribute(
                        value=copy.deepcopy(numpy), attr="asarray", ctx=ast.Load()
                    ),
                    args=[a],
                    keywords=[ast.keyword(arg="dtype", value=copy.deepcopy(dtype[0]))],
                ),
                a,
            )
            for a in call.args
        ]


def _resolve(func: ast.expr, env: Any) -> Any:
    """The object a dotted name refers to (MISSING if none)."""
    path = []
    while isinstance(func, ast.Attribute):
        path.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return MISSING
    obj = env.lookup(func.id)
    for attr in reversed(path):
        obj = getattr(obj, attr, MISSING)
    return obj


def run(parsed: Any) -> None:
    """Rewrite the function's ``out=`` calls (see the module docstring)."""
    node = parsed.node
    _drop_default_out(node, parsed.env)
    _ufunc_keywords(node, parsed.env)
    local = {a.arg for a in walk(node.args) if isinstance(a, ast.arg)} | {
        n.id
        for n in walk(node)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    r = _Rewriter(parsed.env, local)
    r.root = parsed.node
    r.visit(parsed.node)


def out_problem(call: ast.Call, active: set, source):
    """A NumPy call writing a value computed from differentiated inputs into
    ``out=`` an array that is not differentiated (a global, ``where=``: what
    front/outarg.py does not rewrite): its gradient would be lost."""
    info: CallInfo = anno(call).get("call", CallInfo("unknown"))
    out = next((k.value for k in call.keywords if k.arg == "out"), None)
    if out is None or info.kind not in ("rule", "method"):
        return None
    if isinstance(out, ast.Name) and out.id in active:
        return None  # refused as a differentiated keyword argument
    ins = [*call.args, *(k.value for k in call.keywords if k.arg != "out")]
    if info.kind == "method":
        ins.append(call.func.value)
    if not any(isinstance(a, ast.Name) and a.id in active for a in ins):
        return None
    return source.problem(
        call,
        "out= receives a value computed from differentiated inputs; s2sad "
        "follows it only as an item assignment into a local or argument "
        "array (np.add(y, x, out=y), without where=)",
        "assign the result instead: y = f(...) (y[...] = f(...) to change the "
        "array in place)",
    )
