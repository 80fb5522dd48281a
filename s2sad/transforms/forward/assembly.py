"""Forward: follow each normalized statement with the statement computing its tangent.

No tape and no reversal: branches and loops keep their shape, a call to a user
function becomes a call to its ``<name>_jvp`` twin (in the same module, one
per pattern of arguments with tangents, so recursion works), and mutation is
mirrored on the tangent (``L.append(v)`` also appends ``t_v`` to ``t_L``)::

    def f(x, W):                         def f_jvp(x, W, t_x):
        h = np.tanh(x @ W)                   # tangent of: h = np.tanh(x @ W)
        return np.sum(h)          ->         matmul = x @ W
                                             t_matmul = t_x @ W
                                             h = np.tanh(matmul)
                                             t_h = t_matmul * (1.0 - h * h)
                                             # tangent of: return np.sum(h)
                                             out = np.sum(h)
                                             t_out = np.sum(t_h)
                                             return out, finish(t_out, out)

``None`` is the zero tangent.  Each tangent variable is tracked as none / set /
maybe (may be None at run time), flow-sensitively: a branch joins the states
of its two arms and a loop iterates its body's states to a fixpoint, so
straight-line code reads like hand-written derivative code and only values
that may really be None get ``or_zeros(t, x)`` before arithmetic.  Containers
whose tangent may hold None entries (``[t_a, None]``) are tracked as *holey*.

The emitted module is itself valid input: compiling the gradient module of
``f`` in this mode gives forward-over-reverse Hessian-vector products.
"""

from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from s2sad import pipeline
from s2sad.errors import MissingRuleError, S2SADError
from s2sad.runtime import tangents
from s2sad.transforms import emit
from s2sad.transforms.forward import cleanup as tangent_cleanup
from s2sad.transforms.forward import statements as forward_stmts
from s2sad.transforms.front import activity, desugar, normalize, parse, validate
from s2sad.transforms.astutil import Namer, anno, call, const
from s2sad.transforms.front.calls import CallInfo
from s2sad.transforms.forward.function import FunctionForward, mutator_position
from s2sad.transforms.forward.exprs import SET

#: helpers of s2sad.runtime.tangents that generated code may call
TANGENT_HELPERS = (
    "or_zeros",
    "filled",
    "broadcast_like",
    "zero_entry",
    "set_item",
    "restore_tangent",
    "finish",
    "jvp_scalar",
    "jvp_reduction",
)


@dataclass
class ForwardOptions(pipeline.Options):
    """Options of a forward-mode module (the key keeps them apart in the cache)."""

    def key(self) -> str:
        return f"mode=jvp,{super().key()},tangents={tangents.fingerprint()}"


@dataclass
class JvpSpec:
    name: str
    info: CallInfo
    pattern: tuple  # per argument: 0 no tangent, 1 tangent, 2 tangent with None entries
    site: Any = None  # for a runtime function differentiated from its source: the call


class ForwardModule(pipeline.ModuleBuilder):
    """The functions, imports and bindings of one emitted forward-mode module."""

    def __init__(self, options: pipeline.Options):
        super().__init__(options)
        self.jvp_specs: dict[tuple, JvpSpec] = {}
        self.jvp_queue: list[tuple[JvpSpec, parse.ParsedFunction]] = []

    def request_jvp(
        self, info: CallInfo, pattern: tuple, caller: FunctionForward, site: Any = None
    ) -> str:
        """The name of the ``_jvp`` twin of a called user function, queued if new.

        ``site`` (a Problem at the call) marks a runtime function without a tangent
        rule whose source is differentiated instead.
        """
        if info.kind == "local":
            local = caller.local_functions[info.target]
            key: tuple = ("local", id(local.node), pattern)
            base = info.target
        else:
            key, base = ("user", info.target, pattern), info.target.__name__
        spec = self.jvp_specs.get(key)
        if spec is None:
            spec = JvpSpec(self.namer.fresh(f"{base}_jvp"), info, pattern, site)
            self.jvp_specs[key] = spec
            if info.kind == "local":
                node = copy.deepcopy(local.node)
                parsed = parse.ParsedFunction(
                    node, caller.parsed.source, caller.parsed.env
                )
                parsed.local_functions = caller.local_functions
            else:
                parsed = parse.parse_function(info.target)
            self.jvp_queue.append((spec, parsed))
        return spec.name

    def snapshot(self) -> tuple:
        return (
            set(self.namer.used),
            len(self.comments),
            dict(self.jvp_specs),
            list(self.jvp_queue),
            dict(self.bindings),
            dict(self.origins),
            dict(self.rule_imports),
            set(self.helpers_used),
        )

    def restore(self, snap: tuple) -> None:
        used, n_comments, specs, queue, bindings, origins, imports, helpers = snap
        self.namer.used = used
        del self.comments[n_comments:]
        self.jvp_specs, self.jvp_queue = specs, queue
        self.bindings, self.origins = bindings, origins
        self.rule_imports, self.helpers_used = imports, helpers


