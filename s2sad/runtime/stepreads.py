"""Loop steps read and summed one step at a time (the hoist and loopsums passes).

Where a loop's per-step product ``x[:, t, :] @ w`` reads an ``x`` that is no
differentiated value, the ``hoist`` pass (``transforms/front/hoist.py``) writes::

    x_at_w = stepwise_ahead(x, w, 1, r)
    for t in r:
        matmul = step_product(x_at_w, x, w, 1, t)

``stepwise_ahead`` computes every step's product in one call: time-major
when a step's product is small (a ``StepProducts``, ``x``'s steps copied
once: step ``t``'s product is a contiguous slab, ``TIME_MAJOR_ENTRIES``),
else in ``x``'s own layout (``steps.stepwise_matmul``) where a step's product
is small or ``x``'s steps are one matrix without a copy (``own_steps``), else
None; ``step_product`` reads step ``t`` of it, or computes that step's own
product.  Its rules differentiate it as ``x``'s step times ``w``, one step at
a time: the backward sweep never builds a cotangent of the stacked product.
For ``w`` it runs one ``x_t.T @ g`` a step, or, in buffered code (the
``loopsums`` pass), stacks the steps' ``g`` in the product's layout
(``stepstacks.step_stack``, written inline) and runs one ``rows.T @ stack``
after the loop (``stepstacks.stacked_steps``).

``sum_steps`` is the ``loopsums`` pass's helper (``transforms/reverse/
loopsums.py``): a loop-invariant operand's cotangent summed down once after
the loop instead of every step.
"""

from __future__ import annotations

import operator
import sys
import threading
from typing import Any

import numpy as np

from s2sad.runtime import steps as _steps
from s2sad.runtime.refcounts import exclusive
from s2sad.runtime.registry import adjoint, nondifferentiable
from s2sad.runtime.support import add, unbroadcast
from s2sad.runtime.tangents import adjoint_of_multilinear, constant, linear, tangent
from s2sad.runtime.workspace import owned


def _index(axis: int, t: Any) -> tuple:
    """``(:,) * axis + (t,)``: step ``t`` along ``axis``."""
    return (slice(None),) * axis + (t,)


def _slice_of(axis: int, tiles: tuple, t: int) -> tuple:
    """Step ``t``'s slice ``a * t + b : p * t + q`` along ``axis``."""
    a, b, p, q = tiles
    return _index(axis, slice(a * t + b, p * t + q))


def _ints(values: Any) -> tuple | None:
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        return None


# ================================================================ sums over steps


def sum_steps(acc: Any, g: Any, like: Any, out: Any = None) -> Any:
    """One step of a loop's sum of ``unbroadcast(g, like)``, the sum down to
    ``like`` taken once after the loop (the ``loopsums`` pass): the result ``r``
    is such that ``unbroadcast(r, like)`` is ``unbroadcast(acc, like) +
    unbroadcast(g, like)`` (None is zero).

    A bias's cotangent in a loop, ``g_b += unbroadcast(g_z, b)`` each step,
    costs a row sum a step; here the steps' ``g`` (of one shape, with more
    entries than ``like``, in its dtype) are added entry by entry (into their
    sum's own array from the third step on: ``refcounts.exclusive``, or a
    workspace buffer only it holds; ``out``: a buffer for the second), and
    summed down once: the same terms, added in another order.  Any
    other step (another shape or dtype, a number, a container) is summed down
    at once, as before."""
    if g is None:
        return acc
    if (
        type(g) is np.ndarray
        and type(like) is np.ndarray
        and g.dtype == like.dtype
        and g.ndim >= like.ndim
        and g.shape != like.shape
    ):
        if acc is None:  # held, not copied: while held, no buffer ring hands it
            return g  # out and no in-place update sees it exclusive
        if type(acc) is np.ndarray and acc.shape == g.shape and acc.dtype == g.dtype:
            if exclusive(acc) or (owned(acc) and exclusive(acc, 1)):
                np.add(acc, g, out=acc)  # the sum made at an earlier step: ours
                return acc
            if (  # a workspace buffer (``out``) for the sum
                type(out) is np.ndarray
                and out.shape == g.shape
                and out.dtype == g.dtype
                and out.flags.writeable
                and out is not acc
                and out is not g
            ):
                return np.add(acc, g, out=out)
            return np.add(acc, g)
    return add(unbroadcast(acc, like), unbroadcast(g, like))


