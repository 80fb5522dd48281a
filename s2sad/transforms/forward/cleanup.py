"""Cleanup: drop ``t_x = None`` declarations that no statement can read.

Before a loop or branch, forward mode declares the tangents that the loop or
branch may leave set, so that they exist on every path.  A tangent that is
always assigned before it is read needs no declaration; liveness over the
structured code finds those::

    t_mul = None                     for i in r:
    for i in r:              ->          t_mul = t_y * 0.8
        t_mul = t_y * 0.8                t_y = t_mul + t_y
        t_y = t_mul + t_y
"""

from __future__ import annotations

import ast

from s2sad.transforms.astutil import anno, loads


def run(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` without the dead declarations (nested blocks are cleaned in place)."""
    _remove(body, set())
    return body


def _kills(s: ast.stmt) -> set[str]:
    """Names a simple statement binds as a whole (item assignment reads its base)."""
    if not isinstance(s, ast.Assign):
        return set()
    out = set()
    for t in s.targets:
        elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
        out |= {e.id for e in elts if isinstance(e, ast.Name)}
    return out


def _live_block(stmts: list[ast.stmt], live_after: set[str]) -> set[str]:
    live = set(live_after)
    for s in reversed(stmts):
        live = _live(s, live)
    return live


def _live(s: ast.stmt, live: set[str]) -> set[str]:
    """Names live before ``s`` given those live after it."""
    if isinstance(s, ast.If):
        return _live_block(s.body, live) | _live_block(s.orelse, live) | loads(s.test)
    if isinstance(s, (ast.For, ast.While)):
        return _head(s, live) | loads(s.iter if isinstance(s, ast.For) else s.test)
    return (live - _kills(s)) | loads(s)


def _head(loop: ast.For | ast.While, live_after: set[str]) -> set[str]:
    """Names live at the loop head: after the loop, or read by the body first."""
    target = {loop.target.id} if isinstance(loop, ast.For) else set()
    head = set(live_after)
    while True:
        new = live_after | (_live_block(loop.body, head) - target)
        if new == head:
            return head
        head = new


def _remove(stmts: list[ast.stmt], live_after: set[str]) -> None:
    live = set(live_after)
    for k in range(len(stmts) - 1, -1, -1):
        s = stmts[k]
        if anno(s).get("declaration") and not (_kills(s) & live):
            del stmts[k]
            continue
        if isinstance(s, ast.If):
            _remove(s.body, live)
            _remove(s.orelse, live)
        elif isinstance(s, (ast.For, ast.While)):
            _remove(s.body, _head(s, live))
        live = _live(s, live)
