"""Which names hold Python numbers, for scalar code (the ``scalar`` buffer policy).

When every argument of a call is a Python ``float``, ``int`` or ``bool``
(``Options.buffers == "scalar"`` and the argument types the cache key tells
apart, s2sad/binding.py), a name whose every assignment is built from such
numbers by arithmetic or by math functions (``np.sin``, ``math.exp``, ``abs``,
``max``...) holds a number too: a Python float or int, or, where the emitted
code re-runs on NumPy scalars for NumPy's inf and nan, an ``np.float64``.
Between numbers the reverse pass emits plain ``+`` instead of ``accumulate``,
drops ``unbroadcast`` (there is no shape to undo), and the ``scalar`` pass
calls ``math`` directly::

    y = x * 2.0              g_mul = unbroadcast(g_out, mul)     g_mul = g_out
    s = np.sin(y)    ->      g_x = accumulate(g_x, ...)     ->   g_x = g_x + ...

Anything else (a global array, a list, a call the table does not know, ``None``)
makes a name "not a number", and the general helpers stay.
"""

from __future__ import annotations

import ast
import builtins
import math
from typing import Any

import numpy as np

from s2sad.options import SCALAR
from s2sad.transforms.astutil import anno, assign, const, walk
from s2sad.transforms.lattice import NONE, SET, join

#: the exact argument types whose values are numbers here
NUMBER_TYPES = (float, int, bool)

#: NumPy ufuncs and math functions of numbers whose result is a number
_NUMPY = [
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "arcsinh",
    "arccosh",
    "arctanh",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "cbrt",
    "square",
    "abs",
    "absolute",
    "fabs",
    "negative",
    "positive",
    "reciprocal",
    "sign",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "arctan2",
    "hypot",
    "floor",
    "ceil",
]
_MATH = [
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "exp",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "fabs",
    "atan2",
    "hypot",
    "floor",
    "ceil",
]
NUMBER_FUNCTIONS: frozenset = frozenset(
    [getattr(np, n) for n in _NUMPY]
    + [getattr(math, n) for n in _MATH]
    + [builtins.abs, builtins.float, builtins.int, builtins.max, builtins.min]
)
#: operators whose result on two numbers is a number (``**`` only with a whole
#: constant exponent: a negative float to a fractional power is complex)
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)


def applies(job: Any, module: Any) -> bool:
    """Whether this job's code may treat numbers as numbers (the top-level
    function of a call whose arguments hold no arrays)."""
    return job.top and module.options.buffers == SCALAR


def zero_started(job: Any, rv: Any) -> list[ast.stmt]:
    """``g_x = 0.0`` for each differentiated number parameter that is never
    re-bound: its cotangent only sums contributions until ``finalize`` reads it,
    so starting from zero (which ``finalize`` gives for None) lets loops add with
    a plain ``+`` instead of testing for None.  Marks those cotangents set."""
    out = []
    ret = job.node.body[-1].value
    returned = ret.id if isinstance(ret, ast.Name) else None
    looped = {
        n.id
        for loop in _own_nodes(job.node)
        if isinstance(loop, (ast.For, ast.While))
        for n in walk(loop)
        if isinstance(n, ast.Name)
    }
    for p in job.wrt:
        if (
            p in rv.numbers
            and p in looped  # straight-line code assigns the first contribution
            and p not in rv.fc.reassigned
            and p != returned
        ):
            g = rv.g(p)
            out.append(assign(g, const(0.0)))
            rv.state[g] = SET
    return out


def as_float(job: Any, rv: Any, g: ast.expr, p: str) -> ast.expr | None:
    """``float(g_x)`` for the gradient of a Python float parameter whose
    cotangent is set (what ``finalize`` would do, without calling it); None where
    ``finalize`` is needed."""
    if not (
        rv.numbers
        and p in rv.numbers
        and type(job.parsed.example_args.get(p)) is float
        and isinstance(g, ast.Name)
        and rv.state.get(g.id, NONE) == SET
        and "float" not in _stored(job.node)
    ):
        return None
    return ast.Call(func=ast.Name(id="float", ctx=ast.Load()), args=[g], keywords=[])


def loop_body(rv: Any, touched: list[str], body_bwd: Any) -> list[ast.stmt]:
    """The backward body of a loop, generated for the cotangent states its head
    really has: the states before the loop, joined with those after the body, to
    a fixed point (the general code assumes ``maybe`` for every one, which costs
    a None test and an ``accumulate`` per cotangent and iteration).

    Each attempt generates the body afresh; what an attempt added to the names,
    the helpers and the problems is rolled back before the next.
    """
    entry = dict(rv.state)
    head = {g: entry.get(g, NONE) for g in touched}
    fc, module = rv.fc, rv.fc.module
    saved = (
        set(fc.namer.used),
        dict(rv.gnames),
        len(fc.problems),
        set(fc.locals),
        set(fc.reassigned),
        set(module.helpers_used),
    )
    while True:
        rv.state = {**entry, **head}
        body = body_bwd()
        after = {g: join(head[g], rv.state.get(g, NONE)) for g in touched}
        if after == head:
            rv.state.update(head)  # the loop may run any number of times
            return body
        head = after
        fc.namer.used = set(saved[0])
        rv.gnames = dict(saved[1])
        del fc.problems[saved[2] :]
        fc.locals, fc.reassigned = set(saved[3]), set(saved[4])
        module.helpers_used = set(saved[5])


