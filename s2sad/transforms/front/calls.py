"""Calls: how each call is differentiated, and user calls with all arguments positional.

``classify`` decides per call site (stored as ``anno(call)["call"]``)::

    np.tanh(h)        -> CallInfo("rule", np.tanh)        a registered adjoint rule
    helper(x, w=2)    -> CallInfo("user", helper)         compiled to a forward/backward pair,
                                                           called as helper(x, 2)
    step(t)           -> CallInfo("local", "step")        a nested function, lifted
    x.sum(axis=1)     -> CallInfo("method", "sum")        a method of a value
    fns[i](x)         -> CallInfo("unknown")              an error if x carries gradient
"""

from __future__ import annotations

import ast
import functools
import inspect
import site
import sysconfig
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from s2sad.runtime import registry
from s2sad.transforms.astutil import anno, call, const, copy_loc, name, stores
from s2sad.transforms.front.parse import MISSING

#: builtins returning a one-shot iterator over their (differentiated) arguments
MATERIALIZED = (zip, enumerate, reversed)


@dataclass
class CallInfo:
    kind: str  # rule | user | local | method | unknown
    target: Any = None  # the resolved object, local function name, or method name
    extra: dict = field(default_factory=dict)


@dataclass
class LocalFunction:
    node: ast.FunctionDef
    freevars: list[str]


