"""A loop's per-step weight cotangents stacked, summed by one product after it.

The ``loopsums`` pass (``transforms/reverse/loopsums.py``) turns the backward
sweep's ``g_w = accumulate(g_w, d_step_product_rhs(g, m, R, x, w, axis,
t)[0])`` (one ``x_t.T @ g`` product a step) into::

    g_w_steps = stack_step(g_w_steps, g, R, x, w, axis, t)   # in the loop
    g_w = accumulate(g_w, stacked_product(g_w_steps, R))      # after it

Where ``R`` is a ``stepreads.StepProducts`` (the steps made time-major before
the loop) each step's ``g`` is copied into a time-major stack (a contiguous
slab) and ``stacked_product`` runs one ``rows.T @ stack``; else (each step's
own product) the sum is an array, one ``x_t.T @ g`` added a step into a
workspace buffer, as before the pass.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from s2sad.runtime import stepreads as _reads
from s2sad.runtime import steps as _steps
from s2sad.runtime.registry import nondifferentiable
from s2sad.runtime.support import accumulate, add


class StepStack:
    """The backward sweep's cotangents of a loop's ``step_product`` for
    ``w``, held (``stack_step``) until one product after the loop sums them
    (``stacked_product``): ``g[j]`` is step ``j``'s cotangent of the product
    (time-major, as ``StepProducts.prod``), ``filled[j]`` whether it was
    written, ``count`` how many were and ``lo``, ``hi`` the first and one
    past the last; ``rest`` the sum of the cotangents of any step that could
    not be stacked (another shape or dtype), computed one step at a time."""

    __slots__ = ("count", "filled", "g", "hi", "lo", "mine", "rest")

    def __init__(self) -> None:
        self.g = self.filled = self.rest = None
        self.count = self.hi = 0
        self.lo = -1
        self.mine = False  # whether ``rest`` is an array of the stack's own


def stack_step(
    stack: Any,
    g: Any,
    prod: Any,
    x: Any,
    w: Any,
    axis: int,
    t: Any,
    tiles: Any = None,
    out: Any = None,
) -> Any:
    """One step of a loop's sum of ``d_step_product_rhs(g, None, prod, x, w,
    axis, t, tiles)[0]`` (the ``loopsums`` pass): ``stacked_product(stack,
    prod)`` after the loop is that sum.  Where ``prod`` is a ``StepProducts``
    and ``g`` an array of one step's product's shape and dtype, ``g`` is
    copied into a ``StepStack``'s slab for step ``t`` (a contiguous slab: no
    product a step).  Else the step's cotangent is computed at once and
    added: to the stack's ``rest``, or, while there is no stack (``prod`` is
    None: each step's own product), to the sum itself, an array (``out``: a
    workspace buffer for it, as ``accumulate``'s)."""
    if g is None:
        return stack
    if (  # each step's own product (no StepProducts), matrices of one float
        # dtype: the sum itself, x_t.T @ g added in, without further calls
        prod is None
        and type(g) is np.ndarray
        and type(x) is np.ndarray
        and type(stack) is not StepStack
        and g.ndim == 2
        and g.dtype == x.dtype == w.dtype
        and g.dtype.kind == "f"
        and (stack is None or type(stack) is np.ndarray)
    ):
        at = (slice(None),) * axis
        if tiles is None:
            xt = x[at + (t,)]
        else:
            a, b, p, q = tiles
            xt = x[at + (slice(a * t + b, p * t + q),)]
        if xt.ndim == 2 and (stack is None or stack.shape == w.shape):
            if (
                type(out) is np.ndarray
                and out.shape == w.shape
                and out.dtype == g.dtype
                and out.flags.writeable
                and out is not stack
            ):
                np.matmul(xt.T, g, out=out)
                return out if stack is None else np.add(out, stack, out=out)
            part = np.matmul(xt.T, g)
            return part if stack is None else np.add(stack, part, out=part)
    if type(prod) is _reads.StepProducts and type(g) is np.ndarray:
        slabs = prod.prod
        if g.shape == slabs.shape[1:] and g.dtype == slabs.dtype:
            if type(stack) is not StepStack:
                stack = _stack_of(stack)
            j = t if type(t) is int else operator.index(t)
            if j < 0:
                j += len(slabs)
            buf = stack.g
            if buf is None:
                buf = stack.g = _reads.scratch(slabs.shape, slabs.dtype)
                stack.filled = [False] * len(slabs)
            if stack.filled[j]:  # (a step visited twice: its cotangents add)
                np.add(buf[j], g, out=buf[j])
                return stack
            buf[j] = g
            stack.filled[j] = True
            stack.count += 1
            if stack.lo < 0 or j < stack.lo:
                stack.lo = j
            if j >= stack.hi:
                stack.hi = j + 1
            return stack
    if type(stack) is not StepStack:  # no stack: the sum itself
        return _summed_step(stack, g, prod, x, w, axis, t, tiles, out)
    part = _reads.d_step_product_rhs(g, None, prod, x, w, axis, t, tiles)[0]
    rest = stack.rest
    if (
        stack.mine
        and type(part) is np.ndarray
        and part.shape == rest.shape
        and part.dtype == rest.dtype
    ):
        np.add(rest, part, out=rest)
    elif rest is None:
        stack.rest = part
    else:
        stack.rest = add(rest, part)
        stack.mine = type(stack.rest) is np.ndarray
    return stack


def _summed_step(total, g, prod, x, w, axis, t, tiles, out) -> Any:
    """``total`` plus step ``t``'s cotangent for ``w`` (``out``: a workspace
    buffer for the sum, as ``accumulate``'s), by the rule itself: what the
    inline path of ``stack_step`` does not take."""
    part = _reads.d_step_product_rhs(g, None, prod, x, w, axis, t, tiles)[0]
    return accumulate(total, part, out=out)


def _stack_of(total: Any) -> StepStack:
    """A new stack, with the sum of earlier steps (None: none) as its rest."""
    stack = StepStack()
    stack.rest = total
    return stack


def stacked_product(stack: Any, prod: Any) -> Any:
    """The sum of the cotangents ``stack_step`` took: ``rows.T @ g`` over the
    stacked steps, one product (the steps the loop did not visit between the
    first and last it did are zeros in it, when they are at most as many as
    those it visited; else one product a visited step), plus the ``rest``."""
    if type(stack) is not StepStack:  # the sum itself (or None: no step)
        return stack
    total = stack.rest
    if stack.count:
        rows, g, lo, hi = prod.rows, stack.g, stack.lo, stack.hi
        per = rows.shape[0] // max(len(g), 1)  # rows of one step
        if 2 * stack.count >= hi - lo:
            if stack.count < hi - lo:
                for j in range(lo, hi):
                    if not stack.filled[j]:
                        g[j] = 0
            flat = _steps.as_matrix(g[lo:hi])
            total = add(total, np.matmul(rows[lo * per : hi * per].T, flat))
        else:
            for j in range(lo, hi):
                if stack.filled[j]:
                    part = np.matmul(
                        rows[j * per : (j + 1) * per].T, _steps.as_matrix(g[j])
                    )
                    total = add(total, part)
    return total


nondifferentiable(stack_step)
nondifferentiable(stacked_product)