def compile_function(
    fn: Any,
    argnums: tuple[int, ...],
    options: pipeline.Options | None = None,
    example_args: tuple = (),
) -> tuple[str, dict[str, Any]]:
    """Compile ``fn``'s Jacobian-vector product w.r.t. ``argnums``: (source, bindings).

    The module's first function is ``<fn>_jvp(*params, *tangents) -> (value, tangent)``
    with one tangent per entry of ``argnums``, in that order.
    """
    module = ForwardModule(options or ForwardOptions())
    module.top_fn = fn
    parsed = parse.parse_function(fn)
    params = _params(parsed.node)
    parsed.example_args = dict(zip(params, example_args))
    wrt = [params[i] for i in argnums]
    top = module.namer.fresh(f"{parsed.node.name}_jvp")
    module.functions.append(
        _compile(module, parsed, {p: 1 for p in wrt}, wrt, top, True)
    )
    while module.jvp_queue:
        spec, callee = module.jvp_queue.pop(0)
        callee_params = _params(callee.node)
        codes = {p: c for p, c in zip(callee_params, spec.pattern) if c}
        try:
            module.functions.append(
                _compile(module, callee, codes, list(codes), spec.name, False)
            )
        except S2SADError as exc:
            if spec.site is None:
                raise
            raise MissingRuleError(
                dataclasses.replace(
                    spec.site,
                    hint=f"{spec.site.hint}\n(differentiating its source failed: "
                    f"{str(exc).splitlines()[0]})",
                )
            ) from exc
    _rename_clashing_imports(module)
    text = emit.run(module, emit.Header(parsed.source, wrt, fn))
    return _docstring_comments(text, module.comments), dict(module.bindings)


def _rename_clashing_imports(module: ForwardModule) -> None:
    """Rename an imported rule or helper that a variable of some function shadows."""
    tree = ast.Module(body=module.functions, type_ignores=[])
    refs = [
        n for n in ast.walk(tree) if isinstance(n, ast.Name) and anno(n).get("rule_ref")
    ]
    user = {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and not anno(n).get("rule_ref")
    } | {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    for key, (mod, fn_name, alias) in sorted(module.rule_imports.items()):
        if alias in user:
            new = module.namer.fresh(alias)
            while new in user:
                new = module.namer.fresh(alias)
            module.rule_imports[key] = (mod, fn_name, new)
            for n in refs:
                if n.id == alias:
                    n.id = new


def _docstring_comments(text: str, comments: list[str]) -> str:
    """A comment that opens a function body is unparsed as a docstring: restore it."""

    def repl(m: re.Match) -> str:
        return f"{m.group(1)}# {comments[int(m.group(2))]}"

    return re.sub(r'^( *)"""S2SAD_COMMENT_(\d+)"""$', repl, text, flags=re.MULTILINE)


def _params(node: ast.FunctionDef) -> list[str]:
    a = node.args
    return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]


