"""Sharing: which site may write over the buffer of an operand that dies there.

Liveness over the top-level function once its sites exist (sites.py).  A
temporary that every later read uses as an operand of a NumPy site, outside
loops, holds a buffer nobody needs after its last read; an elementwise site
there may take that buffer instead of one of its own.  The pairs go in a
table next to the function, which the runtime reads when it builds the
workspace (s2sad/runtime/workspace.py); the code itself is unchanged::

    mul_3 = np.multiply(h, h, out=ws['mul_3'])
    sub = np.subtract(1.0, mul_3, out=ws['sub'])          # mul_3 dies here
    g_matmul = np.multiply(g_h, sub, out=ws['g_matmul'])  # sub dies here
    ...
    f_value_and_grad.buffer_shares = {'sub': 'mul_3', 'g_matmul': 'sub'}
"""

from __future__ import annotations

import ast
from typing import Any

from s2sad.runtime import contractions
from s2sad.transforms.astutil import anno, name
from s2sad.transforms.buffers.facts import helper_of, runtime_rule
from s2sad.transforms.buffers.sites import elementwise, is_np_call, once_key


def table(fn: ast.FunctionDef, shares: dict[str, str]) -> list[ast.stmt]:
    """``<fn>.buffer_shares = {site key: key it may write over}`` (none if empty)."""
    if not shares:
        return []
    attr = ast.Attribute(value=name(fn.name), attr="buffer_shares", ctx=ast.Store())
    value = ast.Dict(
        keys=[ast.Constant(k) for k in shares],
        values=[ast.Constant(v) for v in shares.values()],
    )
    return [ast.Assign(targets=[attr], value=value, type_comment=None)]


def results_table(fn: ast.FunctionDef, keys: dict[str, int | None]) -> list[ast.stmt]:
    """``<fn>.buffer_results = {key: gradient index}`` (none if empty): see
    ``result_keys``."""
    if not keys:
        return []
    attr = ast.Attribute(value=name(fn.name), attr="buffer_results", ctx=ast.Store())
    value = ast.Dict(
        keys=[ast.Constant(k) for k in keys],
        values=[ast.Constant(i) for i in keys.values()],
    )
    return [ast.Assign(targets=[attr], value=value, type_comment=None)]


def result_keys(fn: ast.FunctionDef) -> dict[str, int | None]:
    """Keys of the sites (outside loops) that bind a gradient ``finalize`` returns,
    each with the gradient's place in the returned tuple (None where one name is
    returned at several places).

    A call without ``out=`` arrays gives these sites no buffer (the workspace
    holds None for them): the site's fresh array is then the gradient itself,
    which ``finalize`` hands back without the copy a workspace buffer needs.  A
    call with ``out=`` arrays may give the site the caller's array instead of a
    buffer (runtime/outinto.py), where the place is known and one site alone
    binds it.  Only which sites get which buffer depends on this table, never a
    value.
    """
    ret = fn.body[-1] if fn.body else None
    if not isinstance(ret, ast.Return) or not isinstance(ret.value, ast.Tuple):
        return {}
    grads = ret.value.elts[1] if len(ret.value.elts) > 1 else None
    wanted: dict[str, int | None] = {}
    for i, f in enumerate(getattr(grads, "elts", [])):
        if (
            isinstance(f, ast.Call)
            and helper_of(f) == "finalize"
            and f.args
            and isinstance(f.args[0], ast.Name)
        ):
            g = f.args[0].id
            wanted[g] = None if g in wanted else i
    keys: dict[str, int | None] = {}
    _collect_result_keys(fn.body, wanted, keys)
    return keys


