"""The ``guards`` module pass: the entry function first checks the globals the
compiler specialised on (both modes).

``bind`` reads data globals when the code runs (``model.SCALE``) but binds what
decided the code itself once: a callee compiled into a forward/backward pair, a
module whose functions became rules, a class whose methods were inlined.  Each
such name is checked by identity, all in one test at the top of the entry
function::

    def loss_value_and_grad(x, g_out=1.0):
        # compiled for these globals: a rebound one makes s2sad compile again
        if model.np is not np or model.helper is not helper:
            globals_changed("model.np, model.helper")
        ...

``globals_changed`` raises :class:`~s2sad.errors.GlobalsChangedError`, which
``s2sad.grad`` and the other transforms catch to compile (or load) the code for
the current values; a module written by ``s2sad compile`` has no compiler at
hand and says to run it again.
"""

from __future__ import annotations

import ast

from s2sad.transforms.astutil import call, const


def run(module) -> None:
    if not module.guards or not module.functions:
        return
    entry = module.functions[0]
    tests = [
        ast.Compare(
            left=ast.parse(holder, mode="eval").body,
            ops=[ast.IsNot()],
            comparators=[ast.Name(id=alias, ctx=ast.Load())],
        )
        for holder, alias in sorted(module.guards.items())
    ]
    test = tests[0] if len(tests) == 1 else ast.BoolOp(op=ast.Or(), values=tests)
    names = ", ".join(sorted(module.guards))
    fail = ast.Expr(value=call(module.helper("globals_changed"), const(names)))
    guard = ast.If(test=test, body=[fail], orelse=[])
    note = module.comment(
        "compiled for these globals: a rebound one makes s2sad compile again"
    )
    entry.body[0:0] = [note, guard]
