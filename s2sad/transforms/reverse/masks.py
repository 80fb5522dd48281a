"""Which cotangents may hold exact zeros placed by a mask (a fact of the reverse pass).

A mask is a rule declared ``registry.masking`` (``where``, ``maximum``, ``clip``...)
or a multiplication by a boolean (``h * (x > 0)``, ``h * m`` with
``m = (x > 0).astype(float)``).  Its operands' cotangents are *masked*: exactly
zero where the mask did not select them.  The fact flows on to the operands of
every statement whose result is masked, and the reverse pass applies the masked
form of a rule (``registry.masked_adjoint``) to a masked cotangent, so the zero
stays zero through ``sqrt``, ``log``, ``/``... instead of becoming ``0 * inf``::

    c = x > 0                 masked: {h, x}     # grad of: h = np.sqrt(x)
    h = np.sqrt(x)      ->                       g_x = 0.5 * g_h / np.where(g_h == 0, 1.0, h)
    y = np.where(c, h, 0.0)

The analysis ignores statement order and branches (a fixpoint over every
statement of the function), so it holds in loops too; too many masked names
only cost speed, never correctness: the masked forms agree with the rules
wherever the cotangent is not zero.  Functions without a mask get exactly the
code they got before.
"""

from __future__ import annotations

import ast

import numpy as np

from s2sad.runtime import registry
from s2sad.transforms.astutil import anno, walk

#: calls whose result is boolean (or 0/1 after ``astype``)
_BOOLEAN = {
    np.greater, np.greater_equal, np.less, np.less_equal, np.equal, np.not_equal,
    np.logical_and, np.logical_or, np.logical_not, np.logical_xor,
    np.isnan, np.isinf, np.isfinite, np.isneginf, np.isposinf, np.isclose,
    np.signbit,
}  # fmt: skip


def masked_names(fn: ast.FunctionDef) -> set[str]:
    """Names (of the normalized function) whose cotangent may come from a mask."""
    stmts = [
        s
        for s in walk(fn)
        if isinstance(s, ast.Assign) or (isinstance(s, ast.Expr) and _is_append(s))
    ]
    bools = _boolean_names(stmts)
    masked: set[str] = set()
    changed = True
    while changed:
        changed = False
        for s in stmts:
            target, value = _target_and_value(s)
            operands = {
                n.id
                for n in walk(value)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            }
            if target in masked or _is_mask(value, bools):
                new = operands - masked
                if new:
                    masked |= new
                    changed = True
    return masked


def _is_append(s: ast.Expr) -> bool:
    v = s.value
    return (
        isinstance(v, ast.Call)
        and isinstance(v.func, ast.Attribute)
        and v.func.attr == "append"
        and isinstance(v.func.value, ast.Name)
    )


def _target_and_value(s: ast.stmt) -> tuple[str | None, ast.expr]:
    """The name whose cotangent flows into ``value``'s operands, and ``value``."""
    if isinstance(s, ast.Expr):  # lst.append(v)
        return s.value.func.value.id, ast.Tuple(elts=s.value.args, ctx=ast.Load())
    t = s.targets[0]
    if isinstance(t, ast.Subscript):  # y[i] = v
        t = t.value
    return (t.id if isinstance(t, ast.Name) else None), s.value


def _function(v: ast.expr):
    """The NumPy function a normalized call or operator stands for (or None)."""
    if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Mult):
        return np.multiply
    if not isinstance(v, ast.Call) or "call" not in anno(v):
        return None
    info = anno(v)["call"]
    if info.kind == "rule":
        return info.target
    if info.kind == "method":
        return registry.lookup_method(info.target)
    return None


def _is_mask(v: ast.expr, bools: set[str]) -> bool:
    fn = _function(v)
    if fn is None:
        return False
    if fn is np.multiply:
        args = [v.left, v.right] if isinstance(v, ast.BinOp) else v.args
        return any(isinstance(a, ast.Name) and a.id in bools for a in args)
    return registry.is_masking(fn)


def _boolean_names(stmts: list[ast.stmt]) -> set[str]:
    """Names holding a boolean array (or its 0/1 ``astype``)."""
    bools: set[str] = set()
    changed = True
    while changed:
        changed = False
        for s in stmts:
            if not (isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)):
                continue
            target = s.targets[0].id
            if target not in bools and _is_boolean(s.value, bools):
                bools.add(target)
                changed = True
    return bools


def _is_boolean(v: ast.expr, bools: set[str]) -> bool:
    def known(e):
        return isinstance(e, ast.Name) and e.id in bools

    if isinstance(v, ast.Compare):
        return True
    if isinstance(v, ast.UnaryOp) and isinstance(v.op, (ast.Not, ast.Invert)):
        return known(v.operand)
    if isinstance(v, ast.BinOp) and isinstance(
        v.op, (ast.BitAnd, ast.BitOr, ast.BitXor, ast.Mult)
    ):
        return known(v.left) and known(v.right)
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute):
        if v.func.attr == "astype":
            return known(v.func.value)
    if not isinstance(v, ast.Call):
        return False
    try:
        return _function(v) in _BOOLEAN
    except TypeError:  # an unhashable callee
        return False
