"""Activity: which names depend on the differentiated inputs AND reach the output.

Flow-insensitive fixpoints over the normalized function (a name is active if any
of its assignments is): conservative, and exact enough for gradient code, since
an adjoint that is never fed stays ``None`` and costs nothing::

    def f(x, n):            active  = {x, y, z}      (n, k depend on no input)
        k = n * 2           useful  = {out, z, y, x} (reach the return value)
        y = x * k           adjoint = active & useful = {x, y, z}
        z = np.sin(y)
        return z

It also rejects what would give a silently wrong gradient: an active value
passed to a callee with no rule and no source, an active keyword argument to a
rule, and in-place mutation of an argument.
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass, field

import numpy as np

from s2sad.errors import MissingRuleError, UnsupportedSyntaxError
from s2sad.runtime import registry
from s2sad.transforms.astutil import anno, walk
from s2sad.transforms.front.arguments import (
    unpacked_active,
    unpacked_displays,
    unpacked_problem,
)
from s2sad.transforms.front.calls import (
    CallInfo,
    builtin_hint,
    call_method,
    library_file,
)
from s2sad.transforms.front.outarg import out_problem  # noqa: F401 (forward mode)
from s2sad.transforms.front import texts
from s2sad.transforms.front.rulekeywords import bind_active_keywords

INACTIVE_ATTRS = {"shape", "ndim", "size", "dtype", "itemsize", "nbytes", "strides"}
INACTIVE_METHODS = {"keys", "index", "count", "tolist_shape"}
#: list and dict methods that change their object (``append`` is differentiated)
CONTAINER_MUTATORS = {
    "insert", "extend", "pop", "remove", "clear", "reverse", "update",
    "setdefault", "popitem",
}  # fmt: skip
INACTIVE_BINOPS = (
    ast.FloorDiv,
    ast.BitAnd,
    ast.BitOr,
    ast.BitXor,
    ast.LShift,
    ast.RShift,
)


@dataclass
class Activity:
    active: set[str] = field(default_factory=set)
    useful: set[str] = field(default_factory=set)
    #: names that never carry a derivative whatever flows into them (loop counters)
    never: set[str] = field(default_factory=set)

    def needs_adjoint(self, n: str) -> bool:
        return n in self.active and n in self.useful


def statement_calls(stmts: list[ast.stmt]) -> list[ast.Call]:
    return [c for s in stmts for c in walk(s) if isinstance(c, ast.Call)]


def simple_statements(body: list[ast.stmt]):
    """Every non-compound statement, in program order, at any depth."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from simple_statements(stmt.body)
            yield from simple_statements(stmt.orelse)
        elif isinstance(stmt, (ast.For, ast.While)):
            yield from simple_statements(stmt.body)
        else:
            yield stmt


def operands(value: ast.expr) -> list[str]:
    """Local names whose value flows (differentiably, if at all) into ``value``."""
    if isinstance(value, ast.Name):
        return [value.id]
    if isinstance(value, ast.Constant):
        return []
    if isinstance(value, ast.Compare) or isinstance(value, ast.JoinedStr):
        return []
    if isinstance(value, ast.BinOp):
        if isinstance(value.op, INACTIVE_BINOPS):
            return []
        return _names(value.left) + _names(value.right)
    if isinstance(value, ast.UnaryOp):
        return (
            [] if isinstance(value.op, (ast.Not, ast.Invert)) else _names(value.operand)
        )
    if isinstance(value, ast.Subscript):
        return _names(value.value)
    if isinstance(value, ast.Attribute):
        if value.attr in INACTIVE_ATTRS:
            return []
        return _names(value.value)
    if isinstance(value, (ast.Tuple, ast.List)):
        return [n for e in value.elts for n in _names(e)]
    if isinstance(value, ast.Dict):
        return [n for e in value.values for n in _names(e)]
    if isinstance(value, ast.Call):
        return call_operands(value)
    return []


def call_operands(value: ast.Call) -> list[str]:
    info: CallInfo = anno(value).get("call", CallInfo("unknown"))
    args = [n for a in value.args for n in _names(a)]
    if info.kind == "unknown":  # refused when active (_check_call), keywords too
        args += [n for k in value.keywords for n in _names(k.value)]
    if info.kind == "method":
        if info.target in INACTIVE_METHODS:
            return []
        fn = registry.lookup_method(info.target)
        rule = registry.lookup(fn) if fn is not None else None
        if rule is not None and not rule.differentiable:
            return []
        return _names(value.func.value) + args
    if info.kind == "rule":
        rule = registry.lookup(info.target)
        if rule is None or not rule.differentiable:
            return []
    return args


