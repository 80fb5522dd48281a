"""Forward mode, statement by statement: assignments, mutation, calls, if and loops.

Each function takes the :class:`~s2sad.transforms.forward.assembly.FunctionForward` of
the function being compiled, one normalized statement and the list to emit
into.  Branches join the tangent states of their arms; loops iterate their
body's states to a fixpoint (dry runs that are rolled back), so that a tangent
is declared possibly-None exactly where some path leaves it None::

    y = x                              t_y = t_x
    for i in r:                        for i in r:
        if c:                ->            if c:
            y = y * 2                          t_y = t_y * 2   (t_y is set on every path)
"""

from __future__ import annotations

import ast
import copy
import inspect

from s2sad.runtime import registry, support, tangents
from s2sad.transforms.astutil import anno, assign, call, const, index_value, name
from s2sad.transforms.front.fresh import fresh_marks, refuse_unseen_change
from s2sad.transforms.front.calls import CallInfo, as_written
from s2sad.transforms.forward.function import (
    field_tangent,
    INACTIVE_METHODS,
    MUTATORS,
    FunctionForward,
    mutator_position,
    op_of_value,
    rule_tangent,
)
from s2sad.transforms.forward.exprs import Op, Tangent, check_keywords
from s2sad.transforms.forward import control
from s2sad.transforms.lattice import MAYBE, NONE, SET
from s2sad.transforms import lines


def _has_tangent(ff: FunctionForward, e: ast.expr) -> bool:
    return isinstance(e, ast.Name) and ff.st(e.id) != NONE


def block(ff: FunctionForward, stmts: list[ast.stmt]) -> list[ast.stmt]:
    """The primal and tangent statements of a normalized block."""
    out: list[ast.stmt] = []
    for s in stmts:
        start = len(out)
        statement(ff, s, out)
        lines.stamp(out[start:], ff.parsed.source, anno(s).get("origin"), lines.TANGENT)
    return out


def statement(ff: FunctionForward, s: ast.stmt, out: list[ast.stmt]) -> None:
    if isinstance(s, ast.If):
        control.if_stmt(ff, s, out, block)
    elif isinstance(s, (ast.For, ast.While)):
        control.loop(ff, s, out, block)
    elif isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
        assign_stmt(ff, s, out)
    elif isinstance(s, ast.Assign):
        setitem(ff, s, out)
    elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
        expr_call(ff, s, out)
    elif not isinstance(s, ast.Return):
        out.append(s)


# ---------------------------------------------------------------- x = value


def assign_stmt(ff: FunctionForward, s: ast.Assign, out: list[ast.stmt]) -> None:
    x, v = s.targets[0].id, s.value
    if isinstance(v, ast.Call) and anno(v)["call"].kind in ("user", "local"):
        user_call(ff, s, x, v, out)
        return
    if isinstance(v, ast.Call) and ff.useful(x) and x not in ff.never:
        bound = _runtime_source_call(ff, v)
        if bound is not None:
            user_call(ff, s, x, bound, out, site=_site(ff, v))
            return
    if not ff.useful(x) or x in ff.never:  # nothing that reaches the output reads t_x
        _pop_in_step(ff, s, v, out)
        ff.state[x] = NONE
        return
    pre: list[ast.stmt] = []
    tan: list[ast.stmt] = []
    ff.set_tangent(x, value_tangent(ff, x, v, pre), tan)
    ff.emit(s, [s], tan, out, pre)


def _pop_in_step(
    ff: FunctionForward, s: ast.stmt, v: ast.expr, out: list[ast.stmt]
) -> None:
    """``x = L.pop()`` where x needs no tangent: still pop ``t_L`` to keep it in step."""
    is_pop = (
        isinstance(v, ast.Call)
        and anno(v)["call"].kind == "method"
        and anno(v)["call"].target == "pop"
        and isinstance(v.func.value, ast.Name)
    )
    if not is_pop or ff.st(v.func.value.id) == NONE or not ff.useful(v.func.value.id):
        out.append(s)
        return
    _method_statement(ff, ast.Expr(value=v), v.func.value.id, "pop", out, like=s)


