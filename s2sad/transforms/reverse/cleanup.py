"""Optimize: drop tape traffic for values the backward sweep never reads.

The reverse pass saves every re-assigned name conservatively; here each
``tape.append(x)`` / ``x = tape.pop()`` pair is removed when no backward
statement reads ``x``, and backward loops or branches left empty go too::

    for t in r:                              for t in r:
        tape.append(cond)                        cond = x[t] > 0
        cond = x[t] > 0           ->             ...
        ...
    for t in reversed(r):                    (removed: nothing left to replay)
        cond = tape.pop()
"""

from __future__ import annotations

import ast

from s2sad.transforms.astutil import anno, walk
from s2sad.transforms.comments import is_marker


def run(
    fwd: list[ast.stmt], bwd: list[ast.stmt], fc, options, keep: set[str] = frozenset()
) -> tuple[list, list]:
    """Remove dead save/restore pairs; record what is still saved on ``fc``."""
    if options.optimize:
        read = _reads(bwd)
        dead = {x for x in fc.reassigned if x not in read}
        fwd = _strip(fwd, lambda s: anno(s).get("save") in dead)
        bwd = _strip(bwd, lambda s: anno(s).get("restore") in dead)
        unread = _saves_nobody_reads(fwd)
        fwd = _strip(
            fwd, lambda s: anno(s).get("save_id") in unread and "save" in anno(s)
        )
        bwd = _strip(
            bwd, lambda s: anno(s).get("save_id") in unread and "restore" in anno(s)
        )
        bwd = _prune(bwd)
        bwd = _drop_dead_resets(bwd, keep=set(keep))
    fc.saved_names = {anno(s)["save"] for s in _walk(fwd) if "save" in anno(s)}
    fc.uses_tape = any(_uses_tape(s) for s in fwd)
    return fwd, bwd


def _saves_nobody_reads(fwd: list[ast.stmt]) -> set[int]:
    """Ids of saves outside loops whose saved (old) value no backward block reads.

    Restoring a value only helps the backward blocks of statements that ran
    before it was overwritten; outside loops those are the statements above.
    """
    unread: set[int] = set()
    _scan(fwd, set(), unread, in_loop=False)
    return unread


def _scan(stmts, read_before: set[str], unread: set[int], in_loop: bool) -> set[str]:
    for s in stmts:
        if isinstance(s, ast.If):
            a = _scan(s.body, set(read_before), unread, in_loop)
            b = _scan(s.orelse, set(read_before), unread, in_loop)
            read_before |= a | b
        elif isinstance(s, (ast.For, ast.While)):
            inner = _scan(s.body, set(read_before), unread, in_loop=True)
            read_before |= inner
        else:
            a = anno(s)
            if "save" in a and not in_loop and a["save"] not in read_before:
                unread.add(a["save_id"])
            if "src" in a:
                read_before |= anno(a["src"]).get("bwd_reads", set())
    return read_before


def _drop_dead_resets(stmts: list[ast.stmt], keep: set[str]) -> list[ast.stmt]:
    """Remove ``g_x = None`` resets that nothing reads afterwards (straight-line code).

    ``keep`` holds names read after ``stmts`` (e.g. the returned gradients).
    Compound statements are kept whole; everything they read counts as live.
    """
    live = set(keep)
    out: list[ast.stmt] = []
    for s in reversed(stmts):
        is_reset = (
            isinstance(s, ast.Assign)
            and isinstance(s.targets[0], ast.Name)
            and isinstance(s.value, ast.Constant)
            and s.value.value is None
            and "restore" not in anno(s)
            and s.targets[0].id.startswith("g_")
        )
        if is_reset and s.targets[0].id not in live:
            continue
        out.append(s)
        if (
            isinstance(s, ast.Assign)
            and isinstance(s.targets[0], ast.Name)
            and not isinstance(s, (ast.If, ast.For, ast.While))
        ):
            live.discard(s.targets[0].id)
        live |= {
            n.id
            for n in walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
    return _drop_dangling_comments(list(reversed(out)))


def _reads(stmts: list[ast.stmt]) -> set[str]:
    out = set()
    for s in stmts:
        for n in walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                out.add(n.id)
    return out


def _walk(stmts):
    for s in stmts:
        yield s
        for field in ("body", "orelse"):
            yield from _walk(getattr(s, field, []) or [])


def _strip(stmts: list[ast.stmt], drop) -> list[ast.stmt]:
    out = []
    for s in stmts:
        if drop(s):
            continue
        for field in ("body", "orelse"):
            if isinstance(getattr(s, field, None), list):
                setattr(s, field, _strip(getattr(s, field), drop))
        out.append(s)
    return out


def _prune(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """Remove backward loops and branches that no longer do anything."""
    out = []
    for s in stmts:
        if isinstance(s, (ast.For, ast.If)):
            s.body = _prune(s.body)
            s.orelse = _prune(s.orelse)
            if not _effective(s.body) and not _effective(s.orelse):
                continue
            if not s.body:
                s.body = [ast.Pass()]
        out.append(s)
    return _drop_dangling_comments(out)


def _effective(stmts: list[ast.stmt]) -> bool:
    return any(not is_marker(s) and not isinstance(s, ast.Pass) for s in stmts)


def _drop_dangling_comments(stmts: list[ast.stmt]) -> list[ast.stmt]:
    out = []
    for i, s in enumerate(stmts):
        if is_marker(s) and (i + 1 == len(stmts) or is_marker(stmts[i + 1])):
            continue
        out.append(s)
    return out


def _uses_tape(s: ast.stmt) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "tape" for n in walk(s))
