"""Shape facts: which names of a gradient function have shapes fixed by its signature.

A greatest fixpoint over every binding of every name decides four properties:
*known* (a NumPy value: a ufunc can compute it with ``out=``), *shaped* (its
shape and dtype follow from the argument shapes), *fixed* (its value follows
from them: sizes, slices, ranges) and *int_index* (usable as an index without
a data-dependent result shape)::

    def f_value_and_grad(x, n, g_out=1.0):     known   shaped  fixed
        h = np.tanh(x)                          yes     yes     -
        k = n * 2                               -       yes     yes  (n: an int)
        pos = x[x > 0.0]                        yes     no      -    (a mask)
        for i in range(k): y = h @ h            yes     yes     -
        while c: z = z + 1                      (shaky: bound in a while loop)

The reverse pass's own statements are recognised by their annotations, not by
their text: ``tape.pop()`` (``anno["tape"] == "pop"``) and ``None`` resets do
not decide a name's kind, ``if g_x is not None`` guards (``anno["guard"]``) are
bookkeeping rather than data tests, rule calls carry their function
(``anno["rule"]``), runtime helpers their name (``anno["helper"]``) and a
callee's residuals are marked (``anno["residuals"]``).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from s2sad.runtime import fused
from s2sad.runtime.activations import log_softmax_as_written
from s2sad.runtime.indexing import add_at_index
from s2sad.runtime.stepreads import step_product, stepwise_ahead, sum_steps
from s2sad.runtime.steps import matmul_zeros, stepwise_matmul
from s2sad.runtime.stepstacks import stacked_steps
from s2sad.transforms.astutil import anno

REDUCTIONS = {"sum", "mean", "max", "min", "prod"}
CREATORS = {"zeros", "ones", "empty", "full", "arange", "zeros_like", "ones_like"}
ARRAY_FUNCS = REDUCTIONS | CREATORS | {"matmul", "dot", "reshape", "transpose"}
SHAPE_METHODS = REDUCTIONS | {
    "reshape",
    "transpose",
    "astype",
    "copy",
    "ravel",
    "squeeze",
    "swapaxes",
}
INT_INDEX_FUNCS = {"arange", "argmax", "argmin"}
PROPERTIES = ("known", "shaped", "fixed", "int_index")


class Facts:
    """The shape facts of one function; see the module docstring.

    ``params`` maps each parameter to whether its *value* is fixed by the
    signature (ints, bools and strings of the call being compiled).  A
    ``callee`` (``<f>_forward``/``<f>_backward``) trusts its residuals' shapes.
    """

    def __init__(self, module: Any, params: dict[str, bool], callee: bool = False):
        self.module = module
        self.params = params
        self.callee = callee
        self.defs: dict[str, list] = {}
        self.shaky: set[str] = set()  # bound in while loops / under data ifs

    # -- bindings -------------------------------------------------------------------
    def collect(self, stmts: list[ast.stmt], ctx: tuple = ()) -> None:
        """Every binding of every name, with the loops and tests around it."""
        for s in stmts:
            if isinstance(s, ast.Assign):
                self._bind(s.targets[0], s.value, ctx)
            elif isinstance(s, ast.For):
                self._bind(s.target, ("for", s.iter), ctx)
                self.collect(s.body, ctx + ("for",))
                self.collect(s.orelse, ctx)
            elif isinstance(s, ast.While):
                self.collect(s.body, ctx + ("while",))
                self.collect(s.orelse, ctx)
            elif isinstance(s, ast.If):
                tag = "if" if anno(s.test).get("guard") else ("dataif", s.test)
                self.collect(s.body, ctx + (tag,))
                self.collect(s.orelse, ctx + (tag,))

    def _bind(self, target: ast.expr, value: Any, ctx: tuple) -> None:
        if isinstance(target, ast.Name):
            self.defs.setdefault(target.id, []).append((value, ctx))
        elif isinstance(target, ast.Tuple):
            for i, t in enumerate(target.elts):
                if isinstance(t, ast.Name):
                    self.defs.setdefault(t.id, []).append((("part", value, i), ctx))

    def solve(self) -> None:
        """Greatest fixpoints of the four properties over all bindings."""
        names = set(self.defs)
        for n, ds in self.defs.items():
            data_ifs = [c for _, ctx in ds for c in ctx if isinstance(c, tuple)]
            if any("while" in ctx for _, ctx in ds) or (data_ifs and len(ds) > 1):
                self.shaky.add(n)
        self.known = set(names)
        self.shaped = (names - self.shaky) | set(self.params)
        self.fixed = (names - self.shaky) | {p for p, f in self.params.items() if f}
        self.int_index = set(names) | set(self.params)
        tests = {
            "known": self.is_known,
            "shaped": self.is_shaped,
            "fixed": self.is_fixed,
            "int_index": self.is_int_index,
        }
        changed = True
        while changed:
            changed = False
            for n, ds in self.defs.items():
                for attr in PROPERTIES:
                    group, test = getattr(self, attr), tests[attr]
                    if n in group and not all(_neutral(v) or test(v) for v, _ in ds):
                        group.discard(n)
                        changed = True

    # -- the four properties of one binding -----------------------------------------
    def is_known(self, v: Any) -> bool:
        """A NumPy value (a ufunc with ``out=`` computes the same)."""
        if isinstance(v, tuple):
            # a rule's array cotangent (a sparse one densifies under a ufunc: same value)
            return v[0] == "part" and self.rule_of(v[1]) is not None
        if isinstance(v, ast.Name):
            return v.id in self.known
        if isinstance(v, ast.BinOp):
            return isinstance(v.op, ast.MatMult) or self.some_known(v.left, v.right)
        if isinstance(v, ast.UnaryOp):
            return self.some_known(v.operand)
        if isinstance(v, ast.Compare):
            return self.some_known(v.left, *v.comparators)
        if isinstance(v, ast.Call):
            return self._known_call(v)
        if isinstance(v, ast.Subscript):
            return self.rule_of(v.value) is not None or self.some_known(v.value)
        if isinstance(v, ast.Attribute) and v.attr == "T":
            return self.some_known(v.value)
        return False

    def _known_call(self, v: ast.Call) -> bool:
        if self.np_func(v) is not None:
            return True
        if isinstance(v.func, ast.Attribute) and v.func.attr in SHAPE_METHODS:
            return self.some_known(v.func.value)
        if helper_of(v) == "unbroadcast":
            return self.some_known(v.args[0])
        if helper_of(v) == "accumulate":  # one of them, or their sum
            return all(self.some_known(a) for a in v.args)
        if self.rule_of(v) is add_at_index:
            return self.some_known(v.args[0])
        if self.rule_of(v) is sum_steps:  # loopsums': a sum of the steps' g
            return self.some_known(v.args[1])
        if self.rule_of(v) in fused.KERNELS:  # a rule's expression, fused
            return self.some_known(*v.args)
        return self.rule_of(v) in (
            stepwise_matmul,
            stepwise_ahead,
            matmul_zeros,
            step_product,
            stacked_steps,
        )

    def some_known(self, *exprs: ast.expr) -> bool:
        """Some operand is a NumPy value (so the operator is the ufunc)."""
        return any(
            (isinstance(e, ast.Name) and e.id in self.known)
            or (not isinstance(e, ast.Name) and self.is_known(e))
            for e in exprs
        )

    def is_fixed(self, v: Any) -> bool:
        """The value is fixed by the signature (ints for shapes, slices, ranges)."""
        if isinstance(v, tuple):
            return v[0] == "for" and self.is_fixed(v[1])
        if isinstance(v, ast.Constant):
            return True
        if isinstance(v, ast.Name):
            return v.id in self.fixed or self._static(v.id)
        if isinstance(v, ast.Attribute):
            return v.attr in ("shape", "ndim", "size", "dtype") and self.is_shaped(
                v.value
            )
        if isinstance(v, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp)):
            return all(self.is_fixed(e) for e in _operands(v))
        if isinstance(v, ast.Subscript):
            return self.is_fixed(v.value) and self.is_fixed(v.slice)
        if isinstance(v, (ast.Tuple, ast.List)):
            return all(self.is_fixed(e) for e in v.elts)
        if isinstance(v, ast.Slice):
            return all(self.is_fixed(e) for e in (v.lower, v.upper, v.step) if e)
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
            if v.func.id in ("range", "reversed", "len", "slice"):
                return all(
                    self.is_fixed(a) if v.func.id != "len" else self.is_shaped(a)
                    for a in v.args
                )
        return False

    def is_shaped(self, v: Any) -> bool:
        """The result's shape (and dtype) is fixed by the signature."""
        if isinstance(v, tuple):
            if v[0] == "for":
                return self.is_fixed(v[1])
            call = v[1]
            if self.callee and anno(call).get("residuals"):
                return True  # residuals: their shapes are in the callee's key
            return self.rule_part_shaped(call, v[2])
        if isinstance(v, ast.Constant):
            return True
        if isinstance(v, ast.Name):
            return v.id in self.shaped or self._static(v.id)
        if isinstance(v, (ast.BinOp, ast.UnaryOp, ast.Compare)):
            return all(self.is_shaped(e) for e in _operands(v))
        if isinstance(v, ast.Attribute):
            return self.is_shaped(v.value)
        if isinstance(v, (ast.Tuple, ast.List)):
            return all(self.is_shaped(e) for e in v.elts)
        if isinstance(v, ast.Subscript):
            if self.rule_of(v.value) is not None:
                idx = v.slice.value if isinstance(v.slice, ast.Constant) else None
                return isinstance(idx, int) and self.rule_part_shaped(v.value, idx)
            return self.is_shaped(v.value) and self._index_ok(v.slice)
        if isinstance(v, ast.Call):
            return self._call_shaped(v)
        return False

    def _call_shaped(self, v: ast.Call) -> bool:
        kw_fixed = all(self.is_fixed(k.value) for k in v.keywords)
        fn = self.np_func(v)
        if fn is not None:
            if isinstance(fn, np.ufunc) or fn in ("matmul", "dot"):
                return all(self.is_shaped(a) for a in v.args) and kw_fixed
            if fn in REDUCTIONS:
                return self.is_shaped(v.args[0]) and kw_fixed
            return all(self.is_fixed(a) for a in v.args) and kw_fixed
        if self.rule_of(v) is add_at_index:  # g_x + a part: shaped like x
            return self.is_shaped(v.args[0]) and self.is_shaped(v.args[2])
        if self.rule_of(v) in (stepwise_matmul, stepwise_ahead):  # (x, w, axis, range)
            return (
                self.is_shaped(v.args[0])
                and self.is_shaped(v.args[1])
                and all(self.is_fixed(a) for a in v.args[2:])
            )
        if self.rule_of(v) is sum_steps:  # shaped like g (checked at run time)
            return self.is_shaped(v.args[1])
        if self.rule_of(v) is stacked_steps:  # loopsums': shaped like w
            return self.is_shaped(v.args[3]) and self.is_fixed(v.args[4])
        if self.rule_of(v) is step_product:  # a step of the hoisted product
            return self.is_shaped(v.args[0]) and self.is_fixed(v.args[3])
        if self.rule_of(v) is log_softmax_as_written:  # fuse's: shaped like x
            return self.is_shaped(v.args[0]) and kw_fixed
        if self.rule_of(v) in fused.KERNELS:  # elementwise, like a ufunc
            return all(self.is_shaped(a) for a in v.args) and not v.keywords
        if self.rule_of(v) is matmul_zeros:  # a peeled loop's zero product
            return self.is_shaped(v.args[0]) and self.is_shaped(v.args[1])
        helper = helper_of(v)
        if helper in ("unbroadcast", "finalize"):
            return self.is_shaped(v.args[1])
        if helper == "accumulate":
            return all(self.is_shaped(a) for a in v.args)
        if isinstance(v.func, ast.Attribute) and v.func.attr in SHAPE_METHODS:
            return (
                self.is_shaped(v.func.value)
                and all(self.is_fixed(a) for a in v.args)
                and kw_fixed
            )
        if isinstance(v.func, ast.Name) and v.func.id in ("len", "range", "reversed"):
            return True
        return False

    def rule_part_shaped(self, call: ast.expr, i: int) -> bool:
        """A rule's i-th cotangent has the shape of its i-th primal argument."""
        if not isinstance(call, ast.Call) or self.rule_of(call) is None:
            return False
        k = 2 + i
        return k < len(call.args) and self.is_shaped(call.args[k])

    def _index_ok(self, idx: ast.expr) -> bool:
        parts = idx.elts if isinstance(idx, ast.Tuple) else [idx]
        for p in parts:
            if isinstance(p, (ast.Slice, ast.Constant)):
                if not self.is_fixed(p):
                    return False
            elif isinstance(p, ast.Name):
                if not (self.is_fixed(p) or p.id in self.int_index):
                    return False
            else:
                return False
        return True

    def is_int_index(self, v: Any) -> bool:
        """Usable as an index without a data-dependent result shape (no masks)."""
        if isinstance(v, ast.Call):
            return self.np_func(v) in INT_INDEX_FUNCS and self.is_shaped(v)
        return self.is_fixed(v)

    def _static(self, n: str) -> bool:
        """A module-level binding (a constant or function of the user's module)."""
        return n in self.module.bindings and n not in self.defs

    # -- what a call calls ----------------------------------------------------------
    def np_func(self, v: ast.Call) -> Any:
        """The NumPy function (ufunc object, or the name of a known one) called."""
        f = v.func
        obj = None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            mod = self.module.bindings.get(f.value.id)
            if mod is np and f.value.id not in self.defs:
                obj = getattr(np, f.attr, None)
                if not isinstance(obj, np.ufunc):
                    return f.attr if f.attr in ARRAY_FUNCS else None
        elif isinstance(f, ast.Name) and f.id not in self.defs:
            obj = self.module.bindings.get(f.id)
        if isinstance(obj, np.ufunc):
            return obj
        return None

    def rule_of(self, v: Any) -> Any:
        """The runtime rule function ``v`` calls (from its annotation), or None."""
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
            return runtime_rule(v.func)
        return None


def helper_of(v: ast.Call) -> str | None:
    """Which runtime helper ``v`` calls (``"finalize"``, ...), from its annotation."""
    helper = anno(v.func).get("helper") if isinstance(v.func, ast.Name) else None
    return helper if isinstance(helper, str) else None


def runtime_rule(func: ast.expr) -> Any:
    """The rule function a ``rule_ref`` name stands for, if it is one of the
    runtime's own: those keep the contract that the i-th cotangent has the i-th
    argument's shape; a user's custom rule is not assumed to."""
    rule = anno(func).get("rule")
    module = getattr(rule, "__module__", None) or ""
    return rule if module.startswith("s2sad.runtime.") else None


def _neutral(v: Any) -> bool:
    """Bindings that do not decide a name's kind: ``None`` resets, tape pops."""
    if isinstance(v, ast.Constant) and v.value is None:
        return True
    return isinstance(v, ast.Call) and anno(v).get("tape") == "pop"


def _operands(v: ast.expr) -> list[ast.expr]:
    if isinstance(v, ast.BinOp):
        return [v.left, v.right]
    if isinstance(v, ast.UnaryOp):
        return [v.operand]
    if isinstance(v, ast.Compare):
        return [v.left, *v.comparators]
    return list(v.values)
