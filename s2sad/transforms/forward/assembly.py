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
import copy
import dataclasses
from dataclasses import dataclass

from s2sad.errors import MissingRuleError, S2SADError, UnsupportedSyntaxError
from s2sad.options import Options
from s2sad.runtime import tangents
from s2sad.transforms.astutil import anno, call, const, function_def, walk
from s2sad.transforms.forward import cleanup as cleanup_pass
from s2sad.transforms.forward import statements
from s2sad.transforms.forward.function import FunctionForward, mutator_position
from s2sad.transforms.front import activity as activity_pass
from s2sad.transforms.front import texts
from s2sad.transforms.front.rulekeywords import bind_active_keywords
from s2sad.transforms.lattice import SET


@dataclass
class ForwardOptions(Options):
    """Options of a forward-mode module (the key keeps them apart in the cache)."""

    def key(self) -> str:
        return f"mode=jvp,{super().key()},tangents={tangents.fingerprint()}"


def unstar(job, module) -> None:
    """``a, b, *_ = v`` (as gradient modules unpack rule results) -> ``a, b = v[:2]``."""
    _unstar(job.node)


def activity(job, module) -> None:
    """Names that depend on the differentiated parameters and reach the output."""
    never = _loop_counters(job.node)
    stmts = list(activity_pass.simple_statements(job.node.body))
    flows = [(t, ops) for t, ops in map(_flow, stmts) if t not in never]
    job.act = activity_pass.solve(job.node, job.wrt, flows, useful_needs_active=False)
    calls = activity_pass.statement_calls(stmts)
    if bind_active_keywords(calls, job.act.active):  # moved to positions: operands
        flows = [(t, ops) for t, ops in map(_flow, stmts) if t not in never]
        job.act = activity_pass.solve(
            job.node, job.wrt, flows, useful_needs_active=False
        )
    job.act.never = never  # loop counters: never a tangent
    found = [
        activity_pass.out_problem(c, job.act.active, job.parsed.source) for c in calls
    ]
    for s in stmts:  # (*xs, y) of a differentiated xs: its items would get no tangent
        found += activity_pass.unpacked_displays(s, job.act, job.parsed.source)
    # float(str(x)): a number read back from text would get no tangent
    found += texts.problems(stmts, job.act.active, job.act.useful, job.parsed.source)
    if any(found):
        raise UnsupportedSyntaxError([p for p in found if p is not None])


def differentiate(job, module) -> None:
    """Each statement followed by the statements computing its tangent."""
    # params: the differentiated ones, whose tangents are the caller's (an item
    # written into one would change them); the others may change in place
    ff = FunctionForward(module, job.parsed, job.namer, job.norm, job.act, job.wrt)
    for p, code in job.codes.items():
        ff.state[p] = SET
        if code == 2:
            ff.holey.add(p)
    body = statements.block(ff, job.node.body[:-1])
    ret = job.node.body[-1].value
    t_ret = ff.tangent_of_atom(ret, body)
    if job.top:
        t_ret = call(ff.rule_ref(tangents.finish), t_ret, copy.deepcopy(ret))
    ff.raise_problems()
    result = ast.Tuple(elts=[ret, t_ret], ctx=ast.Load())
    job.body, job.state = body + [ast.Return(value=result)], ff


def cleanup(job, module) -> None:
    """Drop tangent statements nothing reads."""
    job.body = cleanup_pass.run(job.body)


def assemble(job, module) -> None:
    """``<f>_jvp(*params, *tangents) -> (value, tangent)``."""
    tparams = [job.state.t(p) for p in job.wrt]
    job.functions = [function_def(job.names[0], job.params + tparams, job.body)]


def callee_failed(job, exc: S2SADError) -> S2SADError:
    """A runtime function without a tangent rule whose source could not be
    differentiated either: the error names the user's call, not the library."""
    if job.site is None:
        return exc
    hint = (
        f"{job.site.hint}\n(differentiating its source failed: "
        f"{str(exc).splitlines()[0]})"
    )
    return MissingRuleError(dataclasses.replace(job.site, hint=hint))


def rename_clashing_imports(module) -> None:
    """Rename an imported rule or helper that a variable of some function shadows."""
    tree = ast.Module(body=module.functions, type_ignores=[])
    refs = [
        n for n in walk(tree) if isinstance(n, ast.Name) and anno(n).get("rule_ref")
    ]
    user = {
        n.id
        for n in walk(tree)
        if isinstance(n, ast.Name) and not anno(n).get("rule_ref")
    } | {a.arg for a in walk(tree) if isinstance(a, ast.arg)}
    for key, (mod, fn_name, alias) in sorted(module.rule_imports.items()):
        if alias in user:
            new = module.namer.fresh(alias)
            while new in user:
                new = module.namer.fresh(alias)
            module.rule_imports[key] = (mod, fn_name, new)
            for n in refs:
                if n.id == alias:
                    n.id = new


def _unstar(node: ast.FunctionDef) -> None:
    """``a, b, *_ = v`` (as gradient modules unpack rule results) -> ``a, b = v[:2]``."""
    for sub in walk(node):
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


def _flow(s: ast.stmt) -> tuple[str | None, list[str]]:
    """activity.flow, plus the in-place helpers of emitted gradient modules."""
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
    return activity_pass.flow(s)


def _loop_counters(node: ast.FunctionDef) -> set[str]:
    """Names of ranges and counters of ``for`` loops: integers, never with a tangent.

    (Gradient modules also push them on their tape, so flow-insensitive activity
    alone would give them one.)
    """
    return {
        n.id
        for s in walk(node)
        if isinstance(s, ast.For)
        for n in (s.target, s.iter)
        if isinstance(n, ast.Name)
    }
