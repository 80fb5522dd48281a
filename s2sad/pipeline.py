"""The compiler driver: the order of the passes is written here and only here.

Both modes run the same front passes, then their own::

    reverse:  validate -> desugar -> normalize -> bind -> objects -> hoist -> peel
              -> activity -> aliasing -> shifts -> fuse -> losses -> reverse -> cleanup
              -> assemble -> spreads -> loopsums -> buffers -> scalar -> substitute -> methods
              (per function)
              -> connect -> entry_reads -> guards -> emit          (per module)
    forward:  unstar -> validate -> desugar -> normalize -> bind -> objects -> activity
              -> aliasing -> forward -> cleanup -> assemble       (per function)
              -> imports -> entry_reads -> guards -> emit          (per module)

Every pass is a function ``run(job, module)`` that reads and rewrites the
:class:`~s2sad.transforms.module.Job` of one function (or, for module passes,
the :class:`~s2sad.transforms.module.ModuleBuilder`).  User functions called
with differentiated arguments are queued by the reverse and forward passes and
compiled by the same loop, once per pattern of differentiated arguments, into
the same module (which is what makes recursion work).

``compile_function(..., dump_after="normalize")`` prints each function's code
after that pass (``s2sad show --after normalize`` does the same).
"""

from __future__ import annotations

import ast
import functools
import gc
import sys
from collections.abc import Callable
from typing import Any

from s2sad.errors import ArgnumsError, S2SADError
from s2sad.options import FOREIGN, Options
from s2sad.transforms import comments, emit, guards, lines
from s2sad.transforms.buffers import methods, scalar, substitute
from s2sad.transforms.buffers import wiring as buffers
from s2sad.transforms.forward import assembly as forward
from s2sad.transforms.front import fuse, hoist, objects, parse, peel, prepare, shifts
from s2sad.transforms.module import Job, ModuleBuilder
from s2sad.transforms.reverse import assembly as reverse
from s2sad.transforms.reverse import loopsums, spreads

REVERSE, FORWARD = "reverse", "forward"
MODES = (REVERSE, FORWARD)
BOTH = MODES

PassFn = Callable[[Job, ModuleBuilder], None]

#: (name, pass, modes it runs in), per function, in order
PASSES: list[tuple[str, PassFn, tuple[str, ...]]] = [
    ("unstar", forward.unstar, (FORWARD,)),
    ("validate", prepare.validate, BOTH),
    ("desugar", prepare.desugar, BOTH),
    ("normalize", prepare.normalize, BOTH),
    ("bind", prepare.bind_statics, BOTH),
    ("objects", objects.run, BOTH),
    ("hoist", hoist.run, (REVERSE,)),
    ("peel", peel.run, (REVERSE,)),
    ("activity", reverse.activity, (REVERSE,)),
    ("activity", forward.activity, (FORWARD,)),
    ("aliasing", reverse.aliasing, BOTH),  # forward mode rebinds as well
    ("shifts", shifts.run, (REVERSE,)),
    ("fuse", fuse.run, (REVERSE,)),
    ("losses", fuse.run_losses, (REVERSE,)),
    ("reverse", reverse.differentiate, (REVERSE,)),
    ("forward", forward.differentiate, (FORWARD,)),
    ("cleanup", reverse.cleanup, (REVERSE,)),
    ("cleanup", forward.cleanup, (FORWARD,)),
    ("assemble", reverse.assemble, (REVERSE,)),
    ("assemble", forward.assemble, (FORWARD,)),
    ("spreads", spreads.run, (REVERSE,)),
    ("loopsums", loopsums.run, (REVERSE,)),
    ("buffers", buffers.function_pass, (REVERSE,)),
    ("scalar", scalar.run, (REVERSE,)),
    ("substitute", substitute.run, (REVERSE,)),
    ("methods", methods.run, (REVERSE,)),
]

