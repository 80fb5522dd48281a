"""Control flow in the backward sweep: ``if``, ``for`` and ``while``.

Branches are replayed on the (restored) test value; loops are replayed in reverse
over the same range object, or as many times as the recorded iteration count::

    if cond:                    if cond:
        y = x * 2      ->           g_x = add(g_x, g_y * 2)

    for t in r:                 for t in reversed(r):          (or reversed(r[:n_iter])
        body           ->           <backward of body>          after a break)

    while cond:                 for _ in range(n_iter):
        body           ->           <backward of body>

Cotangent variables a loop or branch may touch are set to ``None`` before it
when they do not exist yet, so the code is valid on every path.
"""

from __future__ import annotations

import ast

from s2sad.transforms.astutil import anno, assign, call, const, name, walk
from s2sad.transforms.lattice import NONE, join
from s2sad.transforms.reverse import scalars


def compound(rv, s: ast.stmt, in_loop: bool):
    if isinstance(s, ast.If):
        return _if(rv, s, in_loop)
    return _loop(rv, s, in_loop)


def _if(rv, s: ast.If, in_loop: bool):
    fwd_body, bwd_body = rv.forward_and_backward(s.body, in_loop)
    fwd_else, bwd_else = rv.forward_and_backward(s.orelse, in_loop)
    fwd = [ast.If(test=s.test, body=fwd_body or [ast.Pass()], orelse=fwd_else)]

    def backward() -> list[ast.stmt]:
        entry = dict(rv.state)
        b1 = bwd_body()
        s1, rv.state = rv.state, dict(entry)
        b2 = bwd_else()
        s2 = rv.state
        if not b1 and not b2:
            rv.state = s1
            return []
        pre = []
        joined = {}
        for g in sorted(set(s1) | set(s2)):
            a, b = s1.get(g, NONE), s2.get(g, NONE)
            joined[g] = join(a, b)
            if entry.get(g, NONE) == NONE and joined[g] != NONE and a != b:
                pre.append(assign(g, const(None)))
        rv.state = joined
        return pre + [ast.If(test=s.test, body=b1 or [ast.Pass()], orelse=b2)]

    return fwd, backward


def _loop(rv, s: ast.For | ast.While, in_loop: bool):
    fc = rv.fc
    fwd: list[ast.stmt] = []
    target = s.target.id if isinstance(s, ast.For) else None
    saved_target = fc.save(target, fwd, in_loop) if target else 0
    body_fwd, body_bwd = rv.forward_and_backward(s.body, True)
    if isinstance(s, ast.For):
        fwd.append(
            ast.For(
                target=s.target, iter=s.iter, body=body_fwd or [ast.Pass()], orelse=[]
            )
        )
    else:
        fwd.append(ast.While(test=s.test, body=body_fwd or [ast.Pass()], orelse=[]))
    touched = sorted(
        {rv.g(n.id) for n in walk(s) if isinstance(n, ast.Name) and rv.needs(n)}
    )

    def backward() -> list[ast.stmt]:
        pre = []
        for g in touched:
            if rv.state.get(g, NONE) == NONE:
                pre.append(assign(g, const(None)))
        # each cotangent's state at the loop's head, to a fixed point: one reset
        # at the end of the body (a name assigned again) is None at the head too,
        # so its first contribution is bound, not added to None, and no test of
        # it is emitted (``maybe`` for every one would cost both per iteration)
        body = scalars.loop_body(rv, touched, body_bwd)
        count = anno(s).get("count")
        post = [fc.restore(target, saved_target)] if saved_target else []
        if not body:
            return post
        if isinstance(s, ast.For):
            rng = s.iter
            if count is not None:
                rng = ast.Subscript(
                    value=rng, slice=ast.Slice(upper=name(count)), ctx=ast.Load()
                )
            loop = ast.For(
                target=name(target, store=True),
                iter=call("reversed", rng),
                body=body,
                orelse=[],
            )
        else:
            loop = ast.For(
                target=name("_", store=True),
                iter=call("range", name(count)),
                body=body,
                orelse=[],
            )
        return pre + [loop] + post

    return fwd, backward
