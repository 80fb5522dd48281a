"""Loop-invariant reads and slice steps: what the ``hoist`` pass moves out of a loop.

Two analyses of one ``for`` loop over a ``range`` (after normalize, one
operation per statement), both used by ``hoist.py``:

* **Invariant reads.**  ``w = params["Wx"]`` or ``w = self.Wx`` at the top level
  of the body reads the same value in every iteration when the loop assigns
  neither ``params`` nor the key, changes no array or container in place (no
  item or attribute assignment, no ``out=``, no mutating method such as
  ``pop``, ``update`` or ``append`` on anything that may be ``params``) and
  calls no user function.  :func:`invariant_reads` takes such statements out
  of the body; the pass runs them once before the loop (inside a one-step
  loop ``for t in r[:1]`` unless the range is a literal that surely runs, so
  that a loop that runs no step still reads nothing, as written).
* **Slice steps.**  ``xt = x[:, lo:hi]`` where ``lo`` and ``hi`` are affine in
  the loop variable ``t`` with loop-invariant coefficients (``t * C``,
  ``(t + 1) * C``, ``t * C + C``...) reads step ``t`` of ``x`` cut into slices.
  :func:`slice_step` gives the slice's axis and its bounds as four expressions
  ``(a, b, p, q)`` (step ``t`` is ``a * t + b : p * t + q``), which
  ``stepwise_matmul`` checks at run time (``s2sad/runtime/steps.py``).
"""

from __future__ import annotations

import ast
import copy

from s2sad.transforms.astutil import anno, walk

#: methods that change a list, dict or set in place
CONTAINER_MUTATORS = frozenset(
    [
        "append",
        "extend",
        "insert",
        "remove",
        "pop",
        "popitem",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
        "reverse",
        "sort",
        "__setitem__",
        "__delitem__",
    ]
)


def invariant_reads(loop: ast.For, fn: ast.FunctionDef, counts: dict) -> list:
    """Take the loop-invariant item and attribute reads out of ``loop``'s body
    (in their order) and return them; ``counts``: the function's store counts."""
    t = loop.target.id
    stored = _stores(loop)
    fresh = _fresh_containers(fn, counts)
    receivers = _mutated_receivers(loop)
    if receivers is None or not receivers <= fresh:
        return []
    aliased = set()
    if receivers:  # a new list, dict or set changed in the loop: not read from
        aliased = receivers | {
            n.id
            for s in walk(fn)
            if isinstance(s, ast.Assign) and isinstance(s.value, ast.Name)
            for n in [s.value, *s.targets]
            if isinstance(n, ast.Name)
        }
    moved, seen = [], set()
    for stmt in list(loop.body):
        read = _read(stmt)
        if read is not None:
            v, c, key = read
            ok = (
                counts.get(v) == 1
                and v not in seen
                and not stored.get(c)
                and c != t
                and c not in aliased
                and (key is None or not stored.get(key) and key != t)
            )
            if ok:
                loop.body.remove(stmt)
                moved.append(stmt)
                continue
        seen |= {n.id for n in walk(stmt) if isinstance(n, ast.Name)}
    if not loop.body:
        loop.body.append(ast.Pass())
    return moved


def surely_runs(block: list, i: int, rng: str) -> bool:
    """Whether ``rng``, assigned in ``block`` before ``block[i]``, is a ``range``
    of integer literals with at least one step."""
    for s in reversed(block[:i]):
        if any(
            isinstance(n, ast.Name) and n.id == rng and isinstance(n.ctx, ast.Store)
            for n in walk(s)
        ):
            v = getattr(s, "value", None)
            if not (
                isinstance(s, ast.Assign)
                and isinstance(v, ast.Call)
                and isinstance(v.func, ast.Name)
                and v.func.id == "range"
                and not v.keywords
                and all(
                    isinstance(a, ast.Constant) and type(a.value) is int for a in v.args
                )
            ):
                return False
            try:
                return len(range(*[a.value for a in v.args])) > 0
            except (TypeError, ValueError):
                return False
    return False


