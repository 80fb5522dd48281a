"""Workspace: NumPy calls of the top-level gradient function write into buffers.

Runs on the finished top-level function (forward sweep + backward sweep).  Each
array-producing statement whose result shape is fixed by the argument shapes
becomes a *site* that passes a preallocated buffer as ``out=`` (``into=`` for
rules that accept buffers)::

    matmul = x @ W1            ->   matmul = np.matmul(x, W1, out=ws["matmul"])
    g_add = g_h * (1.0 - h*h)  ->   mul = np.multiply(h, h, out=ws["mul"])
                                    sub = np.subtract(1.0, mul, out=ws["sub"])
                                    g_add = np.multiply(g_h, sub, out=ws["g_add"])

Inside loops the site asks ``ws.take("key")``, which hands out a ring buffer
only when nothing refers to it (values on the tape keep theirs).  The buffers
themselves are made at run time from a recording call (s2sad/runtime/workspace.py).

Which statements qualify (everything else is left exactly as it was):

* binary operators, unary minus and comparisons with an operand known to be a
  NumPy value (the result of a NumPy call or of another such operator) -- the
  ufunc call is then the same operation; ``@`` always;
* NumPy ufunc calls, ``np.zeros``, and reductions/``.max(...)`` methods with an
  ``axis``; ``table[ids]`` row gathers (``take_rows``);
* ``accumulate``/``unbroadcast`` and rules whose signature has ``into``.

and the result shape must not depend on data: names bound from boolean masks,
calls the compiler does not know, ``int(...)`` of values, or bound in ``while``
loops or under data-dependent ``if`` tests on several paths are excluded.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from typing import Any

import numpy as np

from s2sad.transforms import ops
from s2sad.transforms.astutil import anno, name

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


class Sites:
    """The analysis and rewrite of one function; see the module docstring."""

    def __init__(
        self,
        fn: ast.FunctionDef,
        module: Any,
        params: dict[str, bool],
        callee: bool = False,
    ):
        self.fn = fn
        self.module = module
        self.np = next(
            (a for a, v in module.bindings.items() if v is np), None
        ) or module.bind("np", np, ["module", "numpy", "np"])
        self.rules = _rules(module)
        self.defs: dict[str, list] = {}
        self.shaky: set[str] = set()  # bound in while loops / under data ifs
        self.params = params
        self.keys: dict[str, int] = {}
        self.count = 0
        #: a callee (``<f>_forward`` / ``<f>_backward``) may run several times per
        #: call: every site takes a free ring buffer, and nothing is shared
        self.callee = callee
        self.temps: set[str] = set()  # hoisted elementwise temporaries (one use)
        self.shares: dict[str, str] = {}  # site key -> key of a temporary it may reuse
        self.namer = None

    # -- analysis -------------------------------------------------------------------
    def collect(self, stmts: list[ast.stmt], ctx: tuple = ()) -> None:
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
                tag = "if" if _structural(s.test) else ("dataif", s.test)
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
        """Greatest fixpoints of three name properties: NumPy-valued (``known``),
        shape fixed by the signature (``shaped``), value fixed by it (``fixed``)."""
        names = set(self.defs)
        for n, ds in self.defs.items():
            data_ifs = [c for _, ctx in ds for c in ctx if isinstance(c, tuple)]
            if any("while" in ctx for _, ctx in ds) or (data_ifs and len(ds) > 1):
                self.shaky.add(n)
        self.known = set(names)
        self.shaped = (names - self.shaky) | set(self.params)
        self.fixed = (names - self.shaky) | {p for p, f in self.params.items() if f}
        self.int_index = set(names) | set(self.params)
        changed = True
        while changed:
            changed = False
            for n, ds in self.defs.items():
                for attr, test in (
                    ("known", self._known),
                    ("shaped", self._shaped),
                    ("fixed", self._fixed),
                    ("int_index", self._int_index),
                ):
                    group = getattr(self, attr)
                    if n in group and not all(_neutral(v) or test(v) for v, _ in ds):
                        group.discard(n)
                        changed = True

    def _known(self, v: Any) -> bool:
        if isinstance(v, tuple):
            # a rule's array cotangent (a sparse one densifies under a ufunc: same value)
            return v[0] == "part" and self._rule_of(v[1]) is not None
        if isinstance(v, ast.Name):
            return v.id in self.known
        if isinstance(v, ast.BinOp):
            return isinstance(v.op, ast.MatMult) or self._some_known(v.left, v.right)
        if isinstance(v, ast.UnaryOp):
            return self._some_known(v.operand)
        if isinstance(v, ast.Compare):
            return self._some_known(v.left, *v.comparators)
        if isinstance(v, ast.Call):
            if self._np_func(v) is not None:
                return True
            if isinstance(v.func, ast.Attribute) and v.func.attr in SHAPE_METHODS:
                return self._some_known(v.func.value)
            if self._helper(v) == "unbroadcast":
                return self._some_known(v.args[0])
            if self._helper(v) == "accumulate":  # one of them, or their sum
                return all(self._some_known(a) for a in v.args)
            return False
        if isinstance(v, ast.Subscript):
            return self._rule_of(v.value) is not None or self._some_known(v.value)
        if isinstance(v, ast.Attribute) and v.attr == "T":
            return self._some_known(v.value)
        return False

    def _some_known(self, *exprs: ast.expr) -> bool:
        return any(
            (isinstance(e, ast.Name) and e.id in self.known)
            or (not isinstance(e, ast.Name) and self._known(e))
            for e in exprs
        )

    def _fixed(self, v: Any) -> bool:
        """The value is fixed by the signature (ints for shapes, slices, ranges)."""
        if isinstance(v, tuple):
            if v[0] == "for":
                return self._fixed(v[1])
            return False
        if isinstance(v, ast.Constant):
            return True
        if isinstance(v, ast.Name):
            return v.id in self.fixed or self._static(v.id)
        if isinstance(v, ast.Attribute):
            return v.attr in ("shape", "ndim", "size", "dtype") and self._shaped(
                v.value
            )
        if isinstance(v, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp)):
            return all(self._fixed(e) for e in _operands(v))
        if isinstance(v, ast.Subscript):
            return self._fixed(v.value) and self._fixed(v.slice)
        if isinstance(v, (ast.Tuple, ast.List)):
            return all(self._fixed(e) for e in v.elts)
        if isinstance(v, ast.Slice):
            return all(self._fixed(e) for e in (v.lower, v.upper, v.step) if e)
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
            if v.func.id in ("range", "reversed", "len", "slice"):
                return all(
                    self._fixed(a) if v.func.id != "len" else self._shaped(a)
                    for a in v.args
                )
        return False

    def _shaped(self, v: Any) -> bool:
        """The result's shape (and dtype) is fixed by the signature."""
        if isinstance(v, tuple):
            if v[0] == "for":
                return self._fixed(v[1])
            call = v[1]
            if self.callee and isinstance(call, ast.Name) and call.id == "saved":
                return True  # residuals: their shapes are in the callee's key
            return self._rule_part_shaped(call, v[2])
        if isinstance(v, ast.Constant):
            return True
        if isinstance(v, ast.Name):
            return v.id in self.shaped or self._static(v.id)
        if isinstance(v, (ast.BinOp, ast.UnaryOp, ast.Compare)):
            return all(self._shaped(e) for e in _operands(v))
        if isinstance(v, ast.Attribute):
            return self._shaped(v.value)
        if isinstance(v, (ast.Tuple, ast.List)):
            return all(self._shaped(e) for e in v.elts)
        if isinstance(v, ast.Subscript):
            if self._rule_of(v.value) is not None:
                idx = v.slice.value if isinstance(v.slice, ast.Constant) else None
                return isinstance(idx, int) and self._rule_part_shaped(v.value, idx)
            return self._shaped(v.value) and self._index_ok(v.slice)
        if isinstance(v, ast.Call):
            return self._call_shaped(v)
        return False

    def _call_shaped(self, v: ast.Call) -> bool:
        kw_fixed = all(self._fixed(k.value) for k in v.keywords)
        fn = self._np_func(v)
        if fn is not None:
            if isinstance(fn, np.ufunc) or fn in ("matmul", "dot"):
                return all(self._shaped(a) for a in v.args) and kw_fixed
            if fn in REDUCTIONS:
                return self._shaped(v.args[0]) and kw_fixed
            return all(self._fixed(a) for a in v.args) and kw_fixed
        helper = self._helper(v)
        if helper in ("unbroadcast", "finalize"):
            return self._shaped(v.args[1])
        if helper == "accumulate":
            return all(self._shaped(a) for a in v.args)
        if isinstance(v.func, ast.Attribute) and v.func.attr in SHAPE_METHODS:
            return (
                self._shaped(v.func.value)
                and all(self._fixed(a) for a in v.args)
                and kw_fixed
            )
        if isinstance(v.func, ast.Name) and v.func.id in ("len", "range", "reversed"):
            return True
        return False

    def _rule_part_shaped(self, call: ast.expr, i: int) -> bool:
        """A rule's i-th cotangent has the shape of its i-th primal argument."""
        if not isinstance(call, ast.Call) or self._rule_of(call) is None:
            return False
        k = 2 + i
        return k < len(call.args) and self._shaped(call.args[k])

    def _index_ok(self, idx: ast.expr) -> bool:
        parts = idx.elts if isinstance(idx, ast.Tuple) else [idx]
        for p in parts:
            if isinstance(p, ast.Slice) or isinstance(p, ast.Constant):
                if not self._fixed(p):
                    return False
            elif isinstance(p, ast.Name):
                if not (self._fixed(p) or p.id in self.int_index):
                    return False
            else:
                return False
        return True

    def _int_index(self, v: Any) -> bool:
        """Usable as an index without a data-dependent result shape (no masks)."""
        if isinstance(v, ast.Call):
            fn = self._np_func(v)
            return fn in INT_INDEX_FUNCS and self._shaped(v)
        return self._fixed(v)

    def _static(self, n: str) -> bool:
        """A module-level binding (a constant or function of the user's module)."""
        return n in self.module.bindings and n not in self.defs

    # -- helpers to recognise calls -------------------------------------------------
    def _np_func(self, v: ast.Call) -> Any:
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

    def _helper(self, v: ast.Call) -> str | None:
        if isinstance(v.func, ast.Name) and anno(v.func).get("helper"):
            return v.func.id
        return None

    def _rule_of(self, v: Any) -> Any:
        if (
            isinstance(v, ast.Call)
            and isinstance(v.func, ast.Name)
            and v.func.id in self.rules
        ):
            return self.rules[v.func.id]
        return None

    # -- rewriting ------------------------------------------------------------------
    def rewrite(self, stmts: list[ast.stmt], in_loop: bool) -> list[ast.stmt]:
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
            and self._rule_of(v.value) is not None
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
        if not self._shaped(v):
            return None
        if isinstance(v, ast.BinOp) and isinstance(v.op, ops.BUFFERED):
            if not (isinstance(v.op, ast.MatMult) or self._some_known(v.left, v.right)):
                return None
            args = [self._operand(e, in_loop, pre) for e in (v.left, v.right)]
            return self._np_call(ops.numpy_name(v.op), args, label, in_loop)
        if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub):
            if not self._some_known(v.operand):
                return None
            arg = self._operand(v.operand, in_loop, pre)
            return self._np_call("negative", [arg], label, in_loop)
        if (
            isinstance(v, ast.Compare)
            and len(v.ops) == 1
            and type(v.ops[0]) in ops.COMPARES
        ):
            if not self._some_known(v.left, v.comparators[0]):
                return None
            args = [self._operand(e, in_loop, pre) for e in (v.left, v.comparators[0])]
            return self._np_call(ops.numpy_name(v.ops[0]), args, label, in_loop)
        if not top:
            return None
        if isinstance(v, ast.Call):
            return self._call_site(v, label, in_loop, pre)
        if (
            isinstance(v, ast.Subscript)
            and isinstance(v.value, ast.Name)
            and isinstance(v.slice, ast.Name)
            and v.slice.id in self.int_index
            and not self._fixed(v.slice)
        ):
            take = self.module.helper("take_rows")
            return self._with_out(
                ast.Call(func=take, args=[v.value, v.slice], keywords=[]),
                label,
                in_loop,
            )
        return None

    def _call_site(self, v: ast.Call, label: str, in_loop: bool, pre: list):
        if any(k.arg in ("out", "into", "where") or k.arg is None for k in v.keywords):
            return None
        fn = self._np_func(v)
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
                call = ast.Call(
                    func=self.module.helper("zeros"), args=v.args, keywords=dtype
                )
                return self._with_out(call, label, in_loop)
        if (
            isinstance(v.func, ast.Attribute)
            and v.func.attr in REDUCTIONS
            and axis
            and not v.args
            and self._some_known(v.func.value)
        ):
            return self._with_out(v, label, in_loop)
        helper = self._helper(v)
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
        if rules and isinstance(e, ast.Subscript) and self._rule_of(e.value):
            if isinstance(e.slice, ast.Constant) and e.slice.value == 0:
                if self._rule_part_shaped(e.value, 0):
                    temp = self._fresh(self.rules_label(e.value))
                    self._rule_site(e.value, [temp], in_loop)
                    pre.append(_assign(temp, e))
                    return name(temp)
            return e
        temp = self._fresh(_label(e))
        new = self._expr_site(e, temp, in_loop, pre)
        if new is None:
            return e
        pre.append(_assign(temp, new))
        if _elementwise(new, self.np):
            self.temps.add(temp)
        self.defs[temp] = [(new, ())]
        self.known.add(temp)
        self.shaped.add(temp)
        return name(temp)

    def rules_label(self, call: ast.Call) -> str:
        return "ct_" + call.args[2].id if isinstance(call.args[2], ast.Name) else "ct"

    def _rule_site(self, call: ast.expr, targets: list, in_loop: bool) -> None:
        rule = self._rule_of(call)
        if rule is None or not _takes_into(rule):
            return
        if any(k.arg == "into" for k in call.keywords):
            return
        elts = []
        for i, t in enumerate(targets):
            ok = (
                t is not None
                and t not in self.shaky
                and self._rule_part_shaped(call, i)
            )
            elts.append(self._buffer(t, in_loop) if ok else ast.Constant(None))
        if all(isinstance(e, ast.Constant) for e in elts):
            return
        call.keywords.append(
            ast.keyword(arg="into", value=ast.Tuple(elts=elts, ctx=ast.Load()))
        )

    def _np_call(self, fn: str, args: list, label: str, in_loop: bool) -> ast.Call:
        func = ast.Attribute(value=name(self.np), attr=fn, ctx=ast.Load())
        call = self._with_out(
            ast.Call(func=func, args=args, keywords=[]), label, in_loop
        )
        donors = [a.id for a in args if isinstance(a, ast.Name) and a.id in self.temps]
        if donors and fn != "matmul" and not in_loop and not self.callee:
            # the temporary dies here: this elementwise op may write over it
            self.shares[call.keywords[-1].value.slice.value] = donors[0]
        return call

    def _with_out(self, call: ast.Call, label: str, in_loop: bool) -> ast.Call:
        call.keywords.append(ast.keyword(arg="out", value=self._buffer(label, in_loop)))
        return call

    def _buffer(self, label: str, in_loop: bool) -> ast.expr:
        n = self.keys.get(label, 0) + 1
        self.keys[label] = n
        self.count += 1
        key = ast.Constant(label if n == 1 else f"{label}.{n}")
        if in_loop or self.callee:
            take = ast.Attribute(value=name("ws"), attr="take", ctx=ast.Load())
            return ast.Call(func=take, args=[key], keywords=[])
        return ast.Subscript(value=name("ws"), slice=key, ctx=ast.Load())

    def _fresh(self, base: str) -> str:
        return self.namer.fresh(base)


