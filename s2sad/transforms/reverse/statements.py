"""Reverse: build the forward sweep (with a tape where needed) and the backward sweep.

For each normalized statement the backward sweep, in reverse order, (1) applies
the adjoint rule to the statement's output cotangent and accumulates into the
operands' cotangents, (2) resets the cotangent of a re-assigned name, and
(3) restores the name's previous value from the tape.  Because every value is
restored before the statements that produced it are reversed, each rule sees
exactly the values it saw going forward, in loops and after mutation too::

    for t in r:                           for t in reversed(r):
        tape.append(h)                        # grad of: h = np.tanh(W @ h + x[t])
        h = np.tanh(add)          ->          g_add = g_h * (1.0 - h * h)
                                              g_h = None
                                              h = tape.pop()  ...

Cotangent variables are tracked as none / set / maybe while generating, so
straight-line code gets plain assignments and only loops and branches need
``None`` checks.  Compound statements are handled in :mod:`control`.
"""

from __future__ import annotations

import ast
import operator


from s2sad.runtime import registry
from s2sad.transforms.reverse import control, nancheck
from s2sad.transforms.reverse.rules import RuleCalls
from s2sad.transforms.front import fresh, properties
from s2sad.transforms.front.activity import Activity, is_append
from s2sad.transforms.lattice import MAYBE, NONE, SET
from s2sad.transforms.ops import BINOPS, UNARYOPS
from s2sad.transforms.astutil import anno, assign, call, const, index_value, name, walk
from s2sad.transforms.front.calls import CallInfo, as_written
from s2sad.transforms import lines


