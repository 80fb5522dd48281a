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
import inspect
import sys
import types

from s2sad.transforms.astutil import Namer, anno, name, walk
from s2sad.transforms.front import (
    attributes,
    callees,
    comprehensions,
    concat,
    containers,
    generators,
    hygiene,
    inplace,
    instances,
    objects,
    outarg,
    parse,
    starred,
)
from s2sad.transforms.front import desugar as desugar_pass
from s2sad.transforms.front import normalize as normalize_pass
from s2sad.transforms.front import validate as validate_pass


def validate(job, module) -> None:
    """Generator functions return lists; refuse unsupported syntax early; flatten
    the parameters into one list (a callee's ``*args`` and ``**kwargs`` become a
    tuple and a dict parameter)."""
    concat.run(job.node)  # args + (ones,): while *args is still known
    generators.run(job.parsed, job.top)
    validate_pass.run(job.parsed, module.helper, entry=job.top)
    outarg.run(job.parsed)
    inplace.run(job.parsed, top=job.top)
    args = job.node.args
    if args.kwarg is not None:  # always a dict: its .get is read as items
        anno(job.node)["kwarg"] = args.kwarg.arg
    # the order of inspect.signature, in which call sites pass the arguments
    args.args = (
        args.posonlyargs
        + args.args
        + ([args.vararg] if args.vararg else [])
        + args.kwonlyargs
        + ([args.kwarg] if args.kwarg else [])
    )
    args.posonlyargs, args.kwonlyargs, args.kw_defaults = [], [], []
    args.vararg = args.kwarg = None
    args.defaults = []


def desugar(job, module) -> None:
    """User names the emitted code needs are renamed (hygiene); the function's
    names are reserved; comprehensions become loops; early exits and jumps
    become flags."""
    job.renamed = hygiene.run(job, module)
    node = job.node
    job.namer = Namer(
        {n.id for n in walk(node) if isinstance(n, ast.Name)}
        | {a.arg for a in walk(node) if isinstance(a, ast.arg)}
        | module.namer.used
        | set(module.helper_names)
        # the module's functions: the entry function's guard reads the ones its
        # callees call, by name (a second-order compile of an emitted gradient
        # named the result of rec0_forward(...) rec0_forward_1, the name of the
        # other specialisation its guard then read: UnboundLocalError)
        | {k for k, v in job.parsed.env.globals.items() if inspect.isfunction(v)}
    )
    objects.unroll(node, job.parsed.example_args)
    callees.run(node, job.parsed.example_args, job.namer, job.parsed.env)
    containers.run(node, job.parsed.example_args, job.top, job.namer)
    comprehensions.run(node, job.namer, job.parsed.source)
    instances.run(job)
    starred.run(node, job.parsed.source)
    desugar_pass.run(node, job.namer)
    attributes.run(node, job.parsed.example_args, job.namer)


def normalize(job, module) -> None:
    """One operation per statement (ANF), names in SSA form where that is safe."""
    job.parsed.node, job.norm = normalize_pass.run(job.parsed, job.namer)
    for helper in sorted(getattr(job.norm, "helpers_needed", ())):
        module.helper(helper)


def bind_statics(job, module) -> None:
    """Give every global the function reads a module-level name, or read it at call time.

    Data (numbers, arrays, other objects) is read when the emitted code runs,
    as Python would: through the user's module (``SCALE`` -> ``model.SCALE``) or,
    for a closure variable, its cell (``SCALE_cell.cell_contents``).  What the
    compiler specialises on (modules, classes, functions and other callables,
    and the root of a called name: ``obj`` in ``obj.method(x)``) is bound once
    (``helper``, ``np``) and guarded: the entry function first checks
    ``model.helper is helper`` (the ``guards`` module pass), and a rebound name
    makes s2sad compile again instead of running stale code.
    """
    roots = set()
    for sub in walk(job.node):
        if isinstance(sub, ast.Call):
            root = sub.func
            while isinstance(root, ast.Attribute):
                root = root.value
            roots.add(id(root))
    binder = _Binder(job, module, roots)
    binder.visit(job.node)
    for ref in anno(job.node).get("guards", ()):  # lambda_args: the callee copied
        roots.add(id(ref))
        binder.visit(ref)
    # classes no longer in the code, still specialised on (nodes kept alive:
    # the binder tells nodes apart by id)
    named = [name(var) for var in job.inlined_classes]
    for node in named:
        binder.visit_Name(node)


