"""Scalar code: one-argument NumPy math calls go to ``math`` instead.

For a call whose arguments hold no array at all (``module.options.buffers ==
"scalar"``, decided in s2sad/options.py), the top-level gradient function's
``np.<f>(x)`` calls become ``math.<f>(x)`` where ``x`` is known to hold a
number (s2sad/transforms/reverse/scalars.py), and ``scalar.<f>(x)`` elsewhere
(s2sad/runtime/scalar.py: ``math`` on Python floats, NumPy otherwise)::

    def f_value_and_grad(x, g_out=1.0):       def f_value_and_grad(x, g_out=1.0):
        s = np.sin(x)                   ->        s = math.sin(x)
        g_x = g_out * np.cos(x)                   g_x = g_out * math.cos(x)

Where ``math`` raises and NumPy gives inf or nan (``log(0.0)``, ``exp(1000.0)``,
``sin(inf)``), ``grad`` runs the same code again on ``np.float64`` arguments
with NumPy's functions in place of ``math``'s (``scalar.with_numpy_math``), so
values, infinities, NaNs and warnings stay NumPy's.

Left alone when the function re-binds NumPy's name or already uses ``scalar``.
"""

from __future__ import annotations

import ast
import math
from typing import Any

import numpy as np

from s2sad.options import SCALAR
from s2sad.transforms.astutil import name, walk


def run(job: Any, module: Any) -> None:
    """The pipeline's ``scalar`` pass (the top-level function only)."""
    if job.top and module.options.buffers == SCALAR:
        numbers = getattr(job.state, "numbers", frozenset())
        rewrite(job.functions[0], module, numbers)


def rewrite(fn: ast.FunctionDef, module: Any, numbers: Any = frozenset()) -> None:
    """``np.sin(x)`` -> ``math.sin(x)`` (``x`` one of ``numbers``) or
    ``scalar.sin(x)`` in ``fn``, in place."""
    from s2sad.runtime import scalar

    npname = next((a for a, v in module.bindings.items() if v is np), None)
    names = {n.id for n in walk(fn) if isinstance(n, ast.Name)}
    names |= {a.arg for a in fn.args.args}
    local = {
        n.id
        for n in walk(fn)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    if npname is None or npname in local or "scalar" in names:
        return
    calls = [c for c in walk(fn) if _math_call(c, npname, scalar.MATH_NAMES)]
    if not calls:
        return
    direct = [c for c in calls if _number(c.args[0], numbers)]
    if direct:
        alias = module.bind("math", math, ["module", "math", "math"])
        for c in direct:
            c.func.value = name(alias)
            c.func.attr = scalar.MATH_NAMES[c.func.attr]
    others = [c for c in calls if c not in direct]
    if others:
        alias = module.bind("scalar", scalar, ["module", "s2sad.runtime", "scalar"])
        for c in others:
            c.func.value = name(alias)


def _number(e: ast.expr, numbers: Any) -> bool:
    """A name holding a number, or a number constant: ``math`` takes it as it is."""
    if isinstance(e, ast.Constant):
        return type(e.value) in (float, int)
    return isinstance(e, ast.Name) and e.id in numbers


def _math_call(c: ast.AST, npname: str, math_names: Any) -> bool:
    """``<np>.<f>(x)`` with one plain argument, ``f`` one of ``math_names``."""
    return (
        isinstance(c, ast.Call)
        and isinstance(c.func, ast.Attribute)
        and isinstance(c.func.value, ast.Name)
        and c.func.value.id == npname
        and c.func.attr in math_names
        and len(c.args) == 1
        and not c.keywords
        and not isinstance(c.args[0], ast.Starred)
    )
