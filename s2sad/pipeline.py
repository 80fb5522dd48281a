"""The compiler pipeline: the order of the passes is written here and only here.

    parse -> validate -> desugar -> normalize -> activity -> reverse (+ control)
          -> optimize -> emit

``compile_function(fn, argnums)`` returns the emitted module source.  User
functions called with differentiated arguments get a ``<name>_forward`` /
``<name>_backward`` pair in the same module (specialised per pattern of active
arguments), which is what makes recursion work.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from typing import Any

from s2sad.errors import UnsupportedSyntaxError
from s2sad.options import Options
from s2sad.transforms import emit
from s2sad.transforms.buffers import workspace
from s2sad.transforms.front import (
    activity,
    aliasing,
    desugar,
    normalize,
    parse,
    validate,
)
from s2sad.transforms.reverse import cleanup as optimize
from s2sad.transforms.astutil import Namer, anno, assign, call, const, name, stores
from s2sad.transforms.reverse.statements import FunctionReverser, NONE, SET

PASSES = (
    "parse",
    "validate",
    "desugar",
    "normalize",
    "activity",
    "aliasing",
    "reverse",
    "optimize",
    "emit",
)

#: how many times the full pipeline ran in this process (tests count cache hits with it)
RUN_COUNT = 0

HELPERS = (
    "accumulate",
    "unbroadcast",
    "finalize",
    "item_of",
    "without_item",
    "split_last",
    "copy_item",
    "restore_item",
    "pad",
    "take_rows",
    "zeros",
    "NO_WORKSPACE",
)


class FunctionCompiler:
    """Per-function compile state shared by the reverse and control passes."""

    def __init__(
        self,
        module: "ModuleBuilder",
        parsed: parse.ParsedFunction,
        namer: Namer,
        reassigned: set[str],
        locals_: set[str],
    ):
        self.module = module
        self.parsed = parsed
        self.namer = namer
        self.reassigned = set(reassigned)
        self.locals = set(locals_)
        self.problems = []
        self.uses_tape = False
        self.save_count = 0
        self.save_slots: dict[int, str | None] = {}

    def save(self, x: str, fwd: list[ast.stmt], in_loop: bool) -> int:
        """Keep ``x``'s old value before it is re-assigned; the save's id (0: no save).

        In a loop the value goes on the tape; code that runs once keeps it in a
        named variable (``x_old``) instead.
        """
        if x not in self.reassigned:
            return 0
        self.save_count += 1
        if in_loop:
            node: ast.stmt = ast.Expr(
                value=ast.Call(
                    func=ast.Attribute(
                        value=name("tape"), attr="append", ctx=ast.Load()
                    ),
                    args=[name(x)],
                    keywords=[],
                )
            )
            self.uses_tape = True
            self.save_slots[self.save_count] = None
        else:
            slot = self.namer.fresh(f"{x}_old")
            self.locals.add(slot)
            self.reassigned.add(slot)  # bound on some paths only
            node = assign(slot, name(x))
            self.save_slots[self.save_count] = slot
        anno(node)["save"] = x
        anno(node)["save_id"] = self.save_count
        fwd.append(node)
        return self.save_count

    def restore(self, x: str, save_id: int) -> ast.stmt:
        """``x = tape.pop()`` (or ``x = x_old``), paired with the save ``save_id``."""
        slot = self.save_slots[save_id]
        value = (
            name(slot)
            if slot
            else ast.Call(
                func=ast.Attribute(value=name("tape"), attr="pop", ctx=ast.Load()),
                args=[],
                keywords=[],
            )
        )
        node = assign(x, value)
        anno(node)["restore"] = x
        anno(node)["save_id"] = save_id
        return node

    def save_item(self, y: str, idx: ast.expr, fwd: list[ast.stmt], in_loop: bool):
        old_value = call(self.module.helper("copy_item"), name(y), idx)
        if in_loop:
            fwd.append(
                ast.Expr(
                    value=ast.Call(
                        func=ast.Attribute(
                            value=name("tape"), attr="append", ctx=ast.Load()
                        ),
                        args=[old_value],
                        keywords=[],
                    )
                )
            )
            self.uses_tape = True
            return lambda: ast.Call(
                func=ast.Attribute(value=name("tape"), attr="pop", ctx=ast.Load()),
                args=[],
                keywords=[],
            )
        old = self.namer.fresh(f"{y}_old")
        fwd.append(assign(old, old_value))
        return lambda: name(old)

    def comment(self, lineno: int) -> ast.stmt:
        text = self.parsed.source.line(lineno).strip()
        return self.module.comment(f"grad of: {text}")

    def fail(self, node: ast.AST, message: str, hint: str = "") -> None:
        self.problems.append(self.parsed.source.problem(node, message, hint))


@dataclass
class Specialization:
    fwd: str
    bwd: str
    info: Any
    pattern: tuple


class ModuleBuilder:
    """Collects the functions, imports and bindings of one emitted module."""

    def __init__(self, options: Options):
        self.options = options
        self.namer = Namer({"tape", "g_out", "saved"} | set(dir(builtins)))
        self.functions: list[ast.FunctionDef] = []
        self.bindings: dict[str, Any] = {}
        self.rule_imports: dict[str, tuple[str, str]] = {}
        self.helpers_used: set[str] = set()
        self.specs: dict[tuple, Specialization] = {}
        self.queue: list[tuple[Specialization, parse.ParsedFunction]] = []
        self.comments: list[str] = []
        self.origins: dict[str, list | None] = {}

    # -- names shared by all functions of the module
    def helper(self, fn_name: str) -> ast.expr:
        self.helpers_used.add(fn_name)
        node = name(fn_name)
        anno(node)["helper"] = True
        return node

    def comment(self, text: str) -> ast.stmt:
        self.comments.append(text)
        return ast.Expr(value=const(f"S2SAD_COMMENT_{len(self.comments) - 1}"))

    def bind(self, wanted: str, obj: Any, origin: list | None = None) -> str:
        """A module-level name for ``obj``, preferably ``wanted``.

        ``origin`` says how a later process finds the object again without
        compiling: ``["module", module_name, name]`` or ``["closure", name]``.
        """
        if wanted in self.bindings and self.bindings[wanted] is obj:
            return wanted
        for existing, value in self.bindings.items():
            if value is obj:
                return existing
        alias = wanted
        if wanted in self.bindings or wanted in self.namer.used:
            alias = self.namer.fresh(wanted)
        else:
            self.namer.reserve(wanted)
        self.bindings[alias] = obj
        self.origins[alias] = origin
        return alias

    def rule_ref(self, fn) -> ast.expr:
        mod = getattr(fn, "__module__", "") or ""
        if mod.startswith("s2sad.runtime."):
            key = f"{mod}.{fn.__name__}"
            if key not in self.rule_imports:
                alias = self.namer.fresh(fn.__name__)
                self.rule_imports[key] = (mod, fn.__name__, alias)
            return name(self.rule_imports[key][2])
        origin = ["module", mod, fn.__name__] if mod else None
        return name(self.bind(fn.__name__, fn, origin))

    # -- user functions called with differentiated arguments
    def request(
        self, info, pattern: tuple, caller: FunctionCompiler
    ) -> tuple[str, str]:
        if info.kind == "local":
            local = caller.module_locals[info.target]
            key = ("local", id(local.node), pattern)
            base = info.target
        else:
            key = ("user", info.target, pattern)
            base = info.target.__name__
        spec = self.specs.get(key)
        if spec is None:
            fwd = self.namer.fresh(f"{base}_forward")
            bwd = self.namer.fresh(f"{base}_backward")
            spec = Specialization(fwd, bwd, info, pattern)
            self.specs[key] = spec
            if info.kind == "local":
                parsed = parse.ParsedFunction(
                    local.node, caller.parsed.source, caller.parsed.env
                )
                parsed.local_functions = caller.module_locals
            else:
                parsed = parse.parse_function(info.target)
            self.queue.append((spec, parsed))
        return spec.fwd, spec.bwd


def compile_function(
    fn: Any,
    argnums: tuple[int, ...],
    options: Options | None = None,
    example_args: tuple = (),
) -> tuple[str, dict[str, Any]]:
    """Compile ``fn``'s value-and-gradient w.r.t. ``argnums``: (module source, bindings)."""
    global RUN_COUNT
    RUN_COUNT += 1
    options = options or Options()
    module = ModuleBuilder(options)
    module.top_fn = fn
    parsed = parse.parse_function(fn)
    params = _params(parsed.node)
    parsed.example_args = dict(zip(params, example_args))
    module.examples = parsed.example_args
    wrt = [params[i] for i in argnums]
    top_name = module.namer.fresh(f"{parsed.node.name}_value_and_grad")
    module.functions.extend(_compile(module, parsed, wrt, top_name, None))
    while module.queue:
        spec, callee = module.queue.pop(0)
        callee_params = _params(callee.node)
        callee_wrt = [p for p, active in zip(callee_params, spec.pattern) if active]
        module.functions.extend(
            _compile(module, callee, callee_wrt, spec.fwd, spec.bwd)
        )
    if workspace.wanted(module, parsed.example_args):
        workspace.connect(module.functions, module)
    header = emit.Header(parsed.source, [p for p in wrt], fn)
    return emit.run(module, header), dict(module.bindings)