def function_pass(job: Any, module: Any) -> None:
    """The pipeline's ``buffers`` pass: sites in the function(s) a job emitted."""
    if job.top:
        if module.options.optimize and module.options.workspace:
            job.functions += run(job.functions[0], module, job.namer, module.examples)
    elif wanted(module, module.examples):
        for f in job.functions:
            run_callee(f, module, job.namer)


def connect_pass(module: Any) -> None:
    """The pipeline's ``connect`` pass: ``ws`` handed on to callees with buffers."""
    if wanted(module, module.examples):
        connect(module.functions, module)


def run(
    fn: ast.FunctionDef, module: Any, namer: Any, examples: dict[str, Any]
) -> list[ast.stmt]:
    """Rewrite ``fn`` in place; module-level statements to emit after it.

    ``examples`` maps parameters to the values of the call being compiled (empty
    when compiling ahead of time): ints, bools and strings among them are sizes
    or flags whose values are part of the workspace's shape signature.  With
    examples that hold no array at all (scalar code) nothing is rewritten.
    """
    params = [a.arg for a in fn.args.args if a.arg != "g_out"]
    if not wanted(module, examples):
        if examples and not any(_has_array(v) for v in examples.values()):
            _scalar_math(fn, module)
        return []
    fixed = {p: type(examples.get(p)) in (int, bool, str) for p in params}
    sites = _rewritten(fn, module, namer, fixed, callee=False)
    if sites is None:
        return []
    _finalize_into_results(fn, module)
    _add_ws_param(fn, module)
    for site, donor in _dying_operands(fn, sites.np).items():
        sites.shares.setdefault(site, donor)
    if sites.shares:
        # liveness: each of these sites may write into a temporary that dies there
        attr = ast.Attribute(value=name(fn.name), attr="buffer_shares", ctx=ast.Store())
        table = ast.Dict(
            keys=[ast.Constant(k) for k in sites.shares],
            values=[ast.Constant(v) for v in sites.shares.values()],
        )
        return [ast.Assign(targets=[attr], value=table, type_comment=None)]
    return []


