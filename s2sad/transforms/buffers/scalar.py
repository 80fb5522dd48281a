"""Scalar code: one-argument NumPy math calls go through ``scalar`` instead.

For a call whose arguments hold no array at all (``module.options.buffers ==
"scalar"``, decided in s2sad/options.py), the top-level gradient function's
``np.<f>(x)`` calls become ``scalar.<f>(x)`` (s2sad/runtime/scalar.py: ``math``
on Python floats, NumPy otherwise)::

    def f_value_and_grad(x, g_out=1.0):       def f_value_and_grad(x, g_out=1.0):
        s = np.sin(x)                   ->        s = scalar.sin(x)
        g_x = g_out * np.cos(x)                   g_x = g_out * scalar.cos(x)

Left alone when the function re-binds NumPy's name or already uses ``scalar``.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from s2sad.options import SCALAR
from s2sad.transforms.astutil import name


def run(job: Any, module: Any) -> None:
    """The pipeline's ``scalar`` pass (the top-level function only)."""
    if job.top and module.options.buffers == SCALAR:
        rewrite(job.functions[0], module)


def rewrite(fn: ast.FunctionDef, module: Any) -> None:
    """``np.sin(x)`` -> ``scalar.sin(x)`` in ``fn``, in place."""
    from s2sad.runtime import scalar

    npname = next((a for a, v in module.bindings.items() if v is np), None)
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    names |= {a.arg for a in fn.args.args}
    local = {
        n.id
        for n in ast.walk(fn)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    if npname is None or npname in local or "scalar" in names:
        return
    calls = [c for c in ast.walk(fn) if _math_call(c, npname, scalar.MATH_NAMES)]
    if not calls:
        return
    alias = module.bind("scalar", scalar, ["module", "s2sad.runtime", "scalar"])
    for c in calls:
        c.func.value = name(alias)


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