def _params(node: ast.FunctionDef) -> list[str]:
    a = node.args
    return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]


def _compile(
    module: ModuleBuilder,
    parsed: parse.ParsedFunction,
    wrt: list[str],
    fwd_name: str,
    bwd_name: str | None,
):
    """One function: a single value-and-grad def (top level) or a forward/backward pair."""
    validate.run(parsed)
    node = parsed.node
    node.args.args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
    node.args.posonlyargs, node.args.kwonlyargs, node.args.kw_defaults = [], [], []
    node.args.defaults = []
    namer = Namer(
        {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        | {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
        | module.namer.used
        | set(HELPERS)
    )
    desugar.run(node, namer)
    node, norm = normalize.run(parsed, namer)
    _bind_statics(module, node, norm, parsed)
    act = activity.run(node, wrt, parsed.source)
    aliasing.run(node, act, parsed.source)
    fc = FunctionCompiler(module, parsed, namer, norm.nonsimple, norm.locals)
    fc.module_locals = {
        **getattr(parsed, "local_functions", {}),
        **norm.local_functions,
    }
    rv = FunctionReverser(fc, act)
    ret = node.body[-1]
    if isinstance(ret.value, ast.Name) and ret.value.id not in _params(node):
        rv.gnames[ret.value.id] = (
            "g_out"  # the seed parameter is the output's cotangent
        )
    fwd, bwd_builder = rv.forward_and_backward(node.body[:-1], False)
    ret_atom = ret.value
    if isinstance(ret_atom, ast.Name) and rv.needs(ret_atom):
        rv.state[rv.g(ret_atom.id)] = SET
    bwd = bwd_builder()
    if fc.problems:
        raise UnsupportedSyntaxError(fc.problems)
    keep = {rv.g(p) for p in _params(node)}  # read by the final return
    fwd, bwd = optimize.run(fwd, bwd, fc, module.options, keep)
    params = _params(node)
    grads = [
        name(rv.g(p)) if rv.state.get(rv.g(p), NONE) != NONE else const(None)
        for p in wrt
    ]
    if bwd_name is None:
        top = _top_level(module, node, fc, rv, fwd, bwd, ret_atom, wrt, grads, fwd_name)
        return [top] + getattr(top, "s2sad_after", [])
    pair = list(
        _pair(module, node, fc, rv, fwd, bwd, ret_atom, params, wrt, fwd_name, bwd_name)
    )
    if workspace.wanted(module, getattr(module, "examples", {})):
        for f in pair:
            workspace.run_callee(f, module, fc.namer)
    return pair


def _bind_statics(module: ModuleBuilder, node: ast.FunctionDef, norm, parsed) -> None:
    """Give every static reference's root name a module-level binding."""
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Name)
            and isinstance(sub.ctx, ast.Load)
            and sub.id not in norm.locals
            and sub.id not in norm.local_functions
            and not anno(sub).get("helper")
        ):
            obj = parsed.env.lookup(sub.id)
            if (
                obj is parse._MISSING
                or getattr(builtins, sub.id, parse._MISSING) is obj
            ):
                continue
            if sub.id in parsed.env.cells:
                origin = ["closure", sub.id] if parsed.fn is module.top_fn else None
            else:
                origin = [
                    "module",
                    parsed.env.globals.get("__name__", "__main__"),
                    sub.id,
                ]
            sub.id = module.bind(sub.id, obj, origin)