class FunctionReverser(RuleCalls):
    """Forward and backward statement lists for one normalized function."""

    def __init__(self, fc, act: Activity):
        self.fc = fc  # the per-function compile state (names, module, source)
        self.act = act
        self.state: dict[str, str] = {}
        self.gnames: dict[str, str] = {}
        #: a restore the statement being reversed owes after its own (a call's
        #: receiver saved before the call)
        self.pending_restore: tuple[str, int] | None = None
        #: rule result positions unpacked straight into a cotangent variable
        self.direct_assigned: dict[int, str] = {}
        #: the arguments and the names that may share memory with them (the top
        #: level only): items written through them stay for the caller (``keep_item``)
        self.escaping: set[str] = set()
        #: the list of items to write again at the end, once one is kept
        self.kept: str | None = None

    # ------------------------------------------------------------------ names
    def g(self, x: str) -> str:
        """Name of the cotangent variable of ``x``."""
        if x not in self.gnames:
            self.gnames[x] = self.fc.namer.fresh("g_" + x.lstrip("_"))
        return self.gnames[x]

    def needs(self, e: ast.expr | str | None) -> bool:
        n = e if isinstance(e, str) else (e.id if isinstance(e, ast.Name) else None)
        return n is not None and self.act.needs_adjoint(n)

    def helper(self, fn_name: str) -> ast.expr:
        return self.fc.module.helper(fn_name)

    # ------------------------------------------------------------------ accumulation
    def accumulate(
        self, x: str, contribution: ast.expr, out: list[ast.stmt], definite: bool = True
    ) -> None:
        """``g_x += contribution``; ``definite=False`` when it may be None at run time."""
        gx = self.g(x)
        before = self.state.get(gx, NONE)
        if before == NONE:
            out.append(assign(gx, contribution))
            self.state[gx] = SET if definite else MAYBE
        elif before == SET and definite and x in self.numbers:
            # numbers: plain arithmetic (reverse/scalars.py)
            out.append(
                assign(gx, ast.BinOp(left=name(gx), op=ast.Add(), right=contribution))
            )
        else:
            summed = self.indexed_sum(gx, contribution) or call(
                self.helper("accumulate"), name(gx), contribution
            )
            out.append(assign(gx, summed))
            if before == MAYBE and definite:
                self.state[gx] = SET

    def guarded(
        self, x: str, body: list[ast.stmt], before: dict[str, str]
    ) -> list[ast.stmt]:
        """Wrap ``body`` in ``if g_x is not None`` when g_x may be None here.

        ``before`` is the cotangent state before ``body`` was generated: what the
        body assigns is only maybe-set after a guard, and must exist on both paths.
        """
        if not body:
            return []
        if before.get(self.g(x), NONE) == SET:
            return body
        if before.get(self.g(x), NONE) == NONE:
            # no cotangent reaches x on this path (g_x may not even exist here,
            # as on a branch that returns early): nothing to propagate
            self.state = before
            return []
        pre = []
        assigned = {
            t.id
            for st in body
            for n in walk(st)
            if isinstance(n, (ast.Assign,))
            for t in n.targets
            for t in ([t] if isinstance(t, ast.Name) else getattr(t, "elts", []))
            if isinstance(t, ast.Name)
        }
        for g in sorted(assigned & set(self.gnames.values())):
            if before.get(g, NONE) == NONE:
                pre.append(assign(g, const(None)))
            if before.get(g, NONE) != SET:
                self.state[g] = MAYBE
        test = ast.Compare(
            left=name(self.g(x)), ops=[ast.IsNot()], comparators=[const(None)]
        )
        anno(test)["guard"] = self.g(x)  # cotangent bookkeeping, not a data test
        return pre + [ast.If(test=test, body=body, orelse=[])]

    # ------------------------------------------------------------------ statements
    def forward_and_backward(self, stmts: list[ast.stmt], in_loop: bool):
        """(forward statements, a generator-closure producing backward statements)."""
        fwd: list[ast.stmt] = []
        parts = []
        source = self.fc.parsed.source
        for s in stmts:
            f, b = self.statement(s, in_loop)
            lines.stamp(f, source, anno(s).get("origin"), lines.FORWARD)
            if f and not isinstance(s, (ast.If, ast.For, ast.While)):
                anno(f[-1])[
                    "src"
                ] = s  # optimize reads the statement's backward reads here
            fwd.extend(f)
            parts.append((s, b))

        def backward() -> list[ast.stmt]:
            out: list[ast.stmt] = []
            last_origin = None
            for s, b in reversed(parts):
                block = b()
                lines.stamp(block, source, anno(s).get("origin"), lines.BACKWARD)
                anno(s)["bwd_reads"] = {
                    n.id
                    for st in block
                    for n in walk(st)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                }
                if not block:
                    continue
                if not isinstance(s, (ast.If, ast.For, ast.While)):
                    block = nancheck.checked(self, s, block)  # debug_nans only
                origin = anno(s).get("origin")
                if (
                    origin is not None
                    and origin != last_origin
                    and not isinstance(s, (ast.If, ast.For, ast.While))
                ):
                    out.append(self.fc.comment(origin))
                    last_origin = origin
                elif isinstance(s, (ast.If, ast.For, ast.While)):
                    last_origin = None
                out.extend(block)
            return out

        return fwd, backward

    def statement(self, s: ast.stmt, in_loop: bool):
        if isinstance(s, (ast.If, ast.For, ast.While)):
            return control.compound(self, s, in_loop)
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
            return self.assign_stmt(s, in_loop)
        if isinstance(s, ast.Assign):
            return self.setitem_stmt(s, in_loop)
        if is_append(s):
            return self.append_stmt(s)
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            return [ast.Expr(value=self.forward_call(s.value, None, in_loop)[0])], list
        if isinstance(s, ast.AugAssign) and anno(s).get("counter"):
            return [s], list
        if isinstance(s, ast.Return):
            return [], list  # handled by the function assembler
        return [s], list

    # .................................................................. x = value
    def assign_stmt(self, s: ast.Assign, in_loop: bool):
        x = s.targets[0].id
        fwd: list[ast.stmt] = []
        saved = self.fc.save(x, fwd, in_loop)
        value = s.value
        call_rev = None
        self.pending_restore = None
        if isinstance(value, ast.Call):
            value, call_rev = self.forward_call(value, x, in_loop, fwd)
        if value is not None:
            fwd.append(assign(x, value))
        extra_restore = self.pending_restore
        active = self.needs(x)

        def backward() -> list[ast.stmt]:
            out: list[ast.stmt] = []
            if active:
                before = dict(self.state)
                body = call_rev() if call_rev else self.contributions(x, s.value)
                out.extend(self.guarded(x, body, before))
                if x in self.fc.reassigned:
                    out.append(assign(self.g(x), const(None)))
                    self.state[self.g(x)] = NONE
            if extra_restore:
                out.append(self.fc.restore(*extra_restore))
            if saved:
                out.append(self.fc.restore(x, saved))
            return out

        return fwd, backward

    def contributions(self, x: str, v: ast.expr) -> list[ast.stmt]:
        """Statements accumulating the cotangent of ``x = v`` into v's operands."""
        gx = name(self.g(x))
        out: list[ast.stmt] = []
        if isinstance(v, ast.Name):
            if self.needs(v):
                self.accumulate(v.id, gx, out)
        elif isinstance(v, ast.BinOp):
            self.apply_rule(BINOPS.get(type(v.op)), x, [v.left, v.right], {}, out, v)
        elif isinstance(v, ast.UnaryOp):
            self.apply_rule(UNARYOPS.get(type(v.op)), x, [v.operand], {}, out, v)
        elif isinstance(v, ast.Subscript):
            self.apply_rule(
                operator.getitem, x, [v.value, index_value(v.slice)], {}, out, v
            )
        elif isinstance(v, ast.Attribute):
            fn = registry.lookup_attribute(v.attr)
            examples = self.fc.parsed.example_args
            if fn is None and isinstance(v.value, ast.Name) and self.needs(v.value):
                if properties.array_view_read(v, examples):  # x.flat: refused
                    self.fc.fail(v, *properties.array_view_problem(v))
                if properties.derived_field_read(v, examples):  # init=False
                    self.fc.fail(v, *properties.derived_field_problem(v))
                # a field of a pytree argument (namedtuple, dataclass, registered
                # class): its cotangent is {field: g}, which finalize turns into
                # the argument's type (s2sad.runtime.pytrees)
                field = ast.Dict(keys=[const(v.attr)], values=[gx])
                self.accumulate(v.value.id, field, out, definite=False)
            else:
                self.apply_rule(fn, x, [v.value], {}, out, v)
        elif isinstance(v, (ast.Tuple, ast.List)):
            for i, e in enumerate(v.elts):
                if self.needs(e):
                    self.accumulate(
                        e.id,
                        ast.Subscript(value=gx, slice=const(i), ctx=ast.Load()),
                        out,
                        definite=False,
                    )
        elif isinstance(v, ast.Dict):
            for k, e in zip(v.keys, v.values):
                if self.needs(e):
                    get = ast.Call(
                        func=ast.Attribute(value=gx, attr="get", ctx=ast.Load()),
                        args=[k],
                        keywords=[],
                    )
                    self.accumulate(e.id, get, out, definite=False)
        elif isinstance(v, ast.Call):
            info: CallInfo = anno(v)["call"]
            kwargs = {k.arg: k.value for k in v.keywords}
            if info.kind == "method":
                fn = registry.lookup_method(info.target)
                self.apply_rule(fn, x, [v.func.value, *v.args], kwargs, out, v)
            else:
                self.apply_rule(info.target, x, list(v.args), kwargs, out, v)
        return out

    # .................................................................. calls
    def forward_call(self, v: ast.Call, x: str | None, in_loop: bool, fwd=None):
        """Forward expression for a call, and (for user functions) its backward builder."""
        info: CallInfo = anno(v)["call"]
        if info.kind not in ("user", "local"):
            return v, None
        pattern = tuple(
            self.act.active.__contains__(a.id) if isinstance(a, ast.Name) else False
            for a in v.args
        )
        useful = x is not None and self.needs(x)
        # which arguments are immutable scalars at every visit (front/aliasing.py)
        scalars = anno(v).get("scalar_args", ())
        if not any(pattern) or not useful:
            if info.kind == "user":
                err = fresh.unseen_change(
                    info,
                    v,
                    pattern,
                    scalars,
                    self.fc.module_locals,
                    self.fc.parsed.source,
                    used=x is not None,
                )
                if err is not None:
                    raise err
                return as_written(v), None
            fwd_name = self.fc.request(info, pattern, scalars, in_loop, v).names[0]
            return (
                ast.Subscript(
                    value=ast.Call(func=name(fwd_name), args=v.args, keywords=[]),
                    slice=const(0),
                    ctx=ast.Load(),
                ),
                None,
            )
        fwd_name, bwd_name = self.fc.request(info, pattern, scalars, in_loop, v).names
        saved = self.fc.namer.fresh(f"saved_{fwd_name.removesuffix('_forward')}")
        self.fc.locals.add(saved)
        if x in self.fc.reassigned:
            self.fc.reassigned.add(saved)
        sid = self.fc.save(saved, fwd, in_loop)
        call_fwd = ast.Call(func=name(fwd_name), args=v.args, keywords=[])
        pair = ast.Tuple(
            elts=[name(x, store=True), name(saved, store=True)], ctx=ast.Store()
        )
        fwd.append(ast.Assign(targets=[pair], value=call_fwd, type_comment=None))
        self.pending_restore = (saved, sid) if sid else None

        def backward() -> list[ast.stmt]:
            out: list[ast.stmt] = []
            bcall = ast.Call(
                func=name(bwd_name), args=[name(self.g(x)), name(saved)], keywords=[]
            )
            wanted = [i for i, a in enumerate(v.args) if self.needs(a)]
            cts, direct = self._unpack_names(v.args, wanted, broadcasts=False)
            target = ast.Tuple(elts=[name(c, store=True) for c in cts], ctx=ast.Store())
            out.append(ast.Assign(targets=[target], value=bcall, type_comment=None))
            for i, (a, c) in enumerate(zip(v.args, cts)):
                if i in direct:
                    self.state[c] = MAYBE  # a callee's cotangent may be None
                elif c != "_":
                    self.accumulate(a.id, name(c), out, definite=False)
            return out

        return None, backward

    # .................................................................. mutation
    def setitem_stmt(self, s: ast.Assign, in_loop: bool):
        sub = s.targets[0]
        y, idx, v = sub.value.id, index_value(sub.slice), s.value
        fwd: list[ast.stmt] = []
        old = self.fc.save_item(y, idx, fwd, in_loop)
        fwd.append(s)
        if y in self.escaping or anno(s).get("root", y) in self.escaping:
            # the backward sweep puts the old item back: note the new one, written
            # again at the end (reverse/assembly.py)
            self.kept = self.kept or self.fc.namer.fresh("kept")
            keep = call(self.helper("keep_item"), name(self.kept), name(y), idx)
            fwd.append(ast.Expr(value=keep))

        def backward() -> list[ast.stmt]:
            out: list[ast.stmt] = []
            if self.needs(y):
                before = dict(self.state)
                body: list[ast.stmt] = []
                gy = name(self.g(y))
                item = call(self.helper("written_item"), gy, idx)
                clear = assign(self.g(y), call(self.helper("without_item"), gy, idx))
                if self.needs(v) and v.id == y:  # y[...] = y: clear, then add
                    ct = self.fc.namer.fresh("ct_" + y.lstrip("_"))
                    body += [assign(ct, item), clear]
                    ct_v = call(self.helper("unbroadcast"), name(ct), v)
                    self.accumulate(v.id, ct_v, body, definite=False)
                else:
                    if self.needs(v):
                        ct_v = call(self.helper("unbroadcast"), item, v)
                        self.accumulate(v.id, ct_v, body, definite=False)
                    body.append(clear)
                out.extend(self.guarded(y, body, before))
            out.append(
                ast.Expr(value=call(self.helper("restore_item"), name(y), idx, old()))
            )
            return out

        return fwd, backward

    def append_stmt(self, s: ast.Expr):
        lst = s.value.func.value.id
        v = s.value.args[0]

        def backward() -> list[ast.stmt]:
            out: list[ast.stmt] = []
            if self.needs(lst):
                before = dict(self.state)
                gl = self.g(lst)
                if self.needs(v):
                    ct = self.fc.namer.fresh("ct_" + v.id.lstrip("_"))
                    target = ast.Tuple(
                        elts=[name(gl, store=True), name(ct, store=True)],
                        ctx=ast.Store(),
                    )
                    body = [
                        ast.Assign(
                            targets=[target],
                            value=call(self.helper("split_last"), name(gl)),
                            type_comment=None,
                        )
                    ]
                    self.accumulate(v.id, name(ct), body, definite=False)
                else:
                    body = [
                        ast.Assign(
                            targets=[
                                ast.Tuple(
                                    elts=[name(gl, store=True), name("_", store=True)],
                                    ctx=ast.Store(),
                                )
                            ],
                            value=call(self.helper("split_last"), name(gl)),
                            type_comment=None,
                        )
                    ]
                out.extend(self.guarded(lst, body, before))
            pop = ast.Call(
                func=ast.Attribute(value=name(lst), attr="pop", ctx=ast.Load()),
                args=[],
                keywords=[],
            )
            out.append(ast.Expr(value=pop))
            return out

        return [s], backward