def value_tangent(
    ff: FunctionForward, x: str, v: ast.expr, pre: list[ast.stmt]
) -> Tangent | None:
    """The tangent of ``x = v`` for any normalized value ``v``."""
    if isinstance(v, ast.Name):
        if ff.st(v.id) == NONE:
            return None
        return Tangent(name(ff.t(v.id)), ff.st(v.id), v.id in ff.holey)
    if isinstance(v, (ast.Tuple, ast.List)):
        return _literal(ff, v, v.elts, lambda ts: type(v)(elts=ts, ctx=ast.Load()))
    if isinstance(v, ast.Dict):
        keys = v.keys
        return _literal(
            ff,
            v,
            v.values,
            lambda ts: ast.Dict(keys=[copy.deepcopy(k) for k in keys], values=ts),
        )
    if isinstance(v, ast.Call):
        return _call_tangent(ff, x, v, pre)
    if (field := field_tangent(ff, v)) is not None:
        return field
    op = op_of_value(ff, v)
    return None if op is None else rule_tangent(ff, op, x, pre)


def _literal(
    ff: FunctionForward, v: ast.expr, elts: list[ast.expr], build
) -> Tangent | None:
    """``[a, b]`` -> ``[t_a, None]``: a container tangent (holey if any entry may be None)."""
    if not elts:  # an empty container: its tangent is an empty container
        return Tangent(build([]), SET, False)
    if not any(_has_tangent(ff, e) for e in elts):
        return None
    ts: list[ast.expr] = []
    holey = False
    for e in elts:
        if _has_tangent(ff, e):
            ts.append(name(ff.t(e.id)))
            holey = holey or ff.st(e.id) != SET or e.id in ff.holey
        else:
            ts.append(const(None))
            holey = True
    return Tangent(build(ts), SET, holey)


def _call_tangent(
    ff: FunctionForward, x: str, v: ast.Call, pre: list[ast.stmt]
) -> Tangent | None:
    info = anno(v)["call"]
    check_keywords(ff, v)
    kwargs = {k.arg: k.value for k in v.keywords}
    if info.kind == "method":
        return _method_tangent(ff, x, v, info.target, kwargs, pre)
    keywords = v.keywords
    func = v.func
    op = Op(
        info.target,
        list(v.args),
        lambda a: ast.Call(
            func=copy.deepcopy(func), args=a, keywords=copy.deepcopy(keywords)
        ),
        kwargs,
        v,
    )
    return rule_tangent(ff, op, x, pre)


def _method_tangent(
    ff: FunctionForward,
    x: str,
    v: ast.Call,
    method: str,
    kwargs: dict,
    pre: list[ast.stmt],
) -> Tangent | None:
    recv = v.func.value
    if method in INACTIVE_METHODS:
        return None
    if method in ("pop", "get"):  # the same method on the tangent container
        if not _has_tangent(ff, recv):
            return None
        ff.materialize(recv.id, pre)
        expr = ast.Call(
            func=ast.Attribute(value=name(ff.t(recv.id)), attr=method, ctx=ast.Load()),
            args=[copy.deepcopy(a) for a in v.args],
            keywords=[],
        )
        holey = recv.id in ff.holey or method == "get"
        return Tangent(expr, MAYBE if holey else SET, holey)
    fn = registry.lookup_method(method)
    if fn is None:
        if _has_tangent(ff, recv) or any(_has_tangent(ff, a) for a in v.args):
            ff.fail(
                v,
                f"no forward (tangent) rule for the method '.{method}()' of a "
                "differentiated value",
                f"call the NumPy function instead " f"(np.{method}(x, ...))",
                missing=True,
            )
        return None
    keywords = v.keywords

    def build(a: list) -> ast.Call:
        r = a[0]  # the receiver, or its tangent (a linear method's J t)
        primal = isinstance(r, ast.Name) and r.id == getattr(recv, "id", None)
        if isinstance(recv, ast.Name) and not primal:
            # a NumPy scalar's tangent may be a Python float, without the method
            r = call(ff.rule_ref(tangents.method_receiver), r, copy.deepcopy(recv))
        return ast.Call(
            func=ast.Attribute(value=r, attr=method, ctx=ast.Load()),
            args=a[1:],
            keywords=copy.deepcopy(keywords),
        )

    op = Op(fn, [recv, *v.args], build, kwargs, v)
    return rule_tangent(ff, op, x, pre)


# ---------------------------------------------------------------- calls to user functions


