"""Every forward (tangent) rule against central finite differences.

For each case and each float argument i, a random tangent t is pushed through
the rule (``tangents.pushforward``: exactly what the compiler emits for one
contribution) and compared with (f(x_i + h t) - f(x_i - h t)) / 2h in float64.
A coverage test makes sure every primal with an adjoint rule, and every adjoint
rule or helper with a tangent rule, has a case here.
"""

from __future__ import annotations

import builtins
import copy
import math
import operator

import numpy as np
import pytest

from s2sad.runtime import (
    OPTIONAL_RULE_MODULES,
    activations,
    contractions,
    fused,
    indexing,
    joining,
    losses,
    nn,
    placing,
    pyfuncs,
    reductions,
    registry,
    sequences,
    shapes,
    solvers,
    statistics,
    stepreads,
    steps,
    support,
    tangents,
)
from s2sad.runtime.extrema import max_along, min_along
from s2sad.runtime.reductions import logsumexp
from tests.runtime.test_elementwise import BINARY, PAIRS, UNARY

RNG = np.random.default_rng(7)
H = 1e-6


def rnd(*shape, lo=-1.5, hi=1.5):
    return RNG.uniform(lo, hi, shape) if shape else float(RNG.uniform(lo, hi))


def pos(*shape):
    return rnd(*shape, lo=0.5, hi=2.0)


def spd(n):
    a = rnd(n, n)
    return a @ a.T + n * np.eye(n)


def well(n):
    return rnd(n, n) + 3 * np.eye(n)


def distinct(*shape):
    """Entries far apart from each other (no ties for max/sort/median)."""
    n = int(np.prod(shape)) if shape else 1
    return (RNG.permutation(n) * 0.37 + 0.1).reshape(shape)


# ---------------------------------------------------------------- checking


def _is_float(x) -> bool:
    if isinstance(x, (list, tuple)):
        return any(_is_float(v) for v in x)
    if isinstance(x, dict):
        return any(_is_float(v) for v in x.values())
    return isinstance(x, float) or (isinstance(x, np.ndarray) and x.dtype.kind == "f")


def _random_like(x):
    if x is None:
        return None
    if isinstance(x, dict):
        return {k: _random_like(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_random_like(v) for v in x)
    if isinstance(x, np.ndarray):
        return RNG.normal(size=x.shape)
    return float(RNG.normal())


def _axpy(x, h, t):
    if x is None:
        return None
    if isinstance(x, dict):
        return {k: _axpy(v, h, t[k]) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_axpy(a, h, b) for a, b in zip(x, t))
    return x + h * t


def _leaves(x):
    if x is None:
        return [None]
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in _leaves(x[k])]
    if isinstance(x, (list, tuple)):
        return [leaf for v in x for leaf in _leaves(v)]
    return [x]


def _compare(got, want, where, rtol=1e-5):
    if want is None:  # an output without derivative (an index, a label...)
        assert got is None or not np.any(got), where
        return
    if isinstance(want, (list, tuple)):
        got = [None] * len(want) if got is None else got
        assert len(got) == len(want), where
        for k, (g, w) in enumerate(zip(got, want)):
            _compare(g, w, f"{where}[{k}]", rtol)
        return
    if isinstance(want, dict):
        for k in want:
            _compare(
                None if got is None else got.get(k), want[k], f"{where}[{k!r}]", rtol
            )
        return
    w = np.asarray(want, dtype=float)
    g = np.zeros_like(w) if got is None else np.asarray(got, dtype=float)
    assert g.shape == w.shape, f"{where}: tangent shape {g.shape}, output {w.shape}"
    np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol / 10, err_msg=where)


def check_jvp(fn, *args, argnums=None, step=H, rtol=1e-5, **kwargs):
    """The tangent rule of ``fn`` against central differences, for each float argument.

    (A larger ``step`` and ``rtol`` suit outputs of low precision, e.g. float16.)
    """
    nums = (
        argnums
        if argnums is not None
        else [i for i, a in enumerate(args) if _is_float(a)]
    )
    assert nums, "no float argument to differentiate"
    for i in nums:
        t = _random_like(args[i])
        got = tangents.pushforward(fn, i, t, *copy.deepcopy(args), **kwargs)
        plus = list(copy.deepcopy(args))
        minus = list(copy.deepcopy(args))
        plus[i], minus[i] = _axpy(args[i], step, t), _axpy(args[i], -step, t)
        hi, lo = fn(*plus, **kwargs), fn(*minus, **kwargs)
        want = _difference(hi, lo, step)
        _compare(got, want, f"{registry.display_name(fn)} argument {i}", rtol)


def _difference(hi, lo, step):
    if isinstance(hi, dict):
        return {k: _difference(hi[k], lo[k], step) for k in hi}
    if isinstance(hi, (list, tuple)):
        return [_difference(a, b, step) for a, b in zip(hi, lo)]
    if hi is None:
        return None
    return (np.asarray(hi, dtype=float) - np.asarray(lo, dtype=float)) / (2 * step)


# ---------------------------------------------------------------- elementwise


