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

import numpy as np

from s2sad.runtime import registry
from s2sad.transforms.astutil import anno, call, const, copy_loc, stores
from s2sad.transforms.front import partials
from s2sad.transforms.front.arguments import (
    KEYWORD_ONLY,
    POSITIONAL,
    VAR_POSITIONAL,
    ArgumentBinder,
)
from s2sad.transforms.front.parse import MISSING

#: function values a parameter is specialised on (front/callees.py)
_FUNCTIONS = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    np.ufunc,
)

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


class CallNormalizer(ArgumentBinder):
    """Call handling for :class:`normalize.Normalizer` (a mixin: uses its helpers)."""

    def receiver_atom(
        self, e: ast.Call, info: CallInfo, func: ast.expr, out
    ) -> ast.expr:
        """The receiver a method call passes first: the callee itself for a callable
        object, an atom for ``self.l1`` in ``self.l1.forward_pass(x)``."""
        receiver = info.extra["self"]
        if receiver is e.func:
            return func
        if isinstance(receiver, ast.Name) or self.is_static(receiver):
            return receiver
        return self.atom(receiver, out, "receiver")

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

    def unwrap_partial(self, e: ast.Call) -> ast.Call:
        """See :func:`partials.unwrap`."""
        return partials.unwrap(self, e)

    def super_method(self, func: ast.expr) -> CallInfo | None:
        """``super().f(x)`` in a method compiled for a receiver whose value is
        known (an object passed in, or reached from a global): the method the
        class after this one in the receiver's MRO defines, called with this
        method's ``self``; None for any other call."""
        if not (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
            and not func.value.args
            and not func.value.keywords
            and "super" not in self.locals
        ):
            return None
        params = self.parsed.node.args.args
        me = self.example_value(ast.Name(id=params[0].arg)) if params else MISSING
        fn = self.parsed.fn
        if me is MISSING or fn is None or isinstance(me, type):
            return None
        owner = next(
            (k for k in type(me).__mro__ if any(v is fn for v in vars(k).values())),
            None,
        )
        try:
            method = getattr(super(owner, me), func.attr) if owner else None
        except AttributeError:
            return None
        if not isinstance(method, types.MethodType):
            return None
        receiver = ast.Name(id=params[0].arg, ctx=ast.Load())
        info = classify_object(method, receiver)
        if info.kind != "user":
            return None
        if _class_bound(method):  # super().h(x), h a classmethod: cls, not self
            info.extra["self"] = call("type", receiver)
        return info

    def without_super(self, e: ast.Call, info: CallInfo) -> ast.Call:
        """``super().f(x)`` classified by :meth:`super_method`: the call written
        on the receiver (``self.f``), so no ``super()`` is left in the code (the
        call goes to the method the classification found)."""
        receiver = info.extra.get("self")
        if isinstance(receiver, ast.Call) and receiver.args:  # type(self): a cls
            receiver = receiver.args[0]
        if not (
            info.kind == "user"
            and isinstance(e.func, ast.Attribute)
            and isinstance(e.func.value, ast.Call)
            and isinstance(receiver, ast.Name)
        ):
            return e
        held = ast.Attribute(value=receiver, attr=e.func.attr, ctx=ast.Load())
        return copy_loc(ast.Call(func=held, args=e.args, keywords=e.keywords), e)

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

    def pass_objects(self, e: ast.Call, info: CallInfo) -> None:
        """The objects this call passes to a user function (``fit(model, X)``),
        from this call's values: the callee resolves their methods on them."""
        try:
            params = list(inspect.signature(info.target).parameters)
        except (TypeError, ValueError):
            return
        found = {}
        for p, a in zip(params, e.args):
            v = self.example_value(a)
            if v is MISSING and self.is_static(a):
                v = self.resolve(a)  # odeint(dynamics, y0, t): which function
                if not isinstance(v, _FUNCTIONS):
                    continue
            if v is not MISSING and holds_objects(v):
                found[p] = v
        if found:
            info.extra["examples"] = found

    def example_value(self, expr: ast.expr) -> Any:
        """``example_of`` for this call's arguments."""
        if not hasattr(self, "rebound"):  # arguments resolve only if never rebound
            self.rebound = stores(self.parsed.node)
        return example_of(expr, self.parsed.example_args, self.rebound)

    def classify(self, e: ast.Call) -> CallInfo:
        if "call" in anno(e):  # made by the front end, classified there
            return anno(e)["call"]
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
            return classify_object(obj, self_expr, func)
        if isinstance(func, ast.Call) and self.is_static(func.func):
            # Sigmoid()(x): the class is known, so is the __call__ it runs
            cls = self.resolve(func.func)
            method = None
            if isinstance(cls, type):
                method = next(
                    (
                        k.__dict__["__call__"]
                        for k in cls.__mro__
                        if "__call__" in k.__dict__
                    ),
                    None,
                )
            if isinstance(method, types.FunctionType) and _has_source(method):
                return CallInfo("user", method, {"self": func, "receiver": None})
        inherited = self.super_method(func)
        if inherited is not None:
            return inherited
        # a method or callable object reached from an argument of this call
        # (self.l1.forward_pass(x), self.activation(x)): resolved on its value
        obj = self.example_value(func)
        if obj is not MISSING:
            info = classify_object(obj, _receiver(func), func)
            if info.kind == "user" and "receiver" in info.extra:
                if _class_bound(obj) and not isinstance(
                    self.example_value(func.value), type
                ):  # obj.h(x), h a classmethod: its first argument is the class
                    info.extra["self"] = call("type", info.extra["self"])
                return info
            if (
                isinstance(func, ast.Name)
                and isinstance(obj, _FUNCTIONS)
                and info.kind in ("rule", "user")
            ):
                # a function given in this call (odeint(func, ...)): specialised
                # on it, and checked first thing (front/callees.py)
                return info
            if (
                isinstance(func, ast.Attribute)
                and info.kind in ("rule", "user")
                and _static_method(self.example_value(func.value), func.attr)
            ):
                return info  # self.g(x), g a staticmethod: a plain function
        if isinstance(func, ast.Attribute):
            return CallInfo("method", func.attr)
        return CallInfo("unknown")


