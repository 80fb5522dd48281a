"""Masked forms of the rules whose derivative factor can be infinite.

``np.where(x > 0, np.sqrt(x), 0.0)`` at ``x = 0``: the rule of ``where`` gives
the ``sqrt`` branch an exact zero cotangent there, and the rule of ``sqrt``
multiplies it by ``0.5 / sqrt(0) = inf``: ``0 * inf = nan``.  Where the compiler
sees that a cotangent may come from a mask (a rule declared :func:`masking`, or
a multiplication by a boolean), it uses the form registered here instead, which
replaces the operands by harmless values where ``g == 0``, so a zero stays an
exact zero (and no warning is raised)::

    # grad of: return np.sum(np.where(x > 0, np.sqrt(x), 0.0))
    g_sqrt = unbroadcast(np.where(cond, g_where, 0), sqrt)
    g_x = 0.5 * g_sqrt / np.where(g_sqrt == 0, 1.0, sqrt)

Where ``g != 0`` each form computes what the rule computes.  Every form is one
expression of its parameters and ``np`` (constants written out), so it is
inlined, and forward mode differentiates it like any emitted code.
"""

from __future__ import annotations

import numpy as np

from s2sad.runtime.registry import masked_adjoint, masking

# rules that send exact zeros to the operands they did not select
masking(np.where, np.maximum, np.minimum, np.fmax, np.fmin, np.clip, np.nan_to_num)
masking(np.copysign)

# ---------------------------------------------------------------- arithmetic


@masked_adjoint(np.multiply, broadcasts=True)
def dm_multiply(g, ans, x, y):
    """``0 * log(0)`` in ``np.where(x > 0, x * np.log(x), 0.0)``."""
    return (g * np.where(g == 0, 0.0, y), g * np.where(g == 0, 0.0, x))


@masked_adjoint(np.divide, broadcasts=True)
def dm_divide(g, ans, x, y):
    return (
        g / np.where(g == 0, 1.0, y),
        -g * np.where(g == 0, 0.0, ans) / np.where(g == 0, 1.0, y),
    )


@masked_adjoint(np.power, np.float_power, broadcasts=True)
def dm_power(g, ans, x, y):
    return (
        g * y * np.where(g == 0, 1.0, x) ** (y - 1 + (y == 0)),
        g * np.where(g == 0, 0.0, ans) * np.log(np.where(x > 0, x, 1)),
    )


@masked_adjoint(np.reciprocal)
def dm_reciprocal(g, ans, x):
    return (-g * np.where(g == 0, 0.0, ans * ans),)


@masked_adjoint(np.arctan2, broadcasts=True)
def dm_arctan2(g, ans, y, x):
    return (
        g * x / np.where(g == 0, 1.0, x * x + y * y),
        -g * y / np.where(g == 0, 1.0, x * x + y * y),
    )


# ---------------------------------------------------------------- roots, exponents, logs


@masked_adjoint(np.sqrt)
def dm_sqrt(g, ans, x):
    return (0.5 * g / np.where(g == 0, 1.0, ans),)


@masked_adjoint(np.cbrt)
def dm_cbrt(g, ans, x):
    return (g / (3.0 * np.where(g == 0, 1.0, ans * ans)),)


@masked_adjoint(np.exp)
def dm_exp(g, ans, x):
    """``exp`` overflows to inf in an unselected branch."""
    return (g * np.where(g == 0, 0.0, ans),)


@masked_adjoint(np.exp2)
def dm_exp2(g, ans, x):
    return (g * np.where(g == 0, 0.0, ans) * 0.6931471805599453,)


@masked_adjoint(np.expm1)
def dm_expm1(g, ans, x):
    return (g * np.where(g == 0, 0.0, ans + 1.0),)


@masked_adjoint(np.log)
def dm_log(g, ans, x):
    return (g / np.where(g == 0, 1.0, x),)


@masked_adjoint(np.log2)
def dm_log2(g, ans, x):
    return (g / (np.where(g == 0, 1.0, x) * 0.6931471805599453),)


@masked_adjoint(np.log10)
def dm_log10(g, ans, x):
    return (g / (np.where(g == 0, 1.0, x) * 2.302585092994046),)


@masked_adjoint(np.log1p)
def dm_log1p(g, ans, x):
    return (g / np.where(g == 0, 1.0, 1.0 + x),)


# ---------------------------------------------------------------- inverse trigonometric


@masked_adjoint(np.arcsin)
def dm_arcsin(g, ans, x):
    return (g / np.sqrt(np.where(g == 0, 1.0, 1.0 - x * x)),)


@masked_adjoint(np.arccos)
def dm_arccos(g, ans, x):
    return (-g / np.sqrt(np.where(g == 0, 1.0, 1.0 - x * x)),)


@masked_adjoint(np.arccosh)
def dm_arccosh(g, ans, x):
    return (g / np.sqrt(np.where(g == 0, 1.0, x * x - 1.0)),)


@masked_adjoint(np.arctanh)
def dm_arctanh(g, ans, x):
    return (g / np.where(g == 0, 1.0, 1.0 - x * x),)