@pytest.mark.parametrize("fn,domain", UNARY, ids=lambda v: getattr(v, "__name__", ""))
def test_unary_elementwise(fn, domain):
    for shape in [(), (4,), (2, 3)]:
        check_jvp(fn, np.asarray(domain(shape), dtype=float))


@pytest.mark.parametrize("fn,dx,dy", BINARY, ids=lambda v: getattr(v, "__name__", ""))
def test_binary_elementwise_with_broadcasting(fn, dx, dy):
    for sx, sy in PAIRS:
        check_jvp(fn, np.asarray(dx(sx), float), np.asarray(dy(sy), float))


MISC_ELEMENTWISE = [
    (np.where, (rnd(3, 4) > 0, rnd(3, 4), rnd(4)), {}),
    (np.clip, (rnd(6), -0.5, 0.5), {}),
    (np.clip, (rnd(6), rnd(6) - 1.0, rnd(6) + 1.0), {}),
    (np.remainder, (pos(5) * 3, np.full(5, 0.7)), {}),
    (np.fmod, (pos(5) * 3, np.full(5, 0.7)), {}),
    (np.ldexp, (rnd(4), np.array([1, 2, 3, 0])), {}),
    (builtins.abs, (-1.3,), {}),
    (builtins.pow, (1.4, 2.5), {}),
    (nn.relu, (rnd(3, 4),), {}),
    (nn.sigmoid, (rnd(3, 4),), {}),
]
# the fused kernels of rules (runtime/fused.py), one shape and broadcast
ABOVE_ONE = (fused.arccosh_grad, fused.sqrt_grad, fused.cbrt_grad)
MISC_ELEMENTWISE += [
    (k, (rnd(3, 4), np.tanh(rnd(3, 4)) * (0.3 if k in ABOVE_ONE else 0.8)), {})
    for k in fused.KERNELS
]
MISC_ELEMENTWISE = [
    (k, (a[0], a[1] + 1.5), kw) if k in ABOVE_ONE else (k, a, kw)
    for k, a, kw in MISC_ELEMENTWISE
]
MISC_ELEMENTWISE += [(fused.tanh_grad, (rnd(4), np.tanh(rnd(3, 4))), {})]


@pytest.mark.parametrize(
    "fn,args,kwargs", MISC_ELEMENTWISE, ids=lambda v: getattr(v, "__name__", "")
)
def test_other_elementwise(fn, args, kwargs):
    check_jvp(fn, *args, **kwargs)


MATH = [
    (math.exp, 0.3), (math.expm1, 0.3), (math.log, 1.7), (math.log1p, 0.4),
    (math.log2, 1.7), (math.log10, 1.7), (math.sqrt, 1.7), (math.sin, 0.3),
    (math.cos, 0.3), (math.tan, 0.3), (math.asin, 0.3), (math.acos, 0.3),
    (math.atan, 0.3), (math.degrees, 0.3), (math.radians, 0.3), (math.sinh, 0.3),
    (math.cosh, 0.3), (math.tanh, 0.3), (math.asinh, 0.3), (math.acosh, 1.7),
    (math.atanh, 0.3), (math.erf, 0.3), (math.erfc, 0.3), (math.fabs, -0.3),
    (math.exp2, 0.3), (math.cbrt, 1.7),
]  # fmt: skip


@pytest.mark.parametrize("fn,x", MATH, ids=lambda v: getattr(v, "__name__", ""))
def test_math_functions(fn, x):
    check_jvp(fn, x)


def test_math_functions_of_two_and_more():
    check_jvp(math.atan2, 0.4, -1.2)
    check_jvp(math.hypot, 0.4, -1.2, 2.0)
    check_jvp(math.copysign, 0.4, -1.2)
    check_jvp(math.fmod, 5.3, 0.7)
    check_jvp(math.remainder, 5.3, 0.7)
    check_jvp(math.pow, 1.3, 2.2)
    check_jvp(math.log, 1.7, 3.0)
    check_jvp(math.dist, [0.1, 0.5, 2.0], [1.0, -0.5, 0.3])
    check_jvp(math.prod, [0.3, 1.5, 2.0])
    check_jvp(math.fsum, [0.3, 1.5, 2.0])


# ---------------------------------------------------------------- reductions and scans

