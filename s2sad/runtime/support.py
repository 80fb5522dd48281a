"""Helpers that generated gradient code calls.

Conventions shared with the compiler:

* ``None`` is the zero cotangent of any value (array, float, list, dict...).
  Rules are only applied to non-``None`` cotangents.
* The cotangent of a list/tuple is a list of cotangents (``None`` entries are
  zeros); that of a dict is a dict holding the keys that received gradient.
* A cotangent is changed in place only when nothing else refers to it
  (:func:`exclusive`, from reference counts: ``accumulate`` here and
  ``indexing.add_at_index`` add into their first operand then); otherwise helpers
  return new objects, so two names may safely share one cotangent array.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from s2sad.errors import (
    GlobalsChangedError,
    Problem,
    UnsupportedOperationError,
    UnsupportedSyntaxError,
)
from s2sad.runtime import backend, pytrees
from s2sad.runtime.finite import (
    check_finite,
)  # noqa: F401 (emitted code imports it here)
from s2sad.runtime.refcounts import EXCLUSIVE_REFS, exclusive, fits_in_place
from s2sad.runtime.workspace import NO_WORKSPACE

__all__ = [
    "unbroadcast",
    "add",
    "finalize",
    "zeros_like",
    "split_last",
    "copy_item",
    "restore_item",
    "keep_item",
    "redo_items",
    "without_item",
    "item_of",
    "written_item",
    "ones_like_output",
    "accumulate",
    "take_rows",
    "zeros",
    "check_finite",
    "NO_WORKSPACE",
    "globals_changed",
    "refused",
    "structure_changed",
]


def structure_changed(what: str) -> GlobalsChangedError:
    """Raised where emitted code unpacks an argument (``f(*xs)``, ``f(**d)``) whose
    length or keys differ from those of the call it was compiled for."""
    return GlobalsChangedError(
        f"{what}: the code unpacks it as it was then, so it cannot run. s2sad.grad "
        "and the other transforms compile again by themselves; for a module written "
        "by `s2sad compile`, compile it for this call."
    )


def refused(
    filename: str, line: int, col: int, message: str, hint: str, source_line: str
) -> UnsupportedSyntaxError:
    """The error an emitted function raises where the user's code reaches a
    construct s2sad does not differentiate, in a branch that did not run when it
    was compiled (validate left the rest of the function working)."""
    return UnsupportedSyntaxError(
        Problem(filename, line, col, message, hint, source_line)
    )


def globals_changed(names: str) -> None:
    """Raised by an emitted function's first statement when one of the globals it
    was compiled for (a callee, a module, a class, a NumPy function) is rebound."""
    raise GlobalsChangedError(
        f"{names} no longer refer to the objects this gradient code was "
        "compiled for, so it cannot run. s2sad.grad and the other transforms "
        "compile again by themselves; for a module written by `s2sad compile`, run "
        "`s2sad compile` again (or rebind the names to what they were)."
    )


def unbroadcast(g: Any, like: Any, out: np.ndarray | None = None) -> Any:
    """Sum ``g`` down to the shape of ``like``, undoing NumPy broadcasting.

    Also casts to ``like``'s floating dtype, so float32 primals get float32
    cotangents even when a float64 constant took part in the operation.  When a
    sum is needed and ``out`` (a workspace buffer of the result's shape and dtype)
    is given, the sum is written there.
    """
    if g is None:
        return None
    tg, tl = type(g), type(like)
    if tg is float or tg is np.float64:  # scalars: a float and a double agree
        if tl is float or tl is np.float64:
            return g
    if tg is tl:  # the common cases, decided without NumPy calls
        if tg is np.ndarray and g.shape == like.shape and g.dtype == like.dtype:
            return g
        if tg is np.ndarray and out is not None and g.ndim >= like.ndim:
            return _sum_into(g, like, out)
        if (  # a bias's cotangent without a buffer: the rows summed
            tg is np.ndarray
            and g.ndim == 2
            and like.ndim == 1
            and g.dtype == like.dtype
            and g.shape[1:] == like.shape
        ):
            return sum_rows(g)
    elif tl is float and tg is np.ndarray and g.ndim:  # a float broadcast: sum all
        # (a vector's one axis is the whole reduction: no axis tuple to build)
        return g.sum() if g.ndim == 1 else g.sum(axis=tuple(range(g.ndim)))
    if isinstance(like, (list, tuple, dict)):
        if isinstance(like, (list, tuple)) and len(g) != len(like):
            raise UnsupportedOperationError(
                f"cotangent of length {len(g)} for a sequence of length {len(like)}: "
                "concatenating ('+') or repeating ('*') lists or tuples of "
                "differentiated values is not supported; build one list with "
                "list.append instead"
            )
        return g
    if hasattr(g, "to_dense") and not isinstance(like, (list, tuple, dict)):
        return g
    shape = np.shape(like)
    if np.shape(g) != shape:
        g = backend.as_array(g)  # a Dask cotangent stays lazy
        extra = g.ndim - len(shape)
        if extra > 0:
            g = g.sum(axis=tuple(range(extra)))
        axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
        if axes:
            g = g.sum(axis=axes, keepdims=True)
        if g.shape != shape:
            g = np.broadcast_to(g, shape)
    dtype = getattr(like, "dtype", None)
    if dtype is not None and dtype.kind == "f" and getattr(g, "dtype", dtype) != dtype:
        g = backend.as_array(g).astype(dtype)
    return g


def _sum_into(g: np.ndarray, like: np.ndarray, out: np.ndarray) -> np.ndarray:
    """unbroadcast of an array into ``out`` (which has like's shape and dtype)."""
    if (  # a bias's cotangent: the rows summed, without the general bookkeeping
        g.ndim == 2
        and like.ndim == 1
        and out.shape == like.shape == g.shape[1:]
        and out.flags.c_contiguous
    ):
        return sum_rows(g, out)
    extra = g.ndim - like.ndim
    tail = g.shape[extra:]
    if extra and tail == like.shape == out.shape and g.flags.c_contiguous:
        return sum_rows(g.reshape(-1, out.size), out.reshape(-1)).reshape(out.shape)
    if (
        out.shape != like.shape
        or not out.flags.c_contiguous
        or any(n != k and n != 1 for n, k in zip(like.shape, tail))
    ):
        return unbroadcast(g, like)
    axes = tuple(range(extra)) + tuple(
        extra + i for i, n in enumerate(like.shape) if n == 1 and tail[i] != 1
    )
    reduced = tuple(n for i, n in enumerate(g.shape) if i not in axes)
    np.sum(g, axis=axes, out=out.reshape(reduced))  # a view: out is contiguous
    return out


def sum_rows(g: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``g.sum(axis=0)`` of a 2-d array (into ``out`` when given).

    NumPy sums over the first axis row after row, with an inner loop as long as
    a row: narrow rows of many (a convolution bias's cotangent, (8192, 8)) cost
    about 12 ns an entry.  Those are summed in two steps instead: blocks of rows
    side by side (long inner loops), then the block sums; the same terms, added
    in another order (pairs of partial sums: no less accurate), 10x faster.
    """
    n, k = g.shape
    if k > 16 or n < 512 or not g.flags.c_contiguous:
        return np.add.reduce(g, axis=0, out=out)
    m = 1 << (n.bit_length() // 2)  # about sqrt(n) blocks
    head = n - n % m
    blocks = np.add.reduce(g[:head].reshape(m, -1), axis=0)  # (head // m * k,)
    total = np.add.reduce(blocks.reshape(-1, k), axis=0, out=out)
    if head < n:
        total += np.add.reduce(g[head:], axis=0)
    return total


def add(a: Any, b: Any) -> Any:
    """``a + b`` for cotangents, where ``None`` is zero and containers add per entry."""
    if a is None:
        return b
    if b is None:
        return a
    ta = type(a)
    if (
        ta is np.ndarray or ta is float or ta is np.float64 or ta is np.float32
    ) and type(b) in (np.ndarray, float, np.float64, np.float32):
        return a + b
    if isinstance(a, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = add(out.get(k), v)
        return out
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            raise ValueError(f"cotangent lengths differ: {len(a)} and {len(b)}")
        return [add(x, y) for x, y in zip(a, b)]
    return a + b


def zeros_like(x: Any) -> Any:
    """A zero cotangent with the structure, shape and dtype of ``x``."""
    if isinstance(x, np.ndarray):
        return np.zeros_like(x, dtype=x.dtype if x.dtype.kind in "fc" else float)
    if x is None:
        return None  # an empty subtree
    if pytrees.is_object_node(x):  # namedtuple, dataclass, registered class
        return pytrees.rebuild(x, [zeros_like(c) for _, c in pytrees.children(x)])
    if isinstance(x, dict):
        return {k: zeros_like(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(zeros_like(v) for v in x)
    if isinstance(x, np.generic):
        return x.dtype.type(0) if x.dtype.kind in "fc" else 0.0
    return 0.0


def finalize(g: Any, x: Any, out: Any = None) -> Any:
    """Shape cotangent ``g`` like the argument ``x``: same structure, shape, dtype.

    Returned arrays never alias a buffer anything else can see, so the caller may
    keep them: a fresh ``g`` that only the calling variable refers to (see
    ``exclusive``) is returned itself, every other one is copied.
    ``out`` (the caller's ``out=`` arrays, same structure as ``x``) receives the
    result instead of a new array where it is an array of x's shape and dtype.
    """
    if out is None and type(g) is np.ndarray and type(x) is np.ndarray:
        # the common case first: a cotangent of the argument's shape and dtype
        dt = g.dtype
        if g.shape == x.shape and (dt is x.dtype or dt == x.dtype) and dt.kind in "fc":
            # a fresh array only the caller's variable sees needs no copy: what
            # exclusive(g) tells, counted here (one call level above it)
            if (
                sys.getrefcount(g) <= EXCLUSIVE_REFS
                and g.base is None
                and g.flags.writeable
            ):
                return g
            return np.array(g, copy=True)
    elif out is not None and _into_ok(out, x):
        return _finalize_into(g, x, out)
    elif type(x) is dict and type(g) is dict and out is None and pytrees.plain_dict():
        return pytrees.finalize_dict(g, x, finalize)
    if g is None:
        return zeros_like(x)
    if type(x) is float and type(g) in (float, np.float64):
        return float(g)
    if backend.is_foreign(g) and not isinstance(x, (dict, list, tuple)):
        return unbroadcast(g, x)  # lazy: the call computes all gradients at once
    if hasattr(g, "to_dense"):
        dense = g.to_dense()  # a fresh array: no second copy needed
        if (
            isinstance(x, np.ndarray)
            and dense.shape == x.shape
            and dense.dtype == x.dtype
        ):
            return dense
        g = dense
    if pytrees.is_object_node(x):  # namedtuple, dataclass, registered class
        kids = pytrees.children(x)
        outs = pytrees.cotangent_children(out, x) if out is not None else None
        return pytrees.rebuild(
            x,
            [
                finalize(gi, xi, outs[i] if outs else None)
                for i, (gi, (_, xi)) in enumerate(
                    zip(pytrees.cotangent_children(g, x), kids)
                )
            ],
        )
    if isinstance(x, dict):
        outs = out if isinstance(out, dict) else {}
        return {k: finalize(g.get(k), v, outs.get(k)) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        outs = out if isinstance(out, (list, tuple)) and len(out) == len(x) else None
        return type(x)(
            finalize(gi, xi, outs[i] if outs else None)
            for i, (gi, xi) in enumerate(zip(g, x))
        )
    if isinstance(x, np.ndarray):
        g = unbroadcast(g, x)
        return np.array(g, dtype=x.dtype if x.dtype.kind in "fc" else float, copy=True)
    if isinstance(x, np.generic):
        return x.dtype.type(np.sum(g))
    return float(np.sum(g))


def _into_ok(out: Any, x: Any) -> bool:
    return (
        type(out) is np.ndarray
        and type(x) is np.ndarray
        and out.shape == x.shape
        and out.dtype == x.dtype
        and x.dtype.kind in "fc"
    )


def _finalize_into(g: Any, x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """finalize(g, x) written into ``out`` without allocating an array of x's size."""
    if g is out:  # the site wrote the gradient there (runtime/outinto.py)
        return out
    if g is None:
        out.fill(0)
    elif hasattr(g, "to_dense"):
        g.to_dense(out=out) if g.shape == x.shape else np.copyto(out, g.to_dense())
    elif g is not out:
        np.copyto(out, unbroadcast(g, x))
    return out


def take_rows(table: Any, ids: Any, out: np.ndarray | None = None) -> Any:
    """``table[ids]``; an integer-array gather goes into ``out`` when one is given."""
    if (
        out is None
        or type(table) is not np.ndarray
        or type(ids) is not np.ndarray
        or ids.dtype.kind not in "iu"
    ):
        return table[ids]
    n = table.shape[0]
    if ids.size and (ids.min() < -n or ids.max() >= n):
        return table[ids]  # raises NumPy's IndexError
    return np.take(table, ids, axis=0, out=out, mode="wrap")  # wrap: no buffering


def zeros(shape: Any, dtype: Any = float, out: np.ndarray | None = None) -> Any:
    """``np.zeros(shape, dtype)``, reusing ``out`` when one is given."""
    if out is None:
        return np.zeros(shape, dtype=dtype)
    out.fill(0)
    return out


def split_last(g_list: Any) -> tuple[Any, Any]:
    """Cotangent of ``L.append(v)`` read backwards: (cotangent of L before, of v)."""
    if g_list is None:
        return None, None
    return list(g_list[:-1]), g_list[-1]


def item_of(g: Any, index: Any) -> Any:
    """``g[index]`` where ``g`` may be None (zero) or a sparse dict cotangent."""
    if g is None:
        return None
    if isinstance(g, dict):
        return g.get(index)
    return g[index]


def written_item(g: Any, index: Any) -> Any:
    """The cotangent of ``v`` in ``container[index] = v``: ``g[index]``, except
    that a position the index names more than once (``y[[1, 1]] = v``) keeps
    only its last write, as NumPy's assignment does; the others get zero."""
    if g is None or isinstance(g, (dict, list)) or not _int_array_in(index):
        return item_of(g, index)
    g = np.asarray(g)
    picked = g[index]
    writer = np.full(g.shape, -1, dtype=np.intp)
    writer[index] = np.arange(picked.size).reshape(picked.shape)
    won = writer >= 0
    if np.count_nonzero(won) == picked.size:  # no position written twice
        return picked
    out = np.zeros(picked.size, dtype=picked.dtype)
    out[writer[won]] = g[won]
    return out.reshape(picked.shape)


def _int_array_in(index: Any) -> bool:
    """Whether ``index`` has an integer array (or list) part: one that may repeat."""
    for part in index if isinstance(index, tuple) else (index,):
        if isinstance(part, (list, np.ndarray)):
            arr = np.asarray(part)
            if arr.dtype.kind in "iu" and arr.size > 1:
                return True
    return False


def copy_item(container: Any, index: Any) -> Any:
    """A copy of ``container[index]`` taken before it is overwritten.

    For a dict key that does not exist yet, returns the ``MISSING`` marker.
    """
    if isinstance(container, dict) and index not in container:
        return MISSING
    item = container[index]
    return item.copy() if isinstance(item, np.ndarray) else item


def restore_item(container: Any, index: Any, old: Any) -> None:
    """Undo ``container[index] = ...`` with the value saved by :func:`copy_item`."""
    if old is MISSING:
        del container[index]
    else:
        container[index] = old


def keep_item(kept: list, container: Any, index: Any) -> None:
    """Note ``container[index]`` as just written, for :func:`redo_items`."""
    kept.append((container, index, copy_item(container, index)))


def redo_items(kept: list) -> None:
    """Write again, in order, what the call wrote into a caller's container that
    the backward sweep put back: the caller sees it as after a plain call."""
    for container, index, value in kept:
        restore_item(container, index, copy_item([value], 0))


def without_item(g: Any, index: Any) -> Any:
    """A copy of cotangent ``g`` with the entry at ``index`` set to zero."""
    if g is None:
        return None
    if isinstance(g, dict):
        out = dict(g)
        out.pop(index, None)
        return out
    if isinstance(g, list):
        out = list(g)
        out[index] = None
        return out
    out = np.array(g, copy=True)
    out[index] = 0
    return out


def ones_like_output(ans: Any) -> Any:
    """The seed cotangent of a scalar output."""
    if isinstance(ans, np.ndarray):
        return np.ones_like(ans)
    if isinstance(ans, np.generic):
        return ans.dtype.type(1)
    return 1.0


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


def pad(cotangents: tuple, n: int) -> tuple:
    """A rule's cotangent tuple padded with ``None`` to ``n`` entries."""
    cotangents = tuple(cotangents)
    if len(cotangents) >= n:
        return cotangents[:n]
    return cotangents + (None,) * (n - len(cotangents))


def accumulate(a: Any, b: Any, out: np.ndarray | None = None) -> Any:
    """``add(a, b)`` for generated code; two arrays are summed into ``out`` (a
    workspace buffer of the sum's shape and dtype) when one is given.  When no
    other name, view or container can see ``a``, the sum goes into ``a`` itself."""
    if (
        type(a) is np.ndarray
        and type(b) is np.ndarray
        and exclusive(a)
        and fits_in_place(a, b)
    ):
        a += b
        return a
    if (
        out is not None
        and type(a) is np.ndarray
        and type(b) is np.ndarray
        and out.shape == a.shape
        and out.dtype == a.dtype
        and fits_in_place(a, b)
    ):
        return np.add(a, b, out=out)
    if type(a) is dict and type(b) is dict and sys.getrefcount(a) <= EXCLUSIVE_REFS:
        # a dict cotangent only the caller's variable sees (a parameter dict's,
        # built entry by entry): its entries summed into it, not into a copy
        for k, v in b.items():
            a[k] = add(a.get(k), v)
        return a
    return add(a, b)