def _site_key(call: ast.Call) -> str | None:
    """The key of ``call(..., out=ws["key"])`` (code that runs once), else None."""
    for k in call.keywords:
        v = k.value
        if (
            k.arg == "out"
            and isinstance(v, ast.Subscript)
            and isinstance(v.value, ast.Name)
            and v.value.id == "ws"
            and isinstance(v.slice, ast.Constant)
        ):
            return v.slice.value
    return None


def _dying_operands(fn: ast.FunctionDef, np_alias: str) -> dict[str, str]:
    """Liveness outside loops: ``site key -> key of an operand that dies there``.

    A name qualifies when it is bound once, by a site that runs once, and every
    read of it is an operand of a NumPy site (or the shape model of an
    ``unbroadcast``), none of them in a loop: then nothing else can hold its
    buffer, and the elementwise site that reads it last may write over it.
    (Reads are counted per occurrence: the compiler shares Name nodes.)
    """
    order: list[tuple[ast.AST, bool]] = []
    for st in fn.body:
        _in_order(st, False, order)
    binds: dict[str, list] = {}
    reads: dict[str, int] = {}
    fine: dict[str, int] = {}
    last: dict[str, ast.Call] = {}
    looped: set[str] = set()
    for node, loop in order:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            binds.setdefault(node.targets[0].id, []).append((node, loop))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads[node.id] = reads.get(node.id, 0) + 1
            if loop:
                looped.add(node.id)
        if not isinstance(node, ast.Call):
            continue
        if _site_key(node) is not None and _is_np_call(node, np_alias):
            for a in node.args:
                if isinstance(a, ast.Name):
                    fine[a.id] = fine.get(a.id, 0) + 1
                    last[a.id] = node
        elif getattr(node.func, "id", "") == "unbroadcast" and len(node.args) == 2:
            if isinstance(node.args[1], ast.Name):
                fine[node.args[1].id] = fine.get(node.args[1].id, 0) + 1
    out: dict[str, str] = {}
    for n, bs in binds.items():
        if len(bs) != 1 or bs[0][1] or n in looped or not reads.get(n):
            continue
        value = bs[0][0].value
        key = _site_key(value) if isinstance(value, ast.Call) else None
        site = last.get(n)
        if key is None or fine.get(n) != reads[n] or site is None:
            continue
        if _elementwise(site, np_alias):
            out.setdefault(_site_key(site), key)
    return out