REDUCTIONS = [
    (np.sum, (rnd(3, 4),), {"axis": 1}), (np.sum, (rnd(3, 4),), {}),
    (np.mean, (rnd(3, 4), 0), {"keepdims": True}), (np.nansum, (np.array([1.0, np.nan, 2.0]),), {}),
    (np.nanmean, (np.array([[1.0, np.nan], [2.0, 3.0]]),), {"axis": 0}),
    (np.average, (rnd(3, 4), 1, pos(4)), {}), (np.average, (rnd(3, 4), None, pos(3, 4)), {}),
    (np.max, (distinct(3, 4),), {"axis": 0}), (np.amax, (distinct(5),), {}),
    (np.min, (distinct(3, 4), 1), {"keepdims": True}), (np.amin, (distinct(5),), {}),
    (np.nanmax, (distinct(5),), {}), (np.nanmin, (distinct(2, 3),), {"axis": 1}),
    (max_along, (distinct(16, 2, 16), 1), {}), (min_along, (distinct(3, 4), 0), {"keepdims": True}),
    (np.ptp, (distinct(3, 4),), {"axis": 1}), (np.prod, (rnd(3, 4),), {"axis": 0}),
    (np.prod, (np.array([2.0, 0.0, 3.0]),), {}), (np.var, (rnd(3, 4),), {"axis": 1}),
    (np.std, (rnd(3, 4),), {"ddof": 1}), (np.median, (distinct(3, 4),), {"axis": 1}),
    (np.median, (distinct(6),), {}), (logsumexp, (rnd(3, 4),), {"axis": 1}),
    (np.linalg.norm, (rnd(5),), {}), (np.linalg.norm, (rnd(3, 4),), {"axis": 1}),
    (np.linalg.norm, (rnd(3, 4), "fro"), {}), (np.linalg.norm, (rnd(3, 3), 1), {}),
    (np.linalg.vector_norm, (rnd(3, 4),), {"axis": 0, "ord": 3}),
    (np.linalg.matrix_norm, (rnd(2, 3, 3),), {}), (np.cumsum, (rnd(3, 4),), {"axis": 1}),
    (np.cumsum, (rnd(3, 4),), {}), (np.cumprod, (rnd(3, 4),), {"axis": 1}),
    (np.cumprod, (np.array([2.0, 0.0, 3.0, 1.5]),), {}), (np.diff, (rnd(6),), {}),
    (np.diff, (rnd(3, 5), 2), {"axis": 1, "prepend": 0.5}),
    (np.diff, (rnd(3, 5), 2, 1, rnd(3, 2), rnd(3, 1)), {}),
    (np.diff, (rnd(3, 4), 1, 0, rnd(), rnd(2, 4)), {}),
    (np.sort, (distinct(3, 4),), {}), (np.sort, (distinct(3, 4),), {"axis": None}),
    (np.quantile, (distinct(3, 5), 0.3), {"axis": 1}), (np.quantile, (distinct(7), 0.45), {}),
    (np.percentile, (distinct(4, 3), 35.0, 0), {"keepdims": True}),
]  # fmt: skip
if hasattr(np, "cumulative_sum"):
    REDUCTIONS += [
        (np.cumulative_sum, (rnd(3, 4),), {"axis": 0, "include_initial": True}),
        (np.cumulative_prod, (rnd(6),), {}),
        (np.cumulative_prod, (rnd(6),), {"include_initial": True}),
    ]


@pytest.mark.parametrize(
    "fn,args,kwargs", REDUCTIONS, ids=lambda v: getattr(v, "__name__", "")
)
def test_reductions(fn, args, kwargs):
    check_jvp(fn, *args, **kwargs)


# ---------------------------------------------------------------- shapes and indexing

