"""Adjoint rules for elementwise NumPy functions (ufuncs and friends).

Binary rules are registered with ``broadcasts=True``: they return cotangents of
the broadcast shape and the caller sums them back to each argument's shape (and
casts to its float dtype).  Unary rules keep ``g``'s dtype themselves: their
constants are Python floats, which NumPy treats as "weak" and never promotes
float32 with.

Ufunc keywords (``out=``, ``where=``, ``dtype=``...) are not accepted by the
rules, so a call using them fails loudly instead of getting a wrong gradient.

The compiler maps Python operators to these ufuncs (``a + b`` -> ``np.add``,
``a ** b`` -> ``np.power``, ``-a`` -> ``np.negative``), so every rule also works
for Python floats and 0-d arrays.

Conventions at kinks:

* ``maximum``/``minimum``/``fmax``/``fmin``: where both arguments are equal the
  cotangent is split equally between them (``g / 2`` each).
* ``abs``/``fabs``/``copysign``: the derivative of ``|x|`` at 0 is taken as 0.
* ``clip``: where ``a`` equals a bound the whole cotangent goes to ``a``.
* ``power``: the exponent's cotangent is 0 where the base is <= 0 (there
  ``x ** y`` is either not real-differentiable in ``y`` or NaN), and the base's
  cotangent is 0 when the exponent is exactly 0.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from s2sad.runtime import backend
from s2sad.runtime.registry import adjoint, method_alias, nondifferentiable
from s2sad.runtime.support import unbroadcast
from s2sad.runtime.tangents import elementwise, linear

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_DEG = math.pi / 180.0

# ---------------------------------------------------------------- arithmetic


@adjoint(np.add, broadcasts=True)
def d_add(g, ans, x, y):
    return (g, g)


@adjoint(np.subtract, broadcasts=True)
def d_subtract(g, ans, x, y):
    return (g, -g)


@adjoint(np.multiply, broadcasts=True)
def d_multiply(g, ans, x, y):
    return (g * y, g * x)


@adjoint(np.divide, broadcasts=True)  # np.true_divide is the same ufunc
def d_divide(g, ans, x, y):
    return (g / y, -g * ans / y)


@adjoint(np.power, np.float_power, broadcasts=True)
def d_power(g, ans, x, y):
    """x ** y: exponent cotangent is 0 where x <= 0; base cotangent 0 where y == 0."""
    return (
        g * y * x ** (y - 1 + (y == 0)),
        g * ans * np.log(np.where(x > 0, x, 1)),
    )


@adjoint(np.negative)
def d_negative(g, ans, x):
    return (-g,)


@adjoint(np.positive, np.conjugate, np.real)
def d_positive(g, ans, x):
    return (g,)


@adjoint(np.square)
def d_square(g, ans, x):
    return (2.0 * g * x,)


@adjoint(np.reciprocal)
def d_reciprocal(g, ans, x):
    return (-g * ans * ans,)


@adjoint(np.remainder, broadcasts=True)  # np.mod is the same ufunc
def d_remainder(g, ans, x, y):
    """x - floor(x / y) * y, differentiated where the quotient does not jump."""
    return (g, -g * np.floor_divide(x, y))


@adjoint(np.fmod, broadcasts=True)
def d_fmod(g, ans, x, y):
    """x - trunc(x / y) * y, differentiated where the quotient does not jump."""
    return (g, -g * np.trunc(x / y))


@adjoint(np.ldexp, broadcasts=True)
def d_ldexp(g, ans, x, n):
    return (np.ldexp(g, n), None)


# ---------------------------------------------------------------- exponents and logs


@adjoint(np.exp)
def d_exp(g, ans, x):
    return (g * ans,)


@adjoint(np.exp2)
def d_exp2(g, ans, x):
    return (g * ans * _LN2,)


@adjoint(np.expm1)
def d_expm1(g, ans, x):
    return (g * (ans + 1.0),)


@adjoint(np.log)
def d_log(g, ans, x):
    return (g / x,)


@adjoint(np.log2)
def d_log2(g, ans, x):
    return (g / (x * _LN2),)


@adjoint(np.log10)
def d_log10(g, ans, x):
    return (g / (x * _LN10),)


@adjoint(np.log1p)
def d_log1p(g, ans, x):
    return (g / (1.0 + x),)


@adjoint(np.sqrt)
def d_sqrt(g, ans, x):
    return (0.5 * g / ans,)


@adjoint(np.cbrt)
def d_cbrt(g, ans, x):
    return (g / (3.0 * ans * ans),)


@adjoint(np.logaddexp, broadcasts=True)
def d_logaddexp(g, ans, x, y):
    """Softmax weights exp(x - ans), exp(y - ans): no overflow for large inputs."""
    return (g * np.exp(x - ans), g * np.exp(y - ans))


@adjoint(np.logaddexp2, broadcasts=True)
def d_logaddexp2(g, ans, x, y):
    return (g * np.exp2(x - ans), g * np.exp2(y - ans))


# ---------------------------------------------------------------- trigonometric


@adjoint(np.sin)
def d_sin(g, ans, x):
    return (g * np.cos(x),)


@adjoint(np.cos)
def d_cos(g, ans, x):
    return (-g * np.sin(x),)


@adjoint(np.tan)
def d_tan(g, ans, x):
    return (g * (1.0 + ans * ans),)


@adjoint(np.arcsin)
def d_arcsin(g, ans, x):
    return (g / np.sqrt(1.0 - x * x),)


@adjoint(np.arccos)
def d_arccos(g, ans, x):
    return (-g / np.sqrt(1.0 - x * x),)


@adjoint(np.arctan)
def d_arctan(g, ans, x):
    return (g / (1.0 + x * x),)


@adjoint(np.arctan2, broadcasts=True)
def d_arctan2(g, ans, y, x):
    return (g * x / (x * x + y * y), -g * y / (x * x + y * y))


@adjoint(np.hypot, broadcasts=True)
def d_hypot(g, ans, x, y):
    """x / hypot(x, y) and y / hypot(x, y); 0 at the origin."""
    return (g * x / np.where(ans == 0, 1, ans), g * y / np.where(ans == 0, 1, ans))


@adjoint(np.deg2rad, np.radians)
def d_deg2rad(g, ans, x):
    return (g * _DEG,)


@adjoint(np.rad2deg, np.degrees)
def d_rad2deg(g, ans, x):
    return (g / _DEG,)


@adjoint(np.sinc)
def d_sinc(g, ans, x):
    """(cos(pi x) - sinc(x)) / x, which tends to 0 at x = 0."""
    return (
        g * np.where(x == 0, 0, (np.cos(np.pi * x) - ans) / np.where(x == 0, 1, x)),
    )


# ---------------------------------------------------------------- hyperbolic


@adjoint(np.sinh)
def d_sinh(g, ans, x):
    return (g * np.cosh(x),)


@adjoint(np.cosh)
def d_cosh(g, ans, x):
    return (g * np.sinh(x),)


@adjoint(np.tanh)
def d_tanh(g, ans, x):
    return (g * (1.0 - ans * ans),)


@adjoint(np.arcsinh)
def d_arcsinh(g, ans, x):
    return (g / np.sqrt(x * x + 1.0),)


@adjoint(np.arccosh)
def d_arccosh(g, ans, x):
    return (g / np.sqrt(x * x - 1.0),)


@adjoint(np.arctanh)
def d_arctanh(g, ans, x):
    return (g / (1.0 - x * x),)


# ---------------------------------------------------------------- piecewise


@adjoint(np.absolute, np.fabs)  # np.abs is np.absolute
def d_absolute(g, ans, x):
    return (g * np.sign(x),)


@adjoint(np.copysign, broadcasts=True)
def d_copysign(g, ans, x, y):
    return (np.where(np.signbit(x) == np.signbit(ans), g, -g) * (x != 0), None)


def _share(g: Any, x: Any, y: Any, wins: Any, out: Any = None) -> Any:
    """The share of ``x`` in ``maximum``/``minimum``: ``g`` where ``wins(x, y)``,
    ``g / 2`` where ``x == y`` (in the broadcast shape).

    The comparison (written as 0.0/1.0 into ``out`` when it has the result's
    shape) and the product, plus one comparison ``x == y`` to find ties (into
    ``out``'s memory, read as booleans): the half-shares are added only when
    some entry is tied.
    """
    if out is not None and np.shape(out) == np.broadcast_shapes(
        np.shape(g), np.shape(x), np.shape(y)
    ):
        flags = out.reshape(-1).view(np.bool_)[: out.size].reshape(out.shape)
        tied = bool(np.equal(x, y, out=flags).any())
        share = np.multiply(wins(x, y, out=out), g, out=out)
    else:
        share = g * wins(x, y)
        tied = bool(np.any(x == y))
    if tied:  # rare with real data
        share += (0.5 * g) * (x == y)  # share is a new array or the buffer
    return share


def _fits(x: Any, g: Any, into: Any) -> Any:
    """``into[0]`` when it can hold x's share (x's shape and dtype, and ``g * x``
    of x's dtype), else None."""
    if not into or type(into[0]) is not np.ndarray or type(x) is not np.ndarray:
        return None
    buf = into[0]
    if buf.shape != x.shape or buf.dtype != x.dtype or not buf.flags.c_contiguous:
        return None
    if np.result_type(g, x) != x.dtype or not buf.flags.writeable:
        return None
    return buf


def _one_share(g: Any, x: Any, y: Any, wins: Any, into: Any) -> Any:
    """x's share summed to x's shape and dtype, in ``into[0]`` where it fits."""
    buf = _fits(x, g, into)
    return unbroadcast(_share(g, x, y, wins, buf), x, out=buf)


@adjoint(np.maximum, broadcasts=True)
def d_maximum(g, ans, x, y):
    """g to the larger operand; ties split it equally (g / 2 each)."""
    return (_share(g, x, y, np.greater), _share(g, y, x, np.greater))


@adjoint(np.maximum, argnum=0)
def d_maximum_lhs(g, ans, x, y, *, into=None):
    """Only x's share (``np.maximum(x, 0.0)``: a ReLU), summed to x's shape."""
    return (_one_share(g, x, y, np.greater, into),)


@adjoint(np.maximum, argnum=1)
def d_maximum_rhs(g, ans, x, y, *, into=None):
    """Only y's share, summed to y's shape."""
    return (_one_share(g, y, x, np.greater, into),)


@adjoint(np.minimum, broadcasts=True)
def d_minimum(g, ans, x, y):
    """g to the smaller operand; ties split it equally (g / 2 each)."""
    return (_share(g, x, y, np.less), _share(g, y, x, np.less))


@adjoint(np.minimum, argnum=0)
def d_minimum_lhs(g, ans, x, y, *, into=None):
    """Only x's share, summed to x's shape."""
    return (_one_share(g, x, y, np.less, into),)


@adjoint(np.minimum, argnum=1)
def d_minimum_rhs(g, ans, x, y, *, into=None):
    """Only y's share, summed to y's shape."""
    return (_one_share(g, y, x, np.less, into),)


def _nan_aware_weight(x: Any, y: Any, wins: Any) -> Any:
    """Share of x in fmax/fmin: 1 where x wins or y is NaN, 1/2 on ties."""
    return (wins | (np.isnan(y) & ~np.isnan(x))) + 0.5 * (x == y)


@adjoint(np.fmax, broadcasts=True)
def d_fmax(g, ans, x, y):
    """Like maximum, but a NaN argument loses (gets no cotangent)."""
    return (g * _nan_aware_weight(x, y, x > y), g * _nan_aware_weight(y, x, y > x))


@adjoint(np.fmin, broadcasts=True)
def d_fmin(g, ans, x, y):
    """Like minimum, but a NaN argument loses (gets no cotangent)."""
    return (g * _nan_aware_weight(x, y, x < y), g * _nan_aware_weight(y, x, y < x))


@adjoint(np.where, broadcasts=True)
def d_where(g, ans, condition, x=None, y=None):
    return (None, np.where(condition, g, 0), np.where(condition, 0, g))


@adjoint(np.clip, broadcasts=True)
def d_clip(g, ans, a, a_min=None, a_max=None, *rest, **kwargs):
    """Cotangent to ``a`` where it was kept (also at a bound), else to the bound."""
    return (
        g * (ans == a),
        None if a_min is None else g * ((ans == a_min) & (ans != a)),
        None if a_max is None else g * ((ans == a_max) & (ans != a)),
    )


@adjoint(np.nan_to_num, broadcasts=True)
def d_nan_to_num(g, ans, x, copy=True, nan=None, posinf=None, neginf=None):
    """g to x where x is finite, else to the value put in its place.

    (nan=, posinf=, neginf= may be differentiated.)"""
    return (
        g * np.isfinite(x),
        None,
        None if nan is None else g * np.isnan(x),
        None if posinf is None else g * np.isposinf(x),
        None if neginf is None else g * np.isneginf(x),
    )


# ---------------------------------------------------------------- zero gradient

NONDIFFERENTIABLE = (
    np.sign, np.floor, np.ceil, np.rint, np.trunc, np.fix, np.round, np.around,
    np.floor_divide, np.heaviside, np.spacing, np.signbit,
    np.greater, np.greater_equal, np.less, np.less_equal, np.equal, np.not_equal,
    np.logical_and, np.logical_or, np.logical_not, np.logical_xor,
    np.isnan, np.isinf, np.isfinite, np.isneginf, np.isposinf, np.isclose,
    np.allclose, np.array_equal, np.array_equiv, np.iscomplex, np.isreal,
    np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert,
    np.left_shift, np.right_shift, np.gcd, np.lcm,
    np.imag,  # of real values (s2sad differentiates no complex ones): zeros
    # integers and booleans made from numbers: piecewise constant
    np.int8, np.int16, np.int32, np.int64, np.intp, np.uint8, np.uint16,
    np.uint32, np.uint64, np.bool_,
    np.linalg.matrix_rank,
)  # fmt: skip
nondifferentiable(*NONDIFFERENTIABLE)
# the backend helpers rules call (runtime/backend.py): tests and constant masks
nondifferentiable(backend.eye, backend.one_hot, backend.is_foreign, backend.any_foreign)

# ---------------------------------------------------------------- methods

method_alias("clip", np.clip)
method_alias("round", np.round)
method_alias("conj", np.conjugate)
method_alias("conjugate", np.conjugate)


# ================================================================ tangents
# Forward mode (see s2sad.runtime.tangents): how each primal above pushes a
# tangent forward, then the tangents of this module's adjoint rules and helpers,
# which emitted gradient code calls (forward-over-reverse: Hessian-vector products).

elementwise(np.where, np.clip, np.nan_to_num, np.sinc)

# adjoint rules that read their other arguments only for masks
linear(d_maximum, d_maximum_lhs, d_maximum_rhs, container=True)
linear(backend.as_array, backend.broadcast_like, backend.place_diagonal)
linear(np.real)  # (of real values: the identity)
linear(d_minimum, d_minimum_lhs, d_minimum_rhs, container=True)
