"""Which values provably have the shape and the float dtype of another.

``unbroadcast(g, a)`` sums a cotangent down to ``a``'s shape and casts it to
``a``'s float dtype; for ``sub = x - m`` with ``m`` a number, ``g_sub`` already
has ``x``'s shape, and when ``sub`` and ``x`` share a float dtype its dtype too
(a cotangent has its value's dtype: the seed is the output's, a caller's is
cast to it, ``binding.tangent_like``; where the dtype changes, as in ``float32
* float64``, the call stays and casts), so the call (about 0.2 us on a small
array) does nothing.  This pass finds those cases from the code and the call's
argument types, which the cache key tells apart (``binding.array_key``: an
array argument's dtype; Python floats apart from lists), so the reverse pass
can drop the call::

    sub = x - m                  g_x = unbroadcast(g_sub, x)  ->  g_x = g_sub
    p = 1.0 / add_1              g_add_1 = unbroadcast(..., add_1)  ->  g_add_1 = ...
    z_1 = z - z.max(axis=1, keepdims=True)    g_z = unbroadcast(g_z_1, z)  ->  g_z = g_z_1

Each name gets a *class* ``(shape, dtype)``: ``shape`` is the name of a value
of the same shape (or ``"()"``: a number; or ``"m<z"``: ``m``'s own shape,
which broadcasts into ``z``'s, as a reduction of ``z`` with ``keepdims=True``
does), ``dtype`` is ``F64`` (a float64 array or NumPy scalar), ``F32`` (the
same in float32) or ``WEAK`` (a Python number, which NumPy does not let
promote an array).  An operation's result takes the wider of its operands'
non-weak dtypes (NumPy 2's rules, NEP 50: ``float32 * 2.0`` and ``float32 *
np.float32(2)`` are float32, ``float32 * np.float64(2)`` and ``float32 *
float64_array`` float64).  Known are the top-level function's float64 and
float32 array arguments (exact ``np.ndarray``), its Python float,
``np.float64`` and ``np.float32`` arguments, number constants, and what
arithmetic (``+ - * /``, ``np.maximum``...), ``@`` (of one dtype), ufuncs with
a loop of the operand's dtype (``d->d``, ``f->f``) and reductions
(``np.sum(a)``, ``a.max()``, ``a.max(axis=1, keepdims=True)``...) make of
them.  A name bound more than once, or other than by one plain assignment, is
unknown, and so is anything else: then the call stays.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from s2sad.transforms.astutil import anno, walk

F64 = "f8"
F32 = "f4"
WEAK = "weak"
SCALAR = "()"

#: reductions that give one number of the array's dtype (one positional argument)
_REDUCTIONS = {np.sum, np.mean, np.max, np.min, np.amax, np.amin, np.prod}
_REDUCTION_METHODS = {"sum", "mean", "max", "min", "prod"}
#: binary operators whose float64 result broadcasts the operands' shapes
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)
#: binary ufuncs that act like those operators here (the same dtype rules)
_UFUNCS2 = {np.add, np.subtract, np.multiply, np.true_divide, np.maximum, np.minimum}
#: the array dtypes with a class, and each class dtype's unary ufunc loop
_FLOATS = {np.dtype(np.float64): F64, np.dtype(np.float32): F32}
_LOOPS = {F64: "d->d", F32: "f->f"}

Class = tuple[str, str]


def classes(fn: ast.FunctionDef, examples: dict[str, Any]) -> dict[str, Class]:
    """The class of every name of ``fn`` known to have one (see the module doc)."""
    stores: dict[str, int] = {}
    for node in walk(fn):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.arg):
            stores[node.arg] = stores.get(node.arg, 0) + 1
    values: dict[str, ast.expr] = {}
    for node in walk(fn):
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
        if type(v) is np.ndarray and v.dtype in _FLOATS:
            known[p] = (p, _FLOATS[v.dtype])
        elif type(v) is float:
            known[p] = (SCALAR, WEAK)
        elif type(v) is np.float64:
            known[p] = (SCALAR, F64)
        elif type(v) is np.float32:
            known[p] = (SCALAR, F32)
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
                same = a is not None and b is not None and a[1] == b[1] != WEAK
                return (target, a[1]) if same else None
            if isinstance(v.op, _ARITHMETIC):
                return _broadcast(a, b, target)
            return None
        if isinstance(v, ast.Call) and not v.keywords:
            return self.call(v, target)
        if isinstance(v, ast.Call):
            return self.kept(v, target)
        return None

    def kept(self, v: ast.Call, target: str) -> Class | None:
        """A reduction with ``keepdims=True`` (and maybe ``axis=``): its own
        shape, which broadcasts into its operand's (``"target<shape"``)."""
        words = {k.arg: k.value for k in v.keywords}
        keep = words.pop("keepdims", None)
        words.pop("axis", None)
        if words or not (isinstance(keep, ast.Constant) and keep.value is True):
            return None
        info = anno(v).get("call")
        kind, fn = getattr(info, "kind", ""), getattr(info, "target", None)
        if kind == "method" and isinstance(v.func, ast.Attribute):
            if fn not in _REDUCTION_METHODS or len(v.args) > 1:
                return None
            a = self.expr(v.func.value, target)
        elif kind == "rule" and _in(fn, _REDUCTIONS) and 1 <= len(v.args) <= 2:
            a = self.expr(v.args[0], target)
        else:
            return None
        if any(isinstance(x, ast.Starred) for x in v.args):
            return None
        if a is None or a[0] == SCALAR or a[1] == WEAK:
            return None
        # its own token: two reductions of one value (along other axes) differ
        return (f"{target}.{id(v)}<{a[0]}", a[1])

    def call(self, v: ast.Call, target: str) -> Class | None:
        info = anno(v).get("call")
        kind = getattr(info, "kind", "")
        fn = getattr(info, "target", None)
        if kind == "method" and isinstance(v.func, ast.Attribute):
            if fn in _REDUCTION_METHODS and not v.args:
                a = self.expr(v.func.value, target)
                return (SCALAR, a[1]) if a is not None and a[1] != WEAK else None
            return None
        if kind != "rule" or any(isinstance(a, ast.Starred) for a in v.args):
            return None
        args = [self.expr(a, target) for a in v.args]
        if None in args:
            return None
        if _in(fn, _REDUCTIONS) and len(args) == 1:
            # a NumPy scalar of the array's dtype; float64 of a Python number
            return (SCALAR, F64 if args[0][1] == WEAK else args[0][1])
        if isinstance(fn, np.ufunc) and fn.nout == 1 and len(args) == fn.nin == 1:
            dt = args[0][1]
            ok = dt in _LOOPS and _LOOPS[dt] in fn.types
            return (args[0][0], dt) if ok else None
        if _in(fn, _UFUNCS2) and len(args) == 2:
            return _broadcast(args[0], args[1], target)
        return None


def _broadcast(a: Class | None, b: Class | None, target: str) -> Class | None:
    """The class of ``a op b`` for an arithmetic operator."""
    if a is None or b is None:
        return None
    if a[1] == WEAK and b[1] == WEAK:
        return None  # Python numbers: their own type rules (int, bool...)
    if a[0] == b[0] or b[0] == SCALAR or _into(b[0], a[0]):
        shape = a[0]
    elif a[0] == SCALAR or _into(a[0], b[0]):
        shape = b[0]
    else:
        shape = target  # its own shape: a broadcast of both
    # NEP 50: a Python number takes the array's dtype; float32 and float64 give
    # float64 (arrays and NumPy scalars alike)
    dtype = F64 if F64 in (a[1], b[1]) else F32
    return (shape, dtype)


def _into(small: str, big: str) -> bool:
    """``small`` is the shape of a reduction of ``big`` that kept its dims."""
    return small.partition("<")[2] == big


def _in(target: Any, group: set) -> bool:
    try:
        return target in group
    except TypeError:  # unhashable
        return False