def _runtime_source_call(ff: FunctionForward, v: ast.Call) -> ast.Call | None:
    """A call of a runtime function (an adjoint rule) with no tangent rule, whose
    arguments have tangents: the call with every argument positional, so that the
    function's own source is differentiated; None otherwise."""
    info = anno(v)["call"]
    fn = info.target
    if (
        info.kind != "unknown"
        or not inspect.isfunction(fn)
        or tangents.lookup(fn) is not None
    ):
        return None
    if not (fn.__module__ or "").startswith("s2sad.runtime.") or not any(
        _has_tangent(ff, a) for a in v.args
    ):
        return None
    try:
        bound = inspect.signature(fn).bind(
            *v.args, **{k.arg: k.value for k in v.keywords}
        )
    except TypeError:
        return None
    args = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            return None
        if p.name in bound.arguments:
            args.append(bound.arguments[p.name])
        elif isinstance(p.default, (bool, int, float, str, type(None))):
            args.append(const(p.default))
        else:
            return None
    new = ast.Call(func=v.func, args=args, keywords=[])
    anno(new)["call"] = CallInfo("user", fn)
    return ast.copy_location(new, v)


def _site(ff: FunctionForward, v: ast.Call):
    what = registry.display_name(anno(v)["call"].target)
    return ff.parsed.source.problem(
        v,
        f"no forward (tangent) rule for {what}",
        "register one: @s2sad.runtime.tangents.tangent(fn, argnum=i) on "
        "def jvp_fn(t, ans, *args): return <J_i t>",
    )


def user_call(
    ff: FunctionForward,
    s: ast.Assign,
    x: str,
    v: ast.Call,
    out: list[ast.stmt],
    site=None,
) -> None:
    """``x = g(a, b)`` -> ``x, t_x = g_jvp(a, b, t_a)`` (only tangents that exist)."""
    info = anno(v)["call"]
    useful = ff.useful(x)
    active = [a for a in v.args if useful and _has_tangent(ff, a)]
    if not active and info.kind == "user":
        refuse_unseen_change(ff.parsed, s, v, ff.act.active, ff.local_functions)
        tan: list[ast.stmt] = []
        if useful:
            ff.set_tangent(x, None, tan)
        ff.state[x] = NONE
        plain = ast.copy_location(ast.Assign(targets=s.targets, value=as_written(v)), s)
        ff.emit(s, [plain], tan, out)
        return
    pre: list[ast.stmt] = []
    for a in active:
        ff.materialize(a.id, pre)
    pattern = tuple(
        0 if a not in active else 2 if a.id in ff.holey else 1 for a in v.args
    )
    fresh = fresh_marks(ff.parsed.node, s, v, ff.local_functions)
    job = ff.module.request(
        info, pattern, ff.parsed, ff.local_functions, site, fresh, call=v
    )
    fname = job.names[0]
    jvp_call = ast.Call(
        func=name(fname),
        args=list(v.args) + [name(ff.t(a.id)) for a in active],
        keywords=[],
    )
    if not active:
        tan = []
        if useful:
            ff.set_tangent(x, None, tan)
        ff.state[x] = NONE
        first = assign(x, ast.Subscript(value=jvp_call, slice=const(0), ctx=ast.Load()))
        ff.emit(s, [first], tan, out)
        return
    pair = ast.Tuple(
        elts=[name(x, store=True), name(ff.t(x), store=True)], ctx=ast.Store()
    )
    new = ast.Assign(targets=[pair], value=jvp_call, type_comment=None)
    ff.state[x] = MAYBE
    ff.holey.add(x)
    ff.emit(s, [], [new], out, pre)


# ---------------------------------------------------------------- mutation


def setitem(ff: FunctionForward, s: ast.Assign, out: list[ast.stmt]) -> None:
    """``y[i] = v`` -> also ``t_y[i] = t_v`` (zeros for t_y first if it has none)."""
    target = s.targets[0]
    y, v = target.value.id, s.value
    if not ff.useful(y) or (ff.st(y) == NONE and not _has_tangent(ff, v)):
        out.append(s)
        return
    _no_argument_change(ff, s, y)
    pre: list[ast.stmt] = []
    ff.materialize(y, pre)
    tan: list[ast.stmt] = []
    if _has_tangent(ff, v) and ff.st(v.id) == SET:
        store = ast.Subscript(
            value=name(ff.t(y)), slice=copy.deepcopy(target.slice), ctx=ast.Store()
        )
        tan.append(
            ast.Assign(targets=[store], value=name(ff.t(v.id)), type_comment=None)
        )
    else:
        value = name(ff.t(v.id)) if _has_tangent(ff, v) else const(None)
        tan.append(
            ast.Expr(
                value=call(
                    ff.rule_ref(tangents.set_item),
                    name(ff.t(y)),
                    index_value(copy.deepcopy(target.slice)),
                    value,
                )
            )
        )
    if not _has_tangent(ff, v) or ff.st(v.id) != SET or v.id in ff.holey:
        ff.holey.add(y)
    ff.emit(s, [s], tan, out, pre)