def _read(stmt):
    """``(v, c, key name or None)`` for ``v = c[key]`` / ``v = c.attr``."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return None
    v, e = stmt.targets[0].id, stmt.value
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):
        return v, e.value.id, None
    if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name):
        k = e.slice
        if isinstance(k, ast.Constant) and isinstance(k.value, (str, int)):
            return v, e.value.id, None
        if isinstance(k, ast.Name):
            return v, e.value.id, k.id
    return None


def _mutated_receivers(loop: ast.For) -> set | None:
    """Names whose container methods change them in the loop; None when a
    mutating method is called on anything but a name."""
    out = set()
    for sub in walk(loop):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in CONTAINER_MUTATORS
        ):
            if not isinstance(sub.func.value, ast.Name):
                return None
            out.add(sub.func.value.id)
    return out


def _fresh_containers(fn: ast.FunctionDef, counts: dict) -> set:
    """Names the function assigns only a new list, dict or set (literals)."""
    fresh, other = set(), set()
    for s in walk(fn):
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            tg = s.targets[0]
            if isinstance(tg, ast.Name):
                new = isinstance(s.value, (ast.List, ast.Dict, ast.Set))
                (fresh if new else other).add(tg.id)
    params = {a.arg for a in walk(fn.args) if isinstance(a, ast.arg)}
    return fresh - other - params


def _stores(node) -> dict:
    counts: dict = {}
    for sub in walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            counts[sub.id] = counts.get(sub.id, 0) + 1
    return counts


# ---------------------------------------------------------------- slice steps


def invariant_read(stmt, t: str, stored: dict):
    """``(a, A, index)`` for ``a = A[index]`` where the array name ``A`` is neither
    stored in the loop nor its variable ``t``; None for any other statement."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Subscript)
        and isinstance(stmt.value.value, ast.Name)
    ):
        return None
    A = stmt.value.value.id
    if stored.get(A, 0) or A == t:
        return None
    return stmt.targets[0].id, A, stmt.value.slice


def slice_step(stmt, loop: ast.For, stored: dict, arrays: set):
    """``(a, A, axis, bounds)`` for ``a = A[:, ..., lo:hi, ..., :]`` in ``loop``'s
    body, ``lo`` and ``hi`` affine in the loop variable; ``bounds``: four
    expressions to evaluate before the loop.  None otherwise."""
    t = loop.target.id
    read = invariant_read(stmt, t, stored) if stmt in loop.body else None
    if read is None:
        return None
    _, A, idx = read
    elts = idx.elts if isinstance(idx, ast.Tuple) else [idx]
    if not isinstance(idx, ast.Tuple) and A not in arrays:
        return None
    cuts = [j for j, e in enumerate(elts) if not _full(e)]
    if len(cuts) != 1 or not isinstance(elts[cuts[0]], ast.Slice):
        return None
    cut = elts[cuts[0]]
    if cut.lower is None or cut.upper is None or cut.step is not None:
        return None
    defs = _defs_before(loop, stmt, stored)
    lo, hi = _affine(cut.lower, t, defs, stored), _affine(cut.upper, t, defs, stored)
    if lo is None or hi is None or not lo[0] or not hi[0]:
        return None
    bounds = tuple(_expr(p) for p in (lo[0], lo[1], hi[0], hi[1]))
    return stmt.targets[0].id, A, cuts[0], bounds


def _full(e) -> bool:
    return (
        isinstance(e, ast.Slice)
        and e.lower is None
        and e.upper is None
        and e.step is None
    )


def _defs_before(loop: ast.For, stmt, stored: dict) -> dict:
    defs = {}
    for s in loop.body:
        if s is stmt:
            break
        if (
            isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and stored.get(s.targets[0].id) == 1
        ):
            defs[s.targets[0].id] = s.value
    return defs


