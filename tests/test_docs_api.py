"""docs/api.md cannot drift: every public name is documented with its current
signature, every example on the page runs, and the command-line section's
commands print what the page says.

The Python examples run in one subprocess (each saved as its own module, as a
user would save it: s2sad reads the source), so the rules they register never
reach this process's registry.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import s2sad
from s2sad.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
API_MD = ROOT / "docs" / "api.md"
TEXT = API_MD.read_text(encoding="utf-8")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
FILE_BLOCK = re.compile(r"^# (\w+\.py)\n")


def sections() -> dict[str, str]:
    """Text under each ``### `s2sad.NAME` `` heading, by NAME."""
    parts = re.split(r"^### `s2sad\.(\w+)`\n", TEXT, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1].split("\n## ")[0] for i in range(1, len(parts), 2)}


def blocks(text: str, lang: str) -> list[tuple[int, str]]:
    """(line in api.md, code) of each fenced block in ``lang``."""
    found = []
    for m in FENCE.finditer(text):
        if m.group(1) == lang:
            found.append((TEXT[: TEXT.index(m.group(0))].count("\n") + 2, m.group(2)))
    return found


def documented_signature(section: str) -> inspect.Signature:
    """The ``Signature: `s2sad.f(...)` `` line of a section, as a Signature."""
    m = re.search(r"^Signature: `s2sad\.\w+(\(.*\))`$", section, re.MULTILINE)
    assert m, "no 'Signature: `s2sad.NAME(...)`' line"
    tree = ast.parse(f"def f{m.group(1)}: pass").body[0]
    params = []
    a = tree.args
    defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(a.args, defaults):
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params.append((arg.arg, kind, default is not None))
    if a.vararg:
        params.append((a.vararg.arg, inspect.Parameter.VAR_POSITIONAL, False))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        params.append((arg.arg, inspect.Parameter.KEYWORD_ONLY, default is not None))
    return params


PUBLIC = [n for n in s2sad.__all__ if n != "__version__"]


def test_every_public_name_has_a_section_and_an_example():
    found = sections()
    missing = [n for n in s2sad.__all__ if n not in found]
    assert not missing, f"docs/api.md does not document {missing}"
    assert not set(found) - set(
        s2sad.__all__
    ), "docs/api.md documents a non-public name"
    for name, text in found.items():
        assert blocks(text, "python"), f"{name}: no example"


@pytest.mark.parametrize("name", PUBLIC)
def test_documented_signature_is_the_real_one(name):
    real = [
        (p.name, p.kind, p.default is not inspect.Parameter.empty)
        for p in inspect.signature(getattr(s2sad, name)).parameters.values()
    ]
    assert documented_signature(sections()[name]) == real


def test_every_python_example_runs(tmp_path):
    names = []
    for i, (line, code) in enumerate(blocks(TEXT, "python")):
        if FILE_BLOCK.match(code):
            continue  # a file of the command-line section, run below
        name = f"api_example_{i:02d}"
        (tmp_path / f"{name}.py").write_text(code)
        names.append((name, line))
    assert len(names) >= len(s2sad.__all__)
    runner = textwrap.dedent("""
        import importlib, sys, traceback
        failed = 0
        for name, line in %r:
            try:
                importlib.import_module(name)
            except BaseException:
                failed += 1
                print(f"docs/api.md:{line}: the example failed:")
                traceback.print_exc(file=sys.stdout)
        sys.exit(1 if failed else 0)
        """ % (names,))
    done = subprocess.run(
        [sys.executable, "-c", runner],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_command_line_section_runs_as_shown(tmp_path):
    cli = TEXT.split("## The `s2sad` command", 1)[1]
    for _, code in blocks(cli, "python"):
        m = FILE_BLOCK.match(code)
        assert m, "every Python block of the command section is a named file"
        (tmp_path / m.group(1)).write_text(code)
    ((_, session),) = blocks(cli, "console")
    for command, expected in _commands(session):
        argv = shlex.split(command)
        argv = [
            sys.executable,
            *(["-m", "s2sad"] if argv[0] == "s2sad" else []),
        ] + argv[1:]
        done = subprocess.run(
            argv,
            cwd=tmp_path,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"$ {command}\n{done.stderr}"
        _assert_in_order(expected, done.stdout, command)


def test_every_command_and_option_is_documented():
    cli = TEXT.split("## The `s2sad` command", 1)[1]
    for path, option in _options(build_parser(), []):
        assert f"s2sad {' '.join(path)}".strip() in cli, path
        if option not in ("-h", "--help", "--debug") and option.startswith("--"):
            assert option in cli, f"s2sad {' '.join(path)} {option} is not documented"
    assert "--version" in cli and "--debug" in cli


# --- helpers ---------------------------------------------------------------------------


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, S2SAD_CACHE_DIR=str(tmp_path / ".cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("NO_COLOR", None)
    return env


def _commands(session: str) -> list[tuple[str, list[str]]]:
    """``$ command`` lines and the output lines shown under each."""
    out: list[tuple[str, list[str]]] = []
    for line in session.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            out[-1][1].append(line)
    return out


def _assert_in_order(expected: list[str], output: str, command: str) -> None:
    """Each shown line (``...`` skips any lines) starts a line of the output, in order."""
    lines = output.splitlines()
    at = 0
    for want in expected:
        if want == "...":
            continue
        while at < len(lines) and not lines[at].startswith(want):
            at += 1
        assert at < len(lines), f"$ {command}: {want!r} not found in\n{output}"
        at += 1


def _options(parser: argparse.ArgumentParser, path: list[str]):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, [*path, name])
        for option in action.option_strings:
            yield path, option
