"""The values and the calls of the row-wise check of :mod:`s2sad.rowwise`.

:class:`Val` is what an expression is to the check; calls are NumPy reductions,
ufuncs, functions along an axis, s2sad's layers and losses, and the user's own
helpers (followed into their source).
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

ELEMENTWISE_BINOPS = (
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.Pow,
    ast.FloorDiv,
    ast.Mod,
)
#: NumPy reductions: sums and means are linear over rows, the others are not
LINEAR_REDUCTIONS = {np.sum: "sum", np.mean: "mean"}
OTHER_REDUCTIONS = (np.max, np.min, np.amax, np.amin, np.prod, np.std, np.var)
METHOD_REDUCTIONS = {"sum": "sum", "mean": "mean", "max": None, "min": None}
#: functions along one axis (axis 0 would mix the rows)
ALONG_AXIS = (np.sort, np.cumsum, np.cumprod, np.argsort, np.flip)
ELEMENTWISE_FUNCTIONS = (np.where, np.clip)
MAX_DEPTH = 8


@dataclass(frozen=True)
class Val:
    kind: str  # const, row, sum, mean, nrows, shape, mixed
    rank: int | None = None
    obj: Any = None  # a const's Python object, when it names one
    node: Any = None  # mixed: where
    why: str = ""  # mixed: why

    def same(self, other: Val) -> bool:
        return (self.kind, self.rank) == (other.kind, other.rank)


CONST = Val("const")


def _mixed(node: Any, why: str) -> Val:
    return Val("mixed", node=node, why=why)


def _rank_of(value: Any) -> int | None:
    if isinstance(value, (int, float, complex, np.generic)):
        return 0
    if isinstance(value, np.ndarray):
        return value.ndim
    return None


_ABSENT = object()


def call(checker: Any, node: ast.Call) -> Val:
    func = node.func
    if isinstance(func, ast.Attribute):
        receiver = checker.expr(func.value)
        if receiver.kind == "mixed":
            return receiver
        if receiver.kind in ("row", "sum", "mean"):
            return _method(checker, receiver, func.attr, node)
        if receiver.kind == "const" and not isinstance(
            receiver.obj, (types.ModuleType, type)
        ):  # a method of a fixed value: fixed when its arguments are
            vals = [checker.expr(a) for a in node.args]
            return _many(
                vals + [checker.expr(k.value) for k in node.keywords], node, func.attr
            )
    fv = checker.expr(func)
    if fv.kind != "const" or fv.obj is None:
        return (
            fv if fv.kind == "mixed" else _mixed(node, "a call of a computed function")
        )
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        return _mixed(node, "a call with *args or **kwargs")
    return _function(checker, fv.obj, node)


def _arg(checker: Any, node: ast.Call, pos: int, name: str) -> Any:
    """The literal value of an argument (by position or keyword), or _ABSENT;
    a non-literal raises ValueError."""
    target = None
    if pos < len(node.args):
        target = node.args[pos]
    for k in node.keywords:
        if k.arg == name:
            target = k.value
    if target is None:
        return _ABSENT
    v = checker.expr(target)
    if v.kind == "const" and isinstance(v.obj, (int, tuple, type(None), bool)):
        return v.obj
    raise ValueError(name)


def _reduce(red: str | None, v: Val, axis: Any, keepdims: bool, node: Any) -> Val:
    """``red`` ("sum", "mean", or None for max, min...) of ``v`` over ``axis``."""
    if v.kind in ("const", "mixed"):
        return v if v.kind == "mixed" else CONST
    if v.kind in ("sum", "mean"):
        if red is None:
            return _mixed(node, f"a nonlinear reduction of a {v.kind} over rows")
        return Val(v.kind)
    if v.kind != "row" or v.rank is None:
        return _mixed(node, "a reduction of the number of rows")
    r = v.rank
    axes = None if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    if axes is not None:
        axes = tuple(a + r if a < 0 else a for a in axes)
    if axes is None or 0 in axes:
        if red is None:
            return _mixed(
                node,
                "it reduces over the rows with something other "
                "than a sum or mean (max, min, prod, std...)",
            )
        if axes is None:
            return Val(red, rank=0)
        return Val(red, rank=r if keepdims else r - len(axes))
    return Val("row", rank=r if keepdims else r - len(axes))


def _method(checker: Any, v: Val, name: str, node: ast.Call) -> Val:
    if name in METHOD_REDUCTIONS:
        try:
            axis = _arg(checker, node, 0, "axis")
            keepdims = _arg(checker, node, 99, "keepdims")
        except ValueError:
            return _mixed(node, "an axis that is not a literal number")
        axis = None if axis is _ABSENT else axis
        return _reduce(METHOD_REDUCTIONS[name], v, axis, keepdims is True, node)
    if name in ("astype", "copy"):
        return v
    if name == "clip":
        return checker.elementwise([v] + [checker.expr(a) for a in node.args], node)
    return _mixed(node, f"the method '.{name}' of a row-wise value")


def _function(checker: Any, fn: Any, node: ast.Call) -> Val:
    from s2sad.runtime import activations, nn

    args = node.args
    if fn in LINEAR_REDUCTIONS or fn in OTHER_REDUCTIONS:
        if not args:
            return _mixed(node, "a reduction without its array")
        try:
            axis = _arg(checker, node, 1, "axis")
            keepdims = _arg(checker, node, 3 if fn is np.mean else 99, "keepdims")
        except ValueError:
            return _mixed(node, "an axis that is not a literal number")
        axis = None if axis is _ABSENT else axis
        red = LINEAR_REDUCTIONS.get(fn)
        return _reduce(red, checker.expr(args[0]), axis, keepdims is True, node)
    if isinstance(fn, np.ufunc) or fn in ELEMENTWISE_FUNCTIONS or fn is abs:
        if any(k.arg in ("out", "where", "axes", "axis") for k in node.keywords):
            return _mixed(node, "a ufunc with out=, where= or axes")
        return checker.elementwise([checker.expr(a) for a in args], node)
    if fn in (activations.relu, activations.sigmoid):
        return checker.elementwise([checker.expr(a) for a in args], node)
    if fn in (np.matmul, np.dot) and len(args) == 2:
        return checker.matmul(checker.expr(args[0]), checker.expr(args[1]), node)
    if fn is activations.dense and len(args) >= 2:
        out = checker.matmul(checker.expr(args[0]), checker.expr(args[1]), node)
        if len(args) == 3:
            out = checker.elementwise([out, checker.expr(args[2])], node)
        return out
    if fn in ALONG_AXIS or fn in (activations.softmax, activations.log_softmax):
        return _along_axis(checker, fn, node)
    if fn is np.take_along_axis and len(args) >= 2:
        return _take(checker, node)
    if fn in (nn.softmax_cross_entropy, nn.binary_cross_entropy_with_logits):
        vals = [checker.expr(a) for a in args]
        if len(vals) != 2 or node.keywords:
            return _mixed(
                node, f"{fn.__name__} with other arguments than (logits, " "labels)"
            )
        if all(v.kind == "row" for v in vals):
            return Val("mean", rank=0)  # the mean over examples (axis 0)
        return _many(vals, node, fn)
    if fn is nn.one_hot and args:
        v = checker.expr(args[0])
        return (
            Val("row", rank=v.rank + 1)
            if v.kind == "row" and v.rank
            else _many([v] + [checker.expr(a) for a in args[1:]], node, fn)
        )
    if fn is len and len(args) == 1:
        v = checker.expr(args[0])
        return Val("nrows") if v.kind == "row" else _many([v], node, fn)
    if fn in (np.asarray, np.asanyarray) and len(args) == 1 and not node.keywords:
        return checker.expr(args[0])
    if isinstance(fn, types.FunctionType) and not _library(fn):
        return _callee(checker, fn, node)
    vals = [checker.expr(a) for a in args] + [
        checker.expr(k.value) for k in node.keywords
    ]
    return _many(vals, node, fn)


def _many(vals: list[Val], node: Any, fn: Any) -> Val:
    """A call not known to keep rows apart: fine on fixed values only."""
    for v in vals:
        if v.kind == "mixed":
            return v
    if all(v.kind == "const" for v in vals):
        return CONST
    name = getattr(fn, "__name__", repr(fn))
    return _mixed(node, f"s2sad cannot show that '{name}' keeps the rows apart")


def _library(fn: Any) -> bool:
    module = getattr(fn, "__module__", "") or ""
    return module.split(".")[0] in ("numpy", "scipy", "s2sad", "dask")


def _along_axis(checker: Any, fn: Any, node: ast.Call) -> Val:
    v = checker.expr(node.args[0])
    if v.kind != "row":
        return _many([v], node, fn)
    try:
        axis = _arg(checker, node, 1, "axis")
    except ValueError:
        return _mixed(node, "an axis that is not a literal number")
    if axis is _ABSENT:
        axis = -1 if fn in (np.sort, np.argsort) or "softmax" in fn.__name__ else None
    if not isinstance(axis, int) or v.rank is None or axis % v.rank == 0:
        return _mixed(node, f"{fn.__name__} along the rows (axis 0 or flattened)")
    return v


def _take(checker: Any, node: ast.Call) -> Val:
    a, idx = checker.expr(node.args[0]), checker.expr(node.args[1])
    try:
        axis = _arg(checker, node, 2, "axis")
    except ValueError:
        return _mixed(node, "an axis that is not a literal number")
    rowwise = a.kind == "row" and idx.kind == "row" and isinstance(axis, int)
    if rowwise and a.rank and idx.rank == a.rank and axis % a.rank != 0:
        return a
    if "row" in (a.kind, idx.kind):
        return _mixed(node, "take_along_axis that picks along the rows")
    return _many([a, idx], node, np.take_along_axis)


def _callee(checker: Any, fn: Any, node: ast.Call) -> Val:
    """The user's own function: its return value, checked in its source."""
    from s2sad.transforms.front.parse import parse_function

    vals = [checker.expr(a) for a in node.args]
    if all(v.kind == "const" for v in vals) and not node.keywords:
        return CONST
    if node.keywords:
        return _mixed(node, f"a call of {fn.__name__} with keyword arguments")
    if checker.depth >= MAX_DEPTH:
        return _mixed(node, "calls nested too deeply")
    try:
        parsed = parse_function(fn)
    except Exception:  # noqa: BLE001 (no source: refused, not guessed)
        return _mixed(node, f"the source of {fn.__name__} cannot be read")
    result, _ = checker.spawn(parsed).run(vals)
    if result.kind == "mixed":
        return _mixed(node, f"in {fn.__name__}: {result.why}")
    return result
