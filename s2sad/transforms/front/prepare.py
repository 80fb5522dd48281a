"""The passes both modes run first: validate, desugar, normalize, bind.

Each takes the :class:`~s2sad.transforms.module.Job` of one function and the
module being built, and leaves its result on the job (the function's node is
rewritten in place)::

    def f(x, *, k=2):             def f(x, k):          (one flat parameter list)
        y = np.tanh(x @ W)   ->       matmul = x @ W    (normalize: one operation
        return y.sum()                 y = np.tanh(matmul)   per statement)
                                       ...
                                   W -> the module's binding of the global W
"""

from __future__ import annotations

import ast
import builtins

from s2sad.transforms.astutil import Namer, anno
from s2sad.transforms.front import desugar as desugar_pass
from s2sad.transforms.front import hygiene, inplace
from s2sad.transforms.front import normalize as normalize_pass
from s2sad.transforms.front import parse
from s2sad.transforms.front import validate as validate_pass


def validate(job, module) -> None:
    """Refuse unsupported syntax early; flatten the parameters into one list."""
    validate_pass.run(job.parsed)
    inplace.run(job.parsed)
    args = job.node.args
    args.args = args.posonlyargs + args.args + args.kwonlyargs
    args.posonlyargs, args.kwonlyargs, args.kw_defaults = [], [], []
    args.defaults = []


def desugar(job, module) -> None:
    """User names the emitted code needs are renamed (hygiene); early exits and
    jumps become flags; the function's names are reserved."""
    job.renamed = hygiene.run(job, module)
    node = job.node
    job.namer = Namer(
        {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        | {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
        | module.namer.used
        | set(module.helper_names)
    )
    desugar_pass.run(node, job.namer)


def normalize(job, module) -> None:
    """One operation per statement (ANF), names in SSA form where that is safe."""
    job.parsed.node, job.norm = normalize_pass.run(job.parsed, job.namer)


def bind_statics(job, module) -> None:
    """Give every static reference's root name a module-level binding."""
    parsed, norm = job.parsed, job.norm
    for sub in ast.walk(job.node):
        if not (isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load)):
            continue
        if (
            sub.id in norm.locals
            or sub.id in norm.local_functions
            or anno(sub).get("helper")
        ):
            continue
        obj = parsed.env.lookup(sub.id)
        if obj is parse.MISSING or getattr(builtins, sub.id, parse.MISSING) is obj:
            continue
        if sub.id in parsed.env.cells:
            origin = ["closure", sub.id] if parsed.fn is module.top_fn else None
        else:
            origin = ["module", parsed.env.globals.get("__name__", "__main__"), sub.id]
        sub.id = module.bind(sub.id, obj, origin)
