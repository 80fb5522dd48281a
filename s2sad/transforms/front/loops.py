"""Loops: every ``for`` becomes a loop over a range object held in a name.

    for row in X:               seq = X ... r = range(len(X))
        s = s + row      ->     for i in r:
                                    row = X[i]
                                    s = s + row

``zip``, ``enumerate``, ``dict.items()`` and other iterables are indexed the same
way. Indexing gives what Python iterates only for sequences and arrays: a dict the
compiler knows to be one (``for k in d``) is read through its keys, a set, a
generator or a dict view through ``list(...)``, and an iterable it cannot prove to
be a sequence (a callee's result, an item of a container) gets
``check_positional(seq, file, line, col)`` in front of the loop, which refuses a
mapping, set or iterator at run time (runtime/iteration.py): never ``d[0], d[1]``.
A mapping is read through ``list(d.keys())`` and ``d[k]`` only where its class
keeps dict's iteration protocol (``plain_mapping``; ``check_mapping`` at run time
where the compiler cannot tell): a subclass overriding ``__iter__`` or ``items``
is refused, never iterated in another order.

``while c:`` recomputes its test at the end of the body and counts its iterations
(``n_iter``) so the backward sweep can replay them.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator, Mapping, MappingView
from collections.abc import Set as AbstractSet

import numpy as np

from s2sad.runtime.iteration import (
    check_mapping,
    check_positional,
    plain_mapping,
    plain_mapping_class,
)
from s2sad.transforms.astutil import anno, assign, call, const, name, stores, walk
from s2sad.transforms.front.calls import CallInfo


class LoopNormalizer:
    """Loop handling for :class:`normalize.Normalizer` (a mixin: uses its helpers)."""

    def stmt_While(self, s, out, in_loop):
        cond = self.temp("cond", nonsimple=True)
        self.assign_to(name(cond, store=True), s.test, out)
        count = self.temp("n_iter", nonsimple=True)
        out.append(assign(count, const(0)))
        body = [self._increment(count)] + self.block(s.body, True, nested=True)
        self.depth += 1
        retest: list[ast.stmt] = []
        self.assign_to(name(cond, store=True), s.test, retest)
        self.depth -= 1
        if _has_break(body) and (
            len(retest) > 1 or not isinstance(retest[0], ast.Assign)
        ):
            # A test of several statements (``a and b``, a call) runs only when
            # the loop goes on: after a break its statements (and their tape
            # traffic) must not run, or the backward sweep replays statements
            # the last iteration skipped.
            brk = body[-1]
            keep_on = ast.If(test=brk.test, body=[ast.Pass()], orelse=retest)
            body[-1:] = [ast.copy_location(keep_on, brk), brk]
        else:
            body += retest
        loop = ast.While(test=name(cond), body=body, orelse=[])
        anno(loop)["count"] = count
        out.append(loop)

    def _increment(self, count: str) -> ast.stmt:
        inc = ast.AugAssign(
            target=name(count, store=True), op=ast.Add(), value=const(1)
        )
        anno(inc)["counter"] = True
        return inc

    def stmt_For(self, s, out, in_loop):
        rebound = stores(ast.Module(body=s.body, type_ignores=[]))
        rng, prologue_for = self._iteration(s.iter, s.target, out, rebound)
        index = s.target.id if prologue_for is None else self.temp("i", nonsimple=True)
        self.nonsimple.add(index)
        body: list[ast.stmt] = []
        self.depth += 1
        if prologue_for is not None:
            prologue_for(index, body)
        self.depth -= 1
        body += self.block(s.body, True, nested=True)
        loop = ast.For(
            target=name(index, store=True),
            iter=name(rng),
            body=body or [ast.Pass()],
            orelse=[],
        )
        anno(loop)["range"] = rng
        if _has_break(body):
            count = self.temp("n_iter", nonsimple=True)
            out.append(assign(count, const(0)))
            loop.body.insert(0, self._increment(count))
            anno(loop)["count"] = count
        out.append(loop)

    def _iteration(self, it: ast.expr, target: ast.expr, out, rebound=frozenset()):
        """(name of a range object, callback emitting the target assignments or None).

        A sequence the body rebinds (``for e in a: a = a + 1``) is read through a
        name of its own: Python iterates the object ``a`` named when the loop began.
        """
        fn = (
            self.resolve(it.func)
            if isinstance(it, ast.Call) and self.is_static(it.func)
            else None
        )
        if fn is range and isinstance(target, ast.Name):
            rng = self.temp("r")
            out.append(assign(rng, self.value(it, out)))
            return rng, None
        seqs, bind = self._sequences(it, fn, target, out)
        for k, q in enumerate(seqs):
            if isinstance(q, ast.Name) and q.id in rebound:
                held = self.temp(f"iterated_{q.id}")
                out.append(assign(held, name(q.id)))
                q.id = held  # the node bind reads
        length: ast.expr = call("len", seqs[0])
        if len(seqs) > 1:
            length = call("min", *[call("len", q) for q in seqs])
        rng = self.temp("r")
        out.append(
            assign(rng, self.value(call("range", self.atom(length, out, "n")), out))
        )
        return rng, bind

    def _sequences(self, it, fn, target, out):
        """Sequences indexed by the loop counter, and how to bind the target from them."""
        if (
            fn is enumerate
            and isinstance(target, (ast.Tuple, ast.List))
            and len(target.elts) == 2
        ):
            seq = self._indexed(it.args[0], out)
            start = it.args[1] if len(it.args) > 1 else None

            def bind(i, body):
                first = (
                    name(i)
                    if start is None
                    else ast.BinOp(left=name(i), op=ast.Add(), right=start)
                )
                self.assign_to(target.elts[0], first, body)
                self.assign_to(
                    target.elts[1],
                    ast.Subscript(value=seq, slice=name(i), ctx=ast.Load()),
                    body,
                )

            return [seq], bind
        if (
            fn is zip
            and isinstance(target, (ast.Tuple, ast.List))
            and len(target.elts) == len(it.args)
        ):
            seqs = [self._indexed(a, out) for a in it.args]

            def bind(i, body):
                for elt, q in zip(target.elts, seqs):
                    self.assign_to(
                        elt, ast.Subscript(value=q, slice=name(i), ctx=ast.Load()), body
                    )

            return seqs, bind
        dict_view = _dict_view(it, self, out)
        if dict_view is not None:
            if not self._sure_plain(dict_view):  # read by keys: checked at run time
                out.append(self._positional_check(dict_view, it, check_mapping))
            return self._dict_items(dict_view, it.func.attr, target, out)
        if self._kind(it) == "dict":  # ``for k in d``: its keys, not d[0], d[1]...
            d = self.atom(it, out, "seq")
            if not self._sure_plain(it):
                out.append(self._positional_check(d, it, check_mapping))
            return self._dict_items(d, "keys", target, out)
        if isinstance(it, ast.Call):
            it = call("list", it)
        seq = self._indexed(it, out)

        def bind(i, body):
            self.assign_to(
                target, ast.Subscript(value=seq, slice=name(i), ctx=ast.Load()), body
            )

        return [seq], bind

    def _indexed(self, it: ast.expr, out: list[ast.stmt]) -> ast.expr:
        """The atom a loop indexes for ``it``: its keys for a dict, ``list(it)``
        for a set, generator or dict view; checked at run time (``check_positional``)
        where the compiler cannot tell that indexing it gives what Python iterates."""
        kind = self._kind(it)
        if kind in ("dict", "iterator"):
            return self.atom(call("list", it), out, "seq")
        seq = self.atom(it, out, "seq")
        if kind is None:
            out.append(self._positional_check(seq, it))
        return seq

    def _positional_check(
        self, seq: ast.expr, it: ast.expr, check=check_positional
    ) -> ast.stmt:
        """``check_positional(seq, file, line, col)`` (or ``check_mapping``)."""
        p = self.parsed.source.problem(it, "")
        func = name(check.__name__)
        anno(func)["bind"] = (
            check,
            ["module", "s2sad.runtime.iteration", check.__name__],
        )
        fields = (p.filename, p.line, p.col)
        held = copy.deepcopy(seq)  # (_iteration may rename the node the loop reads)
        node = ast.Call(func=func, args=[held, *map(const, fields)], keywords=[])
        anno(node)["call"] = CallInfo("rule", check)
        return ast.Expr(value=node)

    def _kind(self, it: ast.expr, seen: frozenset = frozenset()) -> str | None:
        """What a loop over ``it`` surely gets: ``"seq"`` (iterated as indexed),
        ``"dict"`` (a mapping: its keys), ``"iterator"`` (a set, a generator, a dict
        view: ``list`` of it), or None (not known before it runs).

        Known from the expression (displays, ``list(...)``, ``dict(...)``), from the
        value of an argument the function never rebinds (its type is in the cache
        key; for a path into one, only that it is a dict), or from every binding
        of a local name."""
        if isinstance(it, (ast.List, ast.Tuple)):
            return "seq"
        if isinstance(it, ast.Constant):
            return "seq" if isinstance(it.value, (str, bytes, tuple)) else None
        if isinstance(it, (ast.Dict, ast.DictComp)):
            return "dict"
        if isinstance(it, ast.IfExp):
            kinds = {self._kind(it.body, seen), self._kind(it.orelse, seen)}
            return kinds.pop() if len(kinds) == 1 else None
        if isinstance(it, ast.Call):
            return self._call_kind(it)
        rebound = stores(self.parsed.node)
        if isinstance(it, (ast.Attribute, ast.Subscript)):
            value = _example(it, self.parsed.example_args, rebound)
            # any mapping: read by its keys behind check_mapping (_sure_plain)
            return "dict" if isinstance(value, Mapping) else None
        if not isinstance(it, ast.Name) or it.id in seen:
            return None
        if it.id in self.params:
            if it.id in rebound or it.id not in self.parsed.example_args:
                return None
            return _value_kind(self.parsed.example_args[it.id])
        values = self._assigned_values(it.id)
        if not values:
            return None
        kinds = {self._kind(v, seen | {it.id}) for v in values}
        return kinds.pop() if len(kinds) == 1 else None

    def _sure_plain(self, d: ast.expr, seen: frozenset = frozenset()) -> bool:
        """Whether ``d`` is surely a :func:`plain_mapping` before the code runs: a
        dict display, a plain mapping class called, an argument never rebound
        (its type is in the cache key) or a local every binding of which is
        one; not a path into an argument (only the argument's type is keyed)."""
        if isinstance(d, (ast.Dict, ast.DictComp)):
            return True
        if isinstance(d, ast.Call):
            return self._call_kind(d) == "dict"
        if not isinstance(d, ast.Name) or d.id in seen:
            return False
        if d.id in self.params:
            return self._kind(d) == "dict"
        values = self._assigned_values(d.id)
        return bool(values) and all(self._sure_plain(v, seen | {d.id}) for v in values)

    def _assigned_values(self, var: str) -> list[ast.expr]:
        """The values a local is assigned, when every binding of it is a plain
        assignment (else empty: a loop target, an unpacking, an ``aug``)."""
        values, bindings = [], 0
        for n in walk(self.parsed.node):
            if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == var for t in n.targets
            ):
                values.append(n.value)
            elif (
                isinstance(n, ast.Name) and n.id == var and isinstance(n.ctx, ast.Store)
            ):
                bindings += 1
        return values if values and len(values) == bindings else []

    def _call_kind(self, it: ast.Call) -> str | None:
        if (
            isinstance(it.func, ast.Attribute)
            and it.func.attr in ("keys", "values", "items")
            and not it.args
            and not it.keywords
        ):
            return "iterator"  # a view: ``list`` of it is what Python iterates
        fn = self.resolve(it.func) if self.is_static(it.func) else None
        if any(fn is f for f in (list, tuple, sorted, range, str)):
            return "seq"
        if isinstance(fn, type) and issubclass(fn, Mapping):
            return "dict" if plain_mapping_class(fn) else None
        if any(fn is f for f in (set, frozenset, iter, reversed, map, filter, zip)):
            return "iterator"
        return None

    def _dict_items(self, d, kind, target, out):
        """``for k, v in d.items()`` -> loop over ``list(d.keys())`` reading ``d[k]``."""
        keys = self.temp("keys")
        keys_call = ast.Call(
            func=ast.Attribute(value=d, attr="keys", ctx=ast.Load()),
            args=[],
            keywords=[],
        )
        out.append(assign(keys, self.value(call("list", keys_call), out)))

        def bind(i, body):
            key = self.temp("key", nonsimple=True)
            body.append(
                assign(
                    key, ast.Subscript(value=name(keys), slice=name(i), ctx=ast.Load())
                )
            )
            item = ast.Subscript(value=d, slice=name(key), ctx=ast.Load())
            if kind == "items":
                self.assign_to(target.elts[0], name(key), body)
                self.assign_to(target.elts[1], item, body)
            elif kind == "values":
                self.assign_to(target, item, body)
            else:
                self.assign_to(target, name(key), body)

        return [name(keys)], bind