def example_of(expr: ast.expr, examples: dict, rebound: set) -> Any:
    """The value of ``a.b[0].c`` for ``a`` an argument the compiler was given
    and the function never rebinds; MISSING otherwise."""
    path = []
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        if isinstance(expr, ast.Subscript):
            if not (
                isinstance(expr.slice, ast.Constant) and type(expr.slice.value) is int
            ):
                return MISSING
            path.append(expr.slice.value)
        else:
            path.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name) or expr.id not in examples or expr.id in rebound:
        return MISSING
    value = examples[expr.id]
    for step in reversed(path):
        try:
            value = value[step] if isinstance(step, int) else getattr(value, step)
        except (AttributeError, IndexError, KeyError, TypeError):
            return MISSING
    return value


def holds_objects(v: Any) -> bool:
    """An object with methods s2sad resolves, or a list or tuple holding one."""
    if isinstance(v, (list, tuple)):
        return any(holds_objects(x) for x in v)
    plain = (np.ndarray, np.generic, float, int, complex, str, bytes, dict, type(None))
    return not isinstance(v, plain) and not callable(getattr(v, "__array__", None))


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


def _class_bound(obj: Any) -> bool:
    """A classmethod bound through an object or a class: ``__self__`` is a class."""
    return isinstance(obj, types.MethodType) and isinstance(obj.__self__, type)


def _static_method(receiver: Any, attr: str) -> bool:
    """Whether ``receiver.attr`` is a ``staticmethod`` of its class (found on the
    class, not set on the object), so that calling it passes no receiver."""
    if receiver is MISSING or isinstance(receiver, types.ModuleType):
        return False
    cls = receiver if isinstance(receiver, type) else type(receiver)
    if not isinstance(receiver, type) and attr in getattr(receiver, "__dict__", {}):
        return False
    return isinstance(inspect.getattr_static(cls, attr, None), staticmethod)


def _receiver(func: ast.expr) -> ast.expr | None:
    return func.value if isinstance(func, ast.Attribute) else None


def classify_object(
    obj: Any, self_expr: ast.expr | None = None, func: ast.expr | None = None
) -> CallInfo:
    """How a call to the Python object ``obj`` (written ``func``) is differentiated."""
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
    method = call_method(obj)
    if method is not None and func is not None:
        # a callable object: obj(x) runs type(obj).__call__(obj, x)
        return CallInfo("user", method, {"self": func, "receiver": obj})
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
