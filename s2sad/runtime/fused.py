"""Fused kernels of elementwise adjoint rules: one array where the rule makes several.

``d_tanh``'s cotangent ``g * (1.0 - ans * ans)``, written out, is three NumPy
calls and three new arrays, two of which die at once.  Its kernel computes the
same three operations, in the same order and on the same operands, into one
array (two where a rule negates ``g`` before a function of its operand,
``-g * np.sin(x)``)::

    r = np.multiply(ans, ans)        # the only new array (or ``out``)
    np.subtract(1.0, r, out=r)
    np.multiply(g, r, out=r)

so the result has the same bits as the written-out expression.  In array code
the rule inliner (s2sad/transforms/inline.py) writes the kernel's call where it
would write the rule's expression, ``g_add = tanh_grad(g_h, h)``; the kernel
reads only names the expression reads, so the tape keeps what it kept.  The
in-place steps run only where ``g`` and the rule's array operand are NumPy
arrays of one shape and one float (or complex) dtype; anything else (numbers,
0-d values, broadcasting, mixed dtypes) evaluates the written-out expression
itself.  ``out``: a buffer for the result (the workspace's), used when it has
that shape and dtype and shares no memory with an operand.

Each kernel is registered with ``fuses(rule)`` as the fused form of that rule,
and has rules of its own (adjoint, and tangents by ``elementwise``), so a
gradient that calls it can be differentiated again (Hessian-vector products).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from s2sad.runtime.activations import d_sigmoid
from s2sad.runtime.elementwise import (
    d_arccos,
    d_arccosh,
    d_arcsin,
    d_arcsinh,
    d_arctan,
    d_arctanh,
    d_cbrt,
    d_cos,
    d_cosh,
    d_expm1,
    d_log1p,
    d_reciprocal,
    d_sin,
    d_sinh,
    d_sqrt,
    d_square,
    d_tan,
    d_tanh,
)
from s2sad.runtime.registry import adjoint
from s2sad.runtime.tangents import elementwise

#: adjoint rule -> the kernel the inliner writes for it in array code
FUSED: dict[Callable, Callable] = {}


def fuses(rule: Callable) -> Callable:
    """Register the decorated kernel as ``rule``'s fused form.  The kernel's
    positional parameters (all but ``out``) are named after the rule's, and
    it computes the rule's one cotangent with the same bits."""

    def register(kernel: Callable) -> Callable:
        FUSED[rule] = kernel
        return kernel

    return register


def kernel_of(rule: Callable) -> Callable | None:
    """The fused kernel of the adjoint rule ``rule``, or None."""
    return FUSED.get(rule)


def _fits(g: Any, a: Any) -> bool:
    """Both NumPy arrays of one shape and one float or complex dtype."""
    return (
        type(g) is type(a) is np.ndarray
        and g.shape == a.shape
        and g.dtype == a.dtype
        and g.dtype.kind in "fc"
        and g.ndim > 0
    )


def _buffer(out: Any, g: np.ndarray, a: np.ndarray) -> np.ndarray | None:
    """``out`` when it can hold the result (``a``'s shape and dtype, writeable,
    no memory shared with the operands), else None (a new array)."""
    if (
        type(out) is np.ndarray
        and out.shape == a.shape
        and out.dtype == a.dtype
        and out.flags.writeable
        and not np.may_share_memory(out, g)
        and not np.may_share_memory(out, a)
    ):
        return out
    return None


# ---------------------------------------------------------------- g * f(ans)


@fuses(d_tanh)
def tanh_grad(g: Any, ans: Any, out: Any = None) -> Any:
    """``g * (1.0 - ans * ans)``: d_tanh's cotangent in one array."""
    if not _fits(g, ans):
        return g * (1.0 - ans * ans)
    r = np.multiply(ans, ans, out=out if out is None else _buffer(out, g, ans))
    np.subtract(1.0, r, out=r)
    return np.multiply(g, r, out=r)


@fuses(d_tan)
def tan_grad(g: Any, ans: Any, out: Any = None) -> Any:
    """``g * (1.0 + ans * ans)``: d_tan's cotangent in one array."""
    if not _fits(g, ans):
        return g * (1.0 + ans * ans)
    r = np.multiply(ans, ans, out=out if out is None else _buffer(out, g, ans))
    np.add(1.0, r, out=r)
    return np.multiply(g, r, out=r)


@fuses(d_sigmoid)
def sigmoid_grad(g: Any, ans: Any, out: Any = None) -> Any:
    """``g * (ans * (1.0 - ans))``: d_sigmoid's cotangent in one array."""
    if not _fits(g, ans):
        return g * (ans * (1.0 - ans))
    r = np.subtract(1.0, ans, out=out if out is None else _buffer(out, g, ans))
    np.multiply(ans, r, out=r)
    return np.multiply(g, r, out=r)


@fuses(d_reciprocal)
def reciprocal_grad(g: Any, ans: Any, out: Any = None) -> Any:
    """``-g * ans * ans``: d_reciprocal's cotangent in one array."""
    if not _fits(g, ans):
        return -g * ans * ans
    r = np.negative(g, out=out if out is None else _buffer(out, g, ans))
    np.multiply(r, ans, out=r)
    return np.multiply(r, ans, out=r)


