"""Instantiate adjoint rules: inline a one-expression rule as source, or call it.

A rule whose body is a single ``return (e0, e1, ...)`` that uses nothing but its
parameters and ``np`` is inlined, so the emitted code reads like hand-written
NumPy::

    @adjoint(np.tanh)                      # grad of: y = np.tanh(h)
    def d_tanh(g, ans, x):        ->       g_h = g_y * (1.0 - y * y)
        return (g * (1.0 - ans * ans),)

Any other rule is called by name and its tuple unpacked.

In NumPy array code (``instantiate(..., kernels=True)``), a rule registered
with a fused kernel (s2sad/runtime/fused.py) is written as the kernel's call
instead, ``g_h = tanh_grad(g_y, y)``: the same operations into one array, and
only names the expression reads, so the tape keeps what it kept.
"""

from __future__ import annotations

import ast
import copy
import functools
import inspect
import textwrap
from dataclasses import dataclass

import numpy as np

from s2sad.transforms.astutil import anno, walk, without_docstring


@dataclass(frozen=True)
class InlineForm:
    """A rule whose body is one ``return``: its parameters and the returned expression."""

    params: tuple[str, ...]
    defaults: dict
    result: ast.expr  # a tuple of cotangents (adjoints) or one expression (tangents)
    varargs: bool = False  # extra positional arguments are accepted (and unused)
    varkw: bool = False  # extra keyword arguments are accepted (and unused)
    kwonly: bool = False  # keyword-only or positional-only parameters
    nested: bool = False  # the expression holds a lambda or a walrus


@functools.lru_cache(maxsize=None)
def inline_form(rule_fn) -> InlineForm | None:
    """The parsed single-return form of ``rule_fn``, or None if it cannot be inlined.

    The returned expression may use the rule's parameters and ``np`` (NumPy
    itself in the rule's module) and nothing else: a rule calling a helper or
    reading a global is called by name instead.
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(rule_fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        return None
    body = without_docstring(fn.body)
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    value, args = body[0].value, fn.args
    defaults = {}
    for a, d in zip(args.args[len(args.args) - len(args.defaults) :], args.defaults):
        if not isinstance(d, ast.Constant):
            return None
        defaults[a.arg] = d.value
    params = tuple(a.arg for a in args.args)
    used = {n.id for n in walk(value) if isinstance(n, ast.Name)}
    if used - set(params) - {"np"}:
        return None  # uses a helper, a star parameter or a global: call it instead
    if "np" in used and rule_fn.__globals__.get("np") is not np:
        return None
    return InlineForm(
        params,
        defaults,
        value,
        args.vararg is not None,
        args.kwarg is not None,
        bool(args.kwonlyargs or args.posonlyargs),
        any(isinstance(n, (ast.Lambda, ast.NamedExpr)) for n in walk(value)),
    )


class _Substitute(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, ast.expr]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return copy.deepcopy(self.mapping[node.id]) if node.id in self.mapping else node


def _mapping(
    form: InlineForm,
    g: ast.expr,
    ans: ast.expr,
    args: list[ast.expr],
    kwargs: dict[str, ast.expr],
) -> dict[str, ast.expr] | None:
    """Each parameter of the rule -> the expression passed for it (None: no match)."""
    if len(form.params) < len(args) + 2 and not form.varargs:
        return None
    if set(kwargs) - set(form.params) and not form.varkw:
        return None
    mapping: dict[str, ast.expr] = {form.params[0]: g, form.params[1]: ans}
    mapping.update(zip(form.params[2:], args))
    for p in form.params[2 + len(args) :]:
        if p in kwargs:
            mapping[p] = kwargs[p]
        elif p in form.defaults:
            mapping[p] = ast.Constant(value=form.defaults[p])
        else:
            return None
    return mapping


def instantiate(
    rule_fn,
    g: ast.expr,
    ans: ast.expr,
    args: list[ast.expr],
    kwargs: dict[str, ast.expr],
    kernels: bool = False,
) -> list[ast.expr | None] | None:
    """Cotangent expressions for each positional arg (None: zero), or None if not inlinable.

    ``rule_fn`` is an adjoint rule returning a tuple literal, one entry per
    positional argument.  With ``kernels`` (array code), a rule that has a
    fused kernel (s2sad/runtime/fused.py) gets a call of it in place of its
    expression: ``tanh_grad(g_y, y)`` for ``g_y * (1.0 - y * y)``.
    """
    form = inline_form(rule_fn)
    if form is None or form.kwonly or form.nested:
        return None
    if not isinstance(form.result, ast.Tuple):
        return None
    mapping = _mapping(form, g, ans, args, kwargs)
    if mapping is None:
        return None
    fused = _fused_call(rule_fn, form, mapping) if kernels and args else None
    if fused is not None:
        return [fused] + [None] * (len(args) - 1)
    out: list[ast.expr | None] = []
    for i in range(len(args)):
        expr = form.result.elts[i] if i < len(form.result.elts) else None
        if expr is None or (isinstance(expr, ast.Constant) and expr.value is None):
            out.append(None)
        else:
            out.append(_Substitute(mapping).visit(copy.deepcopy(expr)))
    return out


def _fused_call(rule_fn, form: InlineForm, mapping: dict) -> ast.expr | None:
    """``kernel(...)`` for a one-cotangent rule with a fused kernel, its
    parameters those of the rule the kernel is named after.  Only names the
    rule's expression reads are passed, so the tape keeps what it kept."""
    from s2sad.runtime.fused import kernel_of

    kernel = kernel_of(rule_fn)
    if kernel is None or len(form.result.elts) != 1:
        return None
    params = _kernel_params(kernel)
    read = {n.id for n in walk(form.result) if isinstance(n, ast.Name)}
    if not all(p in read and p in mapping for p in params):
        return None
    func = ast.Name(id=kernel.__name__, ctx=ast.Load())
    anno(func)["kernel"] = kernel
    args = [copy.deepcopy(mapping[p]) for p in params]
    return ast.Call(func=func, args=args, keywords=[])


