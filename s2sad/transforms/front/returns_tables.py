"""The tables of :mod:`returns`: which NumPy functions, builtins and array methods
return a new value, a view of an operand, or a floating-point result."""

from __future__ import annotations

import builtins

import numpy as np

#: NumPy functions that return a new array or scalar (never a view of an argument)
FRESH_FUNCTIONS = {
    getattr(np, n)
    for n in (  # noqa: SIM905 (one name a line would take a page)
        "sum mean max min amax amin prod std var median average nansum nanmean "
        "nanmax nanmin ptp dot vdot matmul inner outer tensordot kron "
        "linspace logspace zeros ones full eye identity arange zeros_like "
        "ones_like full_like copy where clip concatenate stack vstack hstack "
        "column_stack tile repeat cumsum cumprod diff sort argsort argmax argmin "
        "trace cross convolve polyval tril triu interp"
    ).split()
    if hasattr(np, n)
} | {
    np.linalg.norm,
    np.linalg.inv,
    np.linalg.solve,
    np.linalg.det,
    np.linalg.slogdet,
    np.linalg.cholesky,
}
#: NumPy reductions whose result, without axis (one argument only), is a scalar
FULL_REDUCTIONS = {
    np.sum,
    np.mean,
    np.max,
    np.min,
    np.amax,
    np.amin,
    np.prod,
    np.std,
    np.var,
    np.median,
    np.nansum,
    np.nanmean,
    np.nanmax,
    np.nanmin,
    np.ptp,
}
#: builtins that return a new number (``sum`` of arrays adds them up from 0)
FRESH_BUILTINS = {
    builtins.float,
    builtins.int,
    builtins.bool,
    builtins.len,
    builtins.abs,
    builtins.sum,
    builtins.round,
}
#: array methods whose result is a new array or scalar
FRESH_METHODS = {
    "sum",
    "mean",
    "max",
    "min",
    "prod",
    "std",
    "var",
    "dot",
    "item",
    "tolist",
    "cumsum",
    "cumprod",
    "clip",
    "round",
    "argmax",
    "argmin",
}

#: methods and NumPy functions whose result is a view of their first operand
VIEW_METHODS = {
    "reshape",
    "ravel",
    "transpose",
    "squeeze",
    "swapaxes",
    "view",
    "diagonal",
    "T",
}
VIEW_FUNCTIONS = {
    "reshape",
    "ravel",
    "transpose",
    "squeeze",
    "expand_dims",
    "swapaxes",
    "moveaxis",
    "asarray",
    "broadcast_to",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "diagonal",
    "flip",
    "rot90",
}
#: NumPy and math functions whose result is floating point even for integers
#: (``[a] * n`` with an integer ``n`` would repeat the list, keeping ``a``)
FLOATING = set(
    (  # noqa: SIM905
        "exp log log1p expm1 sqrt sin cos tan tanh sinh cosh arctan arcsin arccos "
        "mean std var linspace"
    ).split()
)
