"""A user's model file, imported by path; its functions as standalone gradient modules.

This is the part of ``s2sad compile`` / ``s2sad show`` that knows about the
user's code: :func:`import_model` imports ``model.py`` under a module name
derived from the file, :func:`select` picks the functions to differentiate
(decorated ones, or those named) and :func:`emit` compiles one into a module
that imports the model's globals (``from model import W``) instead of having
them bound by s2sad, so it runs with NumPy and ``s2sad.runtime`` alone.  Every
problem with the user's input is raised as :class:`UserError`, whose message is
``file:line: ...`` ready to print.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from s2sad.errors import LocatedError, Problem, S2SADError


class UserError(Exception):
    """A problem with the command's input, reported as a message without a traceback."""


@dataclasses.dataclass
class Target:
    """One gradient to emit: the function, what to differentiate, and how."""

    attr: str
    fun: Callable
    argnums: tuple[int, ...]
    options: Any  # pipeline.Options
    mode: str = "grad"  # "grad" (reverse mode) or "jvp" (forward mode)


# -- importing the user's file ------------------------------------------------------
def display(path: str | os.PathLike) -> str:
    """``path`` relative to the working directory when it is inside it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)


def module_name(path: Path) -> tuple[Path, str]:
    """(folder to put on sys.path, dotted module name) for a .py file."""
    parts = [] if path.name == "__init__.py" else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    if not parts or not all(p.isidentifier() for p in parts):
        raise UserError(
            f"{display(path)}: '{'.'.join(parts)}' is not a valid module name; rename "
            "the file (emitted gradients import the model's globals from it by name)"
        )
    return folder, ".".join(parts)


def import_model(path_text: str) -> ModuleType:
    """Import the user's file by path (see ``s2sad compile --help``).

    Any failure, including an exception raised by the model's own code, becomes a
    :class:`UserError` that points at the line in the user's file.
    """
    path = Path(path_text).expanduser()
    if not path.exists():
        raise UserError(f"{path_text}: no such file")
    if path.is_dir() or path.suffix != ".py":
        raise UserError(f"{path_text}: expected a Python file (model.py)")
    path = path.resolve()
    folder, name = module_name(path)
    clash = sys.modules.get(name)
    if clash is not None and _file_of(clash) != path:
        raise UserError(
            f"{display(path)}: its module name '{name}' is taken by "
            f"{_file_of(clash) or 'a built-in module'}; rename the file"
        )
    sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module(name)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit too: the model's own code failed
        raise UserError(import_failure(exc, path)) from exc
    if _file_of(module) != path:
        raise UserError(
            f"{display(path)}: importing '{name}' found "
            f"{_file_of(module) or 'a built-in module'} instead; rename the file"
        )
    return module


def _file_of(module: ModuleType) -> Path | None:
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if file else None


def import_failure(exc: BaseException, path: Path) -> str:
    """``file:line: message`` for an exception raised while importing the model."""
    if isinstance(exc, SyntaxError) and exc.filename:
        problem = Problem(
            display(exc.filename),
            exc.lineno or 0,
            exc.offset or 1,
            f"syntax error: {exc.msg}",
            source_line=(exc.text or "").rstrip("\n"),
        )
        return problem.render()
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if Path(f.filename).resolve() == path] or frames[-1:]
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, SystemExit):
        what = f"the module called sys.exit({exc.code!r}) while being imported"
    if not mine:
        return f"{display(path)}: error while importing it: {what}"
    frame = mine[-1]
    where = f"{display(frame.filename)}:{frame.lineno}"
    text = f"{where}: error while importing {path.name}: {what}"
    return text + (f"\n    {frame.line}" if frame.line else "")


# -- choosing and compiling functions -----------------------------------------------
def select(
    module: ModuleType, names: Sequence[str], argnums: str | None, mode: str = "grad"
) -> list[Target]:
    """The functions to compile: those named, else the ones the file marks.

    A file marks a function by decorating it with ``@s2sad.grad`` /
    ``@s2sad.value_and_grad``, or by listing its name in a module-level
    ``__s2sad__ = ["loss"]`` (which leaves the function itself unchanged).
    """
    from s2sad.api import GradientFunction

    where = display(module.__file__)
    if names:
        found = [(n, _lookup(module, n, where)) for n in names]
    else:
        found = [
            (n, obj)
            for n, obj in vars(module).items()
            if isinstance(obj, GradientFunction)
            and obj.fun.__module__ == module.__name__
        ]
        found += [(n, _lookup(module, n, where)) for n in _marked(module, where)]
        if not found:
            raise UserError(
                f"{where}: no function decorated with @s2sad.grad or "
                "@s2sad.value_and_grad, and no __s2sad__ list; name the functions "
                "to compile with --function NAME, or mark them in the file with "
                '__s2sad__ = ["loss"]'
            )
        found.sort(key=lambda item: _first_line(getattr(item[1], "fun", item[1])))
    targets, seen = [], set()
    for attr, obj in found:
        if id(obj) not in seen:
            seen.add(id(obj))
            targets.append(
                dataclasses.replace(_target(attr, obj, argnums, where), mode=mode)
            )
    return targets


def _marked(module: ModuleType, where: str) -> list[str]:
    """The names in the module's ``__s2sad__`` list (none when it has none)."""
    marked = vars(module).get("__s2sad__", ())
    if not isinstance(marked, (list, tuple)) or not all(
        isinstance(n, str) for n in marked
    ):
        raise UserError(
            f"{where}: __s2sad__ must be a list of function names, "
            f'like __s2sad__ = ["loss"]; it is {marked!r}'
        )
    return list(marked)