#: passes that rewrite code for NumPy's own arrays (methods of ndarray, the
#: step helpers, fused kernels): skipped for calls with arrays of other libraries
#: (``Options.buffers == "foreign"``: Dask, torch, CuPy, Array API), whose code
#: runs as written
NUMPY_ONLY = frozenset(
    {"hoist", "peel", "fuse", "losses", "methods", "spreads", "loopsums"}
)

#: (name, pass, modes), over the whole module once every function is compiled
MODULE_PASSES: list[tuple[str, Callable[[ModuleBuilder], None], tuple[str, ...]]] = [
    ("connect", buffers.connect_pass, (REVERSE,)),
    ("imports", forward.rename_clashing_imports, (FORWARD,)),
    ("entry_reads", objects.check_entry_reads, BOTH),
    ("guards", guards.run, BOTH),
]

#: the names ``dump_after`` accepts
PASS_NAMES = tuple(dict.fromkeys([p[0] for p in PASSES + MODULE_PASSES] + ["emit"]))

#: how many times the full pipeline ran in this process (tests count cache hits with it)
RUN_COUNT = 0


def _without_cycle_collection(compile: Callable) -> Callable:
    """``compile`` with Python's cyclic garbage collector paused while it runs.

    A compile keeps the ASTs of the function it rewrites alive (over 100,000
    nodes for 1,000 statements) while its passes make and drop many more: the
    collector's full collections, each one a walk over every live node, took
    a fifth of a 1,000-statement compile and a quarter of a 2,000-statement one,
    and found next to nothing (the passes make few reference cycles: memory
    stays the same).  Paused, not tuned: the collector runs again as before
    once the outermost compile returns or raises.  Reference counting frees
    everything else as usual."""

    @functools.wraps(compile)
    def compile_paused(*args, **kwargs):
        if not gc.isenabled():  # the caller's choice, or an outer compile's pause
            return compile(*args, **kwargs)
        gc.disable()
        try:
            return compile(*args, **kwargs)
        finally:
            gc.enable()

    return compile_paused


@_without_cycle_collection
def compile_function(
    fn: Any,
    argnums: tuple[int, ...],
    options: Options | None = None,
    example_args: tuple = (),
    mode: str = REVERSE,
    dump_after: str | None = None,
    dump: Callable[[str], None] | None = None,
    line_table: bool = False,
    formatted: bool = True,
) -> tuple[str, dict[str, Any]]:
    """Compile ``fn`` w.r.t. ``argnums``: (module source, bindings).

    Reverse mode emits ``<fn>_value_and_grad(*params, g_out=1.0) -> (value,
    grads)``; forward mode emits ``<fn>_jvp(*params, *tangents) -> (value,
    tangent)``, one tangent per entry of ``argnums``.  Either is the module's
    first function.  ``example_args`` are the values of the call being compiled
    (their types fix sizes and methods of objects; they decide buffers unless
    ``options.buffers`` says); ``dump_after`` names a pass
    after which ``dump`` (default: print to stderr) receives the code.
    ``line_table=True`` adds the binding ``_s2sad_lines``: the text of the table
    saying which line of the user's source each emitted line comes from
    (``transforms/lines.py``), which ``cache`` keeps beside the module and
    ``s2sad.locate`` reads when the emitted code raises.  ``formatted=False``
    leaves black out (``emit.formatted`` applies it later): the cache of
    ``grad`` keeps that text, and the line table describes the text returned.
    """
    global RUN_COUNT
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if dump_after is not None and dump_after not in PASS_NAMES:
        raise ValueError(f"no pass named {dump_after!r}; the passes: {PASS_NAMES}")
    RUN_COUNT += 1
    if options is None:
        options = forward.ForwardOptions() if mode == FORWARD else Options()
    options = options.for_call(example_args)  # buffers: unless the caller decided
    module = ModuleBuilder(options, mode, top_fn=fn)
    show = _dumper(dump_after, dump, module)
    parsed = parse.parse_function(fn)
    _check_argnums(parsed, argnums)
    job = _top_job(module, parsed, argnums, example_args)
    module.functions.extend(run_function(job, module, show))
    while module.queue:
        module.functions.extend(run_function(module.queue.pop(0), module, show))
    for pass_name, run, modes in MODULE_PASSES:
        if mode in modes:
            run(module)
            show(pass_name, module.functions)
    wrt = [job.renamed.get(p, p) for p in job.wrt]  # the user's names
    header = emit.Header(parsed.source, wrt, fn, job.names[0])
    text = emit.run(module, header, formatted)
    show("emit", text)
    bindings = dict(module.bindings)
    if line_table:
        table = lines.table(module.functions, text)
        if table is not None:
            bindings[lines.NAME] = repr(table)
    return text, bindings