def specialised(obj) -> bool:
    """Whether the compiler's output depends on which object ``obj`` is (not just
    on reading it): modules, classes and callables."""
    return isinstance(obj, (types.ModuleType, type)) or callable(obj)


class _Binder(ast.NodeTransformer):
    def __init__(self, job, module, call_roots: set[int]):
        self.job, self.module, self.call_roots = job, module, call_roots
        self.parsed, self.norm = job.parsed, job.norm
        self.seen: set[int] = set()  # a Name node may appear twice (a method's self)

    def visit_Name(self, sub: ast.Name) -> ast.expr:
        if not isinstance(sub.ctx, ast.Load) or id(sub) in self.seen:
            return sub
        self.seen.add(id(sub))
        if "bind" in anno(sub):  # a runtime function the front end calls
            obj, origin = anno(sub)["bind"]
            if getattr(obj, "__module__", "") == "s2sad.runtime.support":
                sub.id = self.module.helper(obj.__name__).id
                anno(sub)["helper"] = sub.id
                return sub
            sub.id = self.module.bind(sub.id, obj, origin, self.norm.locals)
            return sub
        if (
            sub.id in self.norm.locals
            or sub.id in self.norm.local_functions
            or anno(sub).get("helper")
        ):
            return sub
        env, module = self.parsed.env, self.module
        obj = env.lookup(sub.id)
        if obj is parse.MISSING or getattr(builtins, sub.id, parse.MISSING) is obj:
            return sub
        top = self.parsed.fn is module.top_fn
        if sub.id in env.defaults:  # a callee's default object
            origin = env.defaults[sub.id]
        elif sub.id in env.foreign:  # read by a method inlined from another module
            origin = ["module", *env.foreign[sub.id][1:]]
        elif sub.id in env.cells:
            origin = ["closure", sub.id] if top else None
        else:
            origin = ["module", env.globals.get("__name__", "__main__"), sub.id]
        holder = self.holder(sub.id)
        if id(sub) in self.call_roots or specialised(obj):
            sub.id = module.bind(sub.id, obj, origin, self.norm.locals)
            if holder is not None:
                module.guards[ast.unparse(holder)] = sub.id
            return sub
        if holder is None:  # no way to read it again: bound as it is now
            sub.id = module.bind(sub.id, obj, origin, self.norm.locals)
            return sub
        return ast.copy_location(holder, sub)

    def holder(self, var: str) -> ast.expr | None:
        """Where emitted code reads the global (or closure variable) ``var`` when it
        runs: ``model.var``, ``model_globals["var"]``, ``var_cell.cell_contents``."""
        env, module = self.parsed.env, self.module
        top = self.parsed.fn is module.top_fn
        if var in env.cells:
            cell = env.cell_objects.get(var)
            if cell is None:
                return None
            alias = self.alias(f"{var}_cell", cell, ["cell", var] if top else None)
            return ast.Attribute(
                value=name(alias), attr="cell_contents", ctx=ast.Load()
            )
        modname = env.globals.get("__name__", "__main__")
        space = env.globals
        if var in env.foreign:  # a global of the module an inlined method is from
            modname, var = env.foreign[var][1:]
            space = getattr(sys.modules.get(modname), "__dict__", None)
        mod = sys.modules.get(modname)
        short = modname.rsplit(".", 1)[-1]
        importable = all(part.isidentifier() for part in modname.split("."))
        if importable and mod is not None and getattr(mod, "__dict__", None) is space:
            return ast.Attribute(
                value=name(self.alias(short, mod, None)), attr=var, ctx=ast.Load()
            )
        if not space:
            return None
        alias = self.alias(f"{short}_globals", space, None)
        return ast.Subscript(value=name(alias), slice=ast.Constant(var), ctx=ast.Load())

    def alias(self, wanted: str, obj, origin) -> str:
        """A module-level name for ``obj`` that no name of this function shadows."""
        used = self.job.namer.used
        for existing, value in self.module.bindings.items():
            if value is obj and existing not in self.norm.locals:
                return existing
        if wanted in used or not wanted.isidentifier():  # "<run_path>": fresh mends
            wanted = self.job.namer.fresh(wanted)
        alias = self.module.bind(wanted, obj, origin)
        self.job.namer.reserve(alias)
        return alias
