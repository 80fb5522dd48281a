"""The on-disk cache of generated gradient modules.

A module is stored as ``<module>.<function>-<key>.py`` under ``$S2SAD_CACHE_DIR``
(default: the platform cache directory, ``~/.cache/s2sad`` on Linux).  The key hashes everything the emitted code depends
on: the function's source and its callees' sources, argnums, options, the types
of non-array arguments, the s2sad version and the rule registry's fingerprint.
The first line of each file holds the SHA-256 of the rest; a file whose content
does not match is regenerated, never executed.  Writes are atomic (a temporary
file in the same directory, flushed, then renamed over the target), so processes
compiling the same function at once each leave a complete file and readers see
either the old file or the new one.

Because cached files are executed, the directory must be private: one that
other users can write to (or that another user owns) is refused with
:class:`UnsafeCacheDirError`, and a file that is not the current user's own, or
that others could modify, is treated as damaged.  ``s2sad cache info`` and
``s2sad cache clear`` (:func:`info`, :func:`clear`) inspect and empty it.

``grad`` stores the code as ``ast.unparse`` writes it (black runs only when a
person reads ``.source``), and beside each module its compiled code object,
``<module>.<function>-<key>.<python tag>.code``: marshal data behind a header
naming the Python version, the bytecode magic number, the SHA-256 of the module
text it was compiled from, the file name it was compiled under and the SHA-256
of the marshal data.  A code file that is not trusted, damaged, or made for
another Python or another text is ignored and written again, never run; the
module's own text is always verified first.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import logging
import os
import re
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from s2sad._version import __version__ as VERSION
from s2sad.cachedir import (  # noqa: F401 (the cache's public names)
    CacheDirError,
    UnsafeCacheDirError,
    cache_dir,
    check_private,
    code_header,
    code_path,
    default_cache_dir,
    read_code,
    trusted,
    write_atomic,
    write_code,
)
from s2sad.cachekeys import (  # noqa: F401 (cache.source_text, _identity...)
    _identity,
    callee_sources,
    class_sources,
    source_text,
)
from s2sad.locate import TABLE
from s2sad.logs import describe
from s2sad.logs import logger as log
from s2sad.runtime import backend, registry
from s2sad.transforms.emit import BINDINGS_TAG, CONTENT_TAG

#: names of cached modules (``<module>.<function>-<16 hex>.py``) and of leftover
#: temporary files
ENTRY = re.compile(r"^[\w.\-]+-[0-9a-f]{16}\.py$")
TEMPORARY = re.compile(r"^\.tmp-.*\.py$")
#: compiled code objects beside the modules (``<entry stem>.<python tag>.code``)
CODE_ENTRY = re.compile(r"^[\w.\-]+-[0-9a-f]{16}\.[\w\-]+\.code$")


#: s2sad modules that never change emitted code (editing them keeps the cache valid)
NOT_COMPILER = {
    "cli.py",
    "modelfile.py",
    "demo.py",
    "docs.py",
    "testing.py",
    "logs.py",
    "locate.py",
}


@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """Hash of the compiler's own source: an upgraded s2sad never reuses stale files."""
    root = Path(__file__).parent
    h = hashlib.sha256()
    paths = [*root.glob("*.py"), *(root / "transforms").rglob("*.py")]
    for path in sorted(paths, key=lambda p: p.relative_to(root).as_posix()):
        if path.name not in NOT_COMPILER:
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def key_for(
    fn: Any, argnums: tuple, options_key: str, type_sig: str, classes: tuple = ()
) -> str:
    """The cache key; ``classes``: the user classes of the call's argument
    objects (``binding.argument_classes``), whose sources it holds."""
    h = hashlib.sha256()
    seen: set = set()
    for part in (
        VERSION,
        compiler_fingerprint(),
        registry.fingerprint(),
        fn.__module__ or "",
        fn.__qualname__,
        repr(argnums),
        options_key,
        type_sig,
        *callee_sources(fn, seen),
        *[text for cls in classes for text in class_sources(cls, seen)],
    ):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def path_for(fn: Any, key: str) -> Path:
    base = f"{fn.__module__}.{fn.__qualname__}".replace("<", "").replace(">", "")
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in base)
    return cache_dir() / f"{safe}-{key}.py"