@functools.cache
def _kernel_params(kernel) -> tuple[str, ...]:
    """A fused kernel's operands: its parameters without a default but ``out``."""
    return tuple(
        p.name
        for p in inspect.signature(kernel).parameters.values()
        if p.name != "out" and p.default is inspect.Parameter.empty
    )


def inline_single(
    fn, t: ast.expr, ans: ast.expr, args: list[ast.expr], kwargs: dict[str, ast.expr]
) -> ast.expr | None:
    """``fn``'s one returned expression with its parameters replaced (a tangent rule
    ``fn(t, ans, *args)``), or None if it cannot be inlined."""
    form = inline_form(fn)
    if form is None or form.varargs or form.varkw or form.kwonly:
        return None
    mapping = _mapping(form, t, ans, args, kwargs)
    return (
        None
        if mapping is None
        else _Substitute(mapping).visit(copy.deepcopy(form.result))
    )


def bind_np(expr: ast.expr, module) -> None:
    """Point ``np`` in an inlined rule at the emitted module's binding of NumPy,
    and a fused kernel's name at its import."""
    for n in walk(expr):
        if isinstance(n, ast.Call) and "kernel" in anno(n.func):
            n.func = module.rule_ref(anno(n.func).pop("kernel"))
        if isinstance(n, ast.Name) and n.id == "np" and not anno(n).get("bound"):
            n.id = module.bind("np", np, ["module", "numpy", "np"])
            anno(n)["bound"] = True


def bool_arithmetic(exprs: list | None) -> bool:
    """Whether inlined cotangent expressions do arithmetic with a comparison of
    arrays (``g * (ans > 0)``; ``(2 == 0)`` of constants is a Python bool):
    NumPy multiplies booleans, the Array API does not, so the foreign path calls
    such a rule by name (its Array API version casts the mask) instead."""
    for e in exprs or ():
        for n in walk(e) if e is not None else ():
            if isinstance(n, ast.BinOp):
                for side in (n.left, n.right):
                    if isinstance(side, ast.Compare) and not all(
                        isinstance(v, ast.Constant)
                        for v in (side.left, *side.comparators)
                    ):
                        return True
    return False


@functools.lru_cache(maxsize=None)
def shortest_return(rule_fn) -> int | None:
    """The fewest cotangents any ``return`` of the rule gives (None: not known,
    a return that is not a tuple literal): a rule may give none for arguments
    it reads as constants (``np.linspace``'s num), which the caller pads."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(rule_fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    returns = [n for n in ast.walk(tree.body[0]) if isinstance(n, ast.Return)]
    if not returns or not all(
        isinstance(r.value, ast.Tuple)
        and not any(isinstance(e, ast.Starred) for e in r.value.elts)
        for r in returns
    ):
        return None
    return min(len(r.value.elts) for r in returns)


@functools.lru_cache(maxsize=None)
def definite_positions(rule_fn) -> frozenset[int]:
    """Positions of the rule's result that are never ``None`` at run time.

    Conservative reading of the source: every ``return`` must be a tuple literal,
    and position ``i`` must contain no ``None`` constant (nor be a name that is
    ever assigned something containing ``None``).
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(rule_fn)))
    except (OSError, TypeError, SyntaxError):
        return frozenset()
    fn = tree.body[0]
    returns = [n for n in walk(fn) if isinstance(n, ast.Return)]
    if not returns or not all(isinstance(r.value, ast.Tuple) for r in returns):
        return frozenset()
    maybe_none_names = {
        t.id
        for n in walk(fn)
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name) and n.value is not None and _has_none(n.value)
    }
    width = min(len(r.value.elts) for r in returns)
    out = set()
    for i in range(width):
        elts = [r.value.elts[i] for r in returns]
        if any(
            _has_none(e) or (isinstance(e, ast.Name) and e.id in maybe_none_names)
            for e in elts
        ):
            continue
        out.add(i)
    return frozenset(out)


def _has_none(e: ast.expr) -> bool:
    return any(isinstance(n, ast.Constant) and n.value is None for n in walk(e))
