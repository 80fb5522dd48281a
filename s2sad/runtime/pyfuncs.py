"""Adjoint rules for Python builtins and the ``math`` module.

These mostly see Python floats, so their rules use ``math`` and return floats;
``abs``, ``float``, ``sum``, ``min`` and ``max`` also accept arrays.  The
cotangent of a list argument (``sum(xs)``, ``max(xs)``, ``sorted(xs)``) is a list.

Conventions: ``min``/``max`` split the cotangent equally among entries equal
to the result (with ``key=``, the entry returned gets it all); ``abs`` and
``fabs`` have derivative 0 at 0.  ``math.floor``, ``ceil``, ``trunc``,
``round``, ``int`` and the other integer-valued functions have zero gradient.
"""

from __future__ import annotations

import builtins
import copy
import logging
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from s2sad.runtime.elementwise import d_power
from s2sad.runtime.registry import adjoint, nondifferentiable
from s2sad.runtime.support import unbroadcast
from s2sad.runtime.tangents import (
    broadcast_like,
    constant,
    elementwise,
    filled,
    jvp_scalar,
    linear,
    scalar,
    tangent,
)

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

# ---------------------------------------------------------------- builtins


@adjoint(builtins.sum, math.fsum)
def d_builtin_sum(g, ans, iterable, start=0):
    """Each entry gets g (summed back over broadcasting); an array's rows too."""
    if isinstance(iterable, np.ndarray):
        rows = np.broadcast_to(unbroadcast(g, iterable[0]), iterable.shape)
        return (rows.copy(), unbroadcast(g, start))
    return ([unbroadcast(g, x) for x in iterable], unbroadcast(g, start))


@adjoint(builtins.abs)
def d_builtin_abs(g, ans, x):
    return (g * np.sign(x),)


@adjoint(builtins.float)
def d_builtin_float(g, ans, x=0.0):
    if isinstance(x, (np.ndarray, np.generic)):
        return (np.asarray(g, dtype=x.dtype if x.dtype.kind == "f" else float),)
    return (g,)


def _shares(values: list, ans: Any) -> list[float]:
    """Equal shares of the cotangent among the entries equal to ``ans``."""
    hits = [float(v == ans) for v in values]
    total = builtins.sum(hits)
    return [h / total for h in hits]


def _entries_like(cts: list, seq: Any) -> Any:
    """Cotangents of the entries of ``seq``: a list (None: zero, missing entries
    too), or for an array its rows stacked, with zeros for None."""
    if isinstance(seq, np.ndarray):
        rows = [np.zeros(seq.shape[1:], seq.dtype) if c is None else c for c in cts]
        rows += [np.zeros(seq.shape[1:], seq.dtype)] * (len(seq) - len(rows))
        if not rows:
            return np.zeros_like(seq)
        return np.stack(rows).astype(seq.dtype, copy=False)
    return list(cts) + [None] * (len(seq) - len(cts))


@adjoint(builtins.max, builtins.min)
def d_builtin_max(g, ans, *args, **kwargs):
    """max(a, b, ...) or max(iterable): ties split equally; with key= the winner."""
    values = list(args[0]) if len(args) == 1 else list(args)
    if "key" in kwargs:
        shares = [float(v is ans) for v in values]
    else:
        shares = _shares(values, ans)
    cts = [None if s == 0 else g * s for s in shares]
    return (_entries_like(cts, args[0]),) if len(args) == 1 else tuple(cts)


@adjoint(builtins.pow, math.pow)
def d_builtin_pow(g, ans, x, y, mod=None):
    return d_power(g, ans, x, y)


@adjoint(builtins.divmod)
def d_divmod(g, ans, x, y):
    """Only the remainder x - q * y carries gradient (the quotient q is a step)."""
    if g[1] is None:
        return (None, None)
    return (g[1], -g[1] * ans[0])


