"""Whether a module's functions may read an array the caller passed as ``out=``.

A call with ``out=`` arrays lets the sites in ``buffer_results`` write a
gradient straight into the caller's array (runtime/outinto.py), which checks at
run time that the array shares no memory with an argument.  Arrays the function
reaches otherwise (a global ``M``, a closure's cell, an attribute of a global
object, whatever a function it does not compile returns) are out of that check's
sight: a caller passing such an array as ``out=`` would have it written while
the function still reads it.  So the table gives the gradients' places (which
let a site write into ``out=``) only for modules whose functions read nothing
but their parameters, their locals, NumPy and math, the runtime's helpers and
rules and each other; elsewhere each place is None.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

from s2sad.transforms.astutil import anno, walk

#: module names whose attributes are functions and constants, never the caller's arrays
MODULES = frozenset({"np", "math"})


def reads_outside(functions: list) -> bool:
    """True when some function among ``functions`` (a module's statements) reads
    a value from outside its parameters and locals that could be an array."""
    defs = [f for f in functions if isinstance(f, ast.FunctionDef)]
    own = {f.name for f in defs}
    return any(_reads_outside(f, own) for f in defs)


def unplace_results(functions: list) -> None:
    """``<fn>.buffer_results``'s gradient places become None in a module's
    statements: its sites still go without a buffer on plain calls (their fresh
    array is the gradient), but none writes into a caller's ``out=`` array."""
    for st in functions:
        if (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Attribute)
            and st.targets[0].attr == "buffer_results"
            and isinstance(st.value, ast.Dict)
        ):
            st.value.values = [ast.Constant(None) for _ in st.value.values]


def _reads_outside(fn: ast.FunctionDef, own: set) -> bool:
    local = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    local |= {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}
    for node in walk(fn):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            local.add(node.id)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
    exempt: set[int] = set()  # chains called, or compared by identity
    for node in walk(fn):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and not _known_callee(node.func, own):
                return True
            if isinstance(node.func, ast.Attribute):
                if _root(node.func) not in local | MODULES:
                    return True  # a function of another module or object
                exempt.update(_chain(node.func))
        elif isinstance(node, ast.Compare) and all(
            isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops
        ):
            for side in [node.left, *node.comparators]:
                exempt.update(_chain(side))
    for node in walk(fn):
        if (
            isinstance(node, ast.Attribute)
            and id(node) not in exempt
            and _root(node) not in local | MODULES
        ):
            return True
    return False


def _known_callee(func: ast.Name, own: set) -> bool:
    a = anno(func)
    if a.get("helper") is not None or a.get("rule") is not None:
        return True
    return func.id in own or func.id in _BUILTINS


_BUILTINS = frozenset(
    n
    for n in dir(builtins)
    if n not in ("getattr", "vars", "globals", "locals", "eval")
)


def _chain(node: Any) -> list[int]:
    """The ids of the Attribute nodes of ``a.b.c``, outermost first."""
    ids = []
    while isinstance(node, ast.Attribute):
        ids.append(id(node))
        node = node.value
    return ids


def _root(node: Any) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None