SHAPES = [
    (np.reshape, (rnd(3, 4), (2, 6)), {}), (np.ravel, (rnd(3, 4),), {}),
    (np.squeeze, (rnd(3, 1),), {}), (np.expand_dims, (rnd(3), 0), {}),
    (np.transpose, (rnd(2, 3, 4), (1, 2, 0)), {}), (np.swapaxes, (rnd(2, 3), 0, 1), {}),
    (np.moveaxis, (rnd(2, 3, 4), 0, -1), {}), (np.broadcast_to, (rnd(3), (2, 3)), {}),
    (np.matrix_transpose, (rnd(2, 3),), {}), (np.linalg.matrix_transpose, (rnd(2, 3),), {}),
    (np.flip, (rnd(3, 4), 1), {}), (np.fliplr, (rnd(3, 4),), {}), (np.flipud, (rnd(3, 4),), {}),
    (np.roll, (rnd(5), 2), {}), (np.rot90, (rnd(3, 4),), {}), (np.tile, (rnd(2, 3), (2, 1)), {}),
    (np.repeat, (rnd(3), 2), {}), (np.triu, (rnd(3, 3),), {}), (np.tril, (rnd(3, 3), -1), {}),
    (np.diag, (rnd(3),), {}), (np.diag, (rnd(3, 3),), {}), (np.diagonal, (rnd(3, 4),), {}),
    (np.linalg.diagonal, (rnd(2, 3, 3),), {}), (np.trace, (rnd(3, 3),), {}),
    (np.linalg.trace, (rnd(2, 3, 3),), {}), (np.array, ([rnd(), rnd()],), {}),
    (np.asarray, (rnd(3),), {}), (np.asanyarray, (rnd(3),), {}),
    (np.ascontiguousarray, (rnd(3),), {}), (np.asfortranarray, (rnd(2, 2),), {}),
    (np.asarray_chkfinite, (rnd(3),), {}), (np.copy, (rnd(3),), {}),
    (np.float64, (rnd(),), {}), (np.float32, (rnd(3),), {}), (np.float16, (rnd(3),), {}),
    (np.astype, (rnd(3), np.float32), {}), (np.astype, (rnd(3), np.int64), {}),
    (np.full, ((2, 3), rnd()), {}), (np.full_like, (rnd(2, 3), rnd(3)), {}),
    (np.concatenate, ([rnd(2, 3), rnd(1, 3)],), {}),
    (np.concatenate, ([rnd(2, 3), rnd(2, 2)], 1), {}),
    (np.stack, ([rnd(3), rnd(3)], 1), {}), (np.vstack, ([rnd(3), rnd(2, 3)],), {}),
    (np.hstack, ([rnd(2), rnd(3)],), {}), (np.dstack, ([rnd(2, 3), rnd(2, 3)],), {}),
    (np.column_stack, ([rnd(3), rnd(3, 2)],), {}), (np.append, (rnd(3), rnd(2)), {}),
    (np.append, (rnd(2, 3), rnd(1, 3), 0), {}), (np.split, (rnd(6), 3), {}),
    (np.array_split, (rnd(7), 3), {}), (np.hsplit, (rnd(2, 4), 2), {}),
    (np.vsplit, (rnd(4, 2), 2), {}), (np.dsplit, (rnd(2, 2, 4), 2), {}),
    (np.pad, (rnd(3), 2), {}), (np.pad, (rnd(2, 3), 1), {"constant_values": 3.0}),
    (np.pad, (rnd(4), 2, "reflect"), {}),
    (np.pad, (rnd(2, 3), 2, "linear_ramp"), {"end_values": 1.5}), (np.atleast_1d, (rnd(),), {}),
    (np.atleast_2d, (rnd(3),), {}), (np.atleast_3d, (rnd(2, 3),), {}),
    (np.atleast_1d, (rnd(), rnd(2)), {}), (np.broadcast_arrays, (rnd(3, 1), rnd(4)), {}),
    (np.meshgrid, (rnd(3), rnd(4)), {}), (np.meshgrid, (rnd(3), rnd(4)), {"indexing": "ij"}),
    (np.linspace, (rnd(), rnd(), 5), {}), (np.linspace, (rnd(2), rnd(2), 4), {"endpoint": False}),
    (np.arange, (0.5, 3.0, 0.7), {}),
    (operator.getitem, (rnd(4, 3), (slice(1, 3), 0)), {}),
    (operator.getitem, (rnd(5), np.array([0, 2, 2])), {}),
    (operator.getitem, ([rnd(2), rnd()], 1), {}), (operator.getitem, ({"a": rnd(2)}, "a"), {}),
    (np.take, (rnd(5), [0, 3, 3]), {}), (np.take, (rnd(3, 4), [1, 0], 1), {}),
    (np.take_along_axis, (rnd(3, 4), np.array([[0], [2], [1]]), 1), {}),
    (np.compress, ([True, False, True], rnd(3)), {}),
    (np.extract, (np.array([True, False, True]), rnd(3)), {}),
    (indexing.item, (rnd(3), 1), {}), (nn.embedding, (rnd(5, 3), np.array([0, 4, 4])), {}),
    (builtins.float, (np.array(rnd()),), {}), (builtins.list, (rnd(3, 2),), {}),
    (builtins.tuple, ([rnd(), rnd(2)],), {}), (builtins.reversed, ([rnd(), rnd()],), {}),
    (np.delete, (rnd(6), [1, 4]), {}), (np.delete, (rnd(3, 4), 2, 1), {}),
    (np.resize, (rnd(5), (2, 4)), {}),
    (np.select, ([np.array([True, False, False]), np.array([True, True, False])],
                 [rnd(3), rnd(3)], rnd(3)), {}),
    (np.select, ([np.array([[True], [False]])], [rnd(2, 3)], 0.5), {}),
    (np.convolve, (rnd(5), rnd(3)), {}), (np.convolve, (rnd(3), rnd(5), "same"), {}),
    (np.correlate, (rnd(5), rnd(2)), {"mode": "full"}),
    (np.polyval, (rnd(4), rnd(3)), {}),
    (np.trapezoid, (rnd(3, 5), np.sort(rnd(5))), {}), (np.trapezoid, (rnd(4), None, 0.3), {}),
    (np.insert, (rnd(5), [1, -1], rnd(2)), {}), (np.insert, (rnd(2, 3), 1, rnd(2)), {"axis": 1}),
    (np.insert, (rnd(2, 3), -1, rnd()), {}),
    (np.partition, (distinct(7), 2), {}), (np.partition, (distinct(3, 4), [0, 2], 0), {}),
    (np.interp, (np.array([-2.0, -0.3, 0.4, 0.9, 2.5]), np.array([-1.0, 0.0, 1.0, 2.0]), rnd(4)), {}),
    (np.interp, (0.37, np.array([-1.0, 0.0, 1.0]), rnd(3), -2.0, 2.0), {}),
]  # fmt: skip
if hasattr(np, "unstack"):
    SHAPES.append((np.unstack, (rnd(3, 2),), {"axis": 1}))


@pytest.mark.parametrize(
    "fn,args,kwargs", SHAPES, ids=lambda v: getattr(v, "__name__", "")
)
def test_shapes_and_indexing(fn, args, kwargs):
    if fn is builtins.reversed:  # an iterator: compare as lists
        t = _random_like(args[0])
        got = list(tangents.pushforward(fn, 0, t, *args))
        want = list(
            reversed(_difference(_axpy(args[0], H, t), _axpy(args[0], -H, t), H))
        )
        _compare(got, want, "reversed")
        return
    low = fn in (np.float32, np.float16) or any(a is np.float32 for a in args)
    check_jvp(fn, *args, **kwargs, **({"step": 0.25, "rtol": 5e-2} if low else {}))


