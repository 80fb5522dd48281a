"""Which values provably have the shape and the float64 dtype of another.

``unbroadcast(g, a)`` sums a cotangent down to ``a``'s shape and casts it to
``a``'s float dtype; for ``sub = x - m`` with ``m`` a number, ``g_sub`` already
has ``x``'s shape, and when everything is float64 its dtype too, so the call
(about 0.2 us on a small array) does nothing.  This pass finds those cases
from the code and the call's argument types, which the cache key tells apart
(``binding.array_key``: an array argument's dtype; Python floats apart from
lists), so the reverse pass can drop the call::

    sub = x - m                  g_x = unbroadcast(g_sub, x)  ->  g_x = g_sub
    p = 1.0 / add_1              g_add_1 = unbroadcast(..., add_1)  ->  g_add_1 = ...

Each name gets a *class* ``(shape, dtype)``: ``shape`` is the name of a value
of the same shape (or ``"()"``: a number), ``dtype`` is ``F64`` (a float64
array or NumPy scalar) or ``WEAK`` (a Python number, which NumPy does not let
promote an array).  Known are the top-level function's float64 array arguments
(exact ``np.ndarray``) and Python float arguments, number constants, and what
arithmetic (``+ - * /``), ``@``, float64 ufuncs (``d->d``, ``dd->d`` loops) and
full reductions (``np.sum(a)``, ``a.max()``...) make of them.  A name bound
more than once, or other than by one plain assignment, is unknown, and so is
anything else: then the call stays.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from s2sad.transforms.astutil import anno

F64 = "f8"
WEAK = "weak"
SCALAR = "()"

#: reductions that give one number of the array's dtype (one positional argument)
_REDUCTIONS = {np.sum, np.mean, np.max, np.min, np.amax, np.amin, np.prod}
_REDUCTION_METHODS = {"sum", "mean", "max", "min", "prod"}
#: binary operators whose float64 result broadcasts the operands' shapes
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)
#: binary ufuncs that act like those operators here
_UFUNCS2 = {np.add, np.subtract, np.multiply, np.true_divide}

Class = tuple[str, str]


def classes(fn: ast.FunctionDef, examples: dict[str, Any]) -> dict[str, Class]:
    """The class of every name of ``fn`` known to have one (see the module doc)."""
    stores: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.arg):
            stores[node.arg] = stores.get(node.arg, 0) + 1
    values: dict[str, ast.expr] = {}
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and stores.get(node.targets[0].id) == 1
        ):
            values[node.targets[0].id] = node.value
    known: dict[str, Class | None] = {}
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    for p in params:
        v = examples.get(p, None)
        if stores.get(p) != 1:  # rebound in the body (or a nested function)
            continue
        if type(v) is np.ndarray and v.dtype == np.float64:
            known[p] = (p, F64)
        elif type(v) is float:
            known[p] = (SCALAR, WEAK)
        elif type(v) is np.float64:
            known[p] = (SCALAR, F64)
    return _Inference(values, known).run()


class _Inference:
    def __init__(self, values: dict[str, ast.expr], known: dict) -> None:
        self.values = values
        self.known: dict[str, Class | None] = dict(known)
        self.busy: set[str] = set()

    def run(self) -> dict[str, Class]:
        for n in self.values:
            self.name(n)
        return {n: c for n, c in self.known.items() if c is not None}

    def name(self, n: str) -> Class | None:
        if n in self.known:
            return self.known[n]
        if n not in self.values or n in self.busy:
            return None
        self.busy.add(n)
        c = self.expr(self.values[n], n)
        self.busy.discard(n)
        self.known[n] = c
        return c

    def expr(self, v: ast.expr, target: str) -> Class | None:
        if isinstance(v, ast.Constant):
            ok = type(v.value) in (int, float)
            return (SCALAR, WEAK) if ok else None
        if isinstance(v, ast.Name):
            return self.name(v.id)
        if isinstance(v, ast.UnaryOp) and isinstance(v.op, (ast.USub, ast.UAdd)):
            return self.expr(v.operand, target)
        if isinstance(v, ast.BinOp):
            a, b = self.expr(v.left, target), self.expr(v.right, target)
            if isinstance(v.op, ast.MatMult):
                f64 = a is not None and b is not None and a[1] == b[1] == F64
                return (target, F64) if f64 else None
            if isinstance(v.op, _ARITHMETIC):
                return _broadcast(a, b, target)
            return None
        if isinstance(v, ast.Call) and not v.keywords:
            return self.call(v, target)
        return None

    def call(self, v: ast.Call, target: str) -> Class | None:
        info = anno(v).get("call")
        kind = getattr(info, "kind", "")
        fn = getattr(info, "target", None)
        if kind == "method" and isinstance(v.func, ast.Attribute):
            if fn in _REDUCTION_METHODS and not v.args:
                a = self.expr(v.func.value, target)
                return (SCALAR, F64) if a is not None and a[1] == F64 else None
            return None
        if kind != "rule" or any(isinstance(a, ast.Starred) for a in v.args):
            return None
        args = [self.expr(a, target) for a in v.args]
        if None in args:
            return None
        if _in(fn, _REDUCTIONS) and len(args) == 1:
            return (SCALAR, F64)  # a float64 scalar, also of a Python number
        if isinstance(fn, np.ufunc) and fn.nout == 1 and len(args) == fn.nin == 1:
            f64 = args[0][1] == F64 and "d->d" in fn.types
            return (args[0][0], F64) if f64 else None
        if _in(fn, _UFUNCS2) and len(args) == 2:
            c = _broadcast(args[0], args[1], target)
            return None if c is None else (c[0], F64)
        return None


def _broadcast(a: Class | None, b: Class | None, target: str) -> Class | None:
    """The class of ``a op b`` for an arithmetic operator."""
    if a is None or b is None:
        return None
    if a[1] == WEAK and b[1] == WEAK:
        return None  # Python numbers: their own type rules (int, bool...)
    if a[0] == b[0] or b[0] == SCALAR:
        shape = a[0]
    elif a[0] == SCALAR:
        shape = b[0]
    else:
        shape = target  # its own shape: a broadcast of both
    return (shape, F64)


def _in(target: Any, group: set) -> bool:
    try:
        return target in group
    except TypeError:  # unhashable
        return False
