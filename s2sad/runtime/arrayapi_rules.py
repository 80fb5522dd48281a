"""The runtime rules on the Array API path (torch, CuPy, array-api-strict).

Each function here stands for the NumPy rule of the same name in emitted code
run by :func:`s2sad.runtime.arrayapi.run` (:data:`RULES` maps the NumPy rule's
qualified name to it); any rule missing here is refused there.  They compute
what the NumPy rules compute (tests/backends compare the two in float64), in
the call's namespace, and never write into an array: no ``out=``, no
``x[...] +=`` (torch and Array API arrays may be immutable), no buffers.
"""

from __future__ import annotations

from typing import Any

from s2sad.runtime import pytrees
from s2sad.runtime.arrayapi import current, refuse, scalar


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _float_dtype(x: Any) -> Any:
    """x's dtype when it is a float array; float64 otherwise (NumPy's default)."""
    xp = current().xp
    if _is_array(x) and xp.isdtype(x.dtype, "real floating"):
        return x.dtype
    return xp.float64


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if _is_array(x) else ()


def _as_float(g: Any, x: Any) -> Any:
    """``g`` as an array of x's float dtype (Python numbers too)."""
    xp = current().xp
    dtype = _float_dtype(x)
    g = scalar(g, None)
    if not xp.isdtype(g.dtype, "real floating") or g.dtype != dtype:
        g = xp.astype(g, dtype)
    return g


