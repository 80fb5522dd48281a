"""Control flow in forward mode: ``if``, ``for`` and ``while`` keep their shape.

Tangent states (none / set / maybe, and holey containers) are joined where two
paths meet; a loop body is transformed under the fixpoint of its states, so a
tangent that is None before the loop and set inside it starts as ``None`` and
is made a value (``or_zeros``) only where it is read::

    t_h = None                         (h0 has no tangent)
    for t in r:
        t_h = or_zeros(t_h, h)
        ...
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from s2sad.transforms.astutil import anno, assign, const
from s2sad.transforms.forward.function import FunctionForward
from s2sad.transforms.lattice import NONE, SET, join_states

#: the statement transformer of forward mode (statements.block), for bodies
Block = Callable[[FunctionForward, list[ast.stmt]], list[ast.stmt]]


def _join(a: tuple, b: tuple) -> tuple:
    states = join_states(a[0], b[0])
    return {x: s for x, s in states.items() if s != NONE}, a[1] | b[1]


def _current(ff: FunctionForward) -> tuple:
    return {x: s for x, s in ff.state.items() if s != NONE}, set(ff.holey)


def _set_current(ff: FunctionForward, states: tuple) -> None:
    ff.state, ff.holey = dict(states[0]), set(states[1])


def _declare(ff: FunctionForward, before: dict, after: dict) -> list[ast.stmt]:
    """``t_x = None`` for tangents that exist after a compound statement but not before."""
    out = [
        assign(ff.t(x), const(None))
        for x in sorted(after)
        if before.get(x, NONE) == NONE and x in ff.tnames
    ]
    for s in out:
        anno(s)["declaration"] = True  # dropped later if nothing reads it
    return out


def if_stmt(ff: FunctionForward, s: ast.If, out: list[ast.stmt], block: Block) -> None:
    entry = _current(ff)
    ff.last_origin = None
    body = block(ff, s.body)
    first = _current(ff)
    _set_current(ff, entry)
    ff.last_origin = None
    orelse = block(ff, s.orelse)
    second = _current(ff)
    joined = _join(first, second)
    both = {x for x in joined[0] if x in first[0] and x in second[0]}
    declared = _declare(ff, {**entry[0], **{x: SET for x in both}}, joined[0])
    _set_current(ff, joined)
    ff.last_origin = None
    out.extend(declared)
    out.append(ast.If(test=s.test, body=body or [ast.Pass()], orelse=orelse))


def loop(
    ff: FunctionForward, s: ast.For | ast.While, out: list[ast.stmt], block: Block
) -> None:
    """The loop with its body transformed under the fixpoint of the body's states."""
    entry = _current(ff)
    guess = entry
    for _ in range(16):
        snap = ff.snapshot()
        _enter_body(ff, s, guess)
        block(ff, s.body)
        after = _current(ff)
        ff.restore(snap)
        new = _join(entry, after)
        if new == guess:
            break
        guess = new
    _enter_body(ff, s, guess)
    ff.last_origin = None
    body = block(ff, s.body) or [ast.Pass()]
    _set_current(ff, _join(guess, _current(ff)))
    ff.last_origin = None
    out.extend(_declare(ff, entry[0], guess[0]))
    if isinstance(s, ast.For):
        new_loop: ast.stmt = ast.For(
            target=s.target, iter=s.iter, body=body, orelse=[], type_comment=None
        )
    else:
        new_loop = ast.While(test=s.test, body=body, orelse=[])
    out.append(new_loop)


def _enter_body(ff: FunctionForward, s: ast.stmt, states: tuple) -> None:
    _set_current(ff, states)
    if isinstance(s, ast.For) and isinstance(s.target, ast.Name):
        ff.state.pop(s.target.id, None)  # the loop counter carries no tangent
