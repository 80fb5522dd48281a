"""JAX's functional forms: ``vjp``, ``jvp(f, primals, tangents)``, ``jacfwd``,
``jacrev`` and ``hessian`` over pytrees.

    out, pullback = s2sad.vjp(f, x, W)      # pullback(u) -> (J_x^T u, J_W^T u)
    out, t_out = s2sad.jvp(f, (x, W), (t_x, t_W))
    s2sad.jacrev(f)(params)                 # {"W": out.shape + W.shape, ...}
    s2sad.jacfwd(f, argnums=(0, 1))(x, W)

``vjp`` seeds the emitted ``<f>_value_and_grad(*params, g_out)`` with the
caller's cotangent; ``jvp`` calls the emitted ``<f>_jvp``.  The Jacobians take
one product per input entry (forward) or output entry (reverse), so they are
meant for small inputs or outputs.  Pytrees are dicts, lists, tuples,
namedtuples, dataclasses and registered classes (:mod:`s2sad.runtime.pytrees`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from s2sad.api import GradientFunction
from s2sad.binding import (
    argnums_tuple,
    check_differentiable,
    normalize_argnums,
    tangent_like,
)
from s2sad.higher import (
    JvpFunction,
    basis,
    jvp_target,
    reverse_function,
    split_aux,
)
from s2sad.options import Options
from s2sad.runtime import pytrees


def _values(target: Callable, args: tuple, keywords: dict) -> list:
    bound = inspect.signature(target).bind(*args, **keywords)
    bound.apply_defaults()
    return list(bound.arguments.values())


# ---------------------------------------------------------------- vjp


def vjp(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(out, pullback)``: ``pullback(u)`` is the tuple of ``J_i^T u``, one per primal.

    ``u`` has the structure and shapes of ``out`` (a float, an array or a pytree
    of them).  With ``has_aux=True`` ``fun`` returns ``(out, aux)`` and this
    returns ``(out, pullback, aux)``.  Every primal must hold floats.
    """
    target, prefix, keywords, nums = jvp_target(fun, len(primals))
    values = _values(target, prefix + primals, keywords)
    names = list(inspect.signature(target).parameters)
    for i in nums:
        check_differentiable(values[i], names[i], i - len(prefix), "cotangents")
    out, aux = split_aux(target(*values), has_aux, _name(fun))
    fn = reverse_function(target, nums, Options(workspace=False), values)

    def pullback(cotangent: Any) -> tuple:
        seed = tangent_like(cotangent, out, "(the cotangent of the output)")
        _, grads = fn(*values, (seed, None) if has_aux else seed)
        return tuple(grads)

    pullback.__name__ = f"vjp_of_{_name(fun)}"
    return (out, pullback, aux) if has_aux else (out, pullback)


def _name(fun: Any) -> str:
    return getattr(fun, "__qualname__", None) or repr(fun)


# ---------------------------------------------------------------- Jacobians over pytrees


def _basis(tree: Any) -> list[Any]:
    """Unit pytrees like ``tree``: one per float entry of its leaves, in order."""
    flat = pytrees.leaves(tree)
    out = []
    for j, (_, leaf) in enumerate(flat):
        for e in basis(leaf):  # a leaf: no container check fires
            parts = [e if k == j else _zero(x) for k, (_, x) in enumerate(flat)]
            out.append(pytrees.unflatten(tree, parts))
    return out


