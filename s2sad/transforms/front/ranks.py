"""How many dimensions a value has, where the code says so (for the aliasing pass).

The aliasing pass needs to know which names hold immutable scalars: ``s *= t``
rebinds a scalar but changes an array in place.  Besides the call's example
arguments, the number of dimensions follows the code through the usual forms
of normalized code: ``np.linspace(a, b, 4)`` has one, ``.reshape(4, 3)`` two,
arithmetic and ufuncs broadcast (the most of their operands), ``a[i, j]`` with
integer ``i``, ``j`` takes two away, ``np.dot``/``@`` of two vectors gives a
scalar.  :func:`rank` answers None when it cannot tell; :func:`scalar_result`
says whether a value of rank 0 is a NumPy scalar (immutable) rather than a
0-d array (``np.where`` always makes an array, which ``+=`` changes in place).
"""

from __future__ import annotations

import ast
import builtins
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from s2sad.transforms.astutil import anno
from s2sad.transforms.front import returns
from s2sad.transforms.front.returns import FULL_REDUCTIONS

REDUCTION_METHODS = {"sum", "mean", "max", "min", "prod", "std", "var", "item"}
#: NumPy functions whose result has one dimension
VECTORS = {np.linspace, np.arange, np.logspace}


def rank(
    value: ast.expr, ranks: dict[str, int], is_int: Callable[[ast.expr], bool]
) -> int | None:
    """The number of dimensions of ``value`` (None: unknown); ``ranks``: of the
    names known here; ``is_int``: whether an index is an integer."""

    def of(e: ast.expr) -> int | None:
        return rank(e, ranks, is_int)

    if isinstance(value, ast.Constant):
        return 0 if type(value.value) in (int, float, bool, complex) else None
    if isinstance(value, ast.Name):
        return ranks.get(value.id)
    if isinstance(value, ast.UnaryOp):
        return of(value.operand)
    if isinstance(value, ast.BinOp):
        left, right = of(value.left), of(value.right)
        if left is None or right is None:
            return None
        if isinstance(value.op, ast.MatMult):
            return _matmul(left, right)
        return max(left, right)
    if isinstance(value, ast.Compare) and len(value.comparators) == 1:
        left, right = of(value.left), of(value.comparators[0])
        return None if left is None or right is None else max(left, right)
    if isinstance(value, ast.Attribute) and value.attr == "T":
        return of(value.value)
    if isinstance(value, ast.Subscript):
        return _subscript(of(value.value), value.slice, is_int)
    if isinstance(value, ast.Call):
        return _call(value, of)
    return None


def scalar_result(value: ast.expr) -> bool:
    """Whether a value of rank 0 made by ``value`` is a NumPy scalar: arithmetic,
    integer indexing, ufuncs, ``np.dot``; not ``np.where`` nor a reshape."""
    if isinstance(value, (ast.BinOp, ast.UnaryOp, ast.Subscript)):
        return True
    if isinstance(value, ast.Call) and not value.keywords:
        info = anno(value).get("call")
        target = getattr(info, "target", None)
        if getattr(info, "kind", "") == "rule":
            return isinstance(target, np.ufunc) or target is np.dot
    return False


def _matmul(a: int, b: int) -> int | None:
    if a == 0 or b == 0:
        return None  # @ refuses scalars
    if a == 1 and b == 1:
        return 0
    if a <= 2 and b <= 2:
        return a + b - 2
    return None


def _subscript(base: int | None, index: ast.expr, is_int) -> int | None:
    if base is None:
        return None
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    ints = 0
    for item in items:
        if isinstance(item, ast.Slice):
            continue
        if not is_int(item):
            return None  # an array index, None, Ellipsis: not counted here
        ints += 1
    return base - ints if len(items) <= base else None


def _call(value: ast.Call, of) -> int | None:
    info = anno(value).get("call")
    kind = getattr(info, "kind", "")
    target = getattr(info, "target", None)
    if kind == "rule" and _full_reduction(value, target):
        return 0  # np.mean(a), np.sum(a, axis=None): a scalar, whatever a's rank
    if value.keywords:
        return None
    if kind == "method" and isinstance(value.func, ast.Attribute):
        receiver = of(value.func.value)
        attr = value.func.attr
        if attr == "reshape":
            args = value.args
            if len(args) == 1 and isinstance(args[0], ast.Tuple):
                return len(args[0].elts)
            if args and all(isinstance(a, ast.Constant) for a in args):
                return len(args)
            return None
        if attr in ("transpose", "copy") and not value.args:
            return receiver
        return None
    if kind != "rule":
        return None
    args = [of(a) for a in value.args]
    if isinstance(target, np.ufunc) and len(value.args) == target.nin:
        return None if None in args else max(args, default=0)
    if _in(target, VECTORS):
        return 1
    if target is np.outer:
        return 2
    if target is np.dot and len(args) == 2 and None not in args:
        return max(args) if 0 in args else _matmul(*args)
    if target is np.where and len(args) == 3 and None not in args:
        return max(args)
    if target is np.transpose and len(args) == 1:
        return args[0]
    return None


def scalar_call(value: ast.Call, scalar: Callable[[ast.expr], bool]) -> bool:
    """Whether the call ``value`` gives an immutable scalar (``scalar``: of an
    argument)."""
    info = anno(value).get("call")
    kind = getattr(info, "kind", "")
    target = getattr(info, "target", None)
    if kind == "method":
        # x.sum(), x.item(): a scalar for an array (other receivers would fail)
        return target in REDUCTION_METHODS and not value.args and not value.keywords
    if kind == "user" and not value.keywords:
        return returns.returns_scalar(target)  # by the callee's source
    if kind == "rule" and _full_reduction(value, target):
        return True
    if kind == "rule" and target is np.clip:  # clip of scalars: a NumPy scalar
        parts = value.args + [k.value for k in value.keywords]
        bounds = ("a_min", "a_max", "min", "max")
        return all(k.arg in bounds for k in value.keywords) and all(map(scalar, parts))
    if kind in ("user", "local") or value.keywords or target is None:
        return False
    if target in (builtins.float, builtins.int):
        return True
    args_scalar = all(scalar(a) for a in value.args)
    if target in (builtins.abs, builtins.min, builtins.max, builtins.round):
        return bool(value.args) and args_scalar  # one of, or a function of, scalars
    if getattr(math, getattr(target, "__name__", ""), None) is target:
        return True  # math functions return Python numbers
    if _in(target, FULL_REDUCTIONS):
        return len(value.args) == 1
    if isinstance(target, np.ufunc):
        return args_scalar  # a ufunc of scalars gives a NumPy scalar
    return False


def _full_reduction(value: ast.Call, target: Any) -> bool:
    """``np.sum(a)``, ``np.mean(a, axis=None)``: one operand, no axis."""
    return (
        _in(target, FULL_REDUCTIONS)
        and len(value.args) == 1
        and all(
            k.arg == "axis"
            and isinstance(k.value, ast.Constant)
            and k.value.value is None
            for k in value.keywords
        )
    )


def _in(target: Any, group: set) -> bool:
    try:
        return target in group
    except TypeError:  # unhashable
        return False