def _check_argnums(parsed: parse.ParsedFunction, argnums) -> None:
    a = parsed.node.args
    if a.vararg or a.kwarg:
        return  # validate refuses *args and **kwargs at their place in the source
    params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    bad = [i for i in argnums if not 0 <= i < len(params)]
    if bad and not params:
        raise ArgnumsError(
            f"argnums={bad[0]} but {parsed.source.qualname}() takes no arguments: "
            "there is nothing to differentiate with respect to"
        )
    if bad:
        raise ArgnumsError(
            f"argnums={bad[0]} but {parsed.source.qualname}({', '.join(params)}) "
            f"takes {len(params)} argument{'s' * (len(params) != 1)}: give "
            f"positions 0 to {len(params) - 1}"
        )


def _top_job(
    module: ModuleBuilder, parsed: parse.ParsedFunction, argnums, example_args
) -> Job:
    a = parsed.node.args
    params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    parsed.example_args = dict(zip(params, example_args))
    module.examples = parsed.example_args
    suffix = "_jvp" if module.mode == FORWARD else "_value_and_grad"
    name = module.namer.fresh(f"{parsed.node.name}{suffix}")
    module.function_names.add(name)
    pattern = tuple(int(i in argnums) for i in range(len(params)))
    return Job(parsed, (name,), pattern, top=True)


def run_function(
    job: Job, module: ModuleBuilder, show: Callable[[str, Any], None]
) -> list[ast.stmt]:
    """Every function pass of the module's mode over one job; what it emits."""
    try:
        foreign = module.options.buffers == FOREIGN
        for pass_name, run, modes in PASSES:
            if module.mode in modes and not (foreign and pass_name in NUMPY_ONLY):
                run(job, module)
                show(pass_name, job)
    except S2SADError as exc:
        if module.mode == FORWARD and job.site is not None:
            raise forward.callee_failed(job, exc) from exc
        raise
    return job.functions


def _dumper(
    dump_after: str | None, dump: Callable[[str], None] | None, module: ModuleBuilder
) -> Callable[[str, Any], None]:
    """``show(pass_name, what)``: hands the code after ``dump_after`` to ``dump``."""
    if dump_after is None:
        return lambda pass_name, what: None
    sink = dump or (lambda text: print(text, file=sys.stderr))

    def show(pass_name: str, what: Any) -> None:
        if pass_name == dump_after:
            sink(code_of(what, module))

    return show


def code_of(what: Any, module: ModuleBuilder) -> str:
    """Readable code for what a pass left: a job's current state, functions, or text."""
    if isinstance(what, str):
        return what
    if isinstance(what, Job):
        if what.functions:
            stmts = what.functions
        elif what.body:
            stmts = what.body
        elif what.fwd or what.bwd:
            stmts = what.fwd + [module.comment("---- backward sweep ----")] + what.bwd
        else:
            stmts = [what.node]
        header = f"# {', '.join(what.names)}\n"
    else:
        stmts, header = list(what), ""
    tree = ast.fix_missing_locations(ast.Module(body=list(stmts), type_ignores=[]))
    return header + comments.restore(ast.unparse(tree), module.comments) + "\n"
