"""Scalar code: no temporaries, no dead resets, invariant products out of loops.

For a call of Python numbers (``module.options.buffers == "scalar"``) the
top-level gradient function holds numbers (s2sad/transforms/reverse/scalars.py)
and their cotangents, whose arithmetic has no side effects.  This pass, after
``scalar`` has pointed the math at ``math``, repeats until nothing changes:

- **dead stores**: ``g_x = None`` (or ``+ - *`` of numbers, which cannot raise) bound to
  a name no path reads before it is bound again (s2sad/transforms/liveness.py:
  the next iteration of a loop counts as a path);
- **loop-invariant code**: ``t = 0.1 * x`` at the top level of a loop body, of
  names the loop never binds and that are bound before it, with ``+ - *`` only
  (nothing that could raise), ``t`` bound nowhere else in the loop, read by
  nothing before it in the body nor after the loop: it moves before the loop;
- **copies back**: ``y = t`` after ``t = y``, neither bound again in between;
- **forward substitution**: ``t = e`` read once further down the same block
  (no further than the next ``# grad of:`` line, nor into a ``return``, and
  into lines of at most six operations, so the code stays readable; a copy
  ``t = y`` or a constant may go anywhere, read any number of times), with
  nothing in between binding ``t`` or the names ``e`` reads, nor calling
  anything but ``math`` and the tape: ``e`` goes where ``t`` was read, ``t``
  goes::

    for i in reversed(r):                        for i in reversed(r):
        g_mul = g_out                                s = tape.pop()
        g_mul_1 = g_out                              g_x = g_x + g_out * 0.1
        g_out = None                       ->        g_out = g_out * 0.9 * math.cos(s)
        s = tape.pop()
        g_x = g_x + g_mul_1 * 0.1
        g_mul_1 = None
        g_sin = g_mul * 0.9
        g_mul = None
        g_out = g_sin * math.cos(s)
        g_sin = None

Then a tape that only one loop fills, one value an iteration, is walked
backwards by the loop that reads it (s2sad/transforms/buffers/states.py), and
each ``math`` function called in a loop is read once, into a local
(``math_cos = math.cos``), not from the module at every iteration.

The operations, their operands and their order stay the same (an expression
moves whole into the place of the name), so every value and gradient is the
same float.  Functions holding anything liveness does not model are left alone.
"""

from __future__ import annotations

import ast
import copy
import math
from typing import Any

from s2sad.options import SCALAR
from s2sad.transforms import liveness
from s2sad.transforms.astutil import anno, assign, name, walk
from s2sad.transforms.buffers import states
from s2sad.transforms.comments import is_marker

