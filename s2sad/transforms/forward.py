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
import operator
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from s2sad import pipeline
from s2sad.errors import MissingRuleError, S2SADError, UnsupportedSyntaxError
from s2sad.runtime import registry, support, tangents
from s2sad.transforms import (
    activity,
    desugar,
    emit,
    normalize,
    parse,
    tangent_cleanup,
    validate,
)
from s2sad.transforms.astutil import Namer, anno, assign, call, const, name
from s2sad.transforms.calls import CallInfo
from s2sad.transforms.reverse import BINOPS, UNARYOPS, index_value
from s2sad.transforms.tangent_exprs import NONE, SET, Op, Tangent, op_tangent

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
#: calls that change their first argument in place: f -> position of the new value
MUTATORS = {support.restore_item: 2, tangents.set_item: 2, tangents.restore_tangent: 2}
INACTIVE_METHODS = activity.INACTIVE_METHODS | {"keys", "index", "count"}


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
    body = ff.block(node.body[:-1])
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


def mutator_position(fn: Any) -> int | None:
    """For a call that changes its first argument in place, the new value's position."""
    try:
        return MUTATORS.get(fn)
    except TypeError:  # unhashable callee
        return None


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
    act = activity.Activity(active=set(wrt))
    flows = [(t, ops) for t, ops in map(_flow, stmts) if t not in never]
    changed = True
    while changed:
        changed = False
        for target, ops in flows:
            if (
                target
                and target not in act.active
                and any(o in act.active for o in ops)
            ):
                act.active.add(target)
                changed = True
    ret = node.body[-1]
    if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Name):
        act.useful.add(ret.value.id)
    changed = True
    while changed:
        changed = False
        for target, ops in flows:
            if target in act.useful:
                new = set(ops) - act.useful
                if new:
                    act.useful |= new
                    changed = True
    return act


# ---------------------------------------------------------------- one function


class FunctionForward:
    """Emits the primal and tangent statements of one normalized function."""

    def __init__(self, module: ForwardModule, parsed, namer: Namer, norm, act, params):
        self.module = module
        self.parsed = parsed
        self.namer = namer
        self.norm = norm
        self.act = act
        self.params = set(params)
        self.local_functions = {
            **getattr(parsed, "local_functions", {}),
            **norm.local_functions,
        }
        self.state: dict[str, str] = {}
        self.holey: set[str] = set()
        self.tnames: dict[str, str] = {}
        self.problems: list = []
        self.missing: list = []
        self.last_origin: int | None = None
        self.never: set[str] = set()

    # .................................................................. names and state
    def t(self, x: str) -> str:
        """Name of the tangent variable of ``x``."""
        if x not in self.tnames:
            self.tnames[x] = self.namer.fresh("t_" + x.lstrip("_"))
        return self.tnames[x]

    def st(self, x: str) -> str:
        return self.state.get(x, NONE)

    def rule_ref(self, fn: Any) -> ast.expr:
        node = self.module.rule_ref(fn)
        anno(node)["rule_ref"] = True
        return node

    def bind_np(self, expr: ast.expr) -> None:
        """Point ``np`` in an inlined rule at the module's binding of NumPy."""
        for n in ast.walk(expr):
            if isinstance(n, ast.Name) and n.id == "np" and not anno(n).get("bound"):
                n.id = self.module.bind("np", np, ["module", "numpy", "np"])
                anno(n)["bound"] = True

    def np_attr(self, attr: str) -> ast.expr:
        alias = self.module.bind("np", np, ["module", "numpy", "np"])
        return ast.Attribute(value=name(alias), attr=attr, ctx=ast.Load())

    def useful(self, x: str) -> bool:
        return x in self.act.useful

    def materialize(self, x: str, out: list[ast.stmt]) -> None:
        """Make ``t_x`` a real value: ``or_zeros(t_x, x)`` (or zeros when it has none)."""
        if self.st(x) == SET:
            return
        if self.st(x) == NONE:
            value = call(self.module.helper("zeros_like"), name(x))
            self.holey.discard(x)
        else:
            value = call(self.rule_ref(tangents.or_zeros), name(self.t(x)), name(x))
        out.append(assign(self.t(x), value))
        self.state[x] = SET

    def set_tangent(self, x: str, tan: Tangent | None, out: list[ast.stmt]) -> None:
        """Record (and emit) ``t_x`` after an assignment to ``x``."""
        if tan is None:  # a NONE state means t_x is None or not yet bound
            if self.st(x) != NONE:
                out.append(assign(self.t(x), const(None)))
            self.state[x] = NONE
            self.holey.discard(x)
            return
        expr = tan.expr
        if tan.alias and x in self.mutated():  # x changes in place: t_x must be its own
            expr = call(self.np_attr("copy"), expr)
        out.append(assign(self.t(x), expr))
        self.state[x] = tan.state
        if tan.holey:
            self.holey.add(x)
        else:
            self.holey.discard(x)

    def mutated(self) -> set[str]:
        """Names changed in place somewhere in the function (their tangents are too)."""
        if not hasattr(self, "_mutated"):
            self._mutated = {
                t
                for s in activity.simple_statements(self.norm_body())
                for t in [_mutation_target(s)]
                if t
            }
        return self._mutated

    def norm_body(self) -> list[ast.stmt]:
        return self.parsed.node.body

    def tangent_of_atom(self, e: ast.expr, out: list[ast.stmt]) -> ast.expr:
        if isinstance(e, ast.Name) and self.st(e.id) != NONE:
            return name(self.t(e.id))
        return const(None)

    # .................................................................. problems
    def fail(
        self, node: ast.AST, message: str, hint: str = "", missing: bool = False
    ) -> None:
        problem = self.parsed.source.problem(node, message, hint)
        target = self.missing if missing else self.problems
        if problem not in target:
            target.append(problem)

    def raise_problems(self) -> None:
        if self.missing:
            raise MissingRuleError(self.missing)
        if self.problems:
            raise UnsupportedSyntaxError(self.problems)

    def comment_for(self, s: ast.stmt, out: list[ast.stmt]) -> None:
        origin = anno(s).get("origin")
        if origin is not None and origin != self.last_origin:
            text = self.parsed.source.line(origin).strip()
            out.append(self.module.comment(f"tangent of: {text}"))
            self.last_origin = origin

    # .................................................................. blocks
    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            self.stmt(s, out)
        return out

    def stmt(self, s: ast.stmt, out: list[ast.stmt]) -> None:
        from s2sad.transforms import forward_stmts

        if isinstance(s, ast.If):
            forward_stmts.if_stmt(self, s, out)
        elif isinstance(s, (ast.For, ast.While)):
            forward_stmts.loop(self, s, out)
        elif isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
            forward_stmts.assign_stmt(self, s, out)
        elif isinstance(s, ast.Assign):
            forward_stmts.setitem(self, s, out)
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            forward_stmts.expr_call(self, s, out)
        elif not isinstance(s, ast.Return):
            out.append(s)

    def emit(
        self,
        s: ast.stmt,
        primal: list[ast.stmt],
        tangent: list[ast.stmt],
        out: list[ast.stmt],
        pre: list[ast.stmt] = (),
    ) -> None:
        """``pre`` (tangents made non-None before the statement changes anything), the
        primal statements, then the tangent ones, under a ``# tangent of:`` comment."""
        if tangent or pre:
            self.comment_for(s, out)
        out.extend(pre)
        out.extend(primal)
        out.extend(tangent)

    # .................................................................. dry runs
    def snapshot(self) -> tuple:
        return (
            dict(self.state),
            set(self.holey),
            dict(self.tnames),
            set(self.namer.used),
            len(self.problems),
            len(self.missing),
            self.last_origin,
            self.module.snapshot(),
        )

    def restore(self, snap: tuple) -> None:
        (
            self.state,
            self.holey,
            self.tnames,
            used,
            n_problems,
            n_missing,
            self.last_origin,
            module,
        ) = snap
        self.namer.used = used
        del self.problems[n_problems:]
        del self.missing[n_missing:]
        self.module.restore(module)