def number_names(fn: ast.FunctionDef, examples: dict[str, Any]) -> set[str]:
    """The names of ``fn`` (normalized) that hold a number wherever they are bound.

    Parameters are numbers when their example value's type is one of
    :data:`NUMBER_TYPES`; locals when every assignment of them is (the largest
    such set: a loop-carried ``s = 0.9 * np.sin(s)`` stays a number).
    """
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    sources: dict[str, list[ast.expr]] = {}
    other: set[str] = set()  # bound by unpacking, with, except, walrus...
    for node in _own_nodes(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Name):
                sources.setdefault(t.id, []).append(node.value)
                continue
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            op = ast.BinOp(
                left=ast.Name(id=node.target.id), op=node.op, right=node.value
            )
            sources.setdefault(node.target.id, []).append(op)
            continue
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            item = ast.Call(func=_RANGE_ITEM, args=[node.iter], keywords=[])
            sources.setdefault(node.target.id, []).append(item)
            continue
        if isinstance(node, (ast.Assign, ast.For, ast.With, ast.NamedExpr)):
            other |= _stored(node)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            other.add(node.name)
    inference = _Inference(sources)
    numbers = {p for p in params if p in examples and type(examples[p]) in NUMBER_TYPES}
    for p in numbers:
        sources.setdefault(p, []).append(ast.Constant(value=0.0))  # the argument
    numbers |= set(sources) - set(params) - other
    numbers -= other
    changed = True
    while changed:
        changed = False
        for x in sorted(numbers & set(sources)):
            if not all(inference.is_number(s, numbers) for s in sources[x]):
                numbers.discard(x)
                changed = True
    return numbers


_RANGE_ITEM = ast.Name(id="<range item>", ctx=ast.Load())


def _own_nodes(fn: ast.FunctionDef):
    """The nodes of ``fn``'s body, not those of functions or lambdas inside it."""
    return _own_nodes_of(fn.body)


def _own_nodes_of(stmts):
    todo = list(stmts)
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
                todo.append(child)


def _stored(node: ast.AST) -> set[str]:
    return {
        n.id
        for n in walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


class _Inference:
    def __init__(self, sources: dict[str, list[ast.expr]]):
        #: names bound once, to ``range(...)``: a loop over them counts in ints
        self.ranges = {
            x
            for x, srcs in sources.items()
            if len(srcs) == 1
            and isinstance(srcs[0], ast.Call)
            and _target(srcs[0]) is builtins.range
        }

    def is_number(self, e: ast.expr, numbers: set[str]) -> bool:
        if isinstance(e, ast.Constant):
            return type(e.value) in NUMBER_TYPES
        if isinstance(e, ast.Name):
            return e.id in numbers
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, ast.Pow):
                if not _whole_constant(e.right):
                    return False
            elif not isinstance(e.op, _BINOPS):
                return False
            return self.is_number(e.left, numbers) and self.is_number(e.right, numbers)
        if isinstance(e, ast.UnaryOp):
            return self.is_number(e.operand, numbers)
        if isinstance(e, ast.Compare):
            if any(
                isinstance(op, (ast.In, ast.NotIn, ast.Is, ast.IsNot)) for op in e.ops
            ):
                return False
            return all(self.is_number(x, numbers) for x in [e.left, *e.comparators])
        if isinstance(e, ast.IfExp):
            return self.is_number(e.body, numbers) and self.is_number(e.orelse, numbers)
        if isinstance(e, ast.Call):
            if e.keywords or any(isinstance(a, ast.Starred) for a in e.args):
                return False
            if e.func is _RANGE_ITEM:
                it = e.args[0]
                return (isinstance(it, ast.Name) and it.id in self.ranges) or (
                    isinstance(it, ast.Call) and _target(it) is builtins.range
                )
            return _number_function(e) and all(
                self.is_number(a, numbers) for a in e.args
            )
        return False


def _whole_constant(e: ast.expr) -> bool:
    """A constant whole exponent (``x ** 2``, ``x ** 3.0``): real on any float."""
    if not isinstance(e, ast.Constant) or type(e.value) not in (int, float):
        return False
    return math.isfinite(e.value) and float(e.value).is_integer()


def _target(call: ast.Call) -> Any:
    info = anno(call).get("call")
    return getattr(info, "target", None) if info is not None else None


def _number_function(call: ast.Call) -> bool:
    target = _target(call)
    try:
        return target in NUMBER_FUNCTIONS
    except TypeError:  # unhashable
        return False