# ---------------------------------------------------------------- contractions and linalg

CONTRACTIONS = [
    (np.matmul, (rnd(2, 3), rnd(3, 4))), (np.matmul, (rnd(3), rnd(2, 3, 4))),
    (np.linalg.matmul, (rnd(2, 3), rnd(3))), (np.dot, (rnd(2, 3), rnd(3))),
    (np.dot, (rnd(), rnd(3))), (np.vecdot, (rnd(2, 3), rnd(3))),
    (np.linalg.vecdot, (rnd(3), rnd(3))), (np.inner, (rnd(2, 3), rnd(4, 3))),
    (np.vdot, (rnd(2, 2), rnd(4))), (np.outer, (rnd(2), rnd(3))),
    (np.linalg.outer, (rnd(2), rnd(3))), (np.tensordot, (rnd(2, 3, 4), rnd(3, 4), 2)),
    (np.linalg.tensordot, (rnd(2, 3), rnd(2, 3))), (np.kron, (rnd(2, 2), rnd(2, 3))),
    (np.cross, (rnd(4, 3), rnd(3))), (np.linalg.cross, (rnd(3), rnd(3))),
    (np.einsum, ("ij,jk->ik", rnd(2, 3), rnd(3, 4))), (np.einsum, ("ii->i", rnd(3, 3))),
    (np.einsum, ("i,i,j", rnd(2), rnd(2), rnd(3))),
    (np.linalg.multi_dot, ([rnd(2, 3), rnd(3, 3), rnd(3)],)),
    (steps.stepwise_matmul, (rnd(3, 4, 2), rnd(2, 5), 1, range(4))),
    (steps.stepwise_matmul, (rnd(3, 4, 2), rnd(2), 1, range(1, 3))),
    # a step of a product not computed ahead (None): x's step t @ w
    (stepreads.step_product, (None, rnd(3, 4, 2), rnd(2, 5), 1, 2)),
    (stepreads.step_product, (None, rnd(3, 8, 2), rnd(2, 5), 1, 1, (2, 0, 2, 2))),
]  # fmt: skip
if hasattr(np, "matvec"):
    CONTRACTIONS += [(np.matvec, (rnd(2, 3), rnd(3))), (np.vecmat, (rnd(3), rnd(3, 2)))]


@pytest.mark.parametrize(
    "fn,args", CONTRACTIONS, ids=lambda v: getattr(v, "__name__", "")
)
def test_contractions(fn, args):
    check_jvp(fn, *args)


def test_linalg():
    check_jvp(np.linalg.inv, well(3))
    check_jvp(np.linalg.det, well(3))
    check_jvp(np.linalg.det, np.stack([well(2), -well(2)]))
    check_jvp(np.linalg.slogdet, well(3))
    check_jvp(np.linalg.solve, well(3), rnd(3))
    check_jvp(np.linalg.solve, well(3), rnd(3, 2))
    check_jvp(np.linalg.matrix_power, well(3) / 3, 3)
    check_jvp(np.linalg.matrix_power, well(3), -2)
    check_jvp(np.linalg.cholesky, spd(3))
    check_jvp(np.linalg.cholesky, spd(3), upper=True)
    check_jvp(np.linalg.eigh, spd(3))
    check_jvp(np.linalg.eigh, spd(3), "U")
    check_jvp(np.linalg.eigvalsh, spd(4))
    check_jvp(np.linalg.svdvals, rnd(3, 2))
    check_jvp(np.linalg.svd, rnd(2, 3), compute_uv=False)
    check_jvp(np.linalg.pinv, rnd(4, 3))
    check_jvp(np.linalg.pinv, rnd(2, 2, 3))
    check_jvp(np.linalg.lstsq, rnd(5, 3), rnd(5), None)
    check_jvp(np.linalg.lstsq, rnd(2, 3), rnd(2, 2), None)


# ---------------------------------------------------------------- builtins and nn


def test_builtins():
    check_jvp(builtins.max, [0.3, 1.5, -2.0])
    check_jvp(builtins.min, 0.3, 1.5)
    check_jvp(builtins.sum, [rnd(2), rnd(2), rnd(2)])
    check_jvp(builtins.sum, rnd(3, 2), rnd(2))
    check_jvp(builtins.sum, [rnd(), rnd()], 0.5)
    check_jvp(builtins.divmod, 5.3, 0.7)
    check_jvp(builtins.sorted, [0.3, 1.5, -2.0])
    check_jvp(builtins.sorted, [0.3, 1.5, -2.0], reverse=True)
    check_jvp(builtins.sorted, rnd(4))
    check_jvp(builtins.max, rnd(4))
    # with key= the result is the entry itself (an array): its tangent, not <grad, t>
    check_jvp(builtins.max, [rnd(3), rnd(3), rnd(3)], key=np.sum)
    check_jvp(builtins.min, rnd(3), rnd(3), key=np.sum)
    check_jvp(copy.copy, [rnd(2), rnd()])
    check_jvp(copy.deepcopy, {"a": rnd(2), "b": [rnd(), rnd(3)]})
    check_jvp(builtins.dict, {"a": rnd(2), "b": rnd()})
    check_jvp(builtins.dict, {"a": rnd(2), "b": rnd()}, b=1.5)