def _mutation_target(s: ast.stmt) -> str | None:
    """The name a statement changes in place (item assignment, append, pop...)."""
    if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Subscript):
        base = s.targets[0].value
        return base.id if isinstance(base, ast.Name) else None
    call_ = s.value if isinstance(s, (ast.Assign, ast.Expr)) else None
    if isinstance(call_, ast.Call):
        info = anno(call_).get("call")
        if (
            info is not None
            and info.kind == "method"
            and isinstance(call_.func.value, ast.Name)
            and info.target in ("append", "pop")
        ):
            return call_.func.value.id
        if (
            info is not None
            and mutator_position(info.target) is not None
            and call_.args
            and isinstance(call_.args[0], ast.Name)
        ):
            return call_.args[0].id
    return None


def op_of_value(ff: FunctionForward, v: ast.expr) -> Op | None:
    """The :class:`Op` of a non-call value (operators, indexing, attributes)."""
    if isinstance(v, ast.BinOp) and type(v.op) in BINOPS:
        op = v.op
        return Op(
            BINOPS[type(op)],
            [v.left, v.right],
            lambda a: ast.BinOp(left=a[0], op=op, right=a[1]),
            node=v,
        )
    if isinstance(v, ast.UnaryOp) and type(v.op) in UNARYOPS:
        op = v.op
        return Op(
            UNARYOPS[type(op)],
            [v.operand],
            lambda a: ast.UnaryOp(op=op, operand=a[0]),
            node=v,
        )
    if isinstance(v, ast.Subscript):
        sl = v.slice
        return Op(
            operator.getitem,
            [v.value, index_value(sl)],
            lambda a: ast.Subscript(
                value=a[0], slice=copy.deepcopy(sl), ctx=ast.Load()
            ),
            node=v,
        )
    if isinstance(v, ast.Attribute) and v.attr not in activity.INACTIVE_ATTRS:
        fn = registry.lookup_attribute(v.attr)
        attr = v.attr
        return Op(
            fn,
            [v.value],
            lambda a: ast.Attribute(value=a[0], attr=attr, ctx=ast.Load()),
            node=v,
        )
    return None


def rule_tangent(
    ff: FunctionForward, op: Op, x: str, pre: list[ast.stmt]
) -> Tangent | None:
    """The tangent of ``x = op`` from the tangent rule of ``op.fn`` (loud if none)."""
    rule = tangents.lookup(op.fn) if op.fn is not None else None
    if rule is None:
        if any(isinstance(a, ast.Name) and ff.st(a.id) != NONE for a in op.args):
            what = (
                registry.display_name(op.fn)
                if op.fn is not None
                else ast.unparse(op.node)
            )
            ff.fail(
                op.node,
                f"no forward (tangent) rule for {what}",
                "register one: @s2sad.runtime.tangents.tangent(fn, argnum=i) on "
                "def jvp_fn(t, ans, *args): return <J_i t>",
                missing=True,
            )
        return None
    return op_tangent(ff, rule, op, x, pre)