def _compile(
    module: ForwardModule,
    parsed: parse.ParsedFunction,
    codes: dict[str, int],
    wrt: list[str],
    fn_name: str,
    top: bool,
) -> ast.FunctionDef:
    """One function's ``_jvp`` twin: tangent parameters ``t_<p>`` for ``wrt``."""
    _unstar(parsed.node)
    validate.run(parsed)
    node = parsed.node
    node.args.args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
    node.args.posonlyargs, node.args.kwonlyargs, node.args.kw_defaults = [], [], []
    node.args.defaults = []
    namer = Namer(
        {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        | {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
        | module.namer.used
        | set(pipeline.HELPERS)
        | set(TANGENT_HELPERS)
    )
    desugar.run(node, namer)
    node, norm = normalize.run(parsed, namer)
    _bind_statics(module, node, norm, parsed)
    never = _loop_counters(node)
    ff = FunctionForward(
        module, parsed, namer, norm, _activity(node, wrt, never), _params(node)
    )
    ff.never = never
    for p in wrt:
        ff.state[p] = SET
        if codes.get(p) == 2:
            ff.holey.add(p)
    tparams = [ff.t(p) for p in wrt]
    body = forward_stmts.block(ff, node.body[:-1])
    ret = node.body[-1].value
    t_ret = ff.tangent_of_atom(ret, body)
    if top:
        t_ret = call(ff.rule_ref(tangents.finish), t_ret, copy.deepcopy(ret))
    ff.raise_problems()
    result = ast.Tuple(elts=[ret, t_ret], ctx=ast.Load())
    body = tangent_cleanup.run(body + [ast.Return(value=result)])
    return pipeline._def(fn_name, _params(node) + tparams, body)


def _unstar(node: ast.FunctionDef) -> None:
    """``a, b, *_ = v`` (as gradient modules unpack rule results) -> ``a, b = v[:2]``."""
    for sub in ast.walk(node):
        if not (
            isinstance(sub, ast.Assign)
            and len(sub.targets) == 1
            and isinstance(sub.targets[0], (ast.Tuple, ast.List))
        ):
            continue
        elts = sub.targets[0].elts
        last = elts[-1] if elts else None
        if (
            isinstance(last, ast.Starred)
            and isinstance(last.value, ast.Name)
            and last.value.id == "_"
            and not any(isinstance(e, ast.Starred) for e in elts[:-1])
        ):
            sub.targets[0].elts = elts[:-1]
            head = ast.Slice(lower=None, upper=const(len(elts) - 1), step=None)
            sub.value = ast.copy_location(
                ast.Subscript(value=sub.value, slice=head, ctx=ast.Load()), sub.value
            )


def _bind_statics(module: ForwardModule, node: ast.FunctionDef, norm, parsed) -> None:
    """Give every non-local name a module-level binding (as the reverse pipeline does)."""
    for sub in ast.walk(node):
        if not (isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load)):
            continue
        if (
            sub.id in norm.locals
            or sub.id in norm.local_functions
            or anno(sub).get("helper")
        ):
            continue
        obj = parsed.env.lookup(sub.id)
        if obj is parse._MISSING or getattr(builtins, sub.id, parse._MISSING) is obj:
            continue
        if sub.id in parsed.env.cells:
            origin = ["closure", sub.id] if parsed.fn is module.top_fn else None
        else:
            origin = ["module", parsed.env.globals.get("__name__", "__main__"), sub.id]
        sub.id = module.bind(sub.id, obj, origin)


# ---------------------------------------------------------------- activity


def _flow(s: ast.stmt) -> tuple[str | None, list[str]]:
    """activity._flow, plus the in-place helpers of emitted gradient modules."""
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
        info = anno(s.value).get("call")
        pos = (
            mutator_position(getattr(info, "target", None))
            if info is not None
            else None
        )
        args = s.value.args
        if pos is not None and len(args) > pos and isinstance(args[0], ast.Name):
            return args[0].id, [
                a.id for a in (args[0], args[pos]) if isinstance(a, ast.Name)
            ]
    return activity._flow(s)


def _loop_counters(node: ast.FunctionDef) -> set[str]:
    """Names of ranges and counters of ``for`` loops: integers, never with a tangent.

    (Gradient modules also push them on their tape, so flow-insensitive activity
    alone would give them one.)
    """
    return {
        n.id
        for s in ast.walk(node)
        if isinstance(s, ast.For)
        for n in (s.target, s.iter)
        if isinstance(n, ast.Name)
    }


def _activity(
    node: ast.FunctionDef, wrt: list[str], never: set[str]
) -> activity.Activity:
    """Names that depend on ``wrt`` and names that reach the returned value."""
    stmts = list(activity.simple_statements(node.body))
    flows = [(t, ops) for t, ops in map(_flow, stmts) if t not in never]
    return activity.solve(node, wrt, flows, useful_needs_active=False)