@tangent(sum_steps)
def jvp_sum_steps_acc(t, ans, acc, g, like, out=None):
    # jointly linear in acc and g: each tangent summed down to like's shape
    # (whatever the primal's representation, the sums down then agree)
    return unbroadcast(t, like)


@tangent(sum_steps, argnum=1)
def jvp_sum_steps_g(t, ans, acc, g, like, out=None):
    return unbroadcast(t, like)


# ================================================================ one step, differentiated per step


def step_of(x: Any, axis: int, t: Any, tiles: Any) -> Any:
    """Step ``t`` of ``x`` as the loop read it: ``x[(:,) * axis + (t,)]``, or
    the slice ``a * t + b : p * t + q`` along ``axis`` for ``tiles = (a, b, p, q)``."""
    if tiles is None:
        return x[_index(axis, t)]
    return x[_slice_of(axis, tuple(tiles), t)]


#: entries of one step's product up to which ``stepwise_ahead`` computes all
#: steps at once, in ``x``'s own layout, where it cannot make them time-major
#: (see ``StepProducts``).  Above it all steps are computed at once only
#: where ``x``'s steps are one matrix without a copy (``own_steps``): a
#: contiguous ``x`` whose axis the steps cover; else each step's own product
#: (a contiguous array).  Measured on rnn_mnist's 4 steps of (100, 196) @
#: (196, 64) (float32, one thread, interleaved against hand-written NumPy):
#: with the backward sweep's ``w`` cotangent stacked in the product's layout
#: (``stepstacks``: one ``rows.T @ stack`` after the loop) the whole gradient
#: ran 1.05-1.06x hand-written, each step's own product 1.09x.
AHEAD_ENTRIES = 2048


#: whether ``stepwise_ahead`` computes a large step's product ahead in ``x``'s
#: own layout where that needs no copy (above ``AHEAD_ENTRIES``); off, each
#: step's own product (the tests run both)
OWN_LAYOUT = True


#: entries of one step's product up to which ``stepwise_ahead`` makes the
#: steps time-major (``StepProducts``).  Measured (one thread, this machine's
#: AVX2 kernels, forward and backward of the steps' products alone, time-major
#: against one product a step with buffers): 200 steps of (32, 16) @ (16, 8)
#: 0.55x (float32) and 0.57x (float64); 50 of (32, 64) @ (64, 64) 0.73x and
#: 0.78x; 20 of (64, 64) @ (64, 64) 0.89x and 0.96x; 10 of (100, 128) @
#: (128, 64) 0.98x; rnn_mnist's 4 of (100, 196) @ (196, 64) 1.01x, and its
#: whole gradient 1.01-1.02x (auto kernels 1.02-1.05x) the time with one
#: product a step (the copies of ``x`` and of the cotangents, and the helpers'
#: Python, cost what the fewer, larger products save); 8 of (256, 128) @
#: (128, 128) 0.96-1.04x.
TIME_MAJOR_ENTRIES = 4096


class StepProducts:
    """Every step's product, time-major (what ``stepwise_ahead`` returns where
    it can): ``prod[t]`` is step ``t``'s product, a contiguous slab, and
    ``rows`` holds ``x``'s steps copied once, time-major, as one matrix (step
    ``t``'s rows are ``rows[t * k : (t + 1) * k]``, ``k`` rows a step), so
    that ``prod`` is one ``rows @ w`` and the backward sweep's ``w``
    cotangent of several steps is one ``rows.T @ stack`` (``step_stack``,
    ``stacked_steps``).  A negative step counts from the end (the steps
    then cover all of ``x``'s axis)."""

    __slots__ = ("prod", "rows")

    def __init__(self, prod: np.ndarray, rows: np.ndarray):
        self.prod = prod
        self.rows = rows


#: arrays ``scratch`` keeps for reuse, per thread (at most ``SCRATCH`` each,
#: of at most ``SCRATCH_BYTES`` each: a larger one is allocated every call, its
#: page faults small beside the work on it, and not held between calls)
_kept = threading.local()
SCRATCH = 8
SCRATCH_BYTES = 4 << 20


