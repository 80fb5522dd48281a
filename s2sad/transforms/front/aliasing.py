"""Aliasing: reject reads of a view after its base array was changed in place.

Gradients flow through names, so when ``z`` shares memory with ``y`` and ``y``
is modified in place, the change reaches ``z``'s later readers without a name
connecting them, and the gradient would silently miss that path::

    y = np.zeros(3)
    z = y[0:2]          # a view of y
    y[0] = x[0]         # also changes z          ->  AliasingError at the read of z
    return np.sum(z * x[:2])                         hint: z = y[0:2].copy()

The check is flow-sensitive (a view re-created before it is read is fine, as in
``for t: h = H[t]; ...; H[t + 1] = ...``) and runs only for bases that carry
gradient.  Scalars cannot alias: a name bound to a full integer index of an
argument of known rank (``s = b[1, 0]`` with ``b`` 2-d), to ``float(...)`` or
``int(...)``, or to arithmetic on scalars, holds an immutable value, and
``s *= t`` on it rebinds (``b[1]`` is a view, and still watched).  So do
full reductions (``np.mean(x)``, ``x.sum()``), ``math`` functions, ufuncs of
scalars, ``np.clip`` of scalars, scalar arguments (from the call's example
arguments, or a callee's ``scalar_params``), the scalar elements of a tuple
(``t = (a, s)``; ``v = t[1]``), the scalar items of a dict display that is
only ever read by constant keys after (``d = {"b": np.tanh(s)}``; ``v = d["b"]``)
and of a list changed only by appends and item stores (``lst = [s]``; ``t = lst[0]``).  Loops iterate to a fixpoint of these facts.  Each call of a
user function is marked with which arguments are scalars at every visit
(``scalar_args``), for the callee's in-place check.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from s2sad.errors import AliasingError
from s2sad.transforms.astutil import anno, walk
from s2sad.transforms.front import fresh, ranks, returns
from s2sad.transforms.front.activity import Activity, is_append
from s2sad.transforms.front.aliasing_facts import (
    containers,
    frozen_dicts,
    int_constant,
    plain_lists,
)
from s2sad.transforms.front.returns import view_sources  # noqa: F401 (setitems)


class _State:
    def __init__(self):
        # y -> names that see an in-place change of y's memory
        self.observers: dict[str, set[str]] = {}
        self.stale: dict[str, int] = {}  # name -> line of the change it missed
        self.scalars: set[str] = set()  # names holding immutable scalars
        self.elements: dict[str, tuple[bool, ...]] = {}  # tuple -> scalar elements
        # a user function's tuple result -> the names each element may share
        self.results: dict[str, tuple] = {}
        self.ranks: dict[str, int] = {}  # name -> number of dimensions (ranks.py)
        self.keyed: dict[str, dict] = {}  # a dict never changed -> scalar items
        # a list changed only by append and item stores -> (which of the items
        # it was made with are scalars, whether all appended ones are)
        self.listed: dict[str, tuple] = {}

    def copy(self) -> _State:
        s = _State()
        s.observers = {k: set(v) for k, v in self.observers.items()}
        s.stale = dict(self.stale)
        s.scalars = set(self.scalars)
        s.elements = dict(self.elements)
        s.results = dict(self.results)
        s.ranks = dict(self.ranks)
        s.keyed = dict(self.keyed)
        s.listed = dict(self.listed)
        return s

    def key(self) -> tuple:
        """What a loop's fixpoint compares."""
        return (
            frozenset((k, frozenset(v)) for k, v in self.observers.items()),
            frozenset(self.stale),
            frozenset(self.scalars),
            frozenset(self.elements.items()),
            frozenset(self.results),
            frozenset(self.ranks.items()),
            frozenset((k, frozenset(v.items())) for k, v in self.keyed.items()),
            frozenset(self.listed.items()),
        )

    def merge(self, other: _State) -> None:
        for k, v in other.observers.items():
            self.observers.setdefault(k, set()).update(v)
        self.stale.update(other.stale)
        self.scalars &= other.scalars  # a scalar on every path only
        self.ranks = {k: v for k, v in self.ranks.items() if other.ranks.get(k) == v}
        self.keyed = {k: v for k, v in self.keyed.items() if other.keyed.get(k) == v}
        mine, self.listed = self.listed, {}
        for k, (flags, rest) in mine.items():
            other_flags, other_rest = other.listed.get(k, ((), False))
            if len(other_flags) == len(flags) and k in other.listed:
                both = tuple(a and b for a, b in zip(flags, other_flags))
                self.listed[k] = (both, rest and other_rest)
        mine, self.results = self.results, {}
        for k in set(mine) | set(other.results):
            if mine.get(k) == other.results.get(k):
                self.results[k] = mine[k]
                continue
            # a tuple result on one path only: linked both ways, as before
            for base in {b for p in mine.get(k, other.results.get(k)) for b in p}:
                self.observe(k, base)
                self.observe(base, k)
        mine, self.elements = self.elements, {}
        for k, v in mine.items():
            w = other.elements.get(k)
            if w is not None and len(w) == len(v):
                self.elements[k] = tuple(a and b for a, b in zip(v, w))

    def observe(self, watcher: str, watched: str) -> None:
        """``watcher`` sees in-place changes of ``watched`` (and of what it sees)."""
        if watcher == watched:
            return
        self.observers.setdefault(watched, set()).add(watcher)
        for upstream, obs in list(self.observers.items()):
            if watched in obs and upstream != watcher:
                obs.add(watcher)