def _dict_view(it: ast.expr, norm: LoopNormalizer, out: list) -> ast.expr | None:
    """The dict of ``d.items()`` / ``d.values()`` / ``d.keys()``, else None: ``d``
    a local, or an expression (``make_table(x).items()``), whose value is then
    held in a name of its own, bound before the loop (where Python evaluates
    it).  Either is read by its keys behind ``check_mapping``, as a local is."""
    if not (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Attribute)
        and not it.args
        and not it.keywords
        and it.func.attr in ("items", "values", "keys")
    ):
        return None
    d = it.func.value
    if isinstance(d, ast.Name):
        return d if d.id in norm.locals else None
    if isinstance(d, ast.Call):
        return norm.atom(d, out, "table")
    return None


def _value_kind(value) -> str | None:
    """:meth:`LoopNormalizer._kind` of an argument's value."""
    if type(value) in (list, tuple, str, bytes, range) or isinstance(value, np.ndarray):
        return "seq"
    if isinstance(value, Mapping):  # read by keys: only where that is iteration
        return "dict" if plain_mapping(value) else None
    if isinstance(value, (AbstractSet, MappingView, Iterator)):
        return "iterator"
    return None


def _example(it: ast.expr, examples: dict, rebound: set):
    """The value of ``p["layers"].w[0]`` for ``p`` an argument the compiler was
    given and the function never rebinds (constant items and attributes only);
    None otherwise."""
    steps = []
    while isinstance(it, (ast.Attribute, ast.Subscript)):
        if isinstance(it, ast.Attribute):
            steps.append((getattr, it.attr))
        elif isinstance(it.slice, ast.Constant) and type(it.slice.value) in (int, str):
            steps.append((lambda v, k: v[k], it.slice.value))
        else:
            return None
        it = it.value
    if not isinstance(it, ast.Name) or it.id not in examples or it.id in rebound:
        return None
    value = examples[it.id]
    for get, key in reversed(steps):
        try:
            value = get(value, key)
        except (AttributeError, LookupError, TypeError):
            return None
    return value


def _has_break(body: list[ast.stmt]) -> bool:
    return (
        bool(body)
        and isinstance(body[-1], ast.If)
        and isinstance(body[-1].body[0], ast.Break)
    )