def _zero(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return np.zeros(x.shape, x.dtype if x.dtype.kind in "fc" else float)
    return 0.0


def _assemble(rows: list[Any], rows_tree: Any, cols_tree: Any) -> Any:
    """Blocks from one ``cols_tree``-shaped pytree per entry of ``rows_tree``:
    ``rows_tree``'s structure, each leaf replaced by ``cols_tree``'s structure
    whose leaves have shape row_leaf.shape + col_leaf.shape."""
    row_leaves = [x for _, x in pytrees.leaves(rows_tree)]
    col_leaves = [x for _, x in pytrees.leaves(cols_tree)]
    flat_rows = [[np.asarray(v, float) for _, v in pytrees.leaves(r)] for r in rows]
    start = 0
    blocks = []
    for rl in row_leaves:
        n = int(np.size(rl))
        mine = flat_rows[start : start + n]
        start += n
        per_col = []
        for c, cl in enumerate(col_leaves):
            shape = np.shape(rl) + np.shape(cl)
            stacked = np.stack([r[c] for r in mine]).reshape(shape)
            per_col.append(float(stacked) if not shape else stacked)
        blocks.append(pytrees.unflatten(cols_tree, per_col))
    return pytrees.unflatten(rows_tree, blocks)


def _transpose(cols: list[Any], cols_tree: Any, out_tree: Any) -> Any:
    """Forward-mode columns (one output pytree per input entry) as JAX's
    out-structure of in-structure blocks, leaves out_leaf.shape + in_leaf.shape."""
    out_leaves = [x for _, x in pytrees.leaves(out_tree)]
    in_leaves = [x for _, x in pytrees.leaves(cols_tree)]
    flat_cols = [[np.asarray(v, float) for _, v in pytrees.leaves(c)] for c in cols]
    blocks = []
    for o, ol in enumerate(out_leaves):
        per_in = []
        start = 0
        for il in in_leaves:
            n = int(np.size(il))
            mine = [c[o] for c in flat_cols[start : start + n]]
            start += n
            shape = np.shape(ol) + np.shape(il)
            arr = np.stack(mine, axis=-1).reshape(shape)
            per_in.append(float(arr) if not shape else arr)
        blocks.append(pytrees.unflatten(cols_tree, per_in))
    return pytrees.unflatten(out_tree, blocks)


def _selected(args: tuple, argnums: int | tuple[int, ...]) -> Any:
    nums = argnums_tuple(argnums)
    return tuple(args[i] for i in nums) if isinstance(argnums, tuple) else args[nums[0]]


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Jacobian by reverse mode: one pullback per output entry.

    For ``f(x) -> out`` the result has ``out``'s structure whose leaves have
    ``x``'s structure, each leaf shaped ``out_leaf.shape + x_leaf.shape``; a tuple
    ``argnums`` puts a tuple of those in each place (JAX's layout).
    """
    argnums = normalize_argnums(argnums)

    @functools.wraps(fun)
    def jac(*args: Any) -> Any:
        out, pullback = vjp_at(fun, args, argnums_tuple(argnums))
        cols_tree = _selected(args, argnums)
        rows = []
        for u in _basis(out):
            grads = pullback(u)
            rows.append(grads if isinstance(argnums, tuple) else grads[0])
        return _assemble(rows, out, cols_tree)

    return jac


def vjp_at(fun: Callable, args: tuple, nums: tuple[int, ...]) -> tuple:
    """vjp of ``fun`` in the arguments ``nums`` (the others held fixed)."""
    target, prefix, keywords, _ = jvp_target(fun, 0)
    values = _values(target, prefix + tuple(args), keywords)
    shifted = tuple(i + len(prefix) for i in nums)
    names = list(inspect.signature(target).parameters)
    for i in shifted:
        check_differentiable(values[i], names[i], i - len(prefix))
    out = target(*values)
    fn = reverse_function(target, shifted, Options(workspace=False), values)

    def pullback(u: Any) -> tuple:
        return tuple(fn(*values, tangent_like(u, out, "(output cotangent)"))[1])

    return out, pullback


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Jacobian by forward mode: one JVP per input entry (same layout as
    :func:`jacrev`)."""
    argnums = normalize_argnums(argnums)
    jf = JvpFunction(fun, argnums)

    @functools.wraps(fun)
    def jac(*args: Any) -> Any:
        cols_tree = _selected(args, argnums)
        out = None
        cols = []
        for e in _basis(cols_tree):
            out, t = jf(*args, e)
            cols.append(t)
        if out is None:
            out = fun(*args)
        return _transpose(cols, cols_tree, out)

    return jac


def hessian_tree(fun: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Hessian of a scalar function of pytrees: ``jacfwd(grad(f))`` (forward
    over reverse), laid out like JAX's ``hessian``."""
    argnums = normalize_argnums(argnums)
    return jacfwd(GradientFunction(fun, argnums, False), argnums)
