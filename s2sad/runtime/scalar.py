"""Math functions for Python floats, used by gradients compiled for scalar code.

When every argument of a differentiated function is a Python scalar, the
emitted code calls ``scalar.sin(x)`` instead of ``np.sin(x)``: for a ``float``
it is the ``math`` module's function (no NumPy scalar is created), for anything
else, and wherever ``math`` would raise (``log(0.0)``, ``exp(1000.0)``,
``sin(inf)``...), it is the NumPy ufunc, so values, infinities, NaNs and
warnings stay NumPy's.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any

import numpy as np

#: NumPy ufunc name -> math function with the same meaning on finite floats
MATH_NAMES = {
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "tanh": "tanh",
    "sinh": "sinh",
    "cosh": "cosh",
    "exp": "exp",
    "expm1": "expm1",
    "log": "log",
    "log1p": "log1p",
    "log2": "log2",
    "log10": "log10",
    "sqrt": "sqrt",
    "arctan": "atan",
    "arcsin": "asin",
    "arccos": "acos",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
}


def _make(np_name: str, math_name: str) -> Callable[[Any], Any]:
    fast = getattr(math, math_name)
    slow = getattr(np, np_name)

    def f(x: Any) -> Any:
        if type(x) is float:
            try:
                return fast(x)
            except (ValueError, OverflowError):
                pass
        return slow(x)

    f.__name__ = f.__qualname__ = np_name
    f.__doc__ = f"math.{math_name} on a float, else (or where it raises) np.{np_name}."
    return f


for _np_name, _math_name in MATH_NAMES.items():
    globals()[_np_name] = _make(_np_name, _math_name)


class _NumpyMath:
    """``math`` with NumPy's ufuncs in place of the functions of :data:`MATH_NAMES`
    (NumPy's inf, nan and warnings where ``math`` raises); anything else is
    ``math``'s own (``math.pi``)."""

    def __init__(self) -> None:
        for np_name, math_name in MATH_NAMES.items():
            setattr(self, math_name, getattr(np, np_name))

    def __getattr__(self, attr: str) -> Any:
        return getattr(math, attr)


NUMPY_MATH = _NumpyMath()


def with_numpy_math(fn: Callable) -> Callable:
    """``fn`` (an emitted function) reading :data:`NUMPY_MATH` wherever its module
    binds ``math``: what ``grad`` re-runs on ``np.float64`` arguments when
    ``math`` raised.  ``fn`` itself when its module does not use ``math``."""
    names = [k for k, v in fn.__globals__.items() if v is math]
    if not names:
        return fn
    scope = dict(fn.__globals__)
    for k in names:
        scope[k] = NUMPY_MATH
    return types.FunctionType(
        fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__
    )


def uses_math(fn: Callable) -> bool:
    """Whether ``fn``'s module binds ``math`` (its domain errors mean: re-run)."""
    return any(v is math for v in getattr(fn, "__globals__", {}).values())