def _names(e: ast.expr) -> list[str]:
    return [e.id] if isinstance(e, ast.Name) else []


def run(
    node: ast.FunctionDef, wrt: list[str], source, top: bool = False, shared=frozenset()
) -> Activity:
    """Compute activity for ``node`` differentiated with respect to ``wrt``
    (``shared``: see :func:`_check`)."""
    stmts = list(simple_statements(node.body))
    act = solve(node, wrt, [flow(s) for s in stmts], useful_needs_active=True)
    if bind_active_keywords(statement_calls(stmts), act.active):
        act = solve(node, wrt, [flow(s) for s in stmts], useful_needs_active=True)
    _check(stmts, act, node, wrt if top else None, source, shared)
    return act


def solve(
    node: ast.FunctionDef,
    wrt: list[str],
    flows: list[tuple[str | None, list[str]]],
    useful_needs_active: bool,
) -> Activity:
    """The two fixpoints over ``(target, operands)`` flows: forward from ``wrt``
    (active), backward from the returned name (useful).  Forward mode passes
    ``useful_needs_active=False``: there a value is useful whatever its activity."""
    act = Activity(active=set(wrt))
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
        # usefulness flows from later statements to earlier ones: walking the
        # flows backwards reaches the fixpoint in one or two sweeps, not one
        # sweep per statement of a chain (the same least fixpoint either way)
        for target, ops in reversed(flows):
            if target in act.useful and (
                target in act.active or not useful_needs_active
            ):
                new = set(ops) - act.useful
                if new:
                    act.useful |= new
                    changed = True
    return act


def flow(s: ast.stmt) -> tuple[str | None, list[str]]:
    """(name whose value the statement sets or mutates, names flowing into it)."""
    if isinstance(s, ast.Assign):
        target = s.targets[0]
        if isinstance(target, ast.Name):
            return target.id, operands(s.value)
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            return target.value.id, _names(s.value) + [target.value.id]
    if isinstance(s, ast.Expr) and is_append(s):
        return s.value.func.value.id, _names(s.value.args[0])
    return None, []


def is_append(s: ast.stmt) -> bool:
    return (
        isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Call)
        and anno(s.value).get("call", CallInfo("")).kind == "method"
        and s.value.func.attr == "append"
        and isinstance(s.value.func.value, ast.Name)
    )


def _check(
    stmts, act: Activity, node, wrt: list[str] | None, source, shared=frozenset()
) -> None:
    """Reject statements that would silently lose gradient.  ``wrt``: given for
    the top level, where an item assignment into an argument that is not
    differentiated (a config dict) is Python's: the caller sees it afterwards
    (reverse/statements.py keeps it, ``keep_item``).  ``shared``: a called
    function's names that may share memory with its arguments; an item written
    through one would be put back by the backward sweep, so the caller's object
    would not keep it: refused."""
    params = {a.arg for a in node.args.args}
    missing, unsupported = [], []
    for s in stmts:
        for call in (c for c in walk(s) if isinstance(c, ast.Call)):
            _check_call(call, act, source, missing, unsupported)
        unsupported += unpacked_displays(s, act, source)
        target, _ = flow(s)
        if (
            isinstance(s, ast.Expr)
            and isinstance(s.value, ast.Call)
            and not is_append(s)
        ):
            if _check_discarded_method(s.value, act, source, unsupported):
                continue
        mutates = isinstance(s, ast.Expr) or (
            isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Subscript)
        )
        config = wrt is not None and target not in wrt and isinstance(s, ast.Assign)
        if isinstance(s, ast.Assign) and mutates and target in shared:
            unsupported.append(
                source.problem(
                    s,
                    f"item assignment into '{target}', which may share memory with an "
                    "argument of this called function: the backward sweep would put "
                    "the old item back, and the caller's object would not keep the "
                    "change",
                    f"work on a copy ({target} = {target}.copy()) and return it, or "
                    "make the change in the function you differentiate",
                )
            )
        elif mutates and target in params and not config:
            unsupported.append(
                source.problem(
                    s,
                    f"in-place change of the argument '{target}'",
                    f"work on a copy: {target} = {target}.copy() (or list({target})) first",
                )
            )
    unsupported += texts.problems(stmts, act.active, act.useful, source)
    if (
        unsupported
    ):  # first: it explains e.g. x.sort() better than "no rule for .sort()"
        raise UnsupportedSyntaxError(unsupported)
    if missing:
        raise MissingRuleError(missing)