class CallNormalizer:
    """Call handling for :class:`normalize.Normalizer` (a mixin: uses its helpers)."""

    def _bind_arguments(self, e: ast.Call, info: CallInfo, out: list) -> ast.Call:
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
        if len(unpacked) > 1 or (unpacked and varkw is not None):
            return mismatch(
                f"keyword unpacking ('**') into '{callee}' that s2sad cannot match "
                "to its parameters",
                "unpack one dict, into a function without '**kwargs'",
            )
        source = self.atom(unpacked[0], out, "kwargs") if unpacked else None
        named = [p for p in params if kinds[p] in (POSITIONAL, KEYWORD_ONLY)]
        extra = {k: v for k, v in given.items() if k not in named}
        if (extra and varkw is None) or set(given) & set(positional[: len(fixed)]):
            return mismatch()
        args = list(fixed[: len(positional)])
        for p in params[len(args) :]:
            kind = kinds[p]
            if kind == VAR_POSITIONAL:
                rest = ast.Tuple(elts=fixed[len(positional) :], ctx=ast.Load())
                if starred is not None:
                    rest = call("tuple", starred)
                args.append(rest)
            elif kind == VAR_KEYWORD:
                args.append(
                    ast.Dict(
                        keys=[const(k) for k in extra], values=list(extra.values())
                    )
                )
            elif p in given:
                args.append(given[p])
            elif source is not None:
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
        if any(kinds[p] != POSITIONAL for p in params):
            info.extra["kinds"] = [(p, kinds[p]) for p in params]
        return ast.Call(func=e.func, args=args, keywords=[])

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
        return var

    def specialise_unpacking(self, e: ast.Call, out: list) -> ast.Call:
        """``f(*xs)`` and ``f(**d)`` on a parameter of the differentiated function
        that the body never rebinds: the call's example argument gives the length
        (the keys), so ``f(xs[0], xs[1])`` (``f(a=d["a"])``), after a check that
        raises ``structure_changed`` (s2sad compiles again) for another one."""
        examples = self.parsed.example_args
        if not examples:
            return e

        def known(v: ast.expr, kinds: tuple) -> Any:
            if not (isinstance(v, ast.Name) and v.id in self.params):
                return None
            if v.id in self._rebound():
                return None
            value = examples.get(v.id)
            return value if isinstance(value, kinds) and len(value) <= 32 else None

        args, keywords, changed = [], [], False
        for a in e.args:
            seq = known(a.value, (list, tuple)) if isinstance(a, ast.Starred) else None
            if seq is None:
                args.append(a)
                continue
            var = a.value.id
            self._structure_guard(
                e, out, call("len", name(var)), const(len(seq)), f"len({var})"
            )
            args += [_item(var, i) for i in range(len(seq))]
            changed = True
        for k in e.keywords:
            d = known(k.value, (dict,)) if k.arg is None else None
            if d is None or not all(
                isinstance(key, str) and key.isidentifier() for key in d
            ):
                keywords.append(k)
                continue
            var = k.value.id
            keys = sorted(d)
            self._structure_guard(
                e,
                out,
                call("sorted", name(var)),
                ast.List(elts=[const(key) for key in keys], ctx=ast.Load()),
                f"the keys of {var}",
            )
            keywords += [ast.keyword(arg=key, value=_item(var, key)) for key in keys]
            changed = True
        if not changed:
            return e
        return copy_loc(ast.Call(func=e.func, args=args, keywords=keywords), e)

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
        self.helpers_needed.add("structure_changed")
        fail = ast.Raise(exc=call(helper, const(message)), cause=None)
        test = ast.Compare(left=got, ops=[ast.NotEq()], comparators=[want])
        guard = copy_loc(ast.If(test=test, body=[fail], orelse=[]), e)
        for sub in ast.walk(guard):
            if isinstance(sub, (ast.expr, ast.stmt)) and not hasattr(sub, "lineno"):
                ast.copy_location(sub, e)
        self.stmt(guard, out, False)

    def builtin_form(self, e: ast.Call, info: CallInfo) -> ast.expr | None:
        """The form of a builtin call that later passes differentiate, or None.

        ``dict(a=x, b=y)`` is the literal ``{"a": x, "b": y}``; ``zip(a, b)``,
        ``enumerate(a)`` and ``reversed(a)`` become ``list(zip(a, b))``..., since a
        later rule reading the value again (``sum``, ``sorted``, ``max``, the
        backward sweep) would find a one-shot iterator already consumed.
        """
        if info.target is dict and not e.args and all(k.arg for k in e.keywords):
            literal = ast.Dict(
                keys=[const(k.arg) for k in e.keywords],
                values=[k.value for k in e.keywords],
            )
            return copy_loc(literal, e)
        if info.target in (list, tuple) and len(e.args) == 1:
            inner = e.args[0]
            if isinstance(inner, ast.Call) and self.is_static(inner.func):
                anno(inner)["materialized"] = True  # list(zip(a, b)) already is
        if (
            info.kind == "rule"
            and info.target in MATERIALIZED
            and not anno(e).get("materialized")
        ):
            anno(e)["materialized"] = True
            return copy_loc(call("list", e), e)
        return None

    def _module_aliases(self, node: ast.FunctionDef) -> dict[str, Any]:
        """Locals assigned once, at the top level, a module (``xp = np``): the
        functions reached through them resolve like ``np.exp`` itself."""
        counts: dict[str, int] = {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                counts[sub.id] = counts.get(sub.id, 0) + 1
        out = {}
        for stmt in node.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and counts.get(stmt.targets[0].id) == 1
                and stmt.targets[0].id not in self.params
                and self.is_static(stmt.value)
            ):
                obj = self.resolve(stmt.value)
                if isinstance(obj, types.ModuleType):
                    out[stmt.targets[0].id] = obj
        return out

    def is_static(self, expr: ast.expr) -> bool:
        """A name or attribute chain rooted at a non-local name (module, global...),
        or at a local that holds a module (``xp = np``)."""
        while isinstance(expr, ast.Attribute):
            expr = expr.value
        return isinstance(expr, ast.Name) and (
            expr.id not in self.locals or expr.id in getattr(self, "module_aliases", {})
        )

    def resolve(self, expr: ast.expr) -> Any:
        if isinstance(expr, ast.Name):
            if expr.id in getattr(self, "module_aliases", {}):
                return self.module_aliases[expr.id]
            return self.env.lookup(expr.id)
        base = self.resolve(expr.value)
        if base is MISSING:
            return MISSING
        return getattr(base, expr.attr, MISSING)

    def classify(self, e: ast.Call) -> CallInfo:
        func = e.func
        if isinstance(func, ast.Name) and func.id in self.local_functions:
            return CallInfo("local", func.id)
        if self.is_static(func):
            obj = self.resolve(func)
            if obj is MISSING:
                self.error(
                    func,
                    f"unresolved name '{ast.unparse(func)}'",
                    "define it at module level before calling the gradient",
                )
                return CallInfo("unknown")
            self_expr = func.value if isinstance(func, ast.Attribute) else None
            return classify_object(obj, self_expr)
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if (
                isinstance(receiver, ast.Name)
                and receiver.id in self.parsed.example_args
            ):
                obj = getattr(self.parsed.example_args[receiver.id], func.attr, MISSING)
                if isinstance(obj, types.MethodType) and _has_source(obj.__func__):
                    return CallInfo(
                        "user",
                        obj.__func__,
                        {"self": name(receiver.id), "receiver": obj.__self__},
                    )
            return CallInfo("method", func.attr)
        return CallInfo("unknown")


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


