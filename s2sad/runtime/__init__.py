"""Everything generated gradient code needs at run time.

This package imports only NumPy and the standard library; it never imports the
compiler side of s2sad.  Rule modules (one per op family) register their rules
in :mod:`s2sad.runtime.registry` when imported; :func:`load_builtin_rules`
imports all of them.
"""

from __future__ import annotations

import importlib
import pkgutil

_NOT_RULE_MODULES = {"registry", "support"}


def load_builtin_rules() -> None:
    """Import every rule module of this package (sorted, so registration is deterministic)."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__))
    for name in names:
        if name not in _NOT_RULE_MODULES and not name.startswith("_"):
            importlib.import_module(f"{__name__}.{name}")
