"""Adjoint rules for reading parts of arrays and containers.

The compiler maps every ``x[idx]`` to ``operator.getitem(x, idx)``:

* array ``x``: the cotangent is zeros shaped like ``x`` with ``g`` written at
  ``idx``.  Basic indices (ints, slices, ``...``, ``None``) and boolean masks
  never repeat an entry and are assigned; integer-array indices may repeat
  entries, whose cotangents accumulate (``np.add.at``; one integer array on
  the first axis, an embedding lookup, by rounds of distinct rows).
* list or tuple ``x``: a list of ``None`` with ``g`` at ``idx`` (a slice writes
  the list of cotangents ``g`` into the slice).
* dict ``x``: ``{idx: g}``.

``np.take``, ``np.take_along_axis``, ``np.compress``, ``np.extract`` and the
``item()`` method scatter the same way.

``d_getitem`` accepts ``into=(buffer,)`` (the protocol is described in
:mod:`s2sad.runtime.contractions`): for an array ``x`` the zeros are the buffer,
cleared and scattered into; container cotangents ignore it.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from s2sad.runtime import backend
from s2sad.runtime.reductions import float_dtype, into_buffer, like
from s2sad.runtime.registry import adjoint, method_alias
from s2sad.runtime.support import add, exclusive
from s2sad.runtime.tangents import filled, linear, tangent
from s2sad.runtime.workspace import owned

# ---------------------------------------------------------------- helpers


def _float_zeros(x: Any, out: np.ndarray | None = None) -> np.ndarray:
    """Zeros shaped like ``x`` in its float dtype: ``out`` cleared, or a new array."""
    if out is not None:
        out.fill(0)
        return out
    return np.zeros(np.shape(x), dtype=float_dtype(x))


def _is_basic(idx: Any) -> bool:
    """True when ``x[idx]`` cannot select an entry twice (no integer arrays)."""
    parts = idx if isinstance(idx, tuple) else (idx,)
    for p in parts:
        if isinstance(p, (list, np.ndarray)) and np.asarray(p).dtype.kind != "b":
            return False
    return True


#: entries per ``np.add.at`` call of a row scatter: bounds its index array (512 KiB)
CHUNK = 16384  # positions per add.at call: a 128 KiB index array

#: rows at least ``WIDE`` entries wide, ``SMALL`` entries in all, are scattered
#: by rounds of distinct rows (see :func:`_scatter_rows`), ``ROUND_CHUNK``
#: entries per copy; others by ``np.add.at`` alone (faster for narrow rows or
#: few entries)
WIDE, SMALL, ROUND_CHUNK = 20, 4096, 16384


def scatter(g: Any, x: Any, idx: Any, out: np.ndarray | None = None) -> np.ndarray:
    """Zeros like ``x`` plus ``g`` accumulated at ``x[idx]`` (built in ``out`` if given).

    ``out`` must have x's shape and float dtype; it is overwritten and returned.
    """
    if backend.is_foreign(x) and _is_basic(idx):  # zeros in x's library (Dask)
        ct = np.zeros_like(x, dtype=float_dtype(x))
        ct[idx] = g
        return ct
    if out is not None and out.size >= SMALL and _zero_outside(out, idx):
        out[idx] = g  # the rest of out was cleared: one write an entry
        return out
    ct = _float_zeros(x, out)
    if _is_basic(idx):
        ct[idx] = g
    elif isinstance(idx, (list, np.ndarray)) and ct.ndim >= 1:
        _scatter_rows(ct, np.asarray(idx), g)
    else:
        np.add.at(ct, idx, g)
    return ct


def _zero_outside(ct: np.ndarray, idx: Any) -> bool:
    """Clear the entries of ``ct`` that ``ct[idx]`` does not select, for an index
    of ints and unit-step slices (``...`` too); False, touching nothing, for any
    other index.  ``x[:, 2:130, :]`` clears ``x[:, :2, :]`` alone."""
    parts = idx if type(idx) is tuple else (idx,)
    dots = [i for i, part in enumerate(parts) if part is Ellipsis]
    if len(dots) == 1:
        at = dots[0]
        fill = (slice(None),) * (ct.ndim - len(parts) + 1)
        parts = parts[:at] + fill + parts[at + 1 :]
    if len(parts) > ct.ndim:
        return False
    spans = []
    for part, n in zip(parts, ct.shape):
        if type(part) is slice and part.step in (None, 1):
            start, stop, _ = part.indices(n)
        elif isinstance(part, (int, np.integer)) and not isinstance(
            part, (bool, np.bool_)
        ):
            if not -n <= part < n:
                return False
            start = part % n
            stop = start + 1
        else:  # None, arrays, masks, other steps
            return False
        spans.append((start, stop))
    prefix: tuple = ()
    for start, stop in spans:  # before and after the span, within the spans so far
        if start > 0:
            ct[prefix + (slice(0, start),)] = 0
        if stop < ct.shape[len(prefix)]:
            ct[prefix + (slice(max(stop, 0), None),)] = 0
        prefix += (slice(start, stop),)
    return True


def _scatter_rows(ct: np.ndarray, idx: np.ndarray, g: Any) -> None:
    """``ct[idx] += g`` with repeats accumulated, for zeros ``ct`` and an integer
    array ``idx`` (rows gathered by an embedding lookup).

    Rows of ``WIDE`` entries or more go in rounds: each round picks one
    position for every distinct row still pending (whichever position an
    index assignment kept) and copies, then adds, those rows with plain
    fancy indexing, which cannot collide within a round.  Once a round would
    place few rows (many repeats), the rest goes to :func:`_add_at_rows`.
    Each row's sum is the same set of terms as ``np.add.at``'s, but it may
    be added in another order, so float results can differ in the last bits.
    """
    rows = idx.ravel()  # a view; flat positions are formed in intp by chunks
    if rows.size < 1024 or rows.min() < 0 or rows.max() >= ct.shape[0]:
        rows = rows % ct.shape[0]  # negative ids (many: two reductions cost less)
    flat = np.reshape(np.broadcast_to(g, idx.shape + ct.shape[1:]), (rows.size, -1))
    # rounds need one slot a table row: not for a few rows of a large table
    wide = (
        flat.shape[1] >= WIDE and flat.size >= SMALL and ct.shape[0] <= 16 * rows.size
    )
    if wide and np.can_cast(flat.dtype, ct.dtype, "same_kind"):
        _add_at_rows(ct, rows, flat, _distinct_rounds(ct, rows, flat))
    else:
        _add_at_rows(ct, rows, flat, None)


def _distinct_rounds(ct: np.ndarray, rows: np.ndarray, flat: np.ndarray) -> Any:
    """The rounds of :func:`_scatter_rows`; returns the positions left for
    ``np.add.at`` (None: all of them).  Scratch memory: a few int32 arrays of
    the ids' size, one slot a table row, and two chunks of ``ROUND_CHUNK``."""
    table = ct.reshape(ct.shape[0], -1)  # a view: ct is C-contiguous
    width = flat.shape[1]
    step = max(1, ROUND_CHUNK // width)
    small = max(rows.size, ct.shape[0]) < 2**31
    slot = np.empty(ct.shape[0], dtype=np.int32 if small else np.intp)
    pending = np.arange(rows.size, dtype=slot.dtype)
    values = total = None
    while pending.size:
        targets = rows[pending]
        slot[targets] = pending  # one of the pending positions of each row stays
        chosen = slot[targets] == pending
        picks = pending[chosen]
        if 4 * picks.size < pending.size:  # few distinct rows left
            return None if values is None else pending
        targets = targets[chosen]
        pending = pending[~chosen]
        del chosen
        first = values is None
        if first:  # the chunk buffers, once rounds are worth it
            values = np.empty((min(step, picks.size), width), flat.dtype)
            cast = values if flat.dtype == ct.dtype else values.astype(ct.dtype)
        elif total is None:
            total = np.empty((min(step, picks.size), width), ct.dtype)
        for start in range(0, picks.size, step):
            stop = min(start + step, picks.size)
            part = values[: stop - start]
            # mode="clip" (picks are in range) writes into part unbuffered
            np.take(flat, picks[start:stop], axis=0, out=part, mode="clip")
            if cast is not values:  # values cast to ct's dtype first, as add.at's
                part = cast[: stop - start]
                np.copyto(part, values[: stop - start], casting="same_kind")
            rows_here = targets[start:stop]
            if not first:  # ct's rows so far plus these: no temporary
                now = total[: stop - start]
                np.take(table, rows_here, axis=0, out=now, mode="clip")
                part = np.add(now, part, out=now)
            table[rows_here] = part  # first round: ct holds zeros there
    return pending


def _add_at_rows(ct: np.ndarray, rows: np.ndarray, flat: np.ndarray, picks) -> None:
    """``ct[rows[p]] += flat[p]`` for the positions ``p`` in ``picks`` (None: all),
    by an unbuffered ``np.add.at`` on flat positions in chunks, so the position
    array stays small (smaller chunks cost more calls)."""
    width = flat.shape[1]
    columns = np.arange(width)
    step = max(1, CHUNK // max(width, 1))
    size = rows.size if picks is None else picks.size
    positions = np.empty((min(step, size), width), dtype=np.intp)
    target = ct.reshape(-1)  # a view: ct is C-contiguous
    for start in range(0, size, step):
        chunk = (
            slice(start, start + step) if picks is None else picks[start : start + step]
        )
        picked = rows[chunk].astype(np.intp, copy=False)
        where = positions[: picked.size]
        np.add(picked[:, None] * width, columns, out=where)
        values = flat[chunk].ravel()
        np.add.at(target, where.ravel(), values.astype(ct.dtype, copy=False))


def _container_ct(g: Any, x: Any, idx: Any) -> Any:
    """Cotangent of ``x[idx]`` for a list, tuple or dict ``x``."""
    if isinstance(x, dict):
        return {idx: g}
    ct = [None] * len(x)
    if isinstance(idx, slice):
        ct[idx] = list(g)
    else:
        ct[idx] = g
    return ct


# ---------------------------------------------------------------- getitem


@adjoint(operator.getitem)
def d_getitem(g, ans, x, idx, *, into=None):
    """Scatter ``g`` into zeros like ``x`` (into ``into[0]`` when given)."""
    if type(x) is dict:  # a parameter of a dict: its cotangent holds that key alone
        return ({idx: g}, None)
    if isinstance(x, (list, tuple, dict)):
        return (_container_ct(g, x, idx), None)
    buf = None if into is None else into_buffer(into, 0, np.shape(x), float_dtype(x))
    return (scatter(g, x, idx, buf), None)


def add_at_index(acc, g, x, idx, *, out=None):
    """``acc`` plus the cotangent of ``x[idx]``: ``g`` scattered into zeros like
    ``x``.  The backward sweep calls it where ``x`` was read a second time
    through an index (the taps ``x[:, k:k + L]`` of a convolution).

    A basic index (ints, slices, masks: no entry twice) adds ``g`` into that
    part alone, not into a zero array added whole: into ``acc`` itself when no
    other name, view or container sees it (a workspace buffer counts as
    private), else into ``out`` (a buffer of x's shape and dtype) or a copy.
    Any other case (integer arrays that may repeat, containers, sparse
    cotangents) adds the scattered cotangent as before.
    """
    if (
        type(acc) is np.ndarray
        and type(x) is np.ndarray
        and acc.shape == x.shape
        and acc.dtype == float_dtype(x)
        and _is_basic(idx)
    ):
        if not (exclusive(acc) or (owned(acc) and exclusive(acc, 1))):
            if into_buffer((out,), 0, x.shape, acc.dtype) is None or out is acc:
                out = np.empty_like(acc)
            np.copyto(out, acc)
            acc = out
        if np.result_type(g) != acc.dtype:
            g = np.asarray(g, dtype=acc.dtype)  # as scatter casts it
        part = acc[idx]
        if type(part) is np.ndarray and part.base is acc:  # a view: add in place
            np.add(part, g, out=part)
        else:
            acc[idx] = part + g  # one entry, or a copy (a boolean mask selects)
        return acc
    if acc is None:
        return d_getitem(g, None, x, idx, into=(out,))[0]
    return add(acc, d_getitem(g, None, x, idx)[0])


# ---------------------------------------------------------------- take and friends


def _wrapped(indices: Any, n: int, mode: str) -> np.ndarray:
    """Indices as ``np.take(mode=...)`` resolves them."""
    indices = np.asarray(indices)
    if mode == "wrap":
        return indices % n
    if mode == "clip":
        return np.clip(indices, 0, n - 1)
    return indices


@adjoint(np.take)
def d_take(g, ans, a, indices, axis=None, out=None, mode="raise"):
    a = np.asarray(a)
    if axis is None:
        flat = scatter(g, a.ravel(), _wrapped(indices, a.size, mode))
        return (flat.reshape(a.shape), None)
    idx = (slice(None),) * (axis % a.ndim) + (_wrapped(indices, a.shape[axis], mode),)
    return (scatter(g, a, idx), None)


def _full_index(indices: np.ndarray, axis: int) -> tuple:
    """The fancy index that ``take_along_axis(a, indices, axis)`` reads."""
    grids = np.ix_(*[np.arange(n) for n in indices.shape])
    return tuple(indices if d == axis else grids[d] for d in range(indices.ndim))


@adjoint(np.take_along_axis)
def d_take_along_axis(g, ans, arr, indices, axis=-1):
    arr = np.asarray(arr)
    if axis is None:
        flat = scatter(g, arr.ravel(), np.asarray(indices))
        return (flat.reshape(arr.shape), None)
    ct = _float_zeros(arr)
    np.add.at(ct, _full_index(np.asarray(indices), axis % arr.ndim), g)
    return (ct, None)


@adjoint(np.compress)
def d_compress(g, ans, condition, a, axis=None, out=None):
    a = np.asarray(a)
    kept = np.flatnonzero(condition)
    if axis is None:
        return (None, scatter(g, a.ravel(), kept).reshape(a.shape))
    return (None, scatter(g, a, (slice(None),) * (axis % a.ndim) + (kept,)))


@adjoint(np.extract)
def d_extract(g, ans, condition, arr):
    arr = np.asarray(arr)
    mask = np.ravel(condition).astype(bool)
    return (None, scatter(g, arr.ravel(), mask).reshape(arr.shape))


# ---------------------------------------------------------------- item()


def item(x: Any, *args: Any) -> Any:
    """``x.item(*args)``: one entry as a Python scalar (the target of the method)."""
    return np.asarray(x).item(*args)


@adjoint(item)
def d_item(g, ans, x, *args):
    x = np.asarray(x)
    if not args:
        return (like(np.reshape(np.asarray(g), x.shape), x),)
    idx = args[0] if len(args) == 1 else args
    idx = np.unravel_index(idx, x.shape) if isinstance(idx, (int, np.integer)) else idx
    return (scatter(g, x, tuple(idx)),)


method_alias("item", item)
method_alias("take", np.take)


# ================================================================ tangents
# Forward mode (see s2sad.runtime.tangents): how each primal above pushes a
# tangent forward, then the tangents of this module's adjoint rules and helpers,
# which emitted gradient code calls (forward-over-reverse: Hessian-vector products).

linear(operator.getitem, np.take, np.take_along_axis, item)
linear(np.compress, np.extract, slots=(1,))
# adjoint rules that read their other arguments only for indices: linear in g
linear(d_getitem, d_take, d_take_along_axis, d_compress, d_extract, d_item,
       container=True)  # fmt: skip


@tangent(add_at_index, container=True)
def jvp_add_at_index_acc(t, ans, acc, g, x, idx, out=None):
    # no accumulator yet (None): zeros shaped like the result, a container
    # included, so that its items can be read (t_g[0] after g = (None, g_v))
    return t if acc is not None else filled(t, ans)


@tangent(add_at_index, argnum=1, container=True)
def jvp_add_at_index_g(t, ans, acc, g, x, idx, out=None):
    return d_getitem(t, None, x, idx)[0]