def as_written(v: ast.Call) -> ast.Call:
    """A user call as Python runs it: normalize passes a method's receiver as the
    first argument (the compiled method takes it so), which the bound method
    ``obj.f`` must not get twice when the call is emitted unchanged; and a
    callee's ``*args``, keyword-only and ``**kwargs`` parameters get their
    arguments unpacked and by name again."""
    info = anno(v).get("call")
    if info is None or info.kind != "user":
        return v
    args, keywords = v.args[info.extra.get("self") is not None :], v.keywords
    if info.extra.get("kinds"):  # *args, keyword-only and **kwargs as Python takes them
        bound, args, keywords = args, [], []
        for (p, kind), a in zip(info.extra["kinds"], bound):
            if kind == POSITIONAL:
                args.append(a)
            elif kind == VAR_POSITIONAL:
                args.append(ast.Starred(value=a, ctx=ast.Load()))
            else:
                keywords.append(
                    ast.keyword(arg=p if kind == KEYWORD_ONLY else None, value=a)
                )
    elif info.extra.get("self") is None:
        return v
    new = ast.Call(func=v.func, args=args, keywords=keywords)
    anno(new)["call"] = info
    return ast.copy_location(new, v)


def classify_object(obj: Any, self_expr: ast.expr | None = None) -> CallInfo:
    """How a call to the Python object ``obj`` is differentiated."""
    if registry.lookup(obj) is not None:
        return CallInfo("rule", obj)
    if isinstance(obj, types.MethodType):
        if registry.lookup(obj.__func__) is not None:
            return CallInfo("rule", obj.__func__, {"self": self_expr})
        if _has_source(obj.__func__):
            return CallInfo(
                "user", obj.__func__, {"self": self_expr, "receiver": obj.__self__}
            )
    if isinstance(obj, types.FunctionType) and _has_source(obj):
        return CallInfo("user", obj)
    return CallInfo("unknown", obj)


_ITER_HINT = "index the sequence (xs[0], xs[i]) instead of iter() and next()"
_SET_HINT = "a set has no order, so no entry can be differentiated: keep a list"
#: what to write instead of a builtin that has no rule, for error hints
BUILTIN_HINTS = {
    map: "write a for loop that appends f(v) to a list",
    filter: "write a for loop that appends the entries kept to a list",
    iter: _ITER_HINT,
    next: _ITER_HINT,
    set: _SET_HINT,
    frozenset: _SET_HINT,
}


def builtin_hint(obj: Any) -> str | None:
    """How to rewrite a call to the builtin ``obj`` that s2sad has no rule for."""
    try:
        return BUILTIN_HINTS.get(obj)
    except TypeError:  # unhashable
        return None


def call_method(obj: Any) -> Any:
    """The Python ``__call__`` of a callable object's class, or None."""
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
        return None
    call = getattr(type(obj), "__call__", None)
    if isinstance(call, types.FunctionType) and _has_source(call):
        return call
    return None


def _has_source(fn: Any) -> bool:
    """Whether s2sad compiles ``fn`` from its source: user code, not a library's."""
    mod = getattr(fn, "__module__", "") or ""
    if mod.startswith(("numpy", "s2sad.runtime")) or is_library(fn):
        return False
    try:
        inspect.getsourcefile(fn)
        return inspect.getsourcelines(fn) is not None
    except (OSError, TypeError):
        return False


def _star_params(info: CallInfo, local_functions: dict) -> str:
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


_S2SAD_DIR = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def _library_dirs() -> tuple[Path, ...]:
    """The standard library's and the installed distributions' folders."""
    paths = sysconfig.get_paths()
    dirs = {
        paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths
    }
    dirs.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    dirs.add(site.getusersitepackages())
    return tuple(Path(d).resolve() for d in dirs if d)


def library_file(fn: Any) -> str | None:
    """The file defining ``fn`` when it is library code (the standard library,
    site-packages, any installed distribution), else None: s2sad compiles the
    user's functions from source, never a library's (SciPy's source is full of
    forms it does not differentiate; its calls need rules)."""
    try:
        file = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (TypeError, OSError):
        return None
    if not file:
        return None
    path = Path(file).resolve()
    if path.is_relative_to(_S2SAD_DIR):
        return None
    if any(part in ("site-packages", "dist-packages") for part in path.parts):
        return str(path)
    return str(path) if any(path.is_relative_to(d) for d in _library_dirs()) else None


def is_library(fn: Any) -> bool:
    return library_file(fn) is not None


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