def _mutator_hint(recv: str, method: str) -> str:
    if method in ("setdefault", "update", "popitem"):
        return (
            f"write the items instead (if 'k' not in {recv}: {recv}['k'] = v), on a "
            "dict made in the function or given to the differentiated function"
        )
    return (
        f"index and slice instead (e.g. v = {recv}[-1]; {recv} = {recv}[:-1]), or "
        f"build a new list; {recv}.append(...) is differentiated"
    )


#: methods of logging.Logger: the receiver is not known statically when the
#: function makes it (logging.getLogger(...).info(...)); they store nothing
LOGGER_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}
)


def _check_discarded_method(call: ast.Call, act: Activity, source, unsupported) -> bool:
    """``x.sort()`` / ``x.fill(0)``: a method of a differentiated value whose result is
    dropped can only matter by changing the value in place, which s2sad cannot see."""
    info: CallInfo = anno(call).get("call", CallInfo("unknown"))
    if info.kind != "method" or not isinstance(call.func.value, ast.Name):
        return False
    given = [a.id for a in call.args if isinstance(a, ast.Name) and a.id in act.active]
    if call.func.attr in LOGGER_METHODS:
        return (
            False  # log.info("%s", x) on a logger made in the function: a side effect
        )
    if call.func.value.id not in act.active and given:
        # q.insert(0, v), q.extend(vs), d.update(...): a differentiated value stored
        # in place into a container that s2sad sees as constant
        recv, meth = call.func.value.id, call.func.attr
        unsupported.append(
            source.problem(
                call,
                f"'{recv}.{meth}(...)' stores a differentiated value into '{recv}' "
                "in place, which s2sad does not differentiate",
                (
                    _mutator_hint(recv, meth)
                    if meth in ("setdefault", "update")
                    else f"build a new list or dict and assign it (e.g. {recv} = "
                    f"[v] + {recv}), or use {recv}.append(v), which is differentiated"
                ),
            )
        )
        return True
    if call.func.value.id in act.active:
        recv, meth = call.func.value.id, call.func.attr
        unsupported.append(
            source.problem(
                call,
                f"the result of '{recv}.{meth}(...)' is discarded, so it can only change "
                f"'{recv}' in place, which s2sad does not differentiate",
                f"use the out-of-place form and assign it, e.g. {recv} = np.{meth}({recv}, ...)",
            )
        )
        return True
    return False


#: keyword parameters of NumPy functions (and of their rules) that take an
#: integer, a flag or a dtype, never a value with a derivative.  A name passed to
#: one may still count as differentiated: in the emitted gradient, differentiated
#: again for second order, ``k = tape.pop()`` restores the loop's ``axis=k``
#: from the tape that also holds arrays.
INDEX_KEYWORDS = frozenset({"axis", "axes", "keepdims", "dtype"})


