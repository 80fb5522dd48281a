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
import inspect
import types
from dataclasses import dataclass, field
from typing import Any

from s2sad.runtime import registry
from s2sad.transforms.astutil import const, name
from s2sad.transforms.front.parse import MISSING


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

    def _bind_arguments(self, e: ast.Call, info: CallInfo) -> ast.Call:
        """Rewrite a call to a user function with every argument positional."""
        if info.kind == "local":
            params, defaults = _def_params(self.local_functions[info.target].node)
            params = params[
                : len(params) - len(self.local_functions[info.target].freevars)
            ]
        else:
            params, defaults = _object_params(info.target, e.func)
        star = _star_params(info, self.local_functions)
        if star:
            callee = ast.unparse(e.func)
            self.error(
                e,
                f"calls to functions with {star} are not supported yet: "
                f"'{callee}' takes {star}",
                f"give '{callee}' one named parameter per argument, or pass the "
                "values as one tuple or list argument",
            )
            return e
        if info.extra.get("self") is not None:
            params = params[1:]
        given = {k.arg: k.value for k in e.keywords}
        unknown = set(given) - set(params)
        if unknown or len(e.args) > len(params):
            self.error(
                e,
                f"call does not match the signature of '{ast.unparse(e.func)}'",
                "check the argument names and count",
            )
            return e
        args = list(e.args)
        for p in params[len(e.args) :]:
            if p in given:
                args.append(given[p])
            elif p in defaults and defaults[p] is None:
                self.error(
                    e,
                    f"the default of parameter '{p}' of '{ast.unparse(e.func)}' is not "
                    "a literal",
                    f"pass {p}=... explicitly in this call",
                )
                return e
            elif p in defaults:
                args.append(defaults[p])
            else:
                self.error(
                    e,
                    f"missing argument '{p}' in call to '{ast.unparse(e.func)}'",
                    "pass every parameter that has no default",
                )
                return e
        return ast.Call(func=e.func, args=args, keywords=[])

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
                    return CallInfo("user", obj.__func__, {"self": name(receiver.id)})
            return CallInfo("method", func.attr)
        return CallInfo("unknown")


def classify_object(obj: Any, self_expr: ast.expr | None = None) -> CallInfo:
    """How a call to the Python object ``obj`` is differentiated."""
    if registry.lookup(obj) is not None:
        return CallInfo("rule", obj)
    if isinstance(obj, types.MethodType):
        if registry.lookup(obj.__func__) is not None:
            return CallInfo("rule", obj.__func__, {"self": self_expr})
        if _has_source(obj.__func__):
            return CallInfo("user", obj.__func__, {"self": self_expr})
    if isinstance(obj, types.FunctionType) and _has_source(obj):
        return CallInfo("user", obj)
    return CallInfo("unknown", obj)


def call_method(obj: Any) -> Any:
    """The Python ``__call__`` of a callable object's class, or None."""
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
        return None
    call = getattr(type(obj), "__call__", None)
    if isinstance(call, types.FunctionType) and _has_source(call):
        return call
    return None


def _has_source(fn: Any) -> bool:
    mod = getattr(fn, "__module__", "") or ""
    if mod.startswith(("numpy", "s2sad.runtime")):
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


def _def_params(node: ast.FunctionDef) -> tuple[list[str], dict[str, ast.expr]]:
    params = [a.arg for a in node.args.args]
    defaults = dict(
        zip(params[len(params) - len(node.args.defaults) :], node.args.defaults)
    )
    return params, defaults


def _object_params(
    fn: Any, func_expr: ast.expr
) -> tuple[list[str], dict[str, ast.expr]]:
    """Parameter names of a Python function, and its defaults as expressions."""
    sig = inspect.signature(fn)
    params, defaults = [], {}
    for p in sig.parameters.values():
        params.append(p.name)
        if p.default is not inspect.Parameter.empty:
            defaults[p.name] = _default_expr(fn, p.name, p.default)
    return params, defaults


def _default_expr(fn: Any, pname: str, value: Any) -> ast.expr | None:
    """A literal default as a constant; None when it is some other object."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return const(value)
    if isinstance(value, tuple) and all(
        isinstance(v, (bool, int, float, str)) for v in value
    ):
        return ast.Tuple(elts=[const(v) for v in value], ctx=ast.Load())
    return None