def _no_argument_change(ff: FunctionForward, s: ast.stmt, y: str) -> None:
    if y in ff.params and ff.st(y) != NONE:
        ff.fail(
            s,
            f"in-place change of the argument '{y}'",
            f"work on a copy: {y} = {y}.copy() (or list({y})) first",
        )


def expr_call(ff: FunctionForward, s: ast.Expr, out: list[ast.stmt]) -> None:
    """A call whose value is dropped: only in-place changes matter to tangents."""
    v = s.value
    info = anno(v)["call"]
    refuse_unseen_change(ff.parsed, s, v, ff.act.active, ff.local_functions)
    if info.kind == "method" and isinstance(v.func.value, ast.Name):
        _method_statement(ff, s, v.func.value.id, info.target, out)
        return
    if info.kind in ("rule", "unknown") and mutator_position(info.target) is not None:
        _mutator(ff, s, info.target, out)
        return
    if (
        info.kind == "unknown"
        and any(_has_tangent(ff, a) for a in v.args)
        and tangents.lookup(info.target) is None
    ):
        ff.fail(
            v,
            f"no forward (tangent) rule for {ast.unparse(v.func)}, called on a "
            "differentiated value",
            "register one with " "s2sad.runtime.tangents.tangent(fn)",
            missing=True,
        )
    out.append(s)


def _method_statement(
    ff: FunctionForward,
    s: ast.Expr,
    recv: str,
    method: str,
    out: list[ast.stmt],
    like: ast.stmt | None = None,
) -> None:
    v = s.value
    primal = like or s
    if method == "append":
        _append(ff, s, recv, v.args[0], out)
        return
    if ff.st(recv) == NONE or not ff.useful(recv):
        out.append(primal)
        return
    if method == "pop":  # keep t_L as long as L
        _no_argument_change(ff, s, recv)
        pre: list[ast.stmt] = []
        ff.materialize(recv, pre)
        pop = ast.Call(
            func=ast.Attribute(value=name(ff.t(recv)), attr="pop", ctx=ast.Load()),
            args=[copy.deepcopy(a) for a in v.args],
            keywords=[],
        )
        ff.emit(primal, [primal], [ast.Expr(value=pop)], out, pre)
        return
    fn = registry.lookup_method(method)
    if fn is None and method not in INACTIVE_METHODS:
        ff.fail(
            v,
            f"the method '.{method}()' may change a differentiated value in place",
            "build a new value instead (forward mode mirrors only append, pop and "
            "item assignment)",
            missing=True,
        )
    out.append(primal)


def _append(
    ff: FunctionForward, s: ast.Expr, lst: str, v: ast.expr, out: list[ast.stmt]
) -> None:
    if not ff.useful(lst) or (ff.st(lst) == NONE and not _has_tangent(ff, v)):
        out.append(s)
        return
    _no_argument_change(ff, s, lst)
    pre: list[ast.stmt] = []
    ff.materialize(lst, pre)
    value = name(ff.t(v.id)) if _has_tangent(ff, v) else const(None)
    tan = [
        ast.Expr(
            value=ast.Call(
                func=ast.Attribute(
                    value=name(ff.t(lst)), attr="append", ctx=ast.Load()
                ),
                args=[value],
                keywords=[],
            )
        )
    ]
    if not _has_tangent(ff, v) or ff.st(v.id) != SET or v.id in ff.holey:
        ff.holey.add(lst)
    ff.emit(s, [s], tan, out, pre)


def _mutator(ff: FunctionForward, s: ast.Expr, fn, out: list[ast.stmt]) -> None:
    """``restore_item(y, i, old)`` (gradient modules) and the tangent helpers that
    assign items: the same change on ``t_y`` with the new value's tangent."""
    args = s.value.args
    y, new = args[0], args[MUTATORS[fn]]
    if (
        not isinstance(y, ast.Name)
        or not ff.useful(y.id)
        or (ff.st(y.id) == NONE and not _has_tangent(ff, new))
    ):
        out.append(s)
        return
    pre: list[ast.stmt] = []
    ff.materialize(y.id, pre)
    value = name(ff.t(new.id)) if _has_tangent(ff, new) else const(None)
    rest = [copy.deepcopy(a) for a in args[1:]]
    rest[MUTATORS[fn] - 1] = value
    helper = tangents.restore_tangent if fn is support.restore_item else fn
    if fn is support.restore_item:
        rest.append(copy.deepcopy(new))
    tan = [ast.Expr(value=call(ff.rule_ref(helper), name(ff.t(y.id)), *rest))]
    ff.holey.add(y.id)
    ff.emit(s, [s], tan, out, pre)
