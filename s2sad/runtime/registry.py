"""The rule registry: the one piece of module-level mutable state in s2sad.

A *rule* is a plain Python function ``d_f(g, ans, *args, **kwargs)`` that receives
the cotangent ``g`` of the primal's output ``ans`` and the primal's arguments, and
returns a tuple with one cotangent per positional argument (``None`` where the
argument is not differentiable).  A shorter tuple is padded with ``None``.

    @adjoint(np.tanh)
    def d_tanh(g, ans, x):
        return (g * (1.0 - ans * ans),)

``broadcasts=True`` asks the compiler to undo NumPy broadcasting on every
cotangent (``support.unbroadcast``), so rules for binary ufuncs stay one line.

*Masks*: a rule registered with :func:`masking` (``where``, ``maximum``,
``clip``...) sends exact zeros to the operands it did not select.  A rule whose
derivative factor can be infinite (``sqrt`` at 0) would turn those zeros into
``0 * inf = nan``; its :func:`masked_adjoint` form keeps them zero, and the
compiler uses that form where the cotangent may come from a mask
(``np.where(x > 0, np.sqrt(x), 0.0)`` has gradient 0, not nan, at ``x = 0``).

Rules for array *methods* (``x.sum(axis=1)``) reuse the function rule: the
method table maps a method name to the function whose rule applies with the
receiver as first argument (``method_alias("sum", np.sum)``).
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Rule:
    """A registered adjoint (``adjoint is None`` means: gradient is zero)."""

    primal: Any
    adjoint: Callable | None
    broadcasts: bool = False
    name: str = ""

    @property
    def differentiable(self) -> bool:
        return self.adjoint is not None


_RULES: dict[Any, Rule] = {}
_PARTIAL: dict[tuple[Any, int], Rule] = {}
_MASKED: dict[Any, Rule] = {}  # forms that keep a zero cotangent exactly zero
_MASKING: set[Any] = set()  # primals whose rule sends exact zeros (a mask)
_FINGERPRINT: list[str] = []  # cached; emptied whenever the registry changes


def _changed() -> None:
    _FINGERPRINT.clear()


_METHODS: dict[str, Any] = {}
_ATTRIBUTES: dict[str, Any] = {}


def key_of(fn: Any) -> Any:
    """The dictionary key of a primal: itself, or its id when it is unhashable."""
    try:
        hash(fn)
        return fn
    except TypeError:
        return id(fn)


def display_name(fn: Any) -> str:
    """``numpy.tanh``-style name of a callable, for messages and docs."""
    mod = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if isinstance(fn, np.vectorize):  # named after the function it vectorizes
        return f"numpy.vectorize({display_name(fn.pyfunc)})"
    if not isinstance(name, str):  # a callable object: its class's __call__
        cls = type(fn)
        mod, name = cls.__module__ or "", f"{cls.__qualname__}.__call__"
    if mod.startswith("scipy.") or isinstance(fn, np.ufunc):
        return _scipy_name(fn, mod, name)
    if isinstance(fn, type(len)) and mod == "builtins":
        return name
    mod = mod.lstrip("_")  # _operator -> operator
    if mod.startswith("numpy"):
        mod = "numpy" if not mod.startswith("numpy.linalg") else "numpy.linalg"
    return f"{mod}.{name}" if mod else name


def _scipy_name(fn: Any, mod: str, name: str) -> str:
    """``scipy.special.expit``, ``scipy.stats.norm.logpdf``: the public spelling."""
    special = sys.modules.get("scipy.special")
    if isinstance(fn, np.ufunc):
        if not mod and special is not None and getattr(special, name, None) is fn:
            mod = "scipy.special"
        return f"{mod}.{name}" if mod else name
    public = []
    for part in mod.split("."):
        if part.startswith("_"):
            break
        public.append(part)
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, type):
        label = getattr(owner, "name", None)
        if not isinstance(label, str):
            label = type(owner).__name__.removesuffix("_gen")
        name = f"{label}.{fn.__name__}"
    return ".".join(public + [name])


def adjoint(
    *primals: Any, broadcasts: bool = False, argnum: int | None = None
) -> Callable:
    """Register the decorated function as the adjoint rule of ``primals``.

    With ``argnum=i`` the function is a *partial* rule: it returns a 1-tuple with
    the cotangent of argument ``i`` only.  The compiler uses partial rules when
    it needs some cotangents but not all (``W @ x`` with ``x`` a constant input),
    so no work is spent on the others.  The full rule must be registered too.
    """
    if not primals:
        raise TypeError("adjoint() needs at least one primal function")

    def register(rule_fn: Callable) -> Callable:
        _changed()
        for primal in primals:
            _user_entry("adjoint", primal, rule_fn, f"{broadcasts}{argnum}")
            rule = Rule(primal, rule_fn, broadcasts, display_name(primal))
            if argnum is None:
                _RULES[key_of(primal)] = rule
            else:
                _PARTIAL[(key_of(primal), argnum)] = rule
        return rule_fn

    return register


def lookup_partial(fn: Any, argnum: int) -> Rule | None:
    """The partial rule computing only argument ``argnum``'s cotangent, or None."""
    ensure_loaded()
    try:
        return _PARTIAL.get((key_of(fn), argnum))
    except TypeError:
        return None


def masked_adjoint(*primals: Any, broadcasts: bool = False) -> Callable:
    """Register the decorated function as the *masked form* of ``primals``' rule.

    It must agree with the rule wherever ``g != 0`` and return exact zeros where
    ``g == 0``, even where the rule's derivative factor is infinite or NaN
    (``0.5 * g / np.where(g == 0, 1.0, ans)`` for ``sqrt``).  The compiler uses
    it, instead of the rule, for a cotangent that may come from a mask.
    """

    def register(rule_fn: Callable) -> Callable:
        _changed()
        for primal in primals:
            _user_entry("masked", primal, rule_fn, f"{broadcasts}")
            _MASKED[key_of(primal)] = Rule(
                primal, rule_fn, broadcasts, display_name(primal)
            )
        return rule_fn

    return register