def seal(source: str) -> str:
    """Prefix ``source`` with the hash line that :func:`read_verified` checks."""
    digest = hashlib.sha256(source.encode()).hexdigest()
    return f"{CONTENT_TAG}{digest}\n{source}"


def read_verified(path: Path) -> str | None:
    """The module's source (no hash line, no line table), or None when missing or
    damaged."""
    text = read_verified_text(path)
    return None if text is None else split_line_table(text)[0]


def read_verified_text(path: Path) -> str | None:
    """The file's text without its hash line, or None when missing or damaged."""
    sealed = read_sealed(path)
    return None if sealed is None else sealed[0]


def read_sealed(path: Path) -> tuple[str, str] | None:
    """(the file's text without its hash line, that hash), or None when missing or
    damaged."""
    try:
        with open(path, "rb") as f:
            if not trusted(os.fstat(f.fileno())):
                return None
            text = f.read().decode()
    except (OSError, UnicodeDecodeError):
        return None
    first, _, rest = text.partition("\n")
    if not first.startswith(CONTENT_TAG):
        return None
    digest = first[len(CONTENT_TAG) :].strip()
    if hashlib.sha256(rest.encode()).hexdigest() != digest:
        return None
    return rest, digest


def resolve_bindings(source: str, fn: Any) -> dict[str, Any] | None:
    """Objects for the names the module expects s2sad to bind; None if any is lost."""
    for line in source.splitlines()[:8]:
        if line.startswith(BINDINGS_TAG):
            table = json.loads(line[len(BINDINGS_TAG) :])
            break
    else:
        return {}
    cells, cell_objects = {}, {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        cell_objects[name] = cell
        try:
            cells[name] = cell.cell_contents
        except ValueError:
            pass
    out = {}
    for alias, origin in table.items():
        if not origin:
            return None
        if origin[0] == "closure" and origin[1] in cells:
            out[alias] = cells[origin[1]]
            continue
        if origin[0] == "cell" and origin[1] in cell_objects:
            out[alias] = cell_objects[origin[1]]  # read when the code runs
            continue
        if origin[0] == "default":
            found = _default_of(*origin[1:])
            if found is MISSING_DEFAULT:
                return None
            out[alias] = found
            continue
        if origin[0] == "module":
            mod = sys.modules.get(origin[1])
            if mod is None:
                try:
                    mod = importlib.import_module(origin[1])
                except ImportError:
                    return None
            if hasattr(mod, origin[2]):
                out[alias] = getattr(mod, origin[2])
                continue
        return None
    return out


MISSING_DEFAULT = object()


def _default_of(module: str, qualname: str, pname: str) -> Any:
    """The default object of parameter ``pname`` of the function ``qualname`` of
    ``module`` (a binding's ``["default", ...]`` origin), or ``MISSING_DEFAULT``."""
    try:
        obj = sys.modules.get(module) or importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        param = inspect.signature(obj).parameters[pname]
    except (ImportError, AttributeError, KeyError, TypeError, ValueError):
        return MISSING_DEFAULT
    if param.default is inspect.Parameter.empty:
        return MISSING_DEFAULT
    return param.default


def import_source(
    source: str, path: Path, bindings: dict[str, Any], digest: str | None = None
) -> types.ModuleType:
    """Run the verified module text ``source`` (sealed, its hash ``digest``) as a
    new module: from the cached code object when one matches, else compiled here
    (and the code object stored for the next process)."""
    name = f"s2sad_generated_{path.stem.replace('.', '_').replace('-', '_')}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__dict__.update(bindings)
    if digest is None:
        digest = hashlib.sha256(source.encode()).hexdigest()
    code = read_code(path, digest)
    if code is None:
        # compiled with the hash line so that line numbers match the file; the
        # verified text itself, never re-read from disk
        code = compile(f"{CONTENT_TAG}{digest}\n{source}", str(path), "exec")
        write_code(path, digest, code)
    exec(code, module.__dict__)  # noqa: S102
    return module


def entry_function(module: types.ModuleType) -> Callable:
    """The function a caller runs: the first one the emitted module defines.

    Every transform emits its entry point (``<f>_value_and_grad``, ``<f>_jvp``)
    before its helpers; names bound in from elsewhere (the user's callees, the
    runtime) are skipped because they belong to other modules.
    """
    for value in vars(module).values():
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            return value
    raise LookupError(f"{module.__file__} defines no function")


def load(
    fn: Any,
    argnums: tuple,
    options,
    type_sig: str,
    compile_source: Callable[[], tuple[str, dict]],
    fresh: bool = False,
    classes: tuple = (),
):
    """(module, path, source) of ``fn``'s gradient, cached or freshly compiled
    (``fresh``: compiled, the file in the cache replaced; ``classes``: the
    argument objects' user classes, see ``key_for``)."""
    backend.watch()  # Dask loaded: its data is refused where it arrives unguarded
    path = path_for(fn, key_for(fn, argnums, options.key(), type_sig, classes))
    sealed = None if fresh else read_sealed(path)
    if sealed is not None:
        text, digest = sealed
        source, table = split_line_table(text)
        bindings = resolve_bindings(source, fn)
        if bindings is not None:
            if table:
                bindings[TABLE] = table
            if log.isEnabledFor(logging.INFO):
                log.info(
                    "loaded %s from the disk cache: %s",
                    describe(fn, argnums, options),
                    path,
                )
            return import_source(text, path, bindings, digest), path, source
    logging_on = log.isEnabledFor(logging.INFO)
    if logging_on:
        log.info("compiling %s: %s", describe(fn, argnums, options), _miss(path))
        start = time.perf_counter()
    source, bindings = compile_source()
    text = source
    if bindings.get(TABLE):
        text += f"{LINES_TAG}{bindings[TABLE]}\n"
    write_atomic(path, seal(text))
    if logging_on:
        log.info(
            "compiled %s in %.3f s -> %s",
            describe(fn, argnums, options),
            time.perf_counter() - start,
            path,
        )
    return import_source(text, path, bindings), path, source


#: the last line of a cached file: the line table (a comment, never run)
LINES_TAG = "# s2sad-lines: "


def split_line_table(text: str) -> tuple[str, str | None]:
    """A cached file's text -> (the module's source, its line table or None)."""
    body, sep, last = text.rstrip("\n").rpartition("\n")
    if sep and last.startswith(LINES_TAG):
        return body + "\n", last[len(LINES_TAG) :]
    return text, None


def _miss(path: Path) -> str:
    """Why the disk cache had no module for this key (for the compile log)."""
    if path.exists():
        return f"the cached file {path.name} is damaged or its names are gone"
    stem = path.name.rpartition("-")[0]
    others = [p for p in path.parent.glob(f"{stem}-*.py") if ENTRY.match(p.name)]
    if not others:
        return "not in the disk cache"
    return (
        f"not in the disk cache ({len(others)} cached for other keys: the argument "
        "types, argnums, options, the source, a callee, the rules or s2sad differ)"
    )


@dataclass
class CacheInfo:
    """What ``s2sad cache info`` reports."""

    directory: Path
    modules: int
    bytes: int
    damaged: int
    temporaries: int


def _entries(directory: Path) -> list[Path]:
    """The cache's own files (modules, their code objects and leftover
    temporaries), never anything else."""
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and any(r.match(p.name) for r in (ENTRY, CODE_ENTRY, TEMPORARY))
    )


def info() -> CacheInfo:
    directory = cache_dir()
    modules = damaged = temporaries = size = 0
    for path in _entries(directory):
        size += path.stat().st_size
        if TEMPORARY.match(path.name):
            temporaries += 1
        elif ENTRY.match(path.name):
            modules += 1
            damaged += read_verified(path) is None
    return CacheInfo(directory, modules, size, damaged, temporaries)


def clear() -> int:
    """Delete the cached modules (with their code objects) and leftover
    temporaries; return how many modules and temporaries went.

    Only files named like cache entries are removed, so a cache directory shared
    with other files (the default one also holds the datasets in ``data/``)
    keeps them.
    """
    removed = 0
    for path in _entries(cache_dir()):
        try:
            path.unlink()
            removed += not CODE_ENTRY.match(path.name)
        except FileNotFoundError:  # another process removed or replaced it first
            pass
    return removed