@adjoint(builtins.sorted)
def d_sorted(g, ans, iterable, *, key=None, reverse=False):
    """Each output position sends its cotangent back to the entry it came from."""
    values = list(iterable)
    keyed = values if key is None else [key(v) for v in values]
    order = sorted(range(len(values)), key=keyed.__getitem__, reverse=reverse)
    ct: list = [None] * len(values)
    for position, source in enumerate(order):
        ct[source] = g[position]
    return (_entries_like(ct, iterable),)


@adjoint(builtins.list, builtins.tuple)
def d_list(g, ans, iterable=()):
    """list(xs) of a list gives back the list; of an array, its rows stacked.

    Of a mapping (its keys): nothing."""
    if isinstance(iterable, Mapping):
        return (None,)
    if isinstance(iterable, np.ndarray):
        return (_entries_like(g, iterable),)
    return (list(g),)


# zip, enumerate and reversed are always called as list(zip(...)) (the normalize
# pass adds the list): their cotangent g is a list, and no rule reads them twice.


@adjoint(builtins.zip)
def d_zip(g, ans, *iterables, strict=False):
    """Entry k of each tuple goes back to iterable k (past the shortest: zero)."""
    return tuple(
        _entries_like([None if p is None else p[k] for p in g], seq)
        for k, seq in enumerate(iterables)
    )


@adjoint(builtins.enumerate)
def d_enumerate(g, ans, iterable, start=0):
    """The second entry of each (index, value) pair goes back to the value."""
    return (_entries_like([None if p is None else p[1] for p in g], iterable), None)


@adjoint(builtins.reversed)
def d_reversed(g, ans, seq):
    return (_entries_like(list(g)[::-1], seq),)


@adjoint(builtins.dict)
def d_dict(g, ans, mapping=(), **kwargs):
    """dict(d) or dict(pairs): each key's cotangent goes back to the value stored
    (a value overridden by a later pair or a keyword gets zero)."""
    if isinstance(mapping, dict):
        return ({k: g.get(k) for k in mapping if k not in kwargs},)
    pairs = list(mapping)
    last = {k: i for i, (k, _) in enumerate(pairs)}
    return (
        [
            (None, g.get(k)) if last[k] == i and k not in kwargs else None
            for i, (k, _) in enumerate(pairs)
        ],
    )


def _copied(g: Any) -> Any:
    """A shallow copy of a container cotangent (an array or float as it is)."""
    if isinstance(g, dict):
        return dict(g)
    if isinstance(g, (list, tuple)):
        return list(g)
    return g


@adjoint(copy.copy, copy.deepcopy)
def d_copy(g, ans, x, memo=None):
    """A copy passes its cotangent through, in the structure of ``x``."""
    return (_copied(g),)


# ---------------------------------------------------------------- math: exp and logs


@adjoint(math.exp)
def d_math_exp(g, ans, x):
    return (g * ans,)


@adjoint(math.expm1)
def d_math_expm1(g, ans, x):
    return (g * (ans + 1.0),)


@adjoint(math.log)
def d_math_log(g, ans, x, base=math.e):
    return (g / (x * math.log(base)), -g * ans / (base * math.log(base)))


@adjoint(math.log1p)
def d_math_log1p(g, ans, x):
    return (g / (1.0 + x),)


@adjoint(math.log2)
def d_math_log2(g, ans, x):
    return (g / (x * math.log(2.0)),)


@adjoint(math.log10)
def d_math_log10(g, ans, x):
    return (g / (x * math.log(10.0)),)


@adjoint(math.sqrt)
def d_math_sqrt(g, ans, x):
    return (0.5 * g / ans,)


# ---------------------------------------------------------------- math: trigonometry


@adjoint(math.sin)
def d_math_sin(g, ans, x):
    return (g * math.cos(x),)


@adjoint(math.cos)
def d_math_cos(g, ans, x):
    return (-g * math.sin(x),)


@adjoint(math.tan)
def d_math_tan(g, ans, x):
    return (g * (1.0 + ans * ans),)


@adjoint(math.asin)
def d_math_asin(g, ans, x):
    return (g / math.sqrt(1.0 - x * x),)


@adjoint(math.acos)
def d_math_acos(g, ans, x):
    return (-g / math.sqrt(1.0 - x * x),)