def masking(*primals: Any) -> None:
    """Declare that the rules of ``primals`` send exact zeros to unselected operands."""
    _changed()
    for primal in primals:
        _user_entry("masking", primal)
        _MASKING.add(key_of(primal))


def lookup_masked(fn: Any) -> Rule | None:
    """The masked form of ``fn``'s rule (see :func:`masked_adjoint`), or None."""
    ensure_loaded()
    try:
        return _MASKED.get(key_of(fn))
    except TypeError:
        return None


def is_masking(fn: Any) -> bool:
    """Whether ``fn``'s rule sends exact zeros to the operands it did not select."""
    ensure_loaded()
    try:
        return key_of(fn) in _MASKING
    except TypeError:
        return False


def nondifferentiable(*primals: Any) -> None:
    """Declare that ``primals`` have zero gradient (integer, boolean or shape results)."""
    _changed()
    for primal in primals:
        _user_entry("nondifferentiable", primal)
        _RULES[key_of(primal)] = Rule(primal, None, False, display_name(primal))


def method_alias(method_name: str, function: Any) -> None:
    """``x.<method_name>(*a, **k)`` behaves like ``function(x, *a, **k)`` for rules."""
    _changed()
    _user_entry("method", function, extra=method_name)
    _METHODS[method_name] = function


def attribute_alias(attr_name: str, function: Any) -> None:
    """``x.<attr_name>`` behaves like ``function(x)`` (e.g. ``T`` -> ``np.transpose``)."""
    _changed()
    _user_entry("attribute", function, extra=attr_name)
    _ATTRIBUTES[attr_name] = function


def lookup(fn: Any) -> Rule | None:
    """The rule registered for ``fn``, or None."""
    ensure_loaded()
    return registered(fn)


def registered(fn: Any) -> Rule | None:
    """The rule registered for ``fn`` so far, without importing the rule
    modules: for a rule module that declares, while it is imported, something
    about a rule it registered itself (importing all of them from there would
    import it again, half done)."""
    try:
        return _RULES.get(key_of(fn))
    except TypeError:
        return None


def lookup_method(method_name: str) -> Any | None:
    """The function a method name stands for, or None."""
    ensure_loaded()
    return _METHODS.get(method_name)


def lookup_attribute(attr_name: str) -> Any | None:
    """The function a differentiable array attribute stands for, or None."""
    ensure_loaded()
    return _ATTRIBUTES.get(attr_name)


def all_rules() -> list[Rule]:
    """Every registered rule, sorted by name (for docs and fingerprints)."""
    ensure_loaded()
    return sorted(_RULES.values(), key=lambda r: r.name)


def all_methods() -> dict[str, Any]:
    ensure_loaded()
    return dict(sorted(_METHODS.items()))


def all_attributes() -> dict[str, Any]:
    ensure_loaded()
    return dict(sorted(_ATTRIBUTES.items()))


def fingerprint() -> str:
    """A hash of every rule's name and source; part of every cache key.

    The built-in rules are fixed by the runtime's own files (and the NumPy version,
    which some registrations depend on), so those bytes stand for them without
    importing any rule module: a cache hit stays fast.  Rules users register are
    hashed from their source.
    """
    if _FINGERPRINT:
        return _FINGERPRINT[0]
    h = hashlib.sha256(np.__version__.encode())
    here = Path(__file__).parent
    for path in sorted(here.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    for entry in sorted(_USER_ENTRIES):
        h.update(entry.encode())
    _FINGERPRINT.append(h.hexdigest()[:16])
    return _FINGERPRINT[0]


def _registering_module() -> str:
    """Name of the module that called into the registry (the first frame outside it)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def _user_entry(kind: str, primal: Any, fn: Any = None, extra: str = "") -> None:
    """Remember a registration made outside the built-in rule modules (for the key)."""
    if _LOADING or _registering_module().startswith(__package__ + "."):
        return  # a built-in rule: its module's bytes are already in the fingerprint
    ensure_loaded()  # built-ins first, so they never overwrite a user's rule
    source = ""
    if fn is not None:
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = repr(fn)
    _USER_ENTRIES.append(f"{kind}|{display_name(primal)}|{extra}|{source}")


_LOADED = False
_LOADING = False  # True while the built-in rule modules register themselves
_USER_ENTRIES: list[str] = []
#: libraries of optional rule modules not imported yet (see ``_load_optional``)
_OPTIONAL_PENDING: set[str] = {"scipy"}


def ensure_loaded() -> None:
    """Import the built-in rule modules (they register themselves on import)."""
    global _LOADED, _LOADING
    if not _LOADED:
        _LOADED = True
        _LOADING = True
        try:
            from s2sad.runtime import load_builtin_rules

            load_builtin_rules()
        finally:
            _LOADING = False
        _load_optional()
    elif _OPTIONAL_PENDING and any(lib in sys.modules for lib in _OPTIONAL_PENDING):
        _load_optional()


def _load_optional() -> None:
    """Load the optional rule modules (SciPy's) once their library is imported."""
    global _LOADING
    from s2sad.runtime import OPTIONAL_RULE_MODULES, load_optional_rules

    _LOADING = True
    try:
        load_optional_rules()
    finally:
        _LOADING = False
    _OPTIONAL_PENDING.clear()
    _OPTIONAL_PENDING.update(
        lib for _, lib in OPTIONAL_RULE_MODULES if lib not in sys.modules
    )