def _check_call(call: ast.Call, act: Activity, source, missing, unsupported) -> None:
    info: CallInfo = anno(call).get("call", CallInfo("unknown"))
    if unpacked_active(call, act.active):
        unsupported.append(source.problem(call, *unpacked_problem(call)))
        return
    active_args = [
        a.id
        for a in [*call.args, *(k.value for k in call.keywords)]
        if isinstance(a, ast.Name) and a.id in act.active
    ]
    recv_active = (
        info.kind == "method"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id in act.active
    )
    if info.kind in ("rule", "method"):
        for kw in call.keywords:
            if kw.arg in INDEX_KEYWORDS:
                continue  # an integer, a flag or a type: no derivative to carry
            if isinstance(kw.value, ast.Name) and kw.value.id in act.active:
                unsupported.append(
                    source.problem(
                        kw.value,
                        f"differentiated value '{kw.value.id}' passed as keyword "
                        f"argument '{kw.arg}'",
                        "pass it as a positional argument",
                    )
                )
    problem = out_problem(call, act.active, source)
    if problem is not None:
        unsupported.append(problem)
    if info.kind == "unknown" and active_args:
        missing.append(
            source.problem(
                call, _missing_message(call, info), _missing_hint(call, info)
            )
        )
    if info.kind == "method" and recv_active:
        fn = registry.lookup_method(info.target)
        known = (fn is not None and registry.lookup(fn) is not None) or info.target in (
            "append",
            *INACTIVE_METHODS,
        )
        if not known and info.target in CONTAINER_MUTATORS:
            recv = call.func.value.id
            unsupported.append(
                source.problem(
                    call,
                    f"'{recv}.{info.target}(...)' changes '{recv}' in place, which "
                    "s2sad does not differentiate",
                    _mutator_hint(recv, info.target),
                )
            )
        elif not known:
            missing.append(
                source.problem(
                    call,
                    f"no adjoint rule for the method '.{info.target}()' of a "
                    "differentiated value",
                    (
                        f"index the dict instead ({call.func.value.id}['k'], with "
                        f"'k' in {call.func.value.id} as the test); "
                        if info.target == "get"
                        and isinstance(call.func.value, ast.Name)
                        else (
                            f"call the NumPy function instead (np.{info.target}(x, ...)), "
                            if hasattr(np, info.target)
                            else "call it on an object passed in as an argument (its "
                            "methods are compiled), "
                        )
                    )
                    + "or register one with "
                    f"s2sad.runtime.registry.method_alias('{info.target}', fn)",
                )
            )


def _missing_message(call: ast.Call, info: CallInfo) -> str:
    obj = info.target
    if obj is None:
        return (
            f"cannot tell which function '{ast.unparse(call.func)}' is at compile time"
        )
    if call_method(obj) is not None:
        return (
            f"'{ast.unparse(call.func)}' is a callable object (a "
            f"{registry.display_name(type(obj))}): calls through its __call__ are not "
            "differentiated yet"
        )
    library = library_file(getattr(obj, "__func__", obj))
    if library is not None:
        return (
            f"no adjoint rule for {registry.display_name(obj)} "
            f"(called as '{ast.unparse(call.func)}'); it is library code "
            f"({library}), which s2sad does not compile"
        )
    if isinstance(obj, type):  # a user class built from differentiated values
        return (
            f"'{ast.unparse(call.func)}(...)' builds a {registry.display_name(obj)} "
            "object from differentiated values inside the function: s2sad does not "
            "differentiate through constructors"
        )
    return (
        f"no adjoint rule for {registry.display_name(obj)} "
        f"(called as '{ast.unparse(call.func)}'), and it has no Python source"
    )


def _missing_hint(call: ast.Call, info: CallInfo) -> str:
    obj = info.target
    if obj is None:
        return (
            "s2sad resolves every callee when it compiles, and this one is chosen at "
            "run time (taken from a list, a dict or an argument); call the function "
            "or object by its module-level name instead"
        )
    if call_method(obj) is not None:
        callee = ast.unparse(call.func)
        return (
            f"call its method by name, {callee}.__call__(...), which s2sad compiles "
            f"like a function; or register a rule with @s2sad.adjoint({callee})"
        )
    primal = registry.display_name(obj)
    short = primal.rpartition(".")[2]
    function_like = (types.FunctionType, types.BuiltinFunctionType, type, np.ufunc)
    if not isinstance(obj, function_like) or not all(
        part.isidentifier() for part in primal.split(".")
    ):
        # a callable object, a lambda, np.vectorize(...): the rule is for the object
        primal = ast.unparse(call.func)
        short = primal.rpartition(".")[2]
    if builtin_hint(obj) is not None:
        return f"{builtin_hint(obj)}; or register a rule with @s2sad.adjoint({short})"
    if isinstance(obj, type) and library_file(obj) is None:
        return (
            "create the object outside the differentiated function and pass it in "
            "(its methods are then compiled; a dataclass or s2sad.register_pytree "
            "class gets a gradient of its own type), or keep the arrays in locals"
        )
    return (
        f"register a rule:\n    @s2sad.adjoint({primal})\n"
        f"    def d_{short}(g, ans, x):\n        return (...,)  # one cotangent per "
        "positional argument\nor declare it with s2sad.nondifferentiable(...)"
    )