def test_dict_of_pairs():
    """(Keys are strings, so the tangent and the differences are built by hand.)"""
    a, b = rnd(2), rnd()
    ta, tb = _random_like(a), _random_like(b)
    got = tangents.pushforward(
        builtins.dict, 0, [(None, ta), (None, tb)], [("a", a), ("b", b)]
    )
    _compare(got, {"a": ta, "b": tb}, "dict")
    got = tangents.pushforward(
        builtins.dict, 0, [(None, ta), None], [("a", a), ("b", b)]
    )
    _compare(got, {"a": ta, "b": None}, "dict")


@pytest.mark.parametrize(
    "fn,args",
    [(builtins.zip, ([rnd(), rnd()], rnd(3))), (builtins.zip, (rnd(3, 2), rnd(3))),
     (builtins.enumerate, (rnd(3, 2),)), (builtins.enumerate, ([rnd(), rnd(2)], 1)),
     (builtins.reversed, ([rnd(), rnd()],))],
    ids=lambda v: getattr(v, "__name__", ""),
)  # fmt: skip
def test_iterator_builtins(fn, args):
    """They return one-shot iterators: compare as lists (of tuples)."""
    for i in [k for k, a in enumerate(args) if _is_float(a)]:
        t = _random_like(args[i])
        got = list(tangents.pushforward(fn, i, t, *args))
        plus, minus = list(args), list(args)
        plus[i], minus[i] = _axpy(args[i], H, t), _axpy(args[i], -H, t)
        want = _difference(list(fn(*plus)), list(fn(*minus)), H)
        _compare(got, want, f"{fn.__name__} argument {i}")


def test_nn():
    labels = np.array([0, 2, 1])
    check_jvp(nn.softmax, rnd(3, 4))
    check_jvp(nn.log_softmax, rnd(3, 4), 0)
    check_jvp(activations.log_softmax_as_written, rnd(3, 4), 1)
    check_jvp(activations.log_softmax_as_written, rnd(2, 3, 4), None)
    for reduce in (None, "mean", "sum"):  # z, y, p, first, second
        check_jvp(losses.sigmoid_log_likelihood_as_written, *SIGMOID_LL, reduce)
        check_jvp(losses.sigmoid_log_likelihood_as_written, *SIGMOID_LL, reduce, True)
    check_jvp(losses.picked_log_softmax_as_written, *PICKED, 1, "sum")
    check_jvp(nn.softmax_cross_entropy, rnd(3, 4), labels)
    check_jvp(nn.binary_cross_entropy_with_logits, rnd(3, 4), pos(3, 4) / 2)
    check_jvp(nn.dense, rnd(2, 3), rnd(3, 4), rnd(4))
    check_jvp(nn.conv1d, rnd(2, 3, 6), rnd(4, 3, 2), rnd(4))
    check_jvp(nn.maxpool1d, distinct(2, 7), 3)
    check_jvp(nn.maxpool1d, distinct(1, 40), 20)


# ---------------------------------------------------------------- second order: rules of rules


def test_helpers_of_gradient_modules():
    check_jvp(support.add, rnd(3), rnd(3))
    check_jvp(support.add, [rnd(2), None], [rnd(2), rnd()])
    check_jvp(support.unbroadcast, rnd(2, 3), rnd(3), argnums=[0])
    check_jvp(support.finalize, rnd(3), rnd(3), argnums=[0])
    check_jvp(support.item_of, [rnd(2), rnd(3)], 1, argnums=[0])
    check_jvp(support.without_item, rnd(4), 2, argnums=[0])
    check_jvp(support.split_last, [rnd(), rnd(2)])
    check_jvp(support.pad, (rnd(2), rnd()), 3)
    check_jvp(support.copy_item, rnd(4), 1, argnums=[0])
    check_jvp(tangents.or_zeros, rnd(3), rnd(3), argnums=[0])
    check_jvp(tangents.filled, [rnd(2), None], [rnd(2), rnd(3)], argnums=[0])
    check_jvp(tangents.finish, rnd(3), rnd(3), argnums=[0])
    check_jvp(tangents.broadcast_like, rnd(3), rnd(2, 3), argnums=[0])
    check_jvp(tangents.zero_entry, (rnd(2), rnd(3)), 0, argnums=[0])
    check_jvp(reductions.like, rnd(3), rnd(3), argnums=[0])
    check_jvp(reductions.expand, rnd(3), rnd(3, 4), 1, False, argnums=[0])
    check_jvp(reductions.spread, rnd(3), rnd(3, 4), 1, False, argnums=[0])
    check_jvp(reductions.to_last, rnd(2, 3, 4), (0, 2))
    check_jvp(reductions.from_last, rnd(3, 8), (2, 3, 4), (0, 2))
    check_jvp(shapes.unstack_like, rnd(2, 3), [rnd(3), rnd(3)], argnums=[0])


def _rule_args(rule, *args, **kwargs):
    """(g, ans, *args) for an adjoint rule: g random like the primal's output."""
    ans = rule_primal[rule](*args, **kwargs)
    return (_random_like(ans), ans, *args)