def _in_order(node: ast.AST, loop: bool, out: list) -> None:
    """Every node under ``node`` in source order, with whether it is in a loop."""
    loop = loop or isinstance(node, (ast.For, ast.While))
    out.append((node, loop))
    for child in ast.iter_child_nodes(node):
        _in_order(child, loop, out)


def _is_np_call(call: ast.Call, np_alias: str) -> bool:
    return (
        isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == np_alias
    )


def _elementwise(call: ast.expr, np_alias: str) -> bool:
    """An ``np.<ufunc>(...)`` site made by this pass, other than matmul."""
    return (
        isinstance(call, ast.Call)
        and _is_np_call(call, np_alias)
        and call.func.attr != "matmul"
    )


def _scalar_math(fn: ast.FunctionDef, module: Any) -> None:
    """Scalar code: ``np.sin(x)`` -> ``scalar.sin(x)`` (math on floats, else NumPy)."""
    from s2sad.runtime import scalar

    npname = next((a for a, v in module.bindings.items() if v is np), None)
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    names |= {a.arg for a in fn.args.args}
    local = {
        n.id
        for n in ast.walk(fn)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    if npname is None or npname in local or "scalar" in names:
        return
    calls = [
        c
        for c in ast.walk(fn)
        if isinstance(c, ast.Call)
        and isinstance(c.func, ast.Attribute)
        and isinstance(c.func.value, ast.Name)
        and c.func.value.id == npname
        and c.func.attr in scalar.MATH_NAMES
        and len(c.args) == 1
        and not c.keywords
        and not isinstance(c.args[0], ast.Starred)
    ]
    if not calls:
        return
    alias = module.bind("scalar", scalar, ["module", "s2sad.runtime", "scalar"])
    for c in calls:
        c.func.value = name(alias)


def run_callee(fn: ast.FunctionDef, module: Any, namer: Any) -> bool:
    """Sites in a callee's forward or backward function (always ``ws.take``).

    The function starts with ``ws = ws.enter("<name>", (<its arguments>))``: a
    workspace of its own per shape signature of those arguments, so its sites
    are fixed by its own arguments, whoever calls it.
    """
    params = [a.arg for a in fn.args.args]
    if _rewritten(fn, module, namer, {p: False for p in params}, callee=True) is None:
        return False
    enter = ast.Call(
        func=ast.Attribute(value=name("ws"), attr="enter", ctx=ast.Load()),
        args=[
            ast.Constant(fn.name),
            ast.Tuple(elts=[name(p) for p in params], ctx=ast.Load()),
        ],
        keywords=[],
    )
    fn.body.insert(0, _assign("ws", enter))
    _add_ws_param(fn, module)
    return True


def _rewritten(
    fn: ast.FunctionDef, module: Any, namer: Any, fixed: dict, callee: bool
) -> Sites | None:
    """Analyse and rewrite ``fn``'s body; the Sites, or None when there are none
    (or the function uses the name ``ws`` itself: then it keeps the plain form)."""
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    if "ws" in names | {a.arg for a in fn.args.args}:
        return None
    sites = Sites(fn, module, fixed, callee=callee)
    sites.namer = namer
    sites.collect(fn.body)
    sites.solve()
    fn.body = sites.rewrite(fn.body, False)
    return sites if sites.count else None


def _add_ws_param(fn: ast.FunctionDef, module: Any) -> None:
    if "ws" not in [a.arg for a in fn.args.args]:
        fn.args.args.append(ast.arg(arg="ws"))
        fn.args.defaults.append(module.helper("NO_WORKSPACE"))


def connect(functions: list, module: Any) -> None:
    """After all functions exist: when a callee has buffers, the top-level function
    takes ``ws`` too, and every call to a function taking ``ws`` passes it on."""
    defs = [f for f in functions if isinstance(f, ast.FunctionDef)]
    with_ws = {f.name for f in defs if "ws" in [a.arg for a in f.args.args]}
    if not with_ws - {defs[0].name}:
        return
    _add_ws_param(defs[0], module)
    with_ws.add(defs[0].name)
    for f in defs:
        if f.name not in with_ws:
            continue
        for c in ast.walk(f):
            if (
                isinstance(c, ast.Call)
                and isinstance(c.func, ast.Name)
                and c.func.id in with_ws
                and not any(k.arg == "ws" for k in c.keywords)
            ):
                c.keywords.append(ast.keyword(arg="ws", value=name("ws")))


def _finalize_into_results(fn: ast.FunctionDef, module: Any) -> None:
    """``finalize(g, x)`` in the return becomes ``finalize(g, x, ws.result(i))``."""
    ret = fn.body[-1]
    if not isinstance(ret, ast.Return) or not isinstance(ret.value, ast.Tuple):
        return
    grads = ret.value.elts[1]
    for i, f in enumerate(getattr(grads, "elts", [])):
        if (
            isinstance(f, ast.Call)
            and isinstance(f.func, ast.Name)
            and f.func.id == "finalize"
        ):
            res = ast.Call(
                func=ast.Attribute(value=name("ws"), attr="result", ctx=ast.Load()),
                args=[ast.Constant(i)],
                keywords=[],
            )
            f.args.append(res)


def wanted(module: Any, examples: dict[str, Any]) -> bool:
    """Whether this module gets buffers: arrays among the example arguments, and
    enough of them (see s2sad.runtime.workspace.worthwhile)."""
    from s2sad.runtime.workspace import worthwhile

    if not (module.options.optimize and module.options.workspace):
        return False
    if not examples:
        return True
    values = list(examples.values())
    return any(_has_array(v) for v in values) and worthwhile(values)


def _has_array(v: Any) -> bool:
    if isinstance(v, np.ndarray):
        return True
    if isinstance(v, dict):
        return any(_has_array(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(_has_array(x) for x in v)
    return False


def _rules(module: Any) -> dict[str, Any]:
    out = {}
    for mod, fn_name, alias in module.rule_imports.values():
        out[alias] = getattr(importlib.import_module(mod), fn_name)
    return out


def _takes_into(rule: Any) -> bool:
    try:
        return "into" in inspect.signature(rule).parameters
    except (TypeError, ValueError):
        return False


def _structural(test: ast.expr) -> bool:
    """``x is None`` / ``x is not None`` tests: cotangent bookkeeping, not data."""
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )


def _neutral(v: Any) -> bool:
    """Bindings that do not decide a name's kind: ``None`` resets, tape pops."""
    if isinstance(v, ast.Constant) and v.value is None:
        return True
    return (
        isinstance(v, ast.Call)
        and isinstance(v.func, ast.Attribute)
        and v.func.attr == "pop"
        and isinstance(v.func.value, ast.Name)
        and v.func.value.id == "tape"
    )


def _operands(v: ast.expr) -> list[ast.expr]:
    if isinstance(v, ast.BinOp):
        return [v.left, v.right]
    if isinstance(v, ast.UnaryOp):
        return [v.operand]
    if isinstance(v, ast.Compare):
        return [v.left, *v.comparators]
    return list(v.values)


def _label(e: ast.expr) -> str:
    if isinstance(e, ast.BinOp) and isinstance(e.op, ops.BUFFERED):
        return ops.label(e.op)
    if isinstance(e, ast.UnaryOp):
        return "neg"
    if isinstance(e, ast.Compare):
        return "mask"
    return "t"


def _id(t: ast.expr) -> str | None:
    return t.id if isinstance(t, ast.Name) else None


def _assign(target: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(
        targets=[name(target, store=True)], value=value, type_comment=None
    )
