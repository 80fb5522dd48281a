"""Per-function state of the reverse pass: names, problems, and the tape.

A name the function re-assigns keeps its old value before the new one is
stored, so the backward sweep can restore it: on the tape in loops, in a
named variable in code that runs once::

    h = np.tanh(h)      ->   tape.append(h)       (in a loop)
                             h_old = h            (once)
                             h = np.tanh(h)

Save and restore statements are annotated (``save``/``restore`` with the
save's id), which is how later passes recognise them without reading text.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from s2sad.errors import Problem
from s2sad.transforms.astutil import Namer, anno, assign, call, name
from s2sad.transforms.front import parse


def _tape_call(method: str, *args: ast.expr) -> ast.Call:
    func = ast.Attribute(value=name("tape"), attr=method, ctx=ast.Load())
    node = ast.Call(func=func, args=list(args), keywords=[])
    anno(node)["tape"] = method  # "append" (push) or "pop"
    return node


@dataclass
class FunctionCompiler:
    """Per-function compile state shared by the reverse and control passes."""

    module: Any  # the ModuleBuilder
    parsed: parse.ParsedFunction
    namer: Namer
    reassigned: set[str]
    locals: set[str]
    #: local functions the body may call (its own and its enclosing function's)
    module_locals: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    uses_tape: bool = False
    save_count: int = 0
    save_slots: dict[int, str | None] = field(default_factory=dict)
    #: names some save statement keeps (set by the cleanup pass: after it drops saves)
    saved_names: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.reassigned = set(self.reassigned)
        self.locals = set(self.locals)

    def request(self, info, pattern: tuple, scalars=(), in_loop=True, call=None):
        """The job of a called user function (see ModuleBuilder.request)."""
        return self.module.request(
            info,
            pattern,
            self.parsed,
            self.module_locals,
            scalars=scalars,
            in_loop=in_loop,
            call=call,
        )

    def save(self, x: str, fwd: list[ast.stmt], in_loop: bool) -> int:
        """Keep ``x``'s old value before it is re-assigned; the save's id (0: no save).

        In a loop the value goes on the tape; code that runs once keeps it in a
        named variable (``x_old``) instead.
        """
        if x not in self.reassigned:
            return 0
        self.save_count += 1
        if in_loop:
            node: ast.stmt = ast.Expr(value=_tape_call("append", name(x)))
            self.uses_tape = True
            self.save_slots[self.save_count] = None
        else:
            slot = self.namer.fresh(f"{x}_old")
            self.locals.add(slot)
            self.reassigned.add(slot)  # bound on some paths only
            node = assign(slot, name(x))
            self.save_slots[self.save_count] = slot
        anno(node)["save"] = x
        anno(node)["save_id"] = self.save_count
        fwd.append(node)
        return self.save_count

    def restore(self, x: str, save_id: int) -> ast.stmt:
        """``x = tape.pop()`` (or ``x = x_old``), paired with the save ``save_id``."""
        slot = self.save_slots[save_id]
        node = assign(x, name(slot) if slot else _tape_call("pop"))
        anno(node)["restore"] = x
        anno(node)["save_id"] = save_id
        return node

    def save_item(
        self, y: str, idx: ast.expr, fwd: list[ast.stmt], in_loop: bool
    ) -> Callable[[], ast.expr]:
        """Keep ``y[idx]`` before an item assignment; returns how to read it back."""
        old_value = call(self.module.helper("copy_item"), name(y), idx)
        if in_loop:
            fwd.append(ast.Expr(value=_tape_call("append", old_value)))
            self.uses_tape = True
            return lambda: _tape_call("pop")
        old = self.namer.fresh(f"{y}_old")
        self.locals.add(old)
        self.reassigned.add(old)  # bound on some paths only (a branch not taken)
        fwd.append(assign(old, old_value))
        return lambda: name(old)

    def comment(self, lineno: int) -> ast.stmt:
        return self.module.origin_comment("grad", self.parsed.source, lineno)

    def fail(self, node: ast.AST, message: str, hint: str = "") -> None:
        self.problems.append(self.parsed.source.problem(node, message, hint))