def _sigmoid_ll():
    """z (3,), y (2, 1) broadcast against p, and the two terms (2, 3)."""
    z, y = rnd(3), pos(2, 1) / 2.5
    p = 1.0 / (1.0 + np.exp(-z))
    return z, y, p, y * np.log(p), (1.0 - y) * np.log(1.0 - p)


def _picked():
    x = rnd(3, 4)
    logp = x - np.log(np.sum(np.exp(x), axis=1, keepdims=True))
    return x, logp, np.arange(3), np.array([1, 3, 0])


SIGMOID_LL, PICKED = _sigmoid_ll(), _picked()

rule_primal = {
    reductions.d_sum: np.sum, reductions.d_mean: np.mean, reductions.d_max: np.max,
    statistics.d_var: np.var, statistics.d_std: np.std, reductions.d_logsumexp: logsumexp,
    indexing.d_getitem: operator.getitem, shapes.d_reshape: np.reshape,
    shapes.d_transpose: np.transpose, joining.d_concatenate: np.concatenate,
    contractions.d_matmul: np.matmul, contractions.d_matmul_lhs: np.matmul,
    contractions.d_matmul_rhs: np.matmul, contractions.d_dot: np.dot,
    contractions.d_tensordot: np.tensordot, contractions.d_einsum: np.einsum,
    contractions.d_outer: np.outer, contractions.d_inner: np.inner,
    contractions.d_vdot: np.vdot, contractions.d_kron: np.kron,
    contractions.d_cross: np.cross, contractions.d_vecdot: np.vecdot,
    pyfuncs.d_builtin_sum: builtins.sum, pyfuncs.d_builtin_float: builtins.float,
    nn.d_softmax_cross_entropy: nn.softmax_cross_entropy, activations.d_log_softmax: nn.log_softmax,
    activations.d_softmax: nn.softmax, activations.d_dense: nn.dense, nn.d_conv1d: nn.conv1d,
    nn.d_binary_cross_entropy_with_logits: nn.binary_cross_entropy_with_logits,
    activations.d_relu: nn.relu, steps.d_stepwise_matmul: steps.stepwise_matmul,
    losses.d_sigmoid_log_likelihood: losses.sigmoid_log_likelihood_as_written,
    losses.d_sigmoid_log_likelihood_z: losses.sigmoid_log_likelihood_as_written,
    losses.d_picked_log_softmax: losses.picked_log_softmax_as_written,
    steps.d_stepwise_matmul_lhs: steps.stepwise_matmul,
    steps.d_stepwise_matmul_rhs: steps.stepwise_matmul,
    stepreads.d_step_product: stepreads.step_product,
    stepreads.d_step_product_lhs: stepreads.step_product,
    stepreads.d_step_product_rhs: stepreads.step_product,
    solvers.d_pinv: np.linalg.pinv,
    placing.d_insert: np.insert, placing.d_partition: np.partition,
    sequences.d_interp: np.interp,
}  # fmt: skip