#: operators between numbers that never raise (loop-invariant code may run
#: when the loop does not)
_SAFE_OPS = (ast.Add, ast.Sub, ast.Mult)
_PURE_OPS = (*_SAFE_OPS, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
#: builtins that neither change an object nor read a frame
_PURE_BUILTINS = frozenset({"float", "range", "reversed"})
#: at most this many operations and calls in a statement that takes in another's
_LONGEST = 6
#: at most this many rounds (each one makes the function smaller)
_ROUNDS = 8


def run(job: Any, module: Any) -> None:
    """The pipeline's ``substitute`` pass (the top-level function of scalar code)."""
    options = module.options
    if not (
        job.top
        and options.buffers == SCALAR
        and options.optimize
        and not options.debug_nans
    ):
        return
    rv = job.state
    numbers = set(getattr(rv, "numbers", ()) or ())
    if not numbers:
        return
    scope = numbers | {rv.gnames[x] for x in numbers if x in rv.gnames}
    tidy(job.functions[0], scope, module.bindings)


def tidy(fn: ast.FunctionDef, scope: set[str], bindings: dict[str, Any]) -> bool:
    """Rewrite ``fn`` in place; ``scope``: the names holding numbers or their
    cotangents.  Whether anything changed."""
    try:
        liveness.check(fn.body)
    except liveness.Unsupported:
        return False
    local = liveness.all_writes(fn.body)
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    kit = _Kit(
        scope,
        {a for a, v in bindings.items() if v is math},
        {
            b
            for b in _PURE_BUILTINS
            if b not in bindings and b not in local and b not in params
        },
    )
    changed = False
    for _ in range(_ROUNDS):
        live = liveness.live_after(fn.body)
        step = _dead_stores(fn.body, live, kit)
        live = liveness.live_after(fn.body)
        step |= _hoist(fn.body, live, kit, set(params))
        live = liveness.live_after(fn.body)
        step |= _substitute(fn.body, live, kit)
        if not step:
            break
        changed = True
    live = liveness.live_after(fn.body)
    changed |= states.walk_backwards(fn, live, kit.builtin_names)
    taken = {n.id for n in walk(fn) if isinstance(n, ast.Name)}
    return _math_in_loops(fn, kit, taken | params | set(bindings)) or changed


class _Kit:
    """What the rewrites may assume about names and calls."""

    def __init__(self, scope: set[str], math_names: set[str], builtin_names: set[str]):
        self.scope = scope
        self.math_names = math_names
        self.builtin_names = builtin_names

    def pure(self, e: ast.expr, safe: bool = False) -> bool:
        """Numbers by arithmetic and ``math`` (``safe``: ``+ - *`` only, no calls):
        no side effect, nothing read but names of ``scope``."""
        if isinstance(e, ast.Constant):
            return e.value is None or type(e.value) in (int, float, bool)
        if isinstance(e, ast.Name):
            return e.id in self.scope
        if isinstance(e, ast.BinOp):
            ops = _SAFE_OPS if safe else _PURE_OPS
            return (
                isinstance(e.op, ops)
                and self.pure(e.left, safe)
                and self.pure(e.right, safe)
            )
        if isinstance(e, ast.UnaryOp):
            return isinstance(e.op, (ast.USub, ast.UAdd)) and self.pure(e.operand, safe)
        if isinstance(e, ast.Call) and not safe:
            return (
                self.is_math(e.func)
                and not e.keywords
                and all(not isinstance(a, ast.Starred) and self.pure(a) for a in e.args)
            )
        return False

    def harmless(self, s: ast.stmt) -> bool:
        """A statement that changes no object: its calls are ``math``'s, pure
        builtins' and the tape's, and it writes no item or attribute."""
        for n in walk(s):
            if isinstance(n, ast.Call) and not (
                self.is_math(n.func)
                or (isinstance(n.func, ast.Name) and n.func.id in self.builtin_names)
                or _tape(n.func)
            ):
                return False
            if isinstance(n, (ast.Subscript, ast.Attribute)) and not isinstance(
                n.ctx, ast.Load
            ):
                return False
        return True

    def is_math(self, f: ast.expr) -> bool:
        return (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id in self.math_names
        )


def _tape(f: ast.expr) -> bool:
    return (
        isinstance(f, ast.Attribute)
        and isinstance(f.value, ast.Name)
        and f.value.id == "tape"
        and f.attr in ("append", "pop")
    )


def _binding(s: ast.stmt, kit: _Kit) -> str | None:
    """``t`` of ``t = e``, a name of ``scope`` bound to a pure expression."""
    if (
        isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and s.targets[0].id in kit.scope
        and not {"save", "restore"} & set(anno(s))
        and kit.pure(s.value)
    ):
        return s.targets[0].id
    return None


def _blocks(stmts: list[ast.stmt]):
    """Every statement list of ``stmts``, ``stmts`` itself first."""
    yield stmts
    for s in stmts:
        for field in ("body", "orelse"):
            inner = getattr(s, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from _blocks(inner)


# ---------------------------------------------------------------- math in loops


def _math_in_loops(fn: ast.FunctionDef, kit: _Kit, taken: set[str]) -> bool:
    """``math_cos = math.cos`` once at the top for each ``math`` function called
    in a loop, and the loops call the local: no module attribute read per
    iteration (``grad``'s re-run on NumPy's functions rebinds ``math`` itself,
    so the locals read NumPy's then)."""
    calls: dict[tuple[str, str], list[ast.Call]] = {}
    for loop in walk(fn):
        if isinstance(loop, (ast.For, ast.While)):
            for c in walk(loop):
                if isinstance(c, ast.Call) and kit.is_math(c.func):
                    key = (c.func.value.id, c.func.attr)
                    if all(c is not d for d in calls.get(key, [])):
                        calls.setdefault(key, []).append(c)
    reads = []
    for (module, attr), found in sorted(calls.items()):
        local = f"{module}_{attr}"
        k = 1
        while local in taken:
            local, k = f"{module}_{attr}_{k}", k + 1
        taken.add(local)
        reads.append(assign(local, ast.Attribute(name(module), attr, ast.Load())))
        for c in found:
            c.func = name(local)
    fn.body[0:0] = reads
    return bool(reads)


# ---------------------------------------------------------------- dead stores


def _dead_stores(body: list[ast.stmt], live: dict, kit: _Kit) -> bool:
    changed = False
    for block in _blocks(body):
        keep = []
        for s in block:
            t = _binding(s, kit)
            # only what cannot raise: a dead ``1.0 / x`` still raises as the user's
            # code does
            if t is not None and t not in live[id(s)] and kit.pure(s.value, True):
                changed = True
                continue
            keep.append(s)
        if len(keep) != len(block):
            block[:] = _without_dangling_comments(keep) or [ast.Pass()]
    return changed


def _without_dangling_comments(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """Drop comment markers left with no statement of their own after them."""
    return [
        s
        for i, s in enumerate(stmts)
        if not (is_marker(s) and (i + 1 == len(stmts) or is_marker(stmts[i + 1])))
    ]


# ---------------------------------------------------------------- loop-invariant code


def _hoist(body: list[ast.stmt], live: dict, kit: _Kit, bound: set[str]) -> bool:
    """Move invariant ``t = e`` out of the loops of ``body``; ``bound``: the names
    surely bound before ``body`` runs."""
    changed = False
    bound = set(bound)
    i = 0
    while i < len(body):
        s = body[i]
        if isinstance(s, ast.If):
            changed |= _hoist(s.body, live, kit, bound)
            changed |= _hoist(s.orelse, live, kit, bound)
        elif isinstance(s, (ast.For, ast.While)):
            inner = bound | (liveness.writes(s) if isinstance(s, ast.For) else set())
            changed |= _hoist(s.body, live, kit, inner)
            moved = _invariants(s, live, kit, bound)
            if moved:
                for m in moved:
                    s.body.remove(m)
                s.body = _without_dangling_comments(s.body) or [ast.Pass()]
                body[i:i] = moved
                i += len(moved)
                bound |= {m.targets[0].id for m in moved}
                changed = True
        elif isinstance(s, (ast.Assign, ast.AugAssign)):
            bound |= liveness.writes(s)
        i += 1
    return changed


def _invariants(loop: ast.For | ast.While, live: dict, kit: _Kit, bound: set[str]):
    """The statements of ``loop``'s body that may run once, before it, in order."""
    written = liveness.all_writes([loop])
    head = liveness.reads(loop.test if isinstance(loop, ast.While) else loop.iter)
    stores = [
        n.id
        for n in walk(loop)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    ]
    read_before: set[str] = set(head)
    moved = []
    for s in loop.body:
        t = _binding(s, kit)
        if (
            t is not None
            and kit.pure(s.value, safe=True)
            and not (liveness.reads(s.value) & written)
            and liveness.reads(s.value) <= bound
            and stores.count(t) == 1
            and t not in read_before
            and t not in live[id(loop)]
        ):
            moved.append(s)
            bound = bound | {t}
            continue
        read_before |= liveness.reads(s)
    return moved


# ---------------------------------------------------------------- forward substitution


def _substitute(body: list[ast.stmt], live: dict, kit: _Kit) -> bool:
    changed = False
    for block in _blocks(body):
        i = 0
        while i < len(block):
            changed |= _copies_back(block, i, kit)
            if _forward(block, i, live, kit):
                del block[i]
                changed = True
            else:
                i += 1
        if not block:
            block.append(ast.Pass())
        block[:] = _without_dangling_comments(block) or [ast.Pass()]
    return changed


def _copies_back(block: list[ast.stmt], i: int, kit: _Kit) -> bool:
    """After ``t = y``, drop each ``y = t`` below it while neither is bound again
    (a loop-carried cotangent copied out and back in): it changes nothing."""
    d = block[i]
    t = _binding(d, kit)
    if t is None or not isinstance(d.value, ast.Name) or d.value.id == t:
        return False
    y = d.value.id
    back = []
    for s in block[i + 1 :]:
        if (
            isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and _is_name(s.targets[0], y)
            and _is_name(s.value, t)
            and not {"save", "restore"} & set(anno(s))
        ):
            back.append(s)
        elif {t, y} & liveness.all_writes([s]):
            break
    for s in back:
        block.remove(s)
    return bool(back)


def _is_name(e: ast.expr, x: str) -> bool:
    return isinstance(e, ast.Name) and e.id == x


def _forward(block: list[ast.stmt], i: int, live: dict, kit: _Kit) -> bool:
    """Put ``block[i]``'s value where its name is read below, if that is safe."""
    d = block[i]
    t = _binding(d, kit)
    if t is None:
        return False
    e = d.value
    names = liveness.reads(e)
    trivial = isinstance(e, (ast.Name, ast.Constant))
    uses: list[ast.stmt] = []
    for s in block[i + 1 :]:
        if is_marker(s):
            if trivial:
                continue
            break  # an expression stays in the block of its ``# grad of:`` line
        binds = liveness.all_writes([s])
        if t in liveness.reads(s):
            if not (
                isinstance(s, (ast.Assign, ast.Expr))
                or (trivial and isinstance(s, ast.Return))
            ) or not (kit.harmless(s) and not {"save", "restore"} & set(anno(s))):
                return False
            uses.append(s)
            if t in binds or names & binds:
                break  # the last use: it binds t again, or a name e reads
        elif t in binds or names & binds or not kit.harmless(s):
            break  # t's value is not read past here, or e would differ
    if not uses:
        return False
    last = uses[-1]
    if t in live[id(last)] and t not in liveness.writes(last):
        return False  # read again further on
    spots = [n for s in uses for n in walk(s) if _is_load(n, t)]
    if not trivial and (len(spots) != 1 or _size(e) + _size(last) > _LONGEST):
        return False  # computed once, where it was; lines a person can read
    for s in uses:
        _replace(s, t, e)
    return True


def _size(node: ast.AST) -> int:
    return sum(isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Call)) for n in walk(node))


def _is_load(n: ast.AST, t: str) -> bool:
    return isinstance(n, ast.Name) and n.id == t and isinstance(n.ctx, ast.Load)


def _replace(s: ast.stmt, t: str, e: ast.expr) -> None:
    """Each read of ``t`` in ``s`` becomes (a copy of) ``e``."""
    for node in walk(s):
        for field, value in ast.iter_fields(node):
            if _is_load(value, t):
                setattr(node, field, copy.deepcopy(e))
            elif isinstance(value, list):
                for k, item in enumerate(value):
                    if _is_load(item, t):
                        value[k] = copy.deepcopy(e)