def _collect_result_keys(body: list, wanted: dict, keys: dict) -> None:
    for st in body:
        if isinstance(st, ast.If):
            _collect_result_keys(st.body, wanted, keys)
            _collect_result_keys(st.orelse, wanted, keys)
        if not isinstance(st, ast.Assign) or len(st.targets) != 1:
            continue
        target, value = st.targets[0], st.value
        if isinstance(target, ast.Name) and target.id in wanted:
            if isinstance(value, ast.Call):
                key = once_key(value)
            elif isinstance(value, ast.Subscript) and isinstance(
                value.slice, ast.Constant
            ):
                key = _into_key(value.value, value.slice.value)
            else:
                key = None
            if key is not None and key not in keys:
                keys[key] = wanted[target.id]
        elif isinstance(target, ast.Tuple):
            for i, t in enumerate(target.elts):
                if isinstance(t, ast.Name) and t.id in wanted:
                    k = _into_key(value, i)
                    if k is not None and k not in keys:
                        keys[k] = wanted[t.id]


def _into_key(call: ast.expr, i: Any) -> str | None:
    """The key of ``ws["key"]`` at place ``i`` of ``call``'s ``into=(...)``."""
    if not isinstance(call, ast.Call) or not isinstance(i, int):
        return None
    for k in call.keywords:
        if k.arg == "into" and isinstance(k.value, ast.Tuple) and i < len(k.value.elts):
            return anno(k.value.elts[i]).get("buffer")
    return None


def dying_operands(fn: ast.FunctionDef, np_alias: str) -> dict[str, str]:
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
    uses = _Uses()
    for node, loop in order:
        uses.see(node, loop, np_alias)
    out: dict[str, str] = {}
    for n, bs in uses.binds.items():
        if len(bs) != 1 or bs[0][1] or n in uses.looped or not uses.reads.get(n):
            continue
        value = bs[0][0].value
        key = once_key(value) if isinstance(value, ast.Call) else None
        site = uses.last.get(n)
        if key is None or uses.fine.get(n) != uses.reads[n] or site is None:
            continue
        if elementwise(site, np_alias):
            out.setdefault(once_key(site), key)
    return out


class _Uses:
    """Bindings and reads of every name, in source order."""

    def __init__(self) -> None:
        self.binds: dict[str, list] = {}
        self.reads: dict[str, int] = {}
        self.fine: dict[str, int] = {}  # reads as a site's operand
        self.last: dict[str, ast.Call] = {}  # the site that reads it last
        self.looped: set[str] = set()

    def see(self, node: ast.AST, loop: bool, np_alias: str) -> None:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            self.binds.setdefault(node.targets[0].id, []).append((node, loop))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            self.reads[node.id] = self.reads.get(node.id, 0) + 1
            if loop:
                self.looped.add(node.id)
        if not isinstance(node, ast.Call):
            return
        if once_key(node) is not None and is_np_call(node, np_alias):
            for a in node.args:
                if isinstance(a, ast.Name):
                    self.fine[a.id] = self.fine.get(a.id, 0) + 1
                    self.last[a.id] = node
        elif _unbroadcast(node) and isinstance(node.args[1], ast.Name):
            self.fine[node.args[1].id] = self.fine.get(node.args[1].id, 0) + 1
        elif _unread_ans(node):
            ans = node.args[1]
            self.fine[ans.id] = self.fine.get(ans.id, 0) + 1


def _unbroadcast(call: ast.Call) -> bool:
    """``unbroadcast(g, like)``: ``like`` is read for its shape only."""
    return helper_of(call) == "unbroadcast" and len(call.args) == 2


#: the runtime's adjoint rules that never look at their ``ans`` argument (a
#: product's cotangents need only its operands): a name passed there is not read
UNREAD_ANS = (
    contractions.d_matmul,
    contractions.d_matmul_lhs,
    contractions.d_matmul_rhs,
)


def _unread_ans(call: ast.Call) -> bool:
    """``d_matmul(g, ans, x, y)`` and the like: ``ans`` is not read at all."""
    rule = runtime_rule(call.func)
    return (
        rule is not None
        and any(rule is r for r in UNREAD_ANS)
        and len(call.args) >= 2
        and isinstance(call.args[1], ast.Name)
    )


def _in_order(node: ast.AST, loop: bool, out: list) -> None:
    """Every node under ``node`` in source order, with whether it is in a loop."""
    loop = loop or isinstance(node, (ast.For, ast.While))
    out.append((node, loop))
    for child in ast.iter_child_nodes(node):
        _in_order(child, loop, out)