RULE_CASES = [
    (reductions.d_sum, (rnd(3, 4), 1)), (reductions.d_mean, (rnd(3, 4),)),
    (reductions.d_max, (distinct(3, 4), 0)), (statistics.d_var, (rnd(3, 4), 1)),
    (statistics.d_std, (rnd(3, 4), 1)), (statistics.d_std, (rnd(5),)),
    (reductions.d_logsumexp, (rnd(3, 4), 1)), (indexing.d_getitem, (rnd(4, 3), 2)),
    (shapes.d_reshape, (rnd(3, 4), (2, 6))), (shapes.d_transpose, (rnd(2, 3),)),
    (joining.d_concatenate, ([rnd(2), rnd(3)],)), (contractions.d_matmul, (rnd(2, 3), rnd(3, 4))),
    (contractions.d_matmul, (rnd(3), rnd(3, 2))), (contractions.d_matmul_lhs, (rnd(2, 3), rnd(3, 4))),
    (contractions.d_matmul_rhs, (rnd(2, 3), rnd(3, 4))), (contractions.d_dot, (rnd(2, 3), rnd(3))),
    (contractions.d_tensordot, (rnd(2, 3), rnd(3, 4), 1)),
    (contractions.d_einsum, ("ij,jk,k->i", rnd(2, 3), rnd(3, 4), rnd(4))),
    (contractions.d_outer, (rnd(2), rnd(3))), (contractions.d_inner, (rnd(3), rnd(3))),
    (contractions.d_vdot, (rnd(3), rnd(3))), (contractions.d_kron, (rnd(2), rnd(3))),
    (contractions.d_cross, (rnd(3), rnd(3))), (contractions.d_vecdot, (rnd(2, 3), rnd(2, 3))),
    (pyfuncs.d_builtin_sum, ([rnd(2), rnd(2)],)), (pyfuncs.d_builtin_float, (np.array(rnd()),)),
    (nn.d_softmax_cross_entropy, (rnd(3, 4), np.array([1, 0, 3]))),
    (activations.d_log_softmax, (rnd(3, 4),)), (activations.d_softmax, (rnd(3, 4),)),
    (activations.d_dense, (rnd(2, 3), rnd(3, 4), rnd(4))), (nn.d_conv1d, (rnd(2, 3, 5), rnd(2, 3, 2), rnd(2))),
    (nn.d_binary_cross_entropy_with_logits, (rnd(3), pos(3) / 2)), (activations.d_relu, (rnd(3, 4),)),
    (steps.d_stepwise_matmul, (rnd(3, 4, 2), rnd(2, 5), 1, range(4))),
    (steps.d_stepwise_matmul_lhs, (rnd(3, 4, 2), rnd(2, 5), 1, range(1, 3))),
    (steps.d_stepwise_matmul_rhs, (rnd(3, 4, 2), rnd(2, 5), 0, range(2))),
    (steps.d_stepwise_matmul, (rnd(3, 4, 2), rnd(2), 1, range(4))),
    (stepreads.d_step_product, (None, rnd(3, 4, 2), rnd(2, 5), 1, 2)),
    (stepreads.d_step_product_lhs, (None, rnd(3, 8, 2), rnd(2, 5), 1, 1, (2, 0, 2, 2))),
    (stepreads.d_step_product_rhs, (None, rnd(3, 4, 2), rnd(2, 5), 1, 0)),
    (losses.d_sigmoid_log_likelihood, (*SIGMOID_LL, "mean")),
    (losses.d_sigmoid_log_likelihood_z, (*SIGMOID_LL, "mean")),
    (losses.d_sigmoid_log_likelihood, (*SIGMOID_LL, "sum", True)),
    (losses.d_sigmoid_log_likelihood_z, SIGMOID_LL),
    (losses.d_picked_log_softmax, (*PICKED, 1)),
    (losses.d_picked_log_softmax, (*PICKED[:2], np.array([0, 0, 2]), PICKED[3], 1)),
    (solvers.d_pinv, (rnd(4, 3),)), (solvers.d_pinv, (rnd(2, 3),)),
    (placing.d_insert, (rnd(2, 3), [0, 2], rnd(2, 1), 1)),
    (placing.d_partition, (distinct(3, 5), 2)),
    (sequences.d_interp, (np.array([-2.0, -0.3, 0.4, 0.9, 2.5]), np.array([-1.0, 0.0, 1.0, 2.0]), rnd(4))),
]  # fmt: skip


@pytest.mark.parametrize(
    "rule,args", RULE_CASES, ids=lambda v: getattr(v, "__name__", "")
)
def test_tangents_of_adjoint_rules(rule, args):
    """Forward over reverse: each adjoint rule's own JVP, in g, ans and its inputs."""
    full = _rule_args(rule, *args)
    nums = [i for i, a in enumerate(full) if _is_float(a) and not isinstance(a, str)]
    if rule in MASKED:  # ans and x only choose entries: their tangents are 0 a.e.
        nums = [0]
    check_jvp(rule, *full, argnums=nums)


MASKED = {reductions.d_max, activations.d_relu, placing.d_partition}


# ---------------------------------------------------------------- coverage


def _tested_primals() -> set:
    cases = [c[0] for c in MISC_ELEMENTWISE + REDUCTIONS + SHAPES + CONTRACTIONS + MATH]
    cases += [fn for fn, *_ in UNARY] + [fn for fn, *_ in BINARY] + list(rule_primal)
    cases += [
        math.atan2,
        math.hypot,
        math.copysign,
        math.fmod,
        math.remainder,
        math.pow,
        math.dist,
        math.prod,
        math.fsum,
        np.linalg.inv,
        np.linalg.det,
        np.linalg.slogdet,
        np.linalg.solve,
        np.linalg.matrix_power,
        np.linalg.cholesky,
        np.linalg.eigh,
        np.linalg.eigvalsh,
        np.linalg.svdvals,
        np.linalg.svd,
        np.linalg.pinv,
        np.linalg.lstsq,
        builtins.max,
        builtins.min,
        builtins.sum,
        builtins.divmod,
        builtins.sorted,
        builtins.zip,
        builtins.enumerate,
        builtins.dict,
        copy.copy,
        copy.deepcopy,
        nn.softmax,
        nn.log_softmax,
        activations.log_softmax_as_written,
        losses.sigmoid_log_likelihood_as_written,
        losses.picked_log_softmax_as_written,
        nn.softmax_cross_entropy,
        nn.binary_cross_entropy_with_logits,
        nn.dense,
        nn.conv1d,
        nn.maxpool1d,
    ]
    return {registry.key_of(f) for f in cases}


#: the optional families (SciPy's) test their tangent rules in their own files
OPTIONAL = tuple(f"s2sad.runtime.{name}" for name, _ in OPTIONAL_RULE_MODULES)


def test_every_primal_with_an_adjoint_has_a_tested_tangent_rule():
    tested = _tested_primals()
    untested = [
        r.name
        for r in registry.all_rules()
        if r.adjoint is not None
        and registry.key_of(r.primal) not in tested
        and not r.adjoint.__module__.startswith(OPTIONAL)
    ]
    assert not untested, f"primals without a forward-rule test: {untested}"
    assert all(tangents.lookup(r.primal) is not None for r in registry.all_rules())
