"""A loop's per-step weight cotangents stacked, summed by one product after it.

The ``loopsums`` pass (``transforms/reverse/loopsums.py``) turns the backward
sweep's ``g_w = accumulate(g_w, d_step_product_rhs(g, m, R, x, w, axis,
t)[0])`` (one ``x_t.T @ g`` product a step) into::

    S = step_stack(R, x, w, axis, tiles, r)                    # before the loop
    for t in reversed(r):
        ...
        if g is not None:
            S[:, t] = g                                        # a copy a step
        else:
            S[:, t] = 0
    g_w = stacked_steps(S, R, x, w, axis, tiles, g_w)

Where ``R`` holds every step's product as the rows of one matrix (a
``stepreads.StepProducts``, time-major, or an array in ``x``'s own layout
whose steps are one matrix) ``S`` is an array of ``R``'s layout and
``stacked_steps`` runs one ``rows.T @ S``; else ``S`` is a
``StepCotangents``, which differentiates each step as it is written (one
``x_t.T @ g`` a step, as before the pass).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from s2sad.runtime import stepreads as _reads
from s2sad.runtime import steps as _steps
from s2sad.runtime.registry import nondifferentiable
from s2sad.runtime.support import add


def step_stack(prod: Any, x: Any, w: Any, axis: int, tiles: Any, *ranges: Any) -> Any:
    """Before a loop's backward sweep: ``S`` such that the sweep's ``S[(:,) *
    axis + (t,)] = g`` (inline, the ``loopsums`` pass) keeps step ``t``'s
    cotangent of ``step_product(prod, x, w, axis, t, tiles)``, and
    ``stacked_steps(S, prod, ...)`` after it sums their ``w`` cotangents.

    Where ``prod`` holds every step's product as one matrix's rows (in
    ``x``'s own layout, ``x``'s steps one matrix without a copy, or a
    time-major ``StepProducts``), ``S`` is an uninitialised array of
    ``prod``'s layout (a kept scratch array: a view of it, time-major), the
    steps that none of ``ranges`` (the sweep's loops' ranges) visits set to
    zero: the sweep writes each other step once, its cotangent or zero.
    Else a ``StepCotangents``, which differentiates each step as written."""
    stack = None
    if (
        type(prod) is np.ndarray
        and prod.dtype.kind == "f"
        and 0 <= axis < prod.ndim - 1
        and _steps_of(x, axis, prod, tiles) is not None
    ):
        stack = _zero_unvisited(_reads.scratch(prod.shape, prod.dtype), axis, ranges)
    elif type(prod) is _reads.StepProducts:
        slabs = prod.prod
        buf = _reads.scratch(slabs.shape, slabs.dtype)
        order = list(range(1, slabs.ndim))
        order.insert(axis, 0)  # the time axis back at ``axis``
        stack = _zero_unvisited(buf.transpose(order), axis, ranges)
    return StepCotangents(prod, x, w, axis, tiles) if stack is None else stack


def _steps_of(x: Any, axis: int, prod: np.ndarray, tiles: Any) -> Any:
    """``x`` with step ``t`` at index ``t`` along ``axis`` (``tiles``: its
    slices reshaped so), its rows those of ``prod`` (``stepwise_matmul``'s
    product in ``x``'s own layout), or None."""
    if type(x) is not np.ndarray:
        return None
    if tiles is None:
        return x if x.shape[:-1] == prod.shape[:-1] else None
    x = _steps.tiled(x, axis, range(prod.shape[axis]), tiles)
    if x is None or x.shape[:-1] != prod.shape[:-1]:
        return None
    return x


def _zero_unvisited(stack: np.ndarray, axis: int, ranges: tuple) -> Any:
    """``stack`` with the steps no range of ``ranges`` visits set to zero, or
    None where a range is none or a step is out of bounds."""
    n = stack.shape[axis]
    if not all(type(steps) is range for steps in ranges):
        return None
    seen = set().union(*ranges)
    if len(seen) == n and (not n or min(seen) == 0 and max(seen) == n - 1):
        return stack  # (the usual case: the loops visit every step once)
    if seen and not -n <= min(seen) <= max(seen) < n:
        return None
    seen = {t % n for t in seen}
    for j in range(n):
        if j not in seen:
            stack[(slice(None),) * axis + (j,)] = 0
    return stack


class StepCotangents:
    """``step_stack``'s stack where no array of ``prod``'s layout serves: each
    step written (``S[(:,) * axis + (t,)] = g``, the index's last entry the
    step) is differentiated at once, its ``w`` cotangent added to ``total``
    (``g`` may be a buffer the sweep writes again at the next step)."""

    __slots__ = ("args", "total")

    def __init__(self, prod: Any, x: Any, w: Any, axis: int, tiles: Any) -> None:
        self.args = (prod, x, w, axis, tiles)
        self.total: Any = None

    def __setitem__(self, index: Any, g: Any) -> None:
        t = index[-1] if type(index) is tuple else index
        if type(g) is int and g == 0:
            return  # a step the sweep reached with no cotangent
        prod, x, w, axis, tiles = self.args
        part = _reads.d_step_product_rhs(g, None, prod, x, w, axis, t, tiles)
        self.total = add(self.total, part[0])


def stacked_steps(
    stack: Any,
    prod: Any,
    x: Any,
    w: Any,
    axis: int,
    tiles: Any = None,
    acc: Any = None,
    out: Any = None,
) -> Any:
    """``acc`` (None: zero) plus the sum over the steps of ``stack``
    (``step_stack``'s, written by the sweep) of their cotangents for ``w``:
    one ``rows.T @ stack``, or one product a step (``StepCotangents``).
    ``out``: a buffer for the sum (the caller's ``out=`` array, or a
    workspace's), used where it fits; else a new array."""
    if type(stack) is StepCotangents:
        return add(acc, stack.total)
    if type(prod) is _reads.StepProducts:
        order = list(range(stack.ndim))
        order.insert(0, order.pop(axis))  # time-major again: the kept array
        rows, g = prod.rows, _steps.as_matrix(stack.transpose(order))
    else:
        xs = _steps_of(x, axis, prod, tiles)  # (its rows a view where x is contiguous)
        rows, g = _steps.as_matrix(xs), _steps.as_matrix(stack)
    if (
        type(out) is np.ndarray
        and out.shape == (rows.shape[1], g.shape[1])
        and out.dtype == np.result_type(rows, g)
        and out.flags.writeable
        and out is not acc
        and not np.may_share_memory(out, g)
    ):
        total = np.matmul(rows.T, g, out=out)
    else:
        total = np.matmul(rows.T, g)
    return total if acc is None else add(acc, total)


nondifferentiable(step_stack)
nondifferentiable(stacked_steps)
