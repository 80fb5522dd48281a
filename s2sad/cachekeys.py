"""What a cache key holds of the user's code: the sources of the function,
of every Python function it reaches through its names, and of the classes it
builds or is given (their methods, static and class methods, properties), and
which module, class or function each global names (``_identity``).  Data is
read when the code runs, so it is no part of a key (``cache.key_for``)."""

from __future__ import annotations

import functools
import inspect
import linecache
import types
from typing import Any


def callee_sources(fn: Any, seen: set | None = None) -> list[str]:
    """Sources of ``fn`` and every Python function it can reach through its names."""
    seen = seen if seen is not None else set()
    if id(fn) in seen:
        return []
    seen.add(id(fn))
    try:  # the code that runs (a decorator's wrapper), not what __wrapped__ names
        out = [source_text(fn)]
    except (OSError, TypeError):
        return []
    env = dict(fn.__globals__)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            env[name] = cell.cell_contents
        except ValueError:
            pass
    for name in sorted(_code_names(fn.__code__)):
        obj = env.get(name)
        if isinstance(obj, types.MethodType):
            obj = obj.__func__
        identity = _identity(obj)
        if identity:  # what the code was specialised on (data is read when it runs)
            out.append(f"{name}={identity}")
        if type(obj) is functools.partial:
            obj = obj.func  # (nested partials are flattened by functools)
        if isinstance(obj, types.FunctionType) and not _library(obj):
            out += callee_sources(obj, seen)
        elif isinstance(obj, type):  # a class built inside: its methods are inlined
            out += class_sources(obj, seen)
        elif obj is not None and not isinstance(obj, types.ModuleType):
            out += class_sources(type(obj), seen)  # an object's methods, the same
    return out


def class_sources(cls: type, seen: set | None = None) -> list[str]:
    """The sources of the functions a user class (and each user class of its
    MRO) defines: methods, static and class methods, property getters and
    setters.  Editing one changes what s2sad inlines, so the cache key must
    change with it (a class redefined and reloaded gave the old gradient)."""
    seen = seen if seen is not None else set()
    out = []
    for k in cls.__mro__:
        if k is object or _library(k) or id(k) in seen or not hasattr(k, "__dict__"):
            continue
        seen.add(id(k))
        out.append(f"class {k.__module__}.{k.__qualname__}")
        for attr in sorted(vars(k)):
            for member in _functions_of(vars(k)[attr]):
                out += callee_sources(member, seen)
    return out


def _functions_of(member: Any) -> list:
    """The Python functions a class attribute runs when used."""
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    elif isinstance(member, property):
        return [f for f in (member.fget, member.fset, member.fdel) if _own(f)]
    elif isinstance(member, functools.cached_property):
        member = member.func
    return [member] if _own(member) else []


def _own(f: Any) -> bool:
    return isinstance(f, types.FunctionType) and not _library(f)


def source_text(fn: Any) -> str:
    """The lines that define ``fn`` (decorators included), for the cache key.

    ``inspect.getsource`` tokenizes the file from the definition on (a tenth of
    a second for a 1,000-line function, in every process that loads the cached
    module); the code object already says where the definition starts and
    ends: its first line, the furthest line any of its instructions (or a nested
    function's) spans, and the comment lines indented under it that follow.
    """
    code = getattr(fn, "__code__", None)
    if isinstance(code, types.CodeType):
        linecache.checkcache(code.co_filename)
        lines = linecache.getlines(code.co_filename)
        first, last = code.co_firstlineno, _last_line(code)
        if lines and 0 < first <= last <= len(lines):
            indent = len(lines[first - 1]) - len(lines[first - 1].lstrip())
            end = last
            for line in lines[last:]:
                text = line.strip()
                if text and not (
                    text.startswith("#") and len(line) - len(line.lstrip()) > indent
                ):
                    break
                end += 1
            while end > last and not lines[end - 1].strip():
                end -= 1
            return "".join(lines[first - 1 : end])
    return inspect.getsource(code if code is not None else fn)


def _last_line(code: types.CodeType) -> int:
    last = max((end or 0 for _, end, _, _ in code.co_positions()), default=0)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            last = max(last, _last_line(const))
    return last


def _identity(obj: Any) -> str:
    """Which module, class or function a global names, for the cache key ("" for data:
    emitted code reads data when it runs, and guards the rest)."""
    if type(obj) is functools.partial:  # compiled as a call of obj.func with the
        # stored arguments at their places: what it wraps and where they go
        return (
            f"partial of {_identity(obj.func)} with {len(obj.args)} positional "
            f"argument(s) and keywords {sorted(obj.keywords)}"
        )
    if isinstance(obj, types.ModuleType):
        return f"module {obj.__name__}"
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)) or (
        callable(obj) and hasattr(obj, "__qualname__")
    ):
        return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
    if callable(obj):
        return f"instance of {type(obj).__module__}.{type(obj).__qualname__}"
    return ""


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _library(obj: Any) -> bool:
    mod = getattr(obj, "__module__", "") or ""
    return mod.split(".")[0] in ("numpy", "s2sad", "builtins", "math")