def _lookup(module: ModuleType, name: str, where: str) -> Any:
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            functions = sorted(
                n
                for n, v in vars(module).items()
                if inspect.isfunction(v) or hasattr(v, "fun")
            )
            raise UserError(
                f"{where}: no function named '{name}' (found: "
                f"{', '.join(functions) or 'none'})"
            )
        obj = getattr(obj, part)
    return obj


def _target(attr: str, obj: Any, argnums: str | None, where: str) -> Target:
    from s2sad import pipeline
    from s2sad.api import GradientFunction

    if isinstance(obj, GradientFunction):
        fun, declared, options = obj.fun, obj._argnums, obj.options
    elif inspect.isfunction(obj):
        fun, declared, options = obj, (0,), pipeline.Options()
    else:
        kind = type(obj).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        raise UserError(f"{where}: '{attr}' is {article} {kind}, not a function")
    chosen = parse_argnums(argnums, fun, where) if argnums is not None else declared
    return Target(attr, fun, chosen, dataclasses.replace(options, standalone=True))


def parse_argnums(spec: str, fun: Callable, where: str) -> tuple[int, ...]:
    """``"0,2"`` or ``"params,x"`` (positions or parameter names) -> positions."""
    params = list(inspect.signature(fun).parameters)
    out: list[int] = []
    for part in (p.strip() for p in spec.split(",")):
        if part.isdigit() and int(part) < len(params):
            out.append(int(part))
        elif part in params:
            out.append(params.index(part))
        else:
            raise UserError(
                f"{where}: --argnums {spec!r}: {fun.__name__}({', '.join(params)}) has "
                f"no parameter {part!r}; give positions (0, 1, ...) or names, "
                "comma-separated"
            )
    if len(set(out)) != len(out):
        raise UserError(f"{where}: --argnums {spec!r} names a parameter twice")
    return tuple(out)


def _first_line(fun: Callable) -> int:
    return getattr(getattr(fun, "__code__", None), "co_firstlineno", 0)


def _location(fun: Callable) -> str:
    file = inspect.getsourcefile(fun) or "<unknown>"
    return f"{display(file)}:{_first_line(fun)}"


def emit(target: Target, after: str | None = None) -> str:
    """The standalone gradient module's source; compile problems become UserError.

    With ``after`` (a pass name), the code after that pass instead, for every
    function the module holds.
    """
    from s2sad import pipeline
    from s2sad.transforms.emit import BINDINGS_TAG

    dumps: list[str] = []
    try:
        if target.mode == "jvp":
            from s2sad.transforms.forward import assembly as forward

            options, mode = forward.ForwardOptions(standalone=True), "forward"
        else:
            options, mode = target.options, "reverse"
        source, _ = pipeline.compile_function(
            target.fun,
            target.argnums,
            options,
            mode=mode,
            dump_after=after,
            dump=dumps.append,
        )
    except LocatedError as exc:
        problems = [
            dataclasses.replace(p, filename=display(p.filename)) for p in exc.problems
        ]
        raise UserError(str(LocatedError(problems))) from exc
    except S2SADError as exc:
        raise UserError(f"{_location(target.fun)}: {exc}") from exc
    if after is not None:
        return "\n".join(dumps)
    bound = [
        json.loads(line[len(BINDINGS_TAG) :])
        for line in source.splitlines()
        if line.startswith(BINDINGS_TAG)
    ]
    if bound:
        names = ", ".join(
            sorted(
                f"{origin[1] if origin and origin[0] == 'cell' else n} ({_kind(origin)})"
                for n, origin in bound[0].items()
            )
        )
        raise UserError(
            f"{_location(target.fun)}: the gradient of {target.fun.__name__} uses "
            f"names that a standalone file cannot import: {names}\n"
            "hint: make them module-level names of "
            f"{display(inspect.getsourcefile(target.fun) or 'the model file')}"
        )
    return source


def _kind(origin: list | None) -> str:
    if origin and origin[0] in ("closure", "cell"):
        return "a closure variable"
    if origin and origin[0] == "module":
        return f"a global of {origin[1]}"
    return "a value with no importable name"


def output_names(module: ModuleType, targets: list[Target]) -> list[str]:
    """``<module>_<function>_grad.py`` (``_jvp.py`` in forward mode) per target; the
    attribute name is used instead of the function's if two clash."""
    stem = module.__name__.replace(".", "_")
    names = [f"{stem}_{t.fun.__name__}_{t.mode}.py" for t in targets]
    names = [
        f"{stem}_{t.attr}_{t.mode}.py" if names.count(n) > 1 else n
        for n, t in zip(names, targets)
    ]
    if len(set(names)) != len(names):
        raise UserError(
            f"{display(module.__file__)}: two selected gradients would be written "
            "to the same file; compile them separately with -o"
        )
    return names


def compile_each(targets: list[Target], after: str | None = None) -> list:
    """Per target, its source or the UserError that stopped it."""
    out: list = []
    for t in targets:
        try:
            out.append(emit(t, after))
        except UserError as exc:
            out.append(exc)
    return out


def compile_all(targets: list[Target], after: str | None = None) -> list[str]:
    """Every target's source, or one UserError listing every failure."""
    results = compile_each(targets, after)
    sources = [r for r in results if isinstance(r, str)]
    failures = [r for r in results if isinstance(r, UserError)]
    if failures:
        first = failures[0]  # chained, so that --debug shows the compiler's traceback
        raise UserError("\n\n".join(map(str, failures))) from first.__cause__ or first
    return sources


def write_if_changed(path: Path, text: str) -> None:
    """Write atomically (temporary file + rename); an unchanged file keeps its mtime."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(
            tmp, "x", encoding="utf-8"
        ) as f:  # mode from the umask, like any file
            f.write(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