def _init_saved(
    fc: FunctionCompiler, params: list[str], fwd: list[ast.stmt]
) -> list[ast.stmt]:
    """``tape = []`` and ``x = None`` for saved names that may be unbound when saved."""
    bound = set(params)
    for s in fwd:  # names the top level binds before any save of them needs them
        if "save" in anno(s) and anno(s)["save"] not in bound:
            break
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
            bound.add(s.targets[0].id)
        elif isinstance(s, (ast.If, ast.For, ast.While)):
            break
    inits = [assign(x, const(None)) for x in sorted(fc.saved_names - bound)]
    for s in inits:
        anno(s)["init"] = s.targets[0].id
    tape = [assign("tape", ast.List(elts=[], ctx=ast.Load()))] if fc.uses_tape else []
    return tape + inits


def _top_level(
    module, node, fc, rv, fwd, bwd, ret_atom, wrt, grads, fn_name
) -> ast.FunctionDef:
    params = _params(node)
    seed = []
    if (
        isinstance(ret_atom, ast.Name)
        and rv.needs(ret_atom)
        and rv.g(ret_atom.id) != "g_out"
    ):
        seed = [assign(rv.g(ret_atom.id), name("g_out"))]
    finals = [call(module.helper("finalize"), g, name(p)) for g, p in zip(grads, wrt)]
    keep = []
    if isinstance(ret_atom, ast.Name) and ret_atom.id in fc.saved_names:
        # the backward sweep restores earlier values of this name: keep the output
        value = fc.namer.fresh("value")
        keep = [assign(value, ret_atom)]
        ret_atom = name(value)
    result = ast.Tuple(
        elts=[ret_atom, ast.Tuple(elts=finals, ctx=ast.Load())], ctx=ast.Load()
    )
    body = (
        _init_saved(fc, params, fwd)
        + fwd
        + keep
        + seed
        + bwd
        + [ast.Return(value=result)]
    )
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=p) for p in params] + [ast.arg(arg="g_out")],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[const(1.0)],
        vararg=None,
        kwarg=None,
    )
    fn = ast.FunctionDef(
        name=fn_name,
        args=args,
        body=body,
        decorator_list=[],
        returns=None,
        type_comment=None,
        type_params=[],
    )
    if module.options.optimize and module.options.workspace:
        examples = getattr(fc.parsed, "example_args", {}) or {}
        workspace.run(fn, module, fc.namer, examples)
    return fn