SCALARS = (float, int, complex, np.generic)


def run(
    node: ast.FunctionDef,
    act: Activity,
    source,
    examples: dict[str, Any] | None = None,
    scalar_params: set[str] | frozenset = frozenset(),
    local_functions: dict[str, Any] | None = None,
    env: dict | None = None,
) -> None:
    """``examples``: the call's arguments by parameter (their ranks and scalars);
    ``scalar_params``: parameters every call site passes an immutable scalar;
    ``local_functions`` (name -> ``LocalFunction``) and ``env`` (the function's
    globals): what a call's result may share (``front/returns.py``)."""
    examples = examples or {}
    state = _State()
    # names bound otherwise than by 'name = value' (for targets...): no rank
    single = {
        id(s.targets[0])
        for s in walk(node)
        if isinstance(s, ast.Assign) and len(s.targets) == 1
    }
    untrusted = {
        n.id
        for n in walk(node)
        if isinstance(n, ast.Name)
        and not isinstance(n.ctx, ast.Load)
        and id(n) not in single
    }
    for p in [a.arg for a in node.args.args]:
        v = examples.get(p)
        if isinstance(v, SCALARS) or p in scalar_params:
            state.scalars.add(p)  # facts at entry: the flow keeps them up to date
        elif isinstance(v, tuple):
            state.elements[p] = tuple(isinstance(e, SCALARS) for e in v)
        elif isinstance(v, np.ndarray) and p not in untrusted:
            state.ranks[p] = v.ndim  # the flow keeps it up to date
    checker = _Checker(act, source, containers(node), untrusted)
    checker.local_functions = local_functions or {}
    checker.fresh = fresh.fresh_temps(node)
    checker.env = env or {}
    # r = range(n) (normalized loops), bound once
    counts: dict[str, int] = {}
    for n in walk(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            counts[n.id] = counts.get(n.id, 0) + 1
    checker.ranges = {
        s.targets[0].id: s.value
        for s in walk(node)
        if isinstance(s, ast.Assign)
        and isinstance(s.targets[0], ast.Name)
        and counts.get(s.targets[0].id) == 1
        and isinstance(s.value, ast.Call)
    }
    checker.frozen, checker.plain = frozen_dicts(node), plain_lists(node)
    checker.block(node.body, state)
    if checker.problems:
        raise AliasingError(checker.problems)


class _Checker:
    def __init__(
        self, act: Activity, source, containers: set[str], untrusted: set[str]
    ):
        self.untrusted = untrusted  # names whose number of dimensions is not tracked
        self.act = act
        self.source = source
        self.containers = containers
        self.problems = []
        self.reported: set[tuple] = set()

    def block(self, stmts, state: _State) -> _State:
        for s in stmts:
            state = self.stmt(s, state)
        return state

    def stmt(self, s: ast.stmt, state: _State) -> _State:
        if isinstance(s, ast.If):
            self.reads(s.test, state)
            a = self.block(s.body, state.copy())
            b = self.block(s.orelse, state.copy())
            a.merge(b)
            return a
        if isinstance(s, (ast.For, ast.While)):
            # the state at the top of the body: the entry merged with every
            # iteration's end, up to a fixpoint (facts only grow: observers,
            # stale names; or shrink: scalars)
            head = state.copy()
            for _ in range(100):
                self.counter(s, head)
                end = self.block(s.body, head.copy())
                nxt = head.copy()
                nxt.merge(end)
                if nxt.key() == head.key():
                    break
                head = nxt
            return head
        if anno(s).get("write_back") and isinstance(s, ast.Assign):
            # a[i][j] = v lowered (front/setitems.py): the change of a[i] made on
            # this line reaches a by name here, so a is not stale for it
            t = s.targets[0]
            outer = t.value.id if isinstance(t, ast.Subscript) else t.id
            if state.stale.get(outer) == s.lineno:
                del state.stale[outer]
        self.reads(s, state)
        self.mark_calls(s, state)
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
            if anno(s).get(
                "augassign"
            ):  # x += ...: in place for arrays, seen by aliases
                v = s.value  # after SSA the target may be x_1; the changed object is x
                changed = (
                    v.left.id
                    if isinstance(v, ast.BinOp) and isinstance(v.left, ast.Name)
                    else s.targets[0].id
                )
                if changed not in state.scalars and not anno(s).get("rebinds"):
                    self.mutate(changed, s, state, always=True)
            self.define(s.targets[0].id, s.value, state)
        elif isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Subscript):
            base = s.targets[0].value.id
            if base in state.listed:
                self.store_item(base, s.targets[0].slice, s.value, state)
            self.mutate(base, s, state)
            if isinstance(s.value, ast.Name) and base in self.containers:
                state.observe(base, s.value.id)
        elif is_append(s):
            lst = s.value.func.value.id
            if lst in state.listed:
                flags, rest = state.listed[lst]
                state.listed[lst] = (
                    flags,
                    rest and self.scalar(s.value.args[0], state),
                )
            self.mutate(lst, s, state)
            if isinstance(s.value.args[0], ast.Name):
                state.observe(lst, s.value.args[0].id)
        return state

    def store_item(self, lst: str, index, value, state: _State) -> None:
        """``lst[index] = value`` on a list whose scalar items are tracked."""
        flags, rest = state.listed[lst]
        k, scalar = int_constant(index), self.scalar(value, state)
        if k is not None and 0 <= k < len(flags):
            state.listed[lst] = (flags[:k] + (scalar,) + flags[k + 1 :], rest)
        elif not scalar:
            state.listed[lst] = ((False,) * len(flags), False)

    def counter(self, s: ast.stmt, state: _State) -> None:
        """``for i in range(...)``: ``i`` holds an int in the body."""
        if not isinstance(s, ast.For) or not isinstance(s.target, ast.Name):
            return
        it = s.iter
        if isinstance(it, ast.Name):
            it = self.ranges.get(it.id)
        if (
            isinstance(it, ast.Call)
            and getattr(anno(it).get("call"), "target", None) is range
        ):
            state.scalars.add(s.target.id)
            state.ranks[s.target.id] = 0

    def reads(self, s: ast.AST, state: _State) -> None:
        # t[k] reads only the element: a scalar one cannot have been changed
        scalar_items = {
            id(n.value)
            for n in walk(s)
            if isinstance(n, ast.Subscript)
            and isinstance(n.value, ast.Name)
            and n.value.id in state.elements
            and self.scalar(n, state)
        }
        for n in walk(s):
            if (
                isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Load)
                and n.id in state.stale
                and id(n) not in scalar_items
            ):
                key = (n.id, state.stale[n.id])
                if key not in self.reported:
                    self.reported.add(key)
                    self.problems.append(
                        self.source.problem(
                            n,
                            f"'{n.id}' shares memory with an array that was modified in place "
                            f"at line {state.stale[n.id]}, so its gradient would be wrong",
                            f"take a copy where '{n.id}' is created (e.g. '.copy()'), or modify "
                            "a copy of the array",
                        )
                    )

    def mark_calls(self, s: ast.stmt, state: _State) -> None:
        """Mark calls of user functions with their scalar arguments (``scalar_args``):
        per argument ``True`` (an immutable scalar), ``"fresh"`` (a new array
        that nothing else holds or reads again: see :func:`fresh.fresh_temps`;
        the callee may change it in place) or ``False``.

        A statement may be visited more than once (branches, loop iterations):
        an argument counts as a scalar only if it is one at every visit.
        """
        for n in walk(s):
            if not isinstance(n, ast.Call):
                continue
            info = anno(n).get("call")
            if getattr(info, "kind", "") not in ("user", "local"):
                continue
            new = self.fresh.get(id(s), ())
            # "fresh" only where the callee changes it: other calls share its job
            changed = fresh.changed_params(info, self.local_functions) if new else ()
            now = tuple(
                self.scalar(a, state)
                or (
                    isinstance(a, ast.Name) and a.id in new and i in changed and "fresh"
                )
                for i, a in enumerate(n.args)
            )
            before = anno(n).get("scalar_args")
            if before is not None and len(before) == len(now):
                now = tuple(_meet(a, b) for a, b in zip(before, now))
            anno(n)["scalar_args"] = now

    def define(self, z: str, value: ast.expr, state: _State) -> None:
        scalar = self.scalar(value, state)  # both before z changes
        r = None if z in self.untrusted else self.rank(value, state)
        if r is None:
            state.ranks.pop(z, None)
        else:
            state.ranks[z] = r
        state.elements.pop(z, None)
        state.results.pop(z, None)
        state.keyed.pop(z, None)
        state.listed.pop(z, None)
        if isinstance(value, ast.List) and z in self.plain:
            state.listed[z] = (tuple(self.scalar(e, state) for e in value.elts), True)
        if isinstance(value, ast.Dict) and z in self.frozen:  # its items as made
            items = zip(value.keys, value.values)
            state.keyed[z] = {k.value: self.scalar(v, state) for k, v in items}
        state.stale.pop(z, None)
        for obs in state.observers.values():
            obs.discard(z)
        state.observers.pop(z, None)
        if scalar:
            state.scalars.add(z)  # immutable: shares nothing
            return
        state.scalars.discard(z)
        if isinstance(value, ast.Tuple):  # immutable: its scalar elements stay so
            state.elements[z] = tuple(self.scalar(e, state) for e in value.elts)
            # ... and t[k] is the k-th element (any(Starred) leaves it unknown)
            if not any(isinstance(e, ast.Starred) for e in value.elts):
                state.results[z] = [
                    [e.id] if isinstance(e, ast.Name) else [] for e in value.elts
                ]
        if isinstance(value, (ast.List, ast.Tuple, ast.Dict)):
            elts = value.values if isinstance(value, ast.Dict) else value.elts
            for e in elts:
                if isinstance(e, ast.Name):
                    state.observe(z, e.id)  # the container sees changes of its elements
            return
        bases, parts = returns.sources(value, self.local_functions, self.env)
        if parts is not None:  # r = f(a, b) giving a tuple: r holds its elements
            state.results[z] = parts
            for base in bases:
                if base not in state.scalars:
                    state.observe(z, base)
            return
        if (
            isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name)
            and value.value.id in state.results
        ):  # an element of such a tuple: shares what that element may share
            r, parts = value.value.id, state.results[value.value.id]
            k = int_constant(value.slice)
            inside = -len(parts) <= k < len(parts) if k is not None else False
            bases = parts[k] if inside else sorted({b for p in parts for b in p})
            state.observe(r, z)
            self.link(z, bases, state)
            return
        self.link(z, bases, state, value)

    def link(self, z: str, bases: list[str], state: _State, value=None) -> None:
        """``z`` shares memory with each of ``bases``."""
        for base in bases:
            if base in state.scalars:
                continue  # immutable: nothing to share
            if (
                value is not None
                and base in self.containers
                and not isinstance(value, ast.Name)
            ):
                state.observe(base, z)  # an element taken out of a container
                # ... is one of the arrays it holds: it shares their memory
                held = [
                    e
                    for e, obs in state.observers.items()
                    if base in obs and e not in (z, base) and e not in state.scalars
                ]
                for e in sorted(held):
                    state.observe(z, e)
                    state.observe(e, z)
            else:
                state.observe(z, base)
                state.observe(base, z)
                # z's memory is base's: whoever sees base's changes sees z's,
                # even after base is re-bound (r = s; s = y[1] next time round)
                seen = state.observers.get(base, set()) - {z}
                state.observers.setdefault(z, set()).update(seen)

    def scalar(self, value: ast.expr, state: _State) -> bool:
        """Whether ``value`` is an immutable scalar (a NumPy scalar or a Python number)."""
        if isinstance(value, ast.Constant):
            return isinstance(value.value, (int, float, complex))
        if isinstance(value, ast.Name):
            return value.id in state.scalars
        if isinstance(value, ast.UnaryOp) and self.scalar(value.operand, state):
            return True
        if isinstance(value, ast.BinOp) and all(
            self.scalar(e, state) for e in (value.left, value.right)
        ):
            return True
        if isinstance(value, ast.Call) and ranks.scalar_call(
            value, lambda e: self.scalar(e, state)
        ):
            return True
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            listed = state.listed.get(value.value.id)
            if listed is not None and self._int(value.slice, state):
                (flags, rest), k = listed, int_constant(value.slice)
                return (
                    flags[k]
                    if k is not None and 0 <= k < len(flags)
                    else (all(flags) and rest)
                )
            keyed = state.keyed.get(value.value.id)
            if keyed is not None and isinstance(value.slice, ast.Constant):
                return keyed.get(value.slice.value, False)
            elements = state.elements.get(value.value.id)
            k = int_constant(value.slice)
            if elements is not None and k is not None:
                return -len(elements) <= k < len(elements) and elements[k]
        return self.rank(value, state) == 0 and ranks.scalar_result(value)

    def rank(self, value: ast.expr, state: _State) -> int | None:
        return ranks.rank(value, state.ranks, lambda i: self._int(i, state))

    def _int(self, index: ast.expr, state: _State) -> bool:
        """An integer index (a constant, or a scalar name: a float would raise)."""
        if isinstance(index, ast.Constant):
            return type(index.value) is int
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
            return self._int(index.operand, state)
        return isinstance(index, ast.Name) and index.id in state.scalars

    def mutate(self, y: str, s: ast.stmt, state: _State, always: bool = False) -> None:
        if y not in self.act.active and not always:
            return
        # whoever sees a change of a name that sees y's change sees it too
        # (r = s; s = y[1]; r *= t changes y)
        seen, todo = {y}, [y]
        while todo:
            for other in state.observers.get(todo.pop(), set()):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
                    state.stale[other] = s.lineno


def _meet(a, b):
    """What an argument is at every visit: a scalar and a fresh array: fresh."""
    if a is False or b is False:
        return False
    return a if a == b else "fresh"