@adjoint(math.atan)
def d_math_atan(g, ans, x):
    return (g / (1.0 + x * x),)


@adjoint(math.atan2)
def d_math_atan2(g, ans, y, x):
    return (g * x / (x * x + y * y), -g * y / (x * x + y * y))


@adjoint(math.hypot)
def d_math_hypot(g, ans, *coordinates):
    return tuple(0.0 if ans == 0 else g * c / ans for c in coordinates)


@adjoint(math.degrees)
def d_math_degrees(g, ans, x):
    return (g * (180.0 / math.pi),)


@adjoint(math.radians)
def d_math_radians(g, ans, x):
    return (g * (math.pi / 180.0),)


# ---------------------------------------------------------------- math: hyperbolic


@adjoint(math.sinh)
def d_math_sinh(g, ans, x):
    return (g * math.cosh(x),)


@adjoint(math.cosh)
def d_math_cosh(g, ans, x):
    return (g * math.sinh(x),)


@adjoint(math.tanh)
def d_math_tanh(g, ans, x):
    return (g * (1.0 - ans * ans),)


@adjoint(math.asinh)
def d_math_asinh(g, ans, x):
    return (g / math.sqrt(x * x + 1.0),)


@adjoint(math.acosh)
def d_math_acosh(g, ans, x):
    return (g / math.sqrt(x * x - 1.0),)


@adjoint(math.atanh)
def d_math_atanh(g, ans, x):
    return (g / (1.0 - x * x),)


# ---------------------------------------------------------------- math: special and misc


@adjoint(math.erf)
def d_math_erf(g, ans, x):
    return (g * _TWO_OVER_SQRT_PI * math.exp(-x * x),)


@adjoint(math.erfc)
def d_math_erfc(g, ans, x):
    return (-g * _TWO_OVER_SQRT_PI * math.exp(-x * x),)


@adjoint(math.fabs)
def d_math_fabs(g, ans, x):
    return (g * float(np.sign(x)),)


@adjoint(math.copysign)
def d_math_copysign(g, ans, x, y):
    return (
        0.0 if x == 0 else g if math.copysign(1.0, x) == math.copysign(1.0, y) else -g,
    )


@adjoint(math.fmod)
def d_math_fmod(g, ans, x, y):
    return (g, -g * round((x - ans) / y))


@adjoint(math.remainder)
def d_math_remainder(g, ans, x, y):
    return (g, -g * round((x - ans) / y))


@adjoint(math.dist)
def d_math_dist(g, ans, p, q):
    diff = [0.0 if ans == 0 else g * (a - b) / ans for a, b in zip(p, q)]
    return (diff, [-d for d in diff])


@adjoint(math.prod)
def d_math_prod(g, ans, iterable, *, start=1):
    """Product of the other entries: exact when some entries are 0."""
    values = list(iterable)
    return (
        [
            g * start * math.prod(values[:i] + values[i + 1 :])
            for i in range(len(values))
        ],
    )


if hasattr(math, "exp2"):  # Python >= 3.11

    @adjoint(math.exp2)
    def d_math_exp2(g, ans, x):
        return (g * ans * math.log(2.0),)

    @adjoint(math.cbrt)
    def d_math_cbrt(g, ans, x):
        return (0.0 if ans == 0 else g / (3.0 * ans * ans),)


# ---------------------------------------------------------------- zero gradient

NONDIFFERENTIABLE = (
    builtins.len, builtins.range, builtins.int,
    builtins.bool, builtins.round, builtins.isinstance, builtins.print, builtins.str,
    builtins.repr, builtins.type, builtins.hash, builtins.id, builtins.any,
    builtins.all, builtins.format, builtins.issubclass,
    math.floor, math.ceil, math.trunc, math.isnan, math.isinf, math.isfinite,
    math.isclose, math.factorial, math.comb, math.perm, math.gcd, math.lcm,
    math.isqrt,
)  # fmt: skip
nondifferentiable(*NONDIFFERENTIABLE)

