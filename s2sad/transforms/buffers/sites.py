"""Sites: array-producing statements rewritten to write into workspace buffers.

Each statement whose result shape is fixed by the signature (see facts.py)
becomes a *site* that passes a preallocated buffer as ``out=`` (``into=`` for
rules that accept buffers); nested operands are hoisted into sites of their own::

    matmul = x @ W1            ->   matmul = np.matmul(x, W1, out=ws["matmul"])
    g_add = g_h * (1.0 - h*h)  ->   mul = np.multiply(h, h, out=ws["mul"])
                                    sub = np.subtract(1.0, mul, out=ws["sub"])
                                    g_add = np.multiply(g_h, sub, out=ws["g_add"])
    ct_x, ct_W = matmul_vjp(g, a, x, W)  ->  ...(g, a, x, W, into=(ws["ct_x"], ...))

Inside loops (and everywhere in callees) the site asks ``ws.take("key")``,
which hands out a ring buffer only when nothing refers to it (values on the
tape keep theirs).  The buffers are made at run time from a recording call
(s2sad/runtime/workspace.py).

Which statements qualify (everything else is left exactly as it was):

* binary operators, unary minus and comparisons with an operand known to be a
  NumPy value (the result of a NumPy call or of another such operator) -- the
  ufunc call is then the same operation; ``@`` always;
* NumPy ufunc calls, ``np.zeros``, and reductions/``.max(...)`` methods with an
  ``axis``; ``table[ids]`` row gathers (``take_rows``);
* ``accumulate``/``unbroadcast`` and rules whose signature has ``into``.

Every buffer expression ``ws["key"]`` is annotated with its key
(``anno["buffer"]``), which is how sharing.py finds the sites that run once.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

import numpy as np

from s2sad.runtime import fused
from s2sad.runtime.activations import log_softmax_as_written
from s2sad.runtime.indexing import add_at_index
from s2sad.runtime.stepreads import step_product, stepwise_ahead, sum_steps
from s2sad.runtime.steps import matmul_zeros, stepwise_matmul
from s2sad.runtime.stepstacks import stacked_steps
from s2sad.transforms import ops
from s2sad.transforms.astutil import Namer, anno, assign, name
from s2sad.transforms.buffers.facts import REDUCTIONS, Facts, helper_of

#: hoist's and peel's products (their ``out=``: a buffer for the product)
STEP_PRODUCTS = (
    stepwise_matmul,
    stepwise_ahead,
    step_product,
    matmul_zeros,
    sum_steps,  # loopsums': a buffer for the sum over steps
    stacked_steps,  # loopsums': the weight's cotangent, one product after the loop
)


class Sites(Facts):
    """The facts and the rewrite of one function; see the module docstring."""

    def __init__(
        self, module: Any, params: dict[str, bool], namer: Namer, callee: bool = False
    ):
        super().__init__(module, params, callee)
        self.np = next(
            (a for a, v in module.bindings.items() if v is np), None
        ) or module.bind("np", np, ["module", "numpy", "np"])
        self.namer = namer
        self.keys: dict[str, int] = {}
        self.count = 0
        self.temps: set[str] = set()  # hoisted elementwise temporaries (one use)
        self.shares: dict[str, str] = {}  # site key -> key of a temporary it may reuse

    def rewrite(self, stmts: list[ast.stmt], in_loop: bool) -> list[ast.stmt]:
        """``stmts`` with every site rewritten (hoisted operands before it)."""
        out: list[ast.stmt] = []
        for s in stmts:
            if isinstance(s, (ast.For, ast.While)):
                s.body = self.rewrite(s.body, True)
            elif isinstance(s, ast.If):
                s.body = self.rewrite(s.body, in_loop)
                s.orelse = self.rewrite(s.orelse, in_loop)
            elif isinstance(s, ast.Assign) and len(s.targets) == 1:
                pre: list[ast.stmt] = []
                self._site(s, in_loop, pre)
                out.extend(pre)
            out.append(s)
        return out

    def _site(self, s: ast.Assign, in_loop: bool, pre: list) -> None:
        target = s.targets[0]
        if isinstance(target, ast.Tuple):
            self._rule_site(s.value, [_id(t) for t in target.elts], in_loop)
            return
        if not isinstance(target, ast.Name) or target.id in self.shaky:
            return
        v = s.value
        if (
            isinstance(v, ast.Subscript)
            and self.rule_of(v.value) is not None
            and isinstance(v.slice, ast.Constant)
            and v.slice.value == 0
        ):
            self._rule_site(v.value, [target.id], in_loop)
            return
        new = self._expr_site(v, target.id, in_loop, pre, top=True)
        if new is not None:
            s.value = new

    def _expr_site(
        self, v: ast.expr, label: str, in_loop: bool, pre: list, top: bool = False
    ) -> ast.expr | None:
        """``v`` rewritten to write into a buffer (nested operands are hoisted)."""
        if not self.is_shaped(v):
            return None
        if isinstance(v, ast.BinOp) and isinstance(v.op, ops.BUFFERED):
            if not (isinstance(v.op, ast.MatMult) or self.some_known(v.left, v.right)):
                return None
            args = [self._operand(e, in_loop, pre) for e in (v.left, v.right)]
            return self._np_call(ops.numpy_name(v.op), args, label, in_loop)
        if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub):
            if not self.some_known(v.operand):
                return None
            arg = self._operand(v.operand, in_loop, pre)
            return self._np_call("negative", [arg], label, in_loop)
        if (
            isinstance(v, ast.Compare)
            and len(v.ops) == 1
            and type(v.ops[0]) in ops.COMPARES
        ):
            if not self.some_known(v.left, v.comparators[0]):
                return None
            args = [self._operand(e, in_loop, pre) for e in (v.left, v.comparators[0])]
            return self._np_call(ops.numpy_name(v.ops[0]), args, label, in_loop)
        if isinstance(v, ast.Call) and self.rule_of(v) in fused.KERNELS:
            return self._call_site(v, label, in_loop, pre)  # nested too, like ufuncs
        if not top:
            return None
        if isinstance(v, ast.Call):
            return self._call_site(v, label, in_loop, pre)
        if (
            isinstance(v, ast.Subscript)
            and isinstance(v.value, ast.Name)
            and isinstance(v.slice, ast.Name)
            and v.slice.id in self.int_index
            and not self.is_fixed(v.slice)
        ):
            take = self.module.helper("take_rows")
            call = ast.Call(func=take, args=[v.value, v.slice], keywords=[])
            return self._with_out(call, label, in_loop)
        return None

    def _call_site(self, v: ast.Call, label: str, in_loop: bool, pre: list):
        if any(k.arg in ("out", "into", "where") or k.arg is None for k in v.keywords):
            return None
        fn = self.np_func(v)
        if isinstance(fn, np.ufunc):
            if len(v.args) != fn.nin or v.keywords:
                return None
            v.args = [self._operand(a, in_loop, pre) for a in v.args]
            return self._with_out(v, label, in_loop)
        axis = any(k.arg == "axis" for k in v.keywords)
        if fn in REDUCTIONS and axis and len(v.args) == 1:
            return self._with_out(v, label, in_loop)
        if fn == "zeros" and len(v.args) == 1:
            dtype = [k for k in v.keywords if k.arg == "dtype"]
            if len(dtype) == len(v.keywords):
                zeros = self.module.helper("zeros")
                call = ast.Call(func=zeros, args=v.args, keywords=dtype)
                return self._with_out(call, label, in_loop)
        if (
            isinstance(v.func, ast.Attribute)
            and v.func.attr in REDUCTIONS
            and axis
            and not v.args
            and self.some_known(v.func.value)
        ):
            return self._with_out(v, label, in_loop)
        if self.rule_of(v) in STEP_PRODUCTS and not v.keywords:
            return self._with_out(v, label, in_loop)  # hoist's and peel's products
        if self.rule_of(v) in fused.KERNELS and not v.keywords:
            v.args = [self._operand(a, in_loop, pre) for a in v.args]
            return self._with_out(v, label, in_loop)  # a rule's fused kernel
        if self.rule_of(v) is log_softmax_as_written and len(v.args) == 1:
            return self._with_out(v, label, in_loop)  # fuse's (x, axis=...)
        if self.rule_of(v) is add_at_index and len(v.args) == 4 and not v.keywords:
            return self._with_out(v, label, in_loop)  # a copy of g_x goes there
        helper = helper_of(v)
        if helper in ("accumulate", "unbroadcast") and len(v.args) == 2:
            v.args = [self._operand(v.args[0], in_loop, pre), v.args[1]]
            if helper == "accumulate":
                v.args[1] = self._operand(v.args[1], in_loop, pre, rules=True)
            return self._with_out(v, label, in_loop)
        return None

    def _operand(
        self, e: ast.expr, in_loop: bool, pre: list, rules: bool = False
    ) -> ast.expr:
        """A nested operand: hoisted into its own site when it can be one."""
        if isinstance(e, (ast.Name, ast.Constant)):
            return e
        if rules and isinstance(e, ast.Subscript) and self.rule_of(e.value):
            if isinstance(e.slice, ast.Constant) and e.slice.value == 0:
                if self.rule_part_shaped(e.value, 0):
                    temp = self.namer.fresh(_rule_label(e))
                    self._rule_site(e.value, [temp], in_loop)
                    pre.append(assign(temp, e))
                    return name(temp)
            return e
        temp = self.namer.fresh(_label(e))
        new = self._expr_site(e, temp, in_loop, pre)
        if new is None:
            return e
        pre.append(assign(temp, new))
        if elementwise(new, self.np):
            self.temps.add(temp)
        self.defs[temp] = [(new, ())]
        self.known.add(temp)
        self.shaped.add(temp)
        return name(temp)

    def _rule_site(self, call: ast.expr, targets: list, in_loop: bool) -> None:
        """``into=(buffers...)`` for a rule that accepts them (None where not)."""
        rule = self.rule_of(call)
        if rule is None or not _takes_into(rule):
            return
        if any(k.arg == "into" for k in call.keywords):
            return
        elts = []
        for i, t in enumerate(targets):
            ok = (
                t is not None and t not in self.shaky and self.rule_part_shaped(call, i)
            )
            elts.append(self._buffer(t, in_loop) if ok else ast.Constant(None))
        if all(isinstance(e, ast.Constant) for e in elts):
            return
        call.keywords.append(
            ast.keyword(arg="into", value=ast.Tuple(elts=elts, ctx=ast.Load()))
        )

    def _np_call(self, fn: str, args: list, label: str, in_loop: bool) -> ast.Call:
        func = ast.Attribute(value=name(self.np), attr=fn, ctx=ast.Load())
        call = ast.Call(func=func, args=args, keywords=[])
        call = self._with_out(call, label, in_loop)
        donors = [a.id for a in args if isinstance(a, ast.Name) and a.id in self.temps]
        if donors and fn != "matmul" and not in_loop and not self.callee:
            # the temporary dies here: this elementwise op may write over it
            self.shares[anno(call.keywords[-1].value)["buffer"]] = donors[0]
        return call

    def _with_out(self, call: ast.Call, label: str, in_loop: bool) -> ast.Call:
        call.keywords.append(ast.keyword(arg="out", value=self._buffer(label, in_loop)))
        return call

    def _buffer(self, label: str, in_loop: bool) -> ast.expr:
        """``ws["key"]`` (runs once) or ``ws.take("key")`` (in loops and callees)."""
        n = self.keys.get(label, 0) + 1
        self.keys[label] = n
        self.count += 1
        key = label if n == 1 else f"{label}.{n}"
        if in_loop or self.callee:
            take = ast.Attribute(value=name("ws"), attr="take", ctx=ast.Load())
            return ast.Call(func=take, args=[ast.Constant(key)], keywords=[])
        node = ast.Subscript(value=name("ws"), slice=ast.Constant(key), ctx=ast.Load())
        anno(node)["buffer"] = key
        return node


def once_key(call: ast.Call) -> str | None:
    """The key of ``call(..., out=ws["key"])`` (a site that runs once), else None."""
    for k in call.keywords:
        if k.arg == "out" and anno(k.value).get("buffer") is not None:
            return anno(k.value)["buffer"]
    return None


def is_np_call(call: ast.Call, np_alias: str) -> bool:
    """``<np>.<fn>(...)``; ``np_alias`` is the name the pass bound NumPy to."""
    return (
        isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == np_alias
    )


def elementwise(call: ast.expr, np_alias: str) -> bool:
    """An ``np.<ufunc>(...)`` site made by this pass, other than matmul."""
    return (
        isinstance(call, ast.Call)
        and is_np_call(call, np_alias)
        and call.func.attr != "matmul"
    )


def _takes_into(rule: Any) -> bool:
    """The rule function accepts buffers for its cotangents (``into=``)."""
    try:
        return "into" in inspect.signature(rule).parameters
    except (TypeError, ValueError):
        return False


def _rule_label(item: ast.Subscript) -> str:
    """``ct_<x>`` for ``rule(...)[0]``, the cotangent of ``x``: the rule's first
    argument, or the one the reverse pass marked for a partial rule."""
    of = anno(item).get("cotangent_of")
    if of is None and isinstance(item.value.args[2], ast.Name):
        of = item.value.args[2].id
    return f"ct_{of}" if of else "ct"


def _label(e: ast.expr) -> str:
    if isinstance(e, ast.BinOp) and isinstance(e.op, ops.BUFFERED):
        return ops.label(e.op)
    if isinstance(e, ast.UnaryOp):
        return "neg"
    if isinstance(e, ast.Compare):
        return "mask"
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
        return e.func.id.replace("_grad", "") + "_ct"  # a fused kernel's: sin_ct
    return "t"


def _id(t: ast.expr) -> str | None:
    return t.id if isinstance(t, ast.Name) else None
