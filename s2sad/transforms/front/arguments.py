"""Arguments of calls: unpacking, and user calls with every argument positional.

A user callee is compiled with one flat parameter list (validate flattens its
``*args``, keyword-only parameters and ``**kwargs`` in that order), so each
call site binds its arguments the way Python would::

    concat(W, h, x)          -> concat(W, (h, x))           def concat(weights, *args)
    block(x, **params)       -> block(x, params["mlp"], params["ln"] if "ln" in params
                                      else <default>)         (keys checked: len(params))
    acq(x)                   -> acq(x, acq_y_default)       a non-literal default, bound
    f(*[a, b], **{"k": v})   -> f(a, b, k=v)                literals spliced
    zip(*pairs)              -> zip(pairs[0], pairs[1])     pairs an argument: its length
                                                            checked where the code runs
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

import numpy as np

from s2sad.transforms.astutil import anno, call, const, copy_loc, name, stores


class ArgumentBinder:
    """Argument binding for :class:`calls.CallNormalizer` (a mixin: uses the
    normalizer's ``error``, ``atom``, ``stmt``, ``params`` and ``parsed``)."""

    def _bind_arguments(self, e: ast.Call, info: Any, out: list) -> ast.Call:
        """Rewrite a call to a user function with every argument positional.

        The callee's ``*args`` gets a tuple of the extra positional arguments
        (``tuple(xs)`` for a trailing ``*xs``), its ``**kwargs`` a dict of the
        extra keywords; ``**d`` gives each parameter no other argument gives
        ``d["p"]`` (``d["p"] if "p" in d else <default>`` where it has one).
        """
        callee = ast.unparse(e.func)
        if info.kind == "local":
            local = self.local_functions[info.target]
            star = _star_params(info, self.local_functions)
            if star:
                self.error(
                    e,
                    f"calls to nested functions with {star} are not supported yet: "
                    f"'{callee}' takes {star}",
                    f"define '{callee}' at module level, or give it one named "
                    "parameter per argument",
                )
                return e
            params, defaults = _def_params(local.node, len(local.freevars))
            kinds = {p: POSITIONAL for p in params}
        else:
            params, defaults, kinds = self._object_params(info.target)
        if info.extra.get("self") is not None:
            params = params[1:]

        def mismatch(what: str = "", hint: str = "check the argument names and count"):
            what = what or f"call does not match the signature of '{callee}'"
            self.error(e, what, hint)
            return e

        positional = [p for p in params if kinds[p] == POSITIONAL]
        vararg = next((p for p in params if kinds[p] == VAR_POSITIONAL), None)
        varkw = next((p for p in params if kinds[p] == VAR_KEYWORD), None)
        fixed, starred = list(e.args), None
        if any(isinstance(a, ast.Starred) for a in fixed):
            at = next(i for i, a in enumerate(fixed) if isinstance(a, ast.Starred))
            if vararg is None or at != len(fixed) - 1 or at < len(positional):
                return mismatch(
                    f"star-argument of unknown length in the call to '{callee}'",
                    "pass the arguments one by one, or a tuple or list literal "
                    f"(*[a, b]); or give '{callee}' a '*args' parameter after the "
                    "ones the call passes by position",
                )
            fixed, starred = fixed[:at], fixed[at].value
        if len(fixed) > len(positional) and vararg is None:
            return mismatch()
        given = {k.arg: k.value for k in e.keywords if k.arg is not None}
        unpacked = [k.value for k in e.keywords if k.arg is None]
        named = [p for p in params if kinds[p] in (POSITIONAL, KEYWORD_ONLY)]
        forwarded = (  # f(x, **kw) into def f(x, **kw): the dict passed on whole
            len(unpacked) == 1
            and varkw is not None
            and starred is None
            and all(k in named for k in given)
            and all(p in given or p in positional[: len(fixed)] for p in named)
        )
        if len(unpacked) > 1 or (unpacked and varkw is not None and not forwarded):
            return mismatch(
                f"keyword unpacking ('**') into '{callee}' that s2sad cannot match "
                "to its parameters",
                "unpack one dict, into a function without '**kwargs'",
            )
        source = self.atom(unpacked[0], out, "kwargs") if unpacked else None
        extra = {k: v for k, v in given.items() if k not in named}
        if (extra and varkw is None) or set(given) & set(positional[: len(fixed)]):
            return mismatch()
        args = list(fixed[: len(positional)])
        read: list[str] = []  # the parameters **source gives
        for p in params[len(args) :]:
            kind = kinds[p]
            if kind == VAR_POSITIONAL:
                rest = ast.Tuple(elts=fixed[len(positional) :], ctx=ast.Load())
                if starred is not None:
                    rest = call("tuple", starred)
                args.append(rest)
            elif kind == VAR_KEYWORD and forwarded:
                args.append(source)
                self._collision_check(e, callee, source, named, out)
            elif kind == VAR_KEYWORD:
                args.append(
                    ast.Dict(
                        keys=[const(k) for k in extra], values=list(extra.values())
                    )
                )
            elif p in given:
                args.append(given[p])
            elif source is not None:
                read.append(p)
                item = ast.Subscript(value=source, slice=const(p), ctx=ast.Load())
                if p in defaults:
                    test = ast.Compare(
                        left=const(p), ops=[ast.In()], comparators=[source]
                    )
                    item = ast.IfExp(test=test, body=item, orelse=defaults[p])
                args.append(item)
            elif p in defaults:
                args.append(defaults[p])
            else:
                return mismatch(
                    f"missing argument '{p}' in call to '{callee}'",
                    "pass every parameter that has no default",
                )
        if source is not None and not forwarded:
            self._keys_check(e, callee, source, read, defaults, out)
        if any(kinds[p] != POSITIONAL for p in params):
            info.extra["kinds"] = [(p, kinds[p]) for p in params]
        new = ast.Call(func=e.func, args=args, keywords=[])
        if info.kind == "user" and info.extra.get("self") is None:
            self.pass_objects(new, info)  # objects whose methods the callee calls
        return new

    def _collision_check(self, e, callee, source, named, out) -> None:
        """``f(x, **kw)`` into ``def f(x, **kw)``: Python refuses a key of ``kw``
        that names a parameter the call passes already; so does the emitted code."""
        if not named:
            return
        test: ast.expr = ast.Compare(
            left=const(named[0]), ops=[ast.In()], comparators=[source]
        )
        if len(named) > 1:
            test = ast.BoolOp(
                op=ast.Or(),
                values=[
                    ast.Compare(left=const(p), ops=[ast.In()], comparators=[source])
                    for p in named
                ],
            )
        message = (
            f"{callee}() got multiple values for an argument from "
            f"**{ast.unparse(source)} (it names one of {', '.join(named)})"
        )
        fail = ast.Raise(exc=call("TypeError", const(message)), cause=None)
        guard = copy_loc(ast.If(test=test, body=[fail], orelse=[]), e)
        for sub in ast.walk(guard):
            if isinstance(sub, (ast.expr, ast.stmt)) and not hasattr(sub, "lineno"):
                ast.copy_location(sub, e)
        self.stmt(guard, out, False)

    def _keys_check(self, e, callee, source, read, defaults, out) -> None:
        """``f(x, **d)``: Python refuses a key of ``d`` that names no parameter
        (or one the call passes already); so does the emitted code, which reads
        only the keys it binds: ``len(d)`` must count them."""
        required = [p for p in read if p not in defaults]
        optional = [p for p in read if p in defaults]
        count: ast.expr = const(len(required))
        for p in optional:
            test = ast.Compare(left=const(p), ops=[ast.In()], comparators=[source])
            count = ast.BinOp(left=count, op=ast.Add(), right=test)
        message = (
            f"{callee}() got keyword arguments from **{ast.unparse(source)} that it "
            f"does not take: it reads only {', '.join(read) or 'none'} from it"
        )
        fail = ast.Raise(exc=call("TypeError", const(message)), cause=None)
        test = ast.Compare(
            left=call("len", source), ops=[ast.NotEq()], comparators=[count]
        )
        guard = copy_loc(ast.If(test=test, body=[fail], orelse=[]), e)
        for sub in ast.walk(guard):
            if isinstance(sub, (ast.expr, ast.stmt)) and not hasattr(sub, "lineno"):
                ast.copy_location(sub, e)
        self.stmt(guard, out, False)

    def _object_params(self, fn: Any) -> tuple[list[str], dict[str, ast.expr], dict]:
        """Parameter names of a Python function, in order, their defaults as
        expressions (a non-literal default as a name bound to the object), and
        their kinds."""
        sig = inspect.signature(fn)
        params, defaults, kinds = [], {}, {}
        for p in sig.parameters.values():
            params.append(p.name)
            kinds[p.name] = _KINDS[p.kind]
            if p.default is not inspect.Parameter.empty:
                expr = _default_expr(p.default)
                if expr is None:
                    expr = name(self._bind_default(fn, p.name, p.default))
                defaults[p.name] = expr
        return params, defaults, kinds

    def _bind_default(self, fn: Any, pname: str, value: Any) -> str:
        """A name for the default object of ``fn``'s parameter ``pname``, which the
        bind pass binds at module level like a closure variable (it is fixed
        when ``fn`` is defined)."""
        wanted = f"{fn.__name__}_{pname}_default"
        for existing, obj in self.env.cells.items():
            if obj is value and existing.startswith(wanted):
                return existing
        var = self.namer.fresh(wanted)
        self.env.cells[var] = value
        self.env.defaults[var] = default_origin(fn, pname)
        return var

    def specialise_unpacking(self, e: ast.Call, out: list) -> ast.Call:
        """Unpacked literals spliced (``spliced``); and ``f(*xs)`` on a parameter
        of the differentiated function that the body never rebinds and that
        holds floats: the call's example argument gives the length, so ``f(xs[0], xs[1])``, after a check that raises
        ``structure_changed`` (s2sad compiles again) for another length.  (``**d``
        needs no such thing: a user callee reads ``d[param]``, and NumPy
        functions take no differentiated keyword arguments.)"""
        e = spliced(e)
        examples = self.parsed.example_args
        if not examples:
            return e

        def known(v: ast.expr) -> Any:
            if not (isinstance(v, ast.Name) and v.id in self.params):
                return None
            if v.id in self._rebound():
                return None
            value = examples.get(v.id)
            if not isinstance(value, (list, tuple)) or len(value) > 32:
                return None
            # what holds no float passes unpacked: it never carries a derivative
            return value if _holds_floats(value) else None

        args, changed = [], False
        for a in e.args:
            seq = known(a.value) if isinstance(a, ast.Starred) else None
            if seq is None:
                args.append(a)
                continue
            var = a.value.id
            self._structure_guard(
                e, out, call("len", name(var)), const(len(seq)), f"len({var})"
            )
            args += [_item(var, i) for i in range(len(seq))]
            changed = True
        if not changed:
            return e
        return copy_loc(ast.Call(func=e.func, args=args, keywords=e.keywords), e)

    def _rebound(self) -> set[str]:
        if getattr(self, "_rebound_names", None) is None:
            self._rebound_names = stores(self.parsed.node) | {
                sub.func.value.id
                for sub in ast.walk(self.parsed.node)
                if isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and isinstance(sub.func.value, ast.Name)
            }  # a method call may change a list in place (xs.append)
        return self._rebound_names

    def _structure_guard(
        self, e: ast.Call, out: list, got: ast.expr, want: ast.expr, what: str
    ) -> None:
        where = f"{self.parsed.source.filename}:{e.lineno}"
        message = (
            f"{where}: {what} differs from the call this code was compiled for "
            f"({ast.unparse(want)})"
        )
        helper = name("structure_changed")
        anno(helper)["helper"] = "structure_changed"
        # runtime helpers the emitted checks call (prepare.normalize imports them)
        self.helpers_needed = getattr(self, "helpers_needed", set())
        self.helpers_needed.add("structure_changed")
        fail = ast.Raise(exc=call(helper, const(message)), cause=None)
        test = ast.Compare(left=got, ops=[ast.NotEq()], comparators=[want])
        guard = copy_loc(ast.If(test=test, body=[fail], orelse=[]), e)
        for sub in ast.walk(guard):
            if isinstance(sub, (ast.expr, ast.stmt)) and not hasattr(sub, "lineno"):
                ast.copy_location(sub, e)
        self.stmt(guard, out, False)


def _holds_floats(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_floats(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_floats(v) for v in value)
    if isinstance(value, (bool, int, str)) or value is None:
        return False
    return not isinstance(value, np.ndarray) or value.dtype.kind in "fc"


def _item(var: str, key: Any) -> ast.Subscript:
    return ast.Subscript(value=name(var), slice=const(key), ctx=ast.Load())


def spliced(e: ast.Call) -> ast.Call:
    """``f(*[a, b], **{"k": v})`` -> ``f(a, b, k=v)``: unpacked literals become
    arguments (what is not a literal stays unpacked: a user callee's call binds
    it, any other call must not pass differentiated values through it)."""
    args: list[ast.expr] = []
    changed = False
    for a in e.args:
        if isinstance(a, ast.Starred) and isinstance(a.value, (ast.Tuple, ast.List)):
            args.extend(a.value.elts)
            changed = True
        else:
            args.append(a)
    keywords: list[ast.keyword] = []
    for k in e.keywords:
        d = k.value
        if (
            k.arg is None
            and isinstance(d, ast.Dict)
            and all(
                isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and key.value.isidentifier()
                for key in d.keys
            )
        ):
            keywords += [
                ast.keyword(arg=c.value, value=v) for c, v in zip(d.keys, d.values)
            ]
            changed = True
        else:
            keywords.append(k)
    if not changed:
        return e
    return copy_loc(ast.Call(func=e.func, args=args, keywords=keywords), e)


def _star_params(info: Any, local_functions: dict) -> str:
    """``*args`` / ``**kwargs`` as the callee spells them ('' when it has neither)."""
    if info.kind == "local":
        a = local_functions[info.target].node.args
        names = [f"*{a.vararg.arg}"] if a.vararg else []
        names += [f"**{a.kwarg.arg}"] if a.kwarg else []
    else:
        try:
            sig = inspect.signature(info.target)
        except (TypeError, ValueError):
            return ""
        names = [
            ("*" if p.kind is p.VAR_POSITIONAL else "**") + p.name
            for p in sig.parameters.values()
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
    return " and ".join(names)


def _def_params(
    node: ast.FunctionDef, lifted: int = 0
) -> tuple[list[str], dict[str, ast.expr]]:
    """The parameters of a nested function, without the ``lifted`` free variables
    that lifting appended after them (the defaults belong to the ones before)."""
    params = [a.arg for a in node.args.args]
    params = params[: len(params) - lifted]
    defaults = dict(
        zip(params[len(params) - len(node.args.defaults) :], node.args.defaults)
    )
    return params, defaults


POSITIONAL, VAR_POSITIONAL, KEYWORD_ONLY, VAR_KEYWORD = range(4)
_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: POSITIONAL,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: POSITIONAL,
    inspect.Parameter.VAR_POSITIONAL: VAR_POSITIONAL,
    inspect.Parameter.KEYWORD_ONLY: KEYWORD_ONLY,
    inspect.Parameter.VAR_KEYWORD: VAR_KEYWORD,
}


def _default_expr(value: Any) -> ast.expr | None:
    """A literal default as a constant; None when it is some other object."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return const(value)
    if isinstance(value, tuple) and all(
        isinstance(v, (bool, int, float, str)) for v in value
    ):
        return ast.Tuple(elts=[const(v) for v in value], ctx=ast.Load())
    return None


def unpacked_active(v: ast.Call, active) -> bool:
    """Whether ``v`` unpacks a differentiated value (``f(*xs)``, ``f(**d)``) where
    its arguments cannot be told apart (any call but a user callee's, which
    binds them): both modes refuse it with :func:`unpacked_problem`."""
    unpacked = [a.value for a in v.args if isinstance(a, ast.Starred)]
    unpacked += [k.value for k in v.keywords if k.arg is None]
    return any(isinstance(u, ast.Name) and u.id in active for u in unpacked)


def unpacked_problem(v: ast.Call) -> tuple[str, str]:
    """(message, hint) for :func:`unpacked_active`."""
    return (
        "differentiated values unpacked with '*' or '**' into "
        f"'{ast.unparse(v.func)}', whose arguments s2sad must know one by one "
        "when it compiles",
        "pass the values one by one, or unpack a tuple, list or dict literal "
        "(f(*[a, b]), f(**{'k': v}))",
    )


def unpacked_displays(s: ast.stmt, act: Any, source) -> list:
    """``(*xs, y)``, ``[*xs]``, ``{*xs}``, ``{**d, "k": v}`` unpacking a
    differentiated value the compiler could not spell out item by item
    (front/starred.py does it for a local of fixed length): the display's
    items would carry no gradient, so it is refused where it is written."""
    problems = []
    for d in ast.walk(s):
        if isinstance(d, (ast.Tuple, ast.List, ast.Set)):
            unpacked = [e.value for e in d.elts if isinstance(e, ast.Starred)]
        elif isinstance(d, ast.Dict):
            unpacked = [v for k, v in zip(d.keys, d.values) if k is None]
        else:
            continue
        if any(isinstance(u, ast.Name) and u.id in act.active for u in unpacked):
            problems.append(
                source.problem(
                    d,
                    "differentiated values unpacked with '*' or '**' into a "
                    "display whose length s2sad must know when it compiles",
                    "build it from the items one by one ((xs[0], xs[1], y)), "
                    "unpack a tuple or list literal assigned once, or use "
                    "list.append",
                )
            )
    return problems


def default_origin(fn: Any, pname: str) -> list | None:
    """How the disk cache finds the default of ``fn``'s parameter ``pname`` in
    another process (None: it cannot, for a function defined inside another)."""
    qualname = getattr(fn, "__qualname__", "")
    module = getattr(fn, "__module__", None)
    if not module or not qualname or "<" in qualname:
        return None
    return ["default", module, qualname, pname]