def _refs_in(kept: list) -> int:
    for a in kept:  # (the same references as in scratch's loop)
        return sys.getrefcount(a)
    return 0


#: reference count, seen from ``scratch``, of a kept array nobody else holds
#: (-1 where counts are unreliable: free-threaded builds; then none is reused)
_gil = getattr(sys, "_is_gil_enabled", None)  # (free-threaded builds: False)
_FREE = _refs_in([np.empty(1)]) if _gil is None or _gil() else -1


def scratch(shape: tuple, dtype: Any) -> np.ndarray:
    """An uninitialised array of ``shape`` and ``dtype``: one kept from an
    earlier call of this thread that nothing refers to any more (no name,
    view or container: its reference count is that of the list keeping it),
    else a new one, kept.  A large array allocated and freed every call costs
    page faults (the allocator hands its memory back to the system); a
    gradient function's workspace cannot hold the arrays of a
    ``StepProducts`` (no site's result is an array)."""
    kept = getattr(_kept, "arrays", None)
    if kept is None:
        kept = _kept.arrays = []
    for a in kept:
        if a.shape == shape and a.dtype == dtype and sys.getrefcount(a) <= _FREE:
            return a
    a = np.empty(shape, dtype)
    if _FREE > 0 and a.nbytes <= SCRATCH_BYTES:
        kept.append(a)
        if len(kept) > SCRATCH:
            del kept[0]
    return a


def _time_major(x: Any, w: Any, axis: int, steps: Any, tiles: Any) -> Any:
    """``StepProducts`` of ``x``'s steps times ``w`` (matrices of one float
    dtype, the steps a range), or None where that does not apply."""
    if not (
        type(x) is np.ndarray
        and type(w) is np.ndarray
        and type(steps) is range
        and w.ndim == 2
        and x.dtype == w.dtype
        and x.dtype.kind == "f"
    ):
        return None
    if tiles is not None:
        x = _steps.tiled(x, axis, steps, tiles)  # step t: index t along axis
        if x is None:
            return None
    if not 0 <= axis < x.ndim - 1:
        return None
    m = _steps.reach(steps, x.shape[axis])
    if m == 0 or x.shape[-1] != w.shape[0]:
        return None
    cut = x if m == x.shape[axis] else x[_index(axis, slice(0, m))]
    if axis:  # (np.moveaxis, without its checks)
        order = (axis, *range(axis), *range(axis + 1, x.ndim))
        cut = cut.transpose(order)
    if cut.flags.c_contiguous:
        rows = _steps.as_matrix(cut)
    else:  # the one copy
        rows = scratch(cut.shape, x.dtype)
        np.copyto(rows, cut)
        rows = _steps.as_matrix(rows)
    prod = scratch((rows.shape[0], w.shape[1]), x.dtype)
    np.matmul(rows, w, out=prod)
    return StepProducts(prod.reshape(cut.shape[:-1] + (w.shape[1],)), rows)