# an affine form is (coefficient of t, constant), each a polynomial in
# loop-invariant atoms: {tuple of atom keys: int factor}, atoms kept in the key
# as (ast.dump, node) pairs


def _affine(e, t: str, defs: dict, stored: dict, depth: int = 0):
    if depth > 20:
        return None
    if isinstance(e, ast.Constant) and type(e.value) is int:
        return {}, ({(): e.value} if e.value else {})
    if isinstance(e, ast.Name):
        if e.id == t:
            return {(): 1}, {}
        if e.id in defs:
            return _affine(defs[e.id], t, defs, stored, depth + 1)
        if stored.get(e.id):
            return None
        return {}, {(_atom(e),): 1}
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):
        if stored.get(e.value.id) or e.value.id == t or e.value.id in defs:
            return None
        return {}, {(_atom(e),): 1}
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        f = _affine(e.operand, t, defs, stored, depth + 1)
        return None if f is None else (_scale(f[0], {(): -1}), _scale(f[1], {(): -1}))
    if not isinstance(e, ast.BinOp):
        return None
    left = _affine(e.left, t, defs, stored, depth + 1)
    right = _affine(e.right, t, defs, stored, depth + 1)
    if left is None or right is None:
        return None
    if isinstance(e.op, (ast.Add, ast.Sub)):
        sign = 1 if isinstance(e.op, ast.Add) else -1
        neg = {(): sign}
        return (
            _add(left[0], _scale(right[0], neg)),
            _add(left[1], _scale(right[1], neg)),
        )
    if isinstance(e.op, ast.Mult):
        if not left[0]:
            return _scale(right[0], left[1]), _scale(right[1], left[1])
        if not right[0]:
            return _scale(left[0], right[1]), _scale(left[1], right[1])
    return None


def _atom(e) -> tuple:
    return (ast.dump(e), e)


def _add(p: dict, q: dict) -> dict:
    out = dict(p)
    for k, v in q.items():
        out[k] = out.get(k, 0) + v
        if not out[k]:
            del out[k]
    return out


def _scale(p: dict, q: dict) -> dict:
    out: dict = {}
    for k1, v1 in p.items():
        for k2, v2 in q.items():
            key = tuple(sorted(k1 + k2, key=lambda a: a[0]))
            out = _add(out, {key: v1 * v2})
    return out


def _expr(p: dict) -> ast.expr:
    """The polynomial as an expression (integer factors first, atoms after)."""
    terms = []
    for key, factor in sorted(p.items(), key=lambda kv: [a[0] for a in kv[0]]):
        atoms = [copy.deepcopy(a[1]) for a in key]
        term = None
        if factor != 1 or not atoms:
            term = ast.Constant(factor)
        for a in atoms:
            term = a if term is None else ast.BinOp(term, ast.Mult(), a)
        terms.append(term)
    if not terms:
        return ast.Constant(0)
    out = terms[0]
    for term in terms[1:]:
        out = ast.BinOp(out, ast.Add(), term)
    return out


def one_step_loop(loop: ast.For, namer, rng_name: str, body: list) -> list:
    """``r_once = r[:1]`` and ``for t in r_once: body`` (``loop``'s target)."""
    once = namer.fresh(f"{rng_name}_once")
    head = ast.Assign(
        targets=[ast.Name(id=once, ctx=ast.Store())],
        value=ast.Subscript(
            value=ast.Name(id=rng_name, ctx=ast.Load()),
            slice=ast.Slice(upper=ast.Constant(1)),
            ctx=ast.Load(),
        ),
    )
    ast.copy_location(head, loop)
    anno(head).update({k: v for k, v in anno(loop).items() if k == "origin"})
    guard = ast.For(
        target=ast.Name(id=namer.fresh(f"{loop.target.id}_once"), ctx=ast.Store()),
        iter=ast.Name(id=once, ctx=ast.Load()),
        body=body,
        orelse=[],
    )
    ast.copy_location(guard, loop)
    anno(guard).update(anno(loop), range=once)
    return [head, guard]
