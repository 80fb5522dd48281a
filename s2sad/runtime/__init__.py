"""Everything generated gradient code needs at run time, and nothing else.

This package imports only NumPy and the standard library; it never imports the
compiler side of s2sad (nor ``ast``).  Rule modules (one per op family) hold the
adjoint and tangent (forward-mode) rules of their primals and register them in
:mod:`s2sad.runtime.registry` and :mod:`s2sad.runtime.tangents` when imported;
:func:`load_builtin_rules` imports all of them.
"""

from __future__ import annotations

import importlib

#: the rule modules, in the order they are loaded (a fixed list, not a scan of
#: the package, so that registration order never depends on which files exist)
RULE_MODULES = (
    "activations",
    "contractions",
    "elementwise",
    "indexing",
    "joining",
    "linalg",
    "masked",
    "nn",
    "pyfuncs",
    "reductions",
    "shapes",
    "statistics",
)


def load_builtin_rules() -> None:
    """Import every rule module of :data:`RULE_MODULES` (they register on import)."""
    for name in RULE_MODULES:
        importlib.import_module(f"{__name__}.{name}")