def stepwise_ahead(
    x: Any, w: Any, axis: int, steps: Any, tiles: Any = None, out: Any = None
) -> Any:
    """Every step's product before the loop: a ``StepProducts`` (``x``'s steps
    copied time-major once, one product) where ``x`` and ``w`` are matrices of
    one float dtype and the steps a range that cuts ``x`` as a reshape would;
    else ``stepwise_matmul(x, w, axis, steps, tiles)`` (an array in ``x``'s
    own layout) when one step's product is small (at most ``AHEAD_ENTRIES``
    entries, ``w`` a matrix) or ``x``'s steps are one matrix without a copy
    (``own_steps``), else None: then ``step_product`` computes each step's
    product itself.  Only
    ``step_product`` and the backward sweep's helpers read it, and
    differentiate through ``x`` and ``w``: it is no operand (no gradient, no
    tangent).

    The time-major copy pays where a step's product is small
    (``TIME_MAJOR_ENTRIES``, measurements there): whole gradients of
    ``h = tanh(x[:, t, :] @ W + h @ U + b)`` (one thread, interleaved) ran
    0.91x (float64) and 0.97x (float32) the time of one batch-major product
    read strided for 200 steps of (32, 16) @ (16, 8), 0.89x with OpenBLAS's
    own kernels, 0.97x for 50 steps of (32, 64) @ (64, 64), 0.99x for 20 of
    (64, 64) @ (64, 64)."""
    if (  # the common large case first: x's steps one matrix without a copy
        OWN_LAYOUT
        and tiles is None
        and type(x) is np.ndarray
        and type(w) is np.ndarray
        and type(steps) is range
        and 0 < axis < x.ndim - 1
        and w.ndim == 2
        and x.flags.c_contiguous
        and x.dtype == w.dtype
        and x.dtype.kind == "f"
        and x.size // (x.shape[axis] or 1) // (x.shape[-1] or 1) * w.shape[1]
        > TIME_MAJOR_ENTRIES
        and _steps.reach(steps, x.shape[axis]) == x.shape[axis]
    ):
        return _own_product(x, w, out)
    if type(x) is not np.ndarray or np.ndim(w) != 2:
        return _steps.stepwise_matmul(x, w, axis, steps, tiles, out)
    if tiles is None:
        rows = x.size // max(x.shape[axis] * x.shape[-1], 1)
    else:
        bounds = _ints(tiles)
        if bounds is None or bounds[0] != bounds[2]:
            return _steps.stepwise_matmul(x, w, axis, steps, tiles, out)
        rows = x.size // max(x.shape[axis] * x.shape[-1], 1) * (bounds[3] - bounds[1])
        if axis == x.ndim - 1:
            rows = x.size // max(x.shape[-1], 1)
    entries = rows * np.shape(w)[-1]  # of one step's product
    if entries <= TIME_MAJOR_ENTRIES:
        ahead = _time_major(x, w, axis, steps, tiles)
        if ahead is not None:
            return ahead
    if entries > AHEAD_ENTRIES:
        xs = own_steps(x, axis, steps, tiles) if OWN_LAYOUT else None
        if xs is None:
            return None
        if type(w) is np.ndarray and w.dtype == x.dtype and x.dtype.kind == "f":
            return _own_product(xs, w, out)
    return _steps.stepwise_matmul(x, w, axis, steps, tiles, out)


def _own_product(xs: np.ndarray, w: np.ndarray, out: Any) -> np.ndarray:
    """``stepwise_matmul``'s product of ``own_steps``' ``xs`` (matrices of one
    float dtype), without its checks again: one product of ``xs``'s rows,
    into ``out`` where it fits."""
    shape = xs.shape[:-1] + (w.shape[1],)
    if (
        type(out) is np.ndarray
        and out.shape == shape
        and out.dtype == xs.dtype
        and out.flags.c_contiguous
        and out.flags.writeable
    ):
        np.matmul(_steps.as_matrix(xs), w, out=_steps.as_matrix(out))
        return out
    return np.matmul(_steps.as_matrix(xs), w).reshape(shape)


def own_steps(x: Any, axis: int, steps: Any, tiles: Any) -> Any:
    """``x`` with step ``t`` at index ``t`` along ``axis`` (``tiles``: its
    slices reshaped so), where its steps are the rows of one matrix in
    ``x``'s own layout without a copy (row ``i`` of ``stepwise_matmul``'s
    product as a matrix is row ``i`` of them), else None: ``x`` not
    contiguous, the steps not covering its axis, or the axis the last one."""
    if type(x) is not np.ndarray or type(steps) is not range:
        return None
    if tiles is not None:
        x = _steps.tiled(x, axis, steps, tiles)  # step t: index t along axis
        if x is None:
            return None
    if not (
        0 <= axis < x.ndim - 1
        and x.flags.c_contiguous
        and len(steps)
        and _steps.reach(steps, x.shape[axis]) == x.shape[axis]
    ):
        return None
    return x


nondifferentiable(stepwise_ahead)
constant(stepwise_ahead)