def _sum_to(g: Any, shape: tuple) -> Any:
    """``g`` summed down to ``shape`` (undoing broadcasting)."""
    xp = current().xp
    extra = g.ndim - len(shape)
    if extra > 0:
        g = xp.sum(g, axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return xp.sum(g, axis=axes, keepdims=True) if axes else g


def unbroadcast(g: Any, like: Any, out: Any = None) -> Any:
    """support.unbroadcast: ``g`` summed and cast to ``like``'s shape and dtype."""
    if g is None or isinstance(like, (list, tuple, dict)):
        return g
    if not _is_array(like) and not _is_array(g):
        return g  # two Python numbers
    xp = current().xp
    g = _as_float(g, like)
    shape = _shape(like)
    if tuple(g.shape) != shape:
        g = _sum_to(g, shape)
        if tuple(g.shape) != shape:
            g = xp.broadcast_to(g, shape)
    return g


def accumulate(a: Any, b: Any, out: Any = None) -> Any:
    """support.accumulate: ``a + b`` where None is zero, per entry in containers."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict):
        merged = dict(a)
        for k, v in b.items():
            merged[k] = accumulate(merged.get(k), v)
        return merged
    if isinstance(a, (list, tuple)):
        return [accumulate(x, y) for x, y in zip(a, b, strict=True)]
    return a + b


def zeros_like(x: Any) -> Any:
    """support.zeros_like: a zero cotangent shaped like ``x``."""
    if x is None:
        return None
    if pytrees.is_object_node(x):
        return pytrees.rebuild(x, [zeros_like(c) for _, c in pytrees.children(x)])
    if isinstance(x, dict):
        return {k: zeros_like(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(zeros_like(v) for v in x)
    if _is_array(x):
        return current().xp.zeros_like(x, dtype=_float_dtype(x))
    return 0.0


def finalize(g: Any, x: Any, out: Any = None) -> Any:
    """support.finalize: the gradient shaped like the argument ``x``, a new array
    (never a view of ``x`` or of another gradient)."""
    if out is not None:
        raise refuse("out= (writing gradients into given arrays)")
    if g is None:
        return zeros_like(x)
    if pytrees.is_object_node(x):
        kids = pytrees.children(x)
        return pytrees.rebuild(
            x,
            [
                finalize(gi, xi)
                for gi, (_, xi) in zip(pytrees.cotangent_children(g, x), kids)
            ],
        )
    if isinstance(x, dict):
        return {k: finalize(g.get(k), v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(finalize(gi, xi) for gi, xi in zip(g, x))
    if not _is_array(x):
        return g if not _is_array(g) else unbroadcast(g, scalar(0.0))
    return current().xp.asarray(unbroadcast(g, x), copy=True)


# ---------------------------------------------------------------- reductions


def _axes(ndim: int, axis: Any) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(sorted(a % ndim for a in axes))


def _expand(g: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    """``g`` with the reduced axes put back (size 1), to broadcast against x."""
    xp = current().xp
    g = _as_float(g, x)
    if keepdims or axis is None:
        return xp.reshape(g, (1,) * x.ndim) if axis is None and x.ndim else g
    for a in _axes(x.ndim, axis):
        g = xp.expand_dims(g, axis=a)
    return g


def _reduction_args(name: str, dtype: Any, out: Any, kwargs: dict) -> None:
    if dtype is not None or out is not None or kwargs:
        extra = [k for k in ("dtype", "out") if locals()[k] is not None] + list(kwargs)
        raise refuse(f"the gradient of numpy.{name} with {', '.join(extra)}")


def d_sum(g, ans, x, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
    _reduction_args("sum", dtype, out, kwargs)
    x = scalar(x)
    return (current().xp.broadcast_to(_expand(g, x, axis, keepdims), x.shape),)


def d_mean(
    g, ans, x, axis=None, dtype=None, out=None, keepdims=False, *, into=None, **kw
):
    _reduction_args("mean", dtype, out, kw)
    x = scalar(x)
    n = 1
    for a in _axes(x.ndim, axis):
        n *= x.shape[a]
    ct = _expand(g, x, axis, keepdims) / n
    return (current().xp.broadcast_to(ct, x.shape),)


def d_max(g, ans, x, axis=None, out=None, keepdims=False, *, into=None, **kwargs):
    """Ties share the cotangent equally, as NumPy's rule."""
    _reduction_args("max", None, out, kwargs)
    xp = current().xp
    x = scalar(x)
    full = _expand(ans, x, axis, True if axis is None else keepdims)
    mask = xp.astype(x == full, _float_dtype(x))
    ties = xp.sum(mask, axis=_axes(x.ndim, axis), keepdims=True)
    return (_expand(g, x, axis, keepdims) * mask / ties,)


# ---------------------------------------------------------------- elementwise


def _share(g: Any, x: Any, y: Any, wins: Any) -> Any:
    """x's share in maximum/minimum: g where x wins, g / 2 on ties."""
    xp = current().xp
    x, y = scalar(x, y), scalar(y, x)
    dtype = _float_dtype(x)
    weight = xp.astype(wins(x, y), dtype) + 0.5 * xp.astype(x == y, dtype)
    return unbroadcast(g * weight, x)


def _greater(x: Any, y: Any) -> Any:
    return x > y


def _less(x: Any, y: Any) -> Any:
    return x < y


def d_maximum(g, ans, x, y):
    return (_share(g, x, y, _greater), _share(g, y, x, _greater))


def d_maximum_lhs(g, ans, x, y, *, into=None):
    return (_share(g, x, y, _greater),)


def d_maximum_rhs(g, ans, x, y, *, into=None):
    return (_share(g, y, x, _greater),)


def d_minimum(g, ans, x, y):
    return (_share(g, x, y, _less), _share(g, y, x, _less))


def d_minimum_lhs(g, ans, x, y, *, into=None):
    return (_share(g, x, y, _less),)


def d_minimum_rhs(g, ans, x, y, *, into=None):
    return (_share(g, y, x, _less),)


def d_where(g, ans, condition, x=None, y=None):
    xp = current().xp
    zero = xp.zeros_like(g)
    return (None, xp.where(condition, g, zero), xp.where(condition, zero, g))


# ---------------------------------------------------------------- matmul, shapes


def _matmul_grads(g: Any, x: Any, y: Any) -> tuple:
    """The cotangents of ``x @ y``; 1-d operands promoted and demoted as matmul."""
    xp = current().xp
    xv = x[None, :] if x.ndim == 1 else x
    yv = y[:, None] if y.ndim == 1 else y
    gv = g
    if x.ndim == 1:
        gv = xp.expand_dims(gv, axis=-2)
    if y.ndim == 1:
        gv = xp.expand_dims(gv, axis=-1)
    gx = _sum_to(gv @ xp.matrix_transpose(yv), tuple(xv.shape))
    gy = _sum_to(xp.matrix_transpose(xv) @ gv, tuple(yv.shape))
    if x.ndim == 1:
        gx = gx[..., 0, :]
    if y.ndim == 1:
        gy = gy[..., 0]
    return gx, gy


def d_matmul(g, ans, x, y, *, into=None):
    return _matmul_grads(g, x, y)


def d_matmul_lhs(g, ans, x, y, *, into=None):
    return (_matmul_grads(g, x, y)[0],)


def d_matmul_rhs(g, ans, x, y, *, into=None):
    return (_matmul_grads(g, x, y)[1],)


def d_reshape(g, ans, x, *shape, into=None, **kwargs):
    if kwargs.get("order", "C") != "C" or (len(shape) > 1 and shape[1] != "C"):
        raise refuse("the gradient of numpy.reshape with order other than 'C'")
    return (unbroadcast(current().xp.reshape(g, tuple(x.shape)), x),)


def d_transpose(g, ans, x, *axes, **kwargs):
    axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
    axes = axes or kwargs.get("axes")
    n = g.ndim
    order = tuple(range(n))[::-1] if not axes else tuple(a % n for a in axes)
    inverse = tuple(sorted(range(n), key=order.__getitem__))
    return (current().xp.permute_dims(g, inverse),)


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
    dtype = _float_dtype(x)
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
    return (_place(_as_float(g, x), x, idx), None)


def add_at_index(acc, g, x, idx, *, out=None):
    return accumulate(acc, d_getitem(g, None, x, idx)[0])


# ---------------------------------------------------------------- Python's containers


def _entries_like(cts: list, seq: Any) -> Any:
    """pyfuncs._entries_like: a list's entries, or an array's rows stacked (zeros
    for None and for rows past the end)."""
    if not _is_array(seq):
        return list(cts) + [None] * (len(seq) - len(cts))
    xp, device = current().xp, current().device
    dtype = _float_dtype(seq)
    zero = xp.zeros(tuple(seq.shape[1:]), dtype=dtype, device=device)
    rows = [zero if c is None else _as_float(c, seq) for c in cts]
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
    if _is_array(iterable):
        row = unbroadcast(g, iterable[0, ...])
        return (
            current().xp.broadcast_to(row, tuple(iterable.shape)),
            unbroadcast(g, start),
        )
    return ([unbroadcast(g, x) for x in iterable], unbroadcast(g, start))


def copy_item(container: Any, index: Any) -> Any:
    """support.copy_item: ``container[index]`` before it is overwritten."""
    from s2sad.runtime.support import MISSING

    if isinstance(container, dict) and index not in container:
        return MISSING
    item = container[index]
    return current().xp.asarray(item, copy=True) if _is_array(item) else item


def store_attribute(obj: Any, attr: str, value: Any) -> None:
    """objects.store_attribute: ``setattr``, arrays copied."""
    if _is_array(value):
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
    return (p * (_as_float(g, logits) / max(count, 1)), None)


def _globals_changed(name: str) -> None:
    from s2sad.runtime.support import globals_changed

    globals_changed(name)


def _same_code(fn: Any) -> Any:
    """The NumPy rule ``fn`` itself, its ``np`` being the namespace path's: for
    rules written with verified NumPy functions and operators only."""
    import types

    from s2sad.runtime.arrayapi import NP

    rebound = types.FunctionType(
        fn.__code__, {**fn.__globals__, "np": NP}, fn.__name__, fn.__defaults__
    )
    return rebound


def _activations() -> dict:
    from s2sad.runtime import activations as a

    return {
        f"s2sad.runtime.activations.{f.__name__}": _same_code(f)
        for f in (a.relu, a.sigmoid, a.d_sigmoid)
    }


def d_relu(g, ans, x):
    """activations.d_relu: ``g * (ans > 0)``, the mask as g's float dtype (the
    Array API multiplies no booleans)."""
    g = _as_float(g, ans)
    return (g * current().xp.astype(ans > 0, g.dtype),)


def _pure_python() -> dict:
    """Rules that only move Python containers (no array function): as they are."""
    from s2sad.runtime import pyfuncs, support

    same = {
        "s2sad.runtime.support.split_last": support.split_last,
        "s2sad.runtime.support.pad": support.pad,
        "s2sad.runtime.support.item_of": support.item_of,
        "s2sad.runtime.pyfuncs.d_dict": pyfuncs.d_dict,
    }
    own = {
        f"s2sad.runtime.pyfuncs.{f.__name__}": f
        for f in (d_list, d_zip, d_enumerate, d_reversed, d_builtin_sum)
    }
    return {
        **same,
        **own,
        "s2sad.runtime.support.copy_item": copy_item,
        "s2sad.runtime.objects.store_attribute": store_attribute,
    }


#: the NumPy rules' qualified names -> their versions here (the allow-list)
RULES: dict = {
    **_activations(),
    **_pure_python(),
    "s2sad.runtime.activations.d_relu": d_relu,
    "s2sad.runtime.support.globals_changed": _globals_changed,
    **{
        f"s2sad.runtime.support.{f.__name__}": f
        for f in (unbroadcast, accumulate, finalize, zeros_like)
    },
    **{f"s2sad.runtime.reductions.{f.__name__}": f for f in (d_sum, d_mean, d_max)},
    **{
        f"s2sad.runtime.elementwise.{f.__name__}": f
        for f in (d_maximum, d_maximum_lhs, d_maximum_rhs, d_where)
    },
    **{
        f"s2sad.runtime.elementwise.{f.__name__}": f
        for f in (d_minimum, d_minimum_lhs, d_minimum_rhs)
    },
    **{
        f"s2sad.runtime.contractions.{f.__name__}": f
        for f in (d_matmul, d_matmul_lhs, d_matmul_rhs)
    },
    "s2sad.runtime.shapes.d_reshape": d_reshape,
    "s2sad.runtime.shapes.d_transpose": d_transpose,
    "s2sad.runtime.indexing.d_getitem": d_getitem,
    "s2sad.runtime.indexing.add_at_index": add_at_index,
    "s2sad.runtime.joining.d_concatenate": d_concatenate,
    "s2sad.runtime.joining.d_stack": d_stack,
    "s2sad.runtime.nn.softmax_cross_entropy": softmax_cross_entropy,
    "s2sad.runtime.nn.d_softmax_cross_entropy": d_softmax_cross_entropy,
}
