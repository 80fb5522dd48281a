"""Hygiene: a user name that the emitted code needs for itself is renamed.

The emitted functions use fixed names (``g_out``, ``ws``, ``tape``, ``saved``,
``np``, the runtime helpers, ``range``, ...) and module-level names (rules,
bindings, the other emitted functions).  A parameter or local of the user's
function with one of those names is renamed, consistently in every scope that
sees it, before any other pass reads the function::

    def f(ws, x):                          def f(ws_1, x):
        g_out = np.sin(x) * ws      ->         g_out_1 = np.sin(x) * ws_1
        return np.sum(g_out)                   return np.sum(g_out_1)

Renaming parameters is safe: the API calls emitted functions positionally
(``grad``, ``jvp``, ``hvp``, the workspace pool), and a standalone module's
``<f>_value_and_grad`` takes its arguments by position (documented in the CLI's
help).  The module's namer then reserves the function's names, so that rules,
bindings and functions named later do not take them either.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from s2sad.transforms.astutil import Namer, walk

#: names emitted functions bind or read as locals, or as module-level helpers
FIXED = frozenset({"tape", "g_out", "saved", "ws", "np", "scalar"})
#: builtins the emitted code calls by name (loops, slices)
BUILTINS = frozenset({"range", "reversed", "len", "min", "slice"})

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def run(job, module) -> dict[str, str]:
    """Rename the user names of ``job`` that clash; ``{new: old}`` for parameters."""
    node = job.node
    reserved = set(FIXED | BUILTINS) | set(module.helper_names) | module_names(module)
    if _reads(node, "_"):
        reserved.add("_")  # emitted code throws results away into ``_``
    every = {n.id for n in walk(node) if isinstance(n, ast.Name)}
    every |= {a.arg for a in walk(node) if isinstance(a, ast.arg)}
    namer = Namer(every | reserved | module.namer.used)
    renamed = _rename_scope(node, {}, reserved, namer)
    params = {new: old for old, new in renamed.items()}
    examples = job.parsed.example_args
    for old, new in renamed.items():
        if old in examples:
            examples[new] = examples.pop(old)  # in place: module.examples is this dict
        if old in job.parsed.scalar_params:
            job.parsed.scalar_params = (job.parsed.scalar_params - {old}) | {new}
        if old in job.parsed.fresh_params:
            job.parsed.fresh_params = (job.parsed.fresh_params - {old}) | {new}
    module.namer.reserve(*_bound(node))
    return params


def module_names(module) -> set[str]:
    """Names bound at the module level so far: bindings, rules, emitted functions."""
    names = set(module.bindings)
    names |= {alias for _, _, alias in module.rule_imports.values()}
    for job in module.jobs.values():
        names.update(job.names)
    names.update(module.function_names)
    return names


def _rename_scope(
    scope: ast.AST, outer: dict[str, str], reserved: set[str], namer: Namer
) -> dict[str, str]:
    """Rename in ``scope`` (a function or lambda) and the scopes inside it; the
    renames of this scope's own names."""
    own = {n for n in _bound(scope) if n in reserved}
    mapping = {k: v for k, v in outer.items() if k not in _bound(scope)}
    mine = {n: namer.fresh(n) for n in sorted(own)}
    mapping.update(mine)
    args = scope.args
    for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if a is not None and a.arg in mapping:
            a.arg = mapping[a.arg]
    for sub in _in_scope(scope):
        if isinstance(sub, ast.Name) and sub.id in mapping:
            sub.id = mapping[sub.id]
        elif isinstance(sub, _SCOPES):
            if not isinstance(sub, ast.Lambda) and sub.name in mapping:
                sub.name = mapping[sub.name]
            _rename_scope(sub, mapping, reserved, namer)
    return mine


def _in_scope(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``scope``'s own body; nested functions and lambdas are
    yielded (with their defaults, which belong here) but not entered."""
    body = scope.body if isinstance(scope.body, list) else [scope.body]
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        sub = stack.pop()
        yield sub
        if isinstance(sub, _SCOPES):
            args = sub.args
            stack.extend(args.defaults + [d for d in args.kw_defaults if d])
            if not isinstance(sub, ast.Lambda):
                stack.extend(sub.decorator_list)
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(sub))))


def _bound(scope: ast.AST) -> set[str]:
    """The names ``scope`` binds: parameters, assigned names, local functions."""
    args = scope.args
    names = {
        a.arg
        for a in args.posonlyargs
        + args.args
        + args.kwonlyargs
        + [args.vararg, args.kwarg]
        if a is not None
    }
    for sub in _in_scope(scope):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            names.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(sub.name)
    return names


def _reads(node: ast.AST, ident: str) -> bool:
    return any(
        isinstance(n, ast.Name) and n.id == ident and isinstance(n.ctx, ast.Load)
        for n in walk(node)
    )