# ---------------------------------------------------------------- g / f(x)


@fuses(d_arctan)
def arctan_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``g / (1.0 + x * x)``: d_arctan's cotangent in one array."""
    if not _fits(g, x):
        return g / (1.0 + x * x)
    r = np.multiply(x, x, out=out if out is None else _buffer(out, g, x))
    np.add(1.0, r, out=r)
    return np.divide(g, r, out=r)


@fuses(d_arctanh)
def arctanh_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``g / (1.0 - x * x)``: d_arctanh's cotangent in one array."""
    if not _fits(g, x):
        return g / (1.0 - x * x)
    r = np.multiply(x, x, out=out if out is None else _buffer(out, g, x))
    np.subtract(1.0, r, out=r)
    return np.divide(g, r, out=r)


# ---------------------------------------------------------------- g * h(x), and roots


@fuses(d_sin)
def sin_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``g * np.cos(x)``: d_sin's cotangent in one array."""
    if not _fits(g, x):
        return g * np.cos(x)
    r = np.cos(x, out=out if out is None else _buffer(out, g, x))
    return np.multiply(g, r, out=r)


@fuses(d_cos)
def cos_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``-g * np.sin(x)``: d_cos's cotangent in two arrays (of three)."""
    if not _fits(g, x):
        return -g * np.sin(x)
    r = np.sin(x, out=out if out is None else _buffer(out, g, x))
    return np.multiply(np.negative(g), r, out=r)


@fuses(d_sinh)
def sinh_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``g * np.cosh(x)``: d_sinh's cotangent in one array."""
    if not _fits(g, x):
        return g * np.cosh(x)
    r = np.cosh(x, out=out if out is None else _buffer(out, g, x))
    return np.multiply(g, r, out=r)


@fuses(d_cosh)
def cosh_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``g * np.sinh(x)``: d_cosh's cotangent in one array."""
    if not _fits(g, x):
        return g * np.sinh(x)
    r = np.sinh(x, out=out if out is None else _buffer(out, g, x))
    return np.multiply(g, r, out=r)


@fuses(d_square)
def square_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``2.0 * g * x``: d_square's cotangent in one array."""
    if not _fits(g, x):
        return 2.0 * g * x
    r = np.multiply(2.0, g, out=out if out is None else _buffer(out, g, x))
    return np.multiply(r, x, out=r)


@fuses(d_sqrt)
def sqrt_grad(g: Any, ans: Any, out: Any = None) -> Any:
    """``0.5 * g / ans``: d_sqrt's cotangent in one array."""
    if not _fits(g, ans):
        return 0.5 * g / ans
    r = np.multiply(0.5, g, out=out if out is None else _buffer(out, g, ans))
    return np.divide(r, ans, out=r)


@fuses(d_cbrt)
def cbrt_grad(g: Any, ans: Any, out: Any = None) -> Any:
    """``g / (3.0 * ans * ans)``: d_cbrt's cotangent in one array."""
    if not _fits(g, ans):
        return g / (3.0 * ans * ans)
    r = np.multiply(3.0, ans, out=out if out is None else _buffer(out, g, ans))
    np.multiply(r, ans, out=r)
    return np.divide(g, r, out=r)


@fuses(d_expm1)
def expm1_grad(g: Any, ans: Any, out: Any = None) -> Any:
    """``g * (ans + 1.0)``: d_expm1's cotangent in one array."""
    if not _fits(g, ans):
        return g * (ans + 1.0)
    r = np.add(ans, 1.0, out=out if out is None else _buffer(out, g, ans))
    return np.multiply(g, r, out=r)


@fuses(d_log1p)
def log1p_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``g / (1.0 + x)``: d_log1p's cotangent in one array."""
    if not _fits(g, x):
        return g / (1.0 + x)
    r = np.add(1.0, x, out=out if out is None else _buffer(out, g, x))
    return np.divide(g, r, out=r)


@fuses(d_arcsin)
def arcsin_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``g / np.sqrt(1.0 - x * x)``: d_arcsin's cotangent in one array."""
    if not _fits(g, x):
        return g / np.sqrt(1.0 - x * x)
    r = np.multiply(x, x, out=out if out is None else _buffer(out, g, x))
    np.subtract(1.0, r, out=r)
    np.sqrt(r, out=r)
    return np.divide(g, r, out=r)


@fuses(d_arccos)
def arccos_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``-g / np.sqrt(1.0 - x * x)``: d_arccos's cotangent in two arrays (of five)."""
    if not _fits(g, x):
        return -g / np.sqrt(1.0 - x * x)
    r = np.multiply(x, x, out=out if out is None else _buffer(out, g, x))
    np.subtract(1.0, r, out=r)
    np.sqrt(r, out=r)
    return np.divide(np.negative(g), r, out=r)


@fuses(d_arcsinh)
def arcsinh_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``g / np.sqrt(x * x + 1.0)``: d_arcsinh's cotangent in one array."""
    if not _fits(g, x):
        return g / np.sqrt(x * x + 1.0)
    r = np.multiply(x, x, out=out if out is None else _buffer(out, g, x))
    np.add(r, 1.0, out=r)
    np.sqrt(r, out=r)
    return np.divide(g, r, out=r)


