"""Everything generated gradient code needs at run time, and nothing else.

This package imports only NumPy and the standard library; it never imports the
compiler side of s2sad (nor ``ast``).  Rule modules (one per op family) hold the
adjoint and tangent (forward-mode) rules of their primals and register them in
:mod:`s2sad.runtime.registry` and :mod:`s2sad.runtime.tangents` when imported;
:func:`load_builtin_rules` imports all of them.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

#: the rule modules, in the order they are loaded (a fixed list, not a scan of
#: the package, so that registration order never depends on which files exist)
RULE_MODULES = (
    "activations",
    "contractions",
    "einsums",
    "elementwise",
    "fused",
    "indexing",
    "iteration",
    "joining",
    "linalg",
    "losses",
    "masked",
    "nn",
    "objects",
    "placing",
    "pyfuncs",
    "quantiles",
    "sequences",
    "reductions",
    "shapes",
    "solvers",
    "statistics",
    "steps",
    "stepreads",
    "stepstacks",
)

#: rule modules for optional libraries: (module, the library it needs), loaded
#: after :data:`RULE_MODULES` and only when that library can be imported
OPTIONAL_RULE_MODULES = (
    ("scipy_special", "scipy"),
    ("scipy_stats", "scipy"),
    ("scipy_linalg", "scipy"),
)


_OPTIONAL_LOADED: set[str] = set()


def available_optional_modules() -> tuple[str, ...]:
    """The names of :data:`OPTIONAL_RULE_MODULES` whose library is installed."""
    return tuple(
        name for name, lib in OPTIONAL_RULE_MODULES if importlib.util.find_spec(lib)
    )


def load_builtin_rules() -> None:
    """Import every rule module of :data:`RULE_MODULES` (they register on import)."""
    for name in RULE_MODULES:
        importlib.import_module(f"{__name__}.{name}")
    load_optional_rules()


def load_optional_rules(force: bool = False) -> bool:
    """Import the optional rule modules whose library has been imported.

    A program that calls SciPy has imported it before asking for a gradient, so
    SciPy's rules load then, and programs without SciPy never pay for importing
    it.  ``force`` imports every optional module whose library is installed.
    Returns whether a module was loaded.
    """
    loaded = False
    for name, lib in OPTIONAL_RULE_MODULES:
        if name in _OPTIONAL_LOADED or not (force or lib in sys.modules):
            continue
        if force and importlib.util.find_spec(lib) is None:
            continue
        _OPTIONAL_LOADED.add(name)
        importlib.import_module(f"{__name__}.{name}")
        loaded = True
    return loaded