def step_product(
    prod: Any, x: Any, w: Any, axis: int, t: Any, tiles: Any = None, out: Any = None
) -> Any:
    """Step ``t`` of ``x`` times ``w``: ``prod[(:,) * axis + (t,)]`` of
    ``prod = stepwise_ahead(x, w, axis, steps, tiles)``, computed before the
    loop, or the step's own product when that is None (``out``: a buffer for
    it).  Its rules differentiate it as ``x``'s step ``@ w``, one step at a
    time (the hoist pass writes it where ``x`` is no differentiated value: the
    backward sweep runs one ``x_t.T @ g`` a step for ``w``, and scatters
    nothing into a cotangent of ``prod``)."""
    if type(prod) is np.ndarray:  # (all steps ahead, in x's own layout)
        return prod[(slice(None),) * axis + (t,)]
    if type(prod) is StepProducts:
        return prod.prod[t]
    if prod is not None:
        return prod[_index(axis, t)]
    xt = x[_index(axis, t)] if tiles is None else step_of(x, axis, t, tiles)
    if (  # the common case: matrices of one dtype, a buffer that fits
        type(out) is np.ndarray
        and type(xt) is np.ndarray
        and type(w) is np.ndarray
        and xt.ndim == 2
        and w.ndim == 2
        and xt.dtype == w.dtype == out.dtype
        and out.shape == (xt.shape[0], w.shape[1])
        and out.flags.writeable
    ):
        return np.matmul(xt, w, out=out)
    return np.matmul(xt, w)


def _step_grads(g, x, w, axis, t, tiles, need, into=None) -> tuple:
    from s2sad.runtime.contractions import d_matmul_lhs, d_matmul_rhs

    xt = step_of(x, axis, t, tiles)
    gx = gw = None
    if need[0]:
        gx = np.zeros(np.shape(x), dtype=_float_of(x, w))
        part = d_matmul_lhs(g, None, xt, w)[0]
        at = _index(axis, t) if tiles is None else _slice_of(axis, tuple(tiles), t)
        gx[at] += part
    if need[1]:
        gw = d_matmul_rhs(g, None, xt, w, into=into)[0]
    return gx, gw


def _float_of(x: Any, w: Any) -> Any:
    dtype = np.result_type(x, w)
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)


@adjoint(step_product)
def d_step_product(g, ans, prod, x, w, axis, t, tiles=None, out=None):
    gx, gw = _step_grads(g, x, w, axis, t, tiles, (True, True))
    return (None, gx, gw, None, None, None, None)


@adjoint(step_product, argnum=1)
def d_step_product_lhs(g, ans, prod, x, w, axis, t, tiles=None, out=None):
    return (_step_grads(g, x, w, axis, t, tiles, (True, False))[0],)


@adjoint(step_product, argnum=2)
def d_step_product_rhs(g, ans, prod, x, w, axis, t, tiles=None, out=None, *, into=None):
    if (  # the common case: matrices of one float dtype
        type(x) is np.ndarray
        and type(g) is np.ndarray
        and type(w) is np.ndarray
        and g.ndim == 2
        and w.ndim == 2
        and g.dtype == w.dtype == x.dtype
        and g.dtype.kind == "f"
    ):
        xt = x[_index(axis, t)] if tiles is None else step_of(x, axis, t, tiles)
        if xt.ndim == 2:
            buf = into[0] if into else None
            if (  # a buffer that fits
                type(buf) is np.ndarray
                and buf.dtype == g.dtype
                and buf.shape == w.shape
                and buf.flags.writeable
            ):
                return (np.matmul(xt.T, g, out=buf),)
            return (np.matmul(xt.T, g),)
    return (_step_grads(g, x, w, axis, t, tiles, (False, True), into)[1],)


@tangent(step_product, argnum=1)
def jvp_step_product_x(t_x, ans, prod, x, w, axis, t, tiles=None, out=None):
    return np.matmul(step_of(t_x, axis, t, tiles), w)


@tangent(step_product, argnum=2)
def jvp_step_product_w(t_w, ans, prod, x, w, axis, t, tiles=None, out=None):
    return np.matmul(step_of(x, axis, t, tiles), t_w)


# g and x, g and w: bilinear (prod, the axis, the step and the tiles: no operands)
linear(d_step_product_lhs, slots=(0, 4), container=True)
linear(d_step_product_rhs, slots=(0, 3), container=True)
adjoint_of_multilinear(d_step_product, slots=(0, 3, 4))