@fuses(d_arccosh)
def arccosh_grad(g: Any, x: Any, out: Any = None) -> Any:
    """``g / np.sqrt(x * x - 1.0)``: d_arccosh's cotangent in one array."""
    if not _fits(g, x):
        return g / np.sqrt(x * x - 1.0)
    r = np.multiply(x, x, out=out if out is None else _buffer(out, g, x))
    np.subtract(r, 1.0, out=r)
    np.sqrt(r, out=r)
    return np.divide(g, r, out=r)


KERNELS = (tanh_grad, tan_grad, sigmoid_grad, reciprocal_grad, arctan_grad,
           arctanh_grad, sin_grad, cos_grad, sinh_grad, cosh_grad, square_grad,
           sqrt_grad, cbrt_grad, expm1_grad, log1p_grad, arcsin_grad, arccos_grad,
           arcsinh_grad, arccosh_grad)  # fmt: skip


# ================================================================ rules
# Each kernel k(g, a) is elementwise in both arguments and linear in g: its
# adjoint rule gives both cotangents, and with g := t it is the tangent too.


@adjoint(tanh_grad, broadcasts=True)
def d_tanh_grad(gg, ans, g, a, out=None):
    return (gg * (1.0 - a * a), -2.0 * gg * g * a)


@adjoint(tan_grad, broadcasts=True)
def d_tan_grad(gg, ans, g, a, out=None):
    return (gg * (1.0 + a * a), 2.0 * gg * g * a)


@adjoint(sigmoid_grad, broadcasts=True)
def d_sigmoid_grad(gg, ans, g, a, out=None):
    return (gg * (a * (1.0 - a)), gg * g * (1.0 - 2.0 * a))


@adjoint(reciprocal_grad, broadcasts=True)
def d_reciprocal_grad(gg, ans, g, a, out=None):
    return (-gg * a * a, -2.0 * gg * g * a)


@adjoint(arctan_grad, broadcasts=True)
def d_arctan_grad(gg, ans, g, x, out=None):
    return (gg / (1.0 + x * x), -2.0 * gg * x * ans / (1.0 + x * x))


@adjoint(arctanh_grad, broadcasts=True)
def d_arctanh_grad(gg, ans, g, x, out=None):
    return (gg / (1.0 - x * x), 2.0 * gg * x * ans / (1.0 - x * x))


@adjoint(sin_grad, broadcasts=True)
def d_sin_grad(gg, ans, g, x, out=None):
    return (gg * np.cos(x), -gg * g * np.sin(x))


@adjoint(cos_grad, broadcasts=True)
def d_cos_grad(gg, ans, g, x, out=None):
    return (-gg * np.sin(x), -gg * g * np.cos(x))


@adjoint(sinh_grad, broadcasts=True)
def d_sinh_grad(gg, ans, g, x, out=None):
    return (gg * np.cosh(x), gg * g * np.sinh(x))


@adjoint(cosh_grad, broadcasts=True)
def d_cosh_grad(gg, ans, g, x, out=None):
    return (gg * np.sinh(x), gg * g * np.cosh(x))


@adjoint(square_grad, broadcasts=True)
def d_square_grad(gg, ans, g, x, out=None):
    return (2.0 * gg * x, 2.0 * gg * g)


@adjoint(sqrt_grad, broadcasts=True)
def d_sqrt_grad(gg, ans, g, a, out=None):
    return (0.5 * gg / a, -gg * ans / a)


@adjoint(cbrt_grad, broadcasts=True)
def d_cbrt_grad(gg, ans, g, a, out=None):
    return (gg / (3.0 * a * a), -2.0 * gg * ans / a)


@adjoint(expm1_grad, broadcasts=True)
def d_expm1_grad(gg, ans, g, a, out=None):
    return (gg * (a + 1.0), gg * g)


@adjoint(log1p_grad, broadcasts=True)
def d_log1p_grad(gg, ans, g, x, out=None):
    return (gg / (1.0 + x), -gg * ans / (1.0 + x))


@adjoint(arcsin_grad, broadcasts=True)
def d_arcsin_grad(gg, ans, g, x, out=None):
    return (gg / np.sqrt(1.0 - x * x), gg * x * ans / (1.0 - x * x))


@adjoint(arccos_grad, broadcasts=True)
def d_arccos_grad(gg, ans, g, x, out=None):
    return (-gg / np.sqrt(1.0 - x * x), gg * x * ans / (1.0 - x * x))


@adjoint(arcsinh_grad, broadcasts=True)
def d_arcsinh_grad(gg, ans, g, x, out=None):
    return (gg / np.sqrt(x * x + 1.0), -gg * x * ans / (x * x + 1.0))


@adjoint(arccosh_grad, broadcasts=True)
def d_arccosh_grad(gg, ans, g, x, out=None):
    return (gg / np.sqrt(x * x - 1.0), -gg * x * ans / (x * x - 1.0))


elementwise(*KERNELS)
