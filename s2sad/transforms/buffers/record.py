"""The recording variant of an emitted gradient module (for the workspace pool).

A workspace's buffers are sized by a *recording call*: a variant of the emitted
functions in which every buffer site (``out=ws["k"]``, ``out=ws.take("k")``, or
an ``into=`` tuple holding such sites) is wrapped as ``ws.keep("k", <call>)``,
so that :class:`s2sad.runtime.workspace.Recorder` sees each site's result.

Building that variant means re-reading the module's source, which is compiler
work (it needs :mod:`ast`), so it lives here and not in the runtime: the
runtime's :class:`~s2sad.runtime.workspace.Pool` only receives a callable that
builds it (:func:`recorder`) and calls it on the second call of a new shape.
"""

from __future__ import annotations

import ast
from collections.abc import Callable


def _site_key(node: ast.expr) -> str | None:
    """``"k"`` for ``ws["k"]`` or ``ws.take("k")``, else None."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "ws"
        and isinstance(node.slice, ast.Constant)
    ):
        return node.slice.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "ws"
        and node.func.attr == "take"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return node.args[0].value
    return None


def _site_keys(node: ast.Call) -> ast.expr | None:
    """The key (or tuple of keys, for ``into=``) of a call that writes into sites."""
    for kw in node.keywords:
        if kw.arg == "out" and _site_key(kw.value) is not None:
            return ast.Constant(_site_key(kw.value))
        if kw.arg == "into" and isinstance(kw.value, ast.Tuple):
            found = [_site_key(e) for e in kw.value.elts]
            if any(k is not None for k in found):
                return ast.Tuple(
                    elts=[ast.Constant(k or "") for k in found], ctx=ast.Load()
                )
    return None


class _WrapSites(ast.NodeTransformer):
    """Wrap every call that writes into a site as ``ws.keep(keys, call)``."""

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        keys = _site_keys(node)
        if keys is None:
            return node
        keep = ast.Attribute(
            value=ast.Name("ws", ast.Load()), attr="keep", ctx=ast.Load()
        )
        return ast.Call(func=keep, args=[keys, node], keywords=[])


def recording_variant(fn: Callable, source: str) -> Callable:
    """``fn`` rebuilt from its module ``source`` with every site wrapped in ws.keep."""
    tree = ast.parse(source)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if fn.__name__ not in [d.name for d in defs]:
        raise LookupError(f"{fn.__name__} not found in its module's source")
    # every function: the recording top-level function calls recording callees
    module = ast.Module(body=[_WrapSites().visit(d) for d in defs], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, f"<s2sad recording of {fn.__name__}>", "exec")
    namespace = dict(fn.__globals__)
    exec(code, namespace)
    return namespace[fn.__name__]


def recorder(fn: Callable, source: str) -> Callable[[], Callable]:
    """What a :class:`~s2sad.runtime.workspace.Pool` calls to get ``fn``'s
    recording variant: nothing is parsed until the pool first records."""
    return lambda: recording_variant(fn, source)