#: side effects, like ``print``: run in the forward sweep with the primal values,
#: never differentiated (``log.debug("h %s", h)``, ``logging.info(...)``)
LOGGING = tuple(
    getattr(home, level)
    for home in (logging, logging.Logger)
    for level in ("debug", "info", "warning", "error", "exception", "critical", "log")
)
nondifferentiable(*LOGGING)


# ================================================================ tangents
# Forward mode (see s2sad.runtime.tangents): how each primal above pushes a
# tangent forward, then the tangents of this module's adjoint rules and helpers,
# which emitted gradient code calls (forward-over-reverse: Hessian-vector products).

elementwise(builtins.abs, builtins.pow)
linear(builtins.float, copy.copy, copy.deepcopy)


@tangent(builtins.list, builtins.tuple, container=True)
def jvp_list(t, ans, iterable=()):
    """list(xs) is linear in xs; of a mapping it holds the keys: no tangent."""
    if t is None or isinstance(iterable, Mapping):
        return None
    return list(t) if type(ans) is list else tuple(t)


scalar(math.dist, math.prod)


@tangent(builtins.max, builtins.min, argnum=-1)
def jvp_builtin_max(t, ans, *args, argnum=0, **kwargs):
    """With key= the tangent of the entry returned (an array, maybe); else <grad, t>."""
    if "key" not in kwargs:
        return jvp_scalar(d_builtin_max, argnum, t, ans, *args, **kwargs)
    if len(args) > 1:
        return t if args[argnum] is ans else None
    for value, entry in zip(args[0], t):
        if value is ans:
            return entry
    return None


@tangent(builtins.zip, argnum=-1, container=True)
def jvp_zip(t, ans, *iterables, argnum=0, strict=False):
    """Tuples with the tangent of iterable ``argnum`` in its place, None elsewhere."""
    if t is None:
        return None
    n = builtins.min(len(seq) for seq in iterables)
    k = len(iterables)
    return [tuple(t[j] if i == argnum else None for i in range(k)) for j in range(n)]


@tangent(builtins.dict, container=True)
def jvp_dict(t, ans, mapping=(), **kwargs):
    """The dict of the values' tangents (keywords are constants: None)."""
    if t is None:
        return None
    if isinstance(mapping, dict):
        out = {k: t.get(k) for k in mapping}
    else:
        out = {k: None if p is None else p[1] for (k, _), p in zip(mapping, t)}
    out.update(dict.fromkeys(kwargs))
    return out


@tangent(builtins.enumerate, container=True)
def jvp_enumerate(t, ans, iterable, start=0):
    if t is None:
        return None
    return [(None, t[j]) for j in range(len(iterable))]


linear(builtins.reversed)
constant(builtins.slice)


@tangent(builtins.sum, math.fsum)
def jvp_builtin_sum(t, ans, iterable, start=0):
    """The sum of the entries' tangents (an array's rows, or a list's entries)."""
    if isinstance(t, np.ndarray):
        return broadcast_like(np.sum(t, axis=0), ans)
    return broadcast_like(builtins.sum(filled(t, iterable)), ans)


@tangent(builtins.sum, math.fsum, argnum=1)
def jvp_builtin_sum_start(t, ans, iterable, start=0):
    return broadcast_like(t, ans)


@tangent(builtins.divmod, container=True)
def jvp_divmod_x(t, ans, x, y):
    return (0.0 * t, t)


@tangent(builtins.divmod, argnum=1, container=True)
def jvp_divmod_y(t, ans, x, y):
    return (0.0 * t, -t * ans[0])


@tangent(builtins.sorted)
def jvp_sorted(t, ans, iterable, *, key=None, reverse=False):
    values = list(iterable)
    keyed = values if key is None else [key(v) for v in values]
    order = sorted(range(len(values)), key=keyed.__getitem__, reverse=reverse)
    return [t[i] for i in order]


# adjoint rules that read their other arguments only for shapes or orders
linear(d_builtin_sum, d_builtin_max, d_list, d_sorted, d_builtin_float, d_zip,
       d_enumerate, d_reversed, d_copy, d_dict, container=True)  # fmt: skip