def _pair(module, node, fc, rv, fwd, bwd, ret_atom, params, wrt, fwd_name, bwd_name):
    assigned = stores(ast.Module(body=fwd, type_ignores=[])) | set(params)
    needed = sorted(
        {
            n.id
            for s in bwd
            for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        & assigned
    )
    saved_names = (["tape"] if fc.uses_tape else []) + [
        n for n in needed if n != "tape"
    ]
    residual = ast.Tuple(elts=[name(n) for n in saved_names], ctx=ast.Load())
    # names bound only on some paths must exist when the residual tuple is built
    partial = [
        assign(n, const(None))
        for n in saved_names
        if n in fc.reassigned and n not in fc.saved_names and n not in params
    ]
    fwd_body = (
        _init_saved(fc, params, fwd)
        + partial
        + fwd
        + [ast.Return(value=ast.Tuple(elts=[ret_atom, residual], ctx=ast.Load()))]
    )
    fwd_def = _def(fwd_name, params, fwd_body)
    unpack = []
    if saved_names:
        unpack = [
            ast.Assign(
                targets=[
                    ast.Tuple(
                        elts=[name(n, store=True) for n in saved_names], ctx=ast.Store()
                    )
                ],
                value=name("saved"),
                type_comment=None,
            )
        ]
    seed = []
    if (
        isinstance(ret_atom, ast.Name)
        and rv.needs(ret_atom)
        and rv.g(ret_atom.id) != "g_out"
    ):
        seed = [assign(rv.g(ret_atom.id), name("g_out"))]
    grads = [
        (
            name(rv.g(p))
            if p in wrt and rv.state.get(rv.g(p), NONE) != NONE
            else const(None)
        )
        for p in params
    ]
    ret = ast.Return(value=ast.Tuple(elts=grads, ctx=ast.Load()))
    bwd_def = _def(bwd_name, ["g_out", "saved"], unpack + seed + bwd + [ret])
    return fwd_def, bwd_def


def _def(fn_name: str, params: list[str], body: list[ast.stmt]) -> ast.FunctionDef:
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=p) for p in params],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
        vararg=None,
        kwarg=None,
    )
    return ast.FunctionDef(
        name=fn_name,
        args=args,
        body=body or [ast.Pass()],
        decorator_list=[],
        returns=None,
        type_comment=None,
        type_params=[],
    )
