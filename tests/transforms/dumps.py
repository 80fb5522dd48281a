"""Helpers for the per-pass tests: the code after one pass, as text.

``after("normalize", f)`` compiles ``f`` (a function defined in a real .py
file: s2sad reads its source with inspect) and returns what the pipeline's
``dump_after`` hook hands out after that pass, one text per compiled function,
joined by blank lines.  ``job_after`` runs the function passes by hand and
returns the job itself, for the passes whose result is not code (activity).
``from_string`` parses a function written as a string, for calling one pass
module directly without the driver.
"""

from __future__ import annotations

import ast
import builtins
import textwrap

import numpy as np

from s2sad import pipeline
from s2sad.options import Options
from s2sad.transforms.astutil import Namer
from s2sad.transforms.forward.assembly import ForwardOptions
from s2sad.transforms.front import parse
from s2sad.transforms.front.parse import Env, ParsedFunction, SourceInfo
from s2sad.transforms.module import Job, ModuleBuilder


def after(pass_name, fn, argnums=(0,), mode="reverse", options=None, example_args=()):
    out: list[str] = []
    pipeline.compile_function(
        fn,
        argnums,
        options=options,
        example_args=example_args,
        mode=mode,
        dump_after=pass_name,
        dump=out.append,
    )
    return "\n".join(out)


def job_after(pass_name, fn, argnums=(0,), mode="reverse"):
    """(job, module) of the top-level function once ``pass_name`` has run."""
    options = ForwardOptions() if mode == "forward" else Options()
    module = ModuleBuilder(options, mode, top_fn=fn)
    parsed = parse.parse_function(fn)
    n = len(parsed.node.args.posonlyargs + parsed.node.args.args)
    n += len(parsed.node.args.kwonlyargs)
    pattern = tuple(int(i in argnums) for i in range(n))
    job = Job(parsed, (fn.__name__,), pattern, top=True)
    for name, run, modes in pipeline.PASSES:
        if mode in modes:
            run(job, module)
            if name == pass_name:
                return job, module
    raise ValueError(f"no {mode} pass named {pass_name!r}")


def code(text: str) -> str:
    """An expected code string written indented in a test: dedented, one final newline."""
    return textwrap.dedent(text).strip("\n") + "\n"


def expect(got: str, want: str) -> None:
    """``got`` equals the dedented ``want`` (surrounding blank lines ignored)."""
    assert got.strip() == textwrap.dedent(want).strip(), got


def from_string(src: str) -> ParsedFunction:
    """A function written as a string, parsed (``np`` resolves to NumPy)."""
    node = ast.parse(textwrap.dedent(src)).body[0]
    return ParsedFunction(
        node, SourceInfo("<test>", node.name, "test"), Env(extra={"np": np})
    )


def namer_for(p: ParsedFunction) -> Namer:
    """A namer that avoids the function's names and the builtins."""
    return Namer(
        {n.id for n in ast.walk(p.node) if isinstance(n, ast.Name)} | set(dir(builtins))
    )
