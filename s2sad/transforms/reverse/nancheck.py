"""``debug_nans``: a finiteness check after each backward block (reverse pass).

With ``Options.debug_nans`` every cotangent a block assigns is checked right
after it, naming the user's line and the operand, so the first non-finite
cotangent raises ``NonFiniteCotangentError`` where it appears::

    # grad of: h = np.log(a)
    g_a = g_h / a
    check_finite(g_a, "model.py", 12, "h = np.log(a)", "a")

Without the option the backward sweep is unchanged (no call, no cost).
"""

from __future__ import annotations

import ast

from s2sad.transforms.astutil import anno, call, const, name


def checked(rv, s: ast.stmt, block: list[ast.stmt]) -> list[ast.stmt]:
    """``block`` (the backward of simple statement ``s``) with checks, when asked."""
    origin = anno(s).get("origin")
    if not block or origin is None or not rv.fc.module.options.debug_nans:
        return block
    source = rv.fc.parsed.source
    primal = {g: x for x, g in rv.gnames.items()}
    where = (const(source.filename), const(origin), const(source.line(origin).strip()))
    return _insert(rv, block, primal, where)


def _insert(rv, block, primal, where) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for st in block:
        out.append(st)
        if isinstance(st, ast.If) and "guard" in anno(st.test):
            st.body = _insert(rv, st.body, primal, where)
            continue
        if not isinstance(st, ast.Assign) or _is_none(st.value):
            continue
        targets = st.targets[0]
        elts = targets.elts if isinstance(targets, ast.Tuple) else [targets]
        for t in elts:
            if isinstance(t, ast.Name) and t.id in primal:
                check = call(
                    rv.helper("check_finite"), name(t.id), *where, const(primal[t.id])
                )
                out.append(ast.Expr(value=check))
    return out


def _is_none(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and e.value is None
