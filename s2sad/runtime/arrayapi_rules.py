"""The runtime rules on the Array API path (torch, CuPy, array-api-strict).

Each function here stands for the NumPy rule of the same name in emitted code
run by :func:`s2sad.runtime.arrayapi.run` (the allow-list,
:data:`s2sad.runtime.arrayapi_joining.RULES`, maps the NumPy rule's qualified
name to it); any rule missing there is refused.  They compute
what the NumPy rules compute (tests/backends compare the two in float64), in
the call's namespace, and never write into an array: no ``out=``, no
``x[...] +=`` (torch and Array API arrays may be immutable), no buffers.
"""

from __future__ import annotations

from typing import Any

from s2sad.runtime import pytrees
from s2sad.runtime.arrayapi_numpy import current, refuse, scalar


def is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def float_dtype(x: Any) -> Any:
    """x's dtype when it is a float array; float64 otherwise (NumPy's default)."""
    xp = current().xp
    if is_array(x) and xp.isdtype(x.dtype, "real floating"):
        return x.dtype
    return xp.float64


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if is_array(x) else ()


def as_float(g: Any, x: Any) -> Any:
    """``g`` as an array of x's float dtype (Python numbers too)."""
    xp = current().xp
    dtype = float_dtype(x)
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
    if not is_array(like) and not is_array(g):
        return g  # two Python numbers
    xp = current().xp
    g = as_float(g, like)
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
    if is_array(x):
        return current().xp.zeros_like(x, dtype=float_dtype(x))
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
    if not is_array(x):
        return g if not is_array(g) else unbroadcast(g, scalar(0.0))
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
    g = as_float(g, x)
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
    mask = xp.astype(x == full, float_dtype(x))
    ties = xp.sum(mask, axis=_axes(x.ndim, axis), keepdims=True)
    return (_expand(g, x, axis, keepdims) * mask / ties,)


# ---------------------------------------------------------------- elementwise


def _share(g: Any, x: Any, y: Any, wins: Any, summed: bool = True) -> Any:
    """x's share in maximum/minimum: g where x wins, g / 2 on ties; summed to
    x's shape for the one-operand rules, in the broadcast shape (as NumPy's
    d_maximum: forward mode uses it as the tangent rule) otherwise."""
    xp = current().xp
    x, y = scalar(x, y), scalar(y, x)
    dtype = float_dtype(x)
    weight = xp.astype(wins(x, y), dtype) + 0.5 * xp.astype(x == y, dtype)
    return unbroadcast(g * weight, x) if summed else as_float(g, x) * weight


def _greater(x: Any, y: Any) -> Any:
    return x > y


def _less(x: Any, y: Any) -> Any:
    return x < y


def d_maximum(g, ans, x, y):
    return (_share(g, x, y, _greater, False), _share(g, y, x, _greater, False))


def d_maximum_lhs(g, ans, x, y, *, into=None):
    return (_share(g, x, y, _greater),)


def d_maximum_rhs(g, ans, x, y, *, into=None):
    return (_share(g, y, x, _greater),)


def d_minimum(g, ans, x, y):
    return (_share(g, x, y, _less, False), _share(g, y, x, _less, False))


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


def d_relu(g, ans, x):
    """activations.d_relu: ``g * (ans > 0)``, the mask as g's float dtype (the
    Array API multiplies no booleans)."""
    g = as_float(g, ans)
    return (g * current().xp.astype(ans > 0, g.dtype),)
