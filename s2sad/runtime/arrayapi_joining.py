"""The Array API path's rules for indexing, joining, nn and Python containers,
and :data:`RULES`, the allow-list of rules verified there (:func:`rule_for`).

As in :mod:`s2sad.runtime.arrayapi_rules`: NumPy's results, in the call's
namespace, never writing into an array.  NumPy's rule modules are not imported
(they import the backend layer): :func:`rule_for` receives the NumPy function
itself from the emitted code's globals.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from s2sad.runtime import arrayapi_rules as base
from s2sad.runtime import arrayapi_tangents
from s2sad.runtime.arrayapi_numpy import NP, current, refuse
from s2sad.runtime.arrayapi_rules import (
    accumulate,
    as_float,
    float_dtype,
    is_array,
    unbroadcast,
)

# ---------------------------------------------------------------- indexing


def _basic_index(idx: Any, ndim: int) -> list:
    """``idx`` as one ``(start, stop, is_int)`` per axis (steps of 1 only)."""
    parts = idx if isinstance(idx, tuple) else (idx,)
    if any(p is Ellipsis for p in parts):
        at = parts.index(Ellipsis)
        fill = (slice(None),) * (ndim - len(parts) + 1)
        parts = parts[:at] + fill + parts[at + 1 :]
    parts = parts + (slice(None),) * (ndim - len(parts))
    return parts


def _place(g: Any, x: Any, idx: Any) -> Any:
    """Zeros shaped like x with ``g`` at ``x[idx]``, built by concatenating zero
    blocks (no writes): basic indices of ints and slices of step 1."""
    xp, device = current().xp, current().device
    parts = _basic_index(idx, x.ndim)
    ok = len(parts) == x.ndim and all(
        isinstance(p, int) or (isinstance(p, slice) and p.step in (None, 1))
        for p in parts
    )
    if not ok:
        raise refuse(
            f"the gradient of indexing by {idx!r}",
            "Index by ints and slices of step 1 (no arrays, masks, None or steps).",
        )
    dtype = float_dtype(x)
    ct = xp.astype(g, dtype) if g.dtype != dtype else g
    for axis, p in enumerate(parts):
        n = x.shape[axis]
        if isinstance(p, int):
            start = p % n
            ct = xp.expand_dims(ct, axis=axis)
            stop = start + 1
        else:
            start, stop, _ = p.indices(n)
            stop = max(stop, start)
        blocks = []
        for size in (start, None, n - stop):
            if size is None:
                blocks.append(ct)
            elif size:
                shape = tuple(ct.shape[:axis]) + (size,) + tuple(ct.shape[axis + 1 :])
                blocks.append(xp.zeros(shape, dtype=dtype, device=device))
        ct = xp.concat(blocks, axis=axis) if len(blocks) > 1 else ct
    return ct


def d_getitem(g, ans, x, idx, *, into=None):
    if isinstance(x, (list, tuple, dict)):  # params["W"]: no arrays involved
        if isinstance(idx, slice) and not isinstance(x, dict):
            raise refuse("the gradient of slicing a list of arrays")
        ct = {idx: g} if isinstance(x, dict) else [None] * len(x)
        if not isinstance(x, dict):
            ct[idx] = g
        return (ct, None)
    return (_place(as_float(g, x), x, idx), None)


def add_at_index(acc, g, x, idx, *, out=None):
    return accumulate(acc, d_getitem(g, None, x, idx)[0])


# ---------------------------------------------------------------- Python's containers


def _entries_like(cts: list, seq: Any) -> Any:
    """pyfuncs._entries_like: a list's entries, or an array's rows stacked (zeros
    for None and for rows past the end)."""
    if not is_array(seq):
        return list(cts) + [None] * (len(seq) - len(cts))
    xp, device = current().xp, current().device
    dtype = float_dtype(seq)
    zero = xp.zeros(tuple(seq.shape[1:]), dtype=dtype, device=device)
    rows = [zero if c is None else as_float(c, seq) for c in cts]
    rows += [zero] * (seq.shape[0] - len(rows))
    return xp.stack(rows) if rows else xp.zeros_like(seq, dtype=dtype)


def d_list(g, ans, iterable=()):
    return (_entries_like(list(g), iterable),)


def d_zip(g, ans, *iterables, strict=False):
    return tuple(
        _entries_like([None if p is None else p[k] for p in g], seq)
        for k, seq in enumerate(iterables)
    )


def d_enumerate(g, ans, iterable, start=0):
    return (_entries_like([None if p is None else p[1] for p in g], iterable), None)


def d_reversed(g, ans, seq):
    return (_entries_like(list(g)[::-1], seq),)


def d_builtin_sum(g, ans, iterable, start=0):
    """Python's sum: each entry (an array's rows too) gets g, summed back."""
    if is_array(iterable):
        row = unbroadcast(g, iterable[0, ...])
        return (
            current().xp.broadcast_to(row, tuple(iterable.shape)),
            unbroadcast(g, start),
        )
    return ([unbroadcast(g, x) for x in iterable], unbroadcast(g, start))


def copy_item(container: Any, index: Any) -> Any:
    """support.copy_item: ``container[index]`` before it is overwritten."""
    missing = sys.modules["s2sad.runtime.support"].MISSING  # emitted code loaded it

    if isinstance(container, dict) and index not in container:
        return missing
    item = container[index]
    return current().xp.asarray(item, copy=True) if is_array(item) else item


def store_attribute(obj: Any, attr: str, value: Any) -> None:
    """objects.store_attribute: ``setattr``, arrays copied."""
    if is_array(value):
        value = current().xp.asarray(value, copy=True)
    setattr(obj, attr, value)


# ---------------------------------------------------------------- joining


def _split(g: Any, sizes: list, axis: int) -> list:
    pieces, start = [], 0
    axis = axis % g.ndim
    for n in sizes:
        index = (slice(None),) * axis + (slice(start, start + n), ...)
        pieces.append(g[index])
        start += n
    return pieces


def d_concatenate(g, ans, arrays, axis=0, *rest, **kwargs):
    if axis is None:
        raise refuse("the gradient of numpy.concatenate with axis=None")
    pieces = _split(g, [a.shape[axis] for a in arrays], axis)
    return ([unbroadcast(p, a) for p, a in zip(pieces, arrays)],)


def d_stack(g, ans, arrays, axis=0, *rest, **kwargs):
    xp = current().xp
    axis = axis % g.ndim
    pieces = _split(g, [1] * len(arrays), axis)
    return ([unbroadcast(xp.squeeze(p, axis=axis), a) for p, a in zip(pieces, arrays)],)


# ---------------------------------------------------------------- nn


def _one_hot(labels: Any, classes: int, dtype: Any) -> Any:
    xp, device = current().xp, current().device
    hot = labels[..., None] == xp.arange(classes, device=device)
    return xp.astype(hot, dtype)


def _check_labels(logits: Any, labels: Any) -> None:
    xp = current().xp
    if not xp.isdtype(labels.dtype, "integral") or tuple(logits.shape[:-1]) != tuple(
        labels.shape
    ):
        raise ValueError(
            "softmax_cross_entropy needs integer labels with logits.shape == "
            f"labels.shape + (classes,); got logits {tuple(logits.shape)}, "
            f"labels {tuple(labels.shape)} of {labels.dtype}"
        )


def softmax_cross_entropy(logits: Any, labels: Any) -> Any:
    """nn.softmax_cross_entropy: mean of ``-log softmax(logits)[label]``."""
    xp = current().xp
    _check_labels(logits, labels)
    z = logits - xp.max(logits, axis=-1, keepdims=True)
    log_norm = xp.log(xp.sum(xp.exp(z), axis=-1))
    picked = xp.sum(z * _one_hot(labels, z.shape[-1], z.dtype), axis=-1)
    return xp.mean(log_norm - picked)


def d_softmax_cross_entropy(g, ans, logits, labels, *, into=None):
    xp = current().xp
    z = logits - xp.max(logits, axis=-1, keepdims=True)
    e = xp.exp(z)
    p = e / xp.sum(e, axis=-1, keepdims=True)
    p = p - _one_hot(labels, p.shape[-1], p.dtype)
    count = 1
    for n in labels.shape:
        count *= n
    return (p * (as_float(g, logits) / max(count, 1)), None)


# ---------------------------------------------------------------- the allow-list

#: NumPy rules whose own code is verified on the namespace path, run with
#: ``np`` being :data:`~s2sad.runtime.arrayapi_numpy.NP` (verified functions only)
SAME_CODE = frozenset(
    f"s2sad.runtime.activations.{name}" for name in ("relu", "sigmoid", "d_sigmoid")
)

#: rules that only move Python containers or raise: run as they are
AS_THEY_ARE = frozenset(
    (
        "s2sad.runtime.support.split_last",
        "s2sad.runtime.support.pad",
        "s2sad.runtime.support.item_of",
        "s2sad.runtime.support.globals_changed",
        "s2sad.runtime.iteration.check_positional",
        "s2sad.runtime.iteration.check_mapping",
        "s2sad.runtime.pyfuncs.d_dict",
        "s2sad.runtime.pyfuncs.jvp_list",
    )
)


def _named(module: str, *fns: Any) -> dict:
    return {f"s2sad.runtime.{module}.{f.__name__}": f for f in fns}


#: the NumPy rules' qualified names -> their versions on the namespace path
RULES: dict = {
    **_named("support", base.unbroadcast, base.accumulate, base.finalize),
    **_named("support", base.zeros_like, copy_item),
    **_named("reductions", base.d_sum, base.d_mean, base.d_max),
    **_named("elementwise", base.d_maximum, base.d_maximum_lhs, base.d_maximum_rhs),
    **_named("elementwise", base.d_minimum, base.d_minimum_lhs, base.d_minimum_rhs),
    **_named("elementwise", base.d_where),
    **_named("contractions", base.d_matmul, base.d_matmul_lhs, base.d_matmul_rhs),
    **_named("shapes", base.d_reshape, base.d_transpose),
    **_named("activations", base.d_relu),
    **_named("indexing", d_getitem, add_at_index),
    **_named("joining", d_concatenate, d_stack),
    **_named("nn", softmax_cross_entropy, d_softmax_cross_entropy),
    **_named("pyfuncs", d_list, d_zip, d_enumerate, d_reversed, d_builtin_sum),
    **_named("objects", store_attribute),
    **arrayapi_tangents.RULES,  # forward mode's helpers (s2sad.jvp)
}

_SAME_CODE_DONE: dict = {}


def rule_for(fn: Any, name: str) -> Any:
    """What the NumPy runtime function ``fn`` (qualified ``name``) is on the
    namespace path; None when it is not verified there."""
    if name in RULES:
        return RULES[name]
    if name in AS_THEY_ARE:
        return fn
    if name in SAME_CODE:
        done = _SAME_CODE_DONE.get(name)
        if done is None:
            done = types.FunctionType(
                fn.__code__, {**fn.__globals__, "np": NP}, fn.__name__, fn.__defaults__
            )
            done = _SAME_CODE_DONE.setdefault(name, done)
        return done
    return None
