"""Rules for Python builtins and the math module."""

from __future__ import annotations

import builtins
import copy
import math

import numpy as np
import pytest

from s2sad.runtime import pyfuncs
from s2sad.testing import check_nondifferentiable, check_rule

RNG = np.random.default_rng(9)

MATH_UNARY = [
    (math.exp, 0.7), (math.expm1, -0.3), (math.log, 1.7), (math.log1p, 0.4),
    (math.log2, 2.5), (math.log10, 3.5), (math.sqrt, 2.2), (math.sin, 0.9),
    (math.cos, -1.1), (math.tan, 0.4), (math.asin, 0.3), (math.acos, -0.6),
    (math.atan, 1.9), (math.degrees, 0.4), (math.radians, 33.0), (math.sinh, 0.8),
    (math.cosh, -0.5), (math.tanh, 0.3), (math.asinh, -1.2), (math.acosh, 1.9),
    (math.atanh, 0.45), (math.erf, 0.6), (math.erfc, -0.2), (math.fabs, -1.3),
    (builtins.abs, -2.1), (builtins.float, 1.25),
]  # fmt: skip
if hasattr(math, "exp2"):
    MATH_UNARY += [(math.exp2, 1.3), (math.cbrt, -2.7)]

MATH_BINARY = [
    (math.atan2, 0.7, -1.3), (math.hypot, 0.7, -1.3), (math.pow, 1.7, 2.3),
    (builtins.pow, 1.7, -0.4), (math.log, 5.0, 3.0), (math.copysign, -1.5, 2.0),
    (math.fmod, 5.3, 2.1), (math.remainder, 5.3, 2.1), (builtins.max, 1.0, 2.5),
    (builtins.min, 1.0, 2.5),
]  # fmt: skip


@pytest.mark.parametrize("fn,x", MATH_UNARY, ids=lambda v: getattr(v, "__name__", ""))
def test_unary(fn, x):
    check_rule(fn, x)


@pytest.mark.parametrize(
    "fn,x,y", MATH_BINARY, ids=lambda v: getattr(v, "__name__", "")
)
def test_binary(fn, x, y):
    argnums = (0,) if fn is math.copysign else None
    check_rule(fn, x, y, argnums=argnums)


def test_arrays_through_builtins():
    x = RNG.standard_normal((3, 4))
    check_rule(builtins.abs, x)
    check_rule(builtins.abs, np.float32(-1.5))
    check_rule(builtins.float, np.array(2.5))
    check_rule(builtins.float, np.float32(2.5))


def test_sum_of_lists_and_arrays():
    a, b = RNG.standard_normal(3), RNG.standard_normal((2, 3))
    check_rule(builtins.sum, [a, b, 1.5])
    check_rule(builtins.sum, [1.5, 2.0, -0.5])
    check_rule(builtins.sum, (a, a), 2.0)
    check_rule(builtins.sum, b)
    check_rule(math.fsum, [1.5, 2.0, -0.5])
    check_rule(builtins.sum, [a.astype(np.float32), a.astype(np.float32)])


def test_min_max_forms():
    check_rule(builtins.max, 1.0, 3.0, -2.0)
    check_rule(builtins.max, [1.0, 3.0, -2.0])
    check_rule(builtins.min, (1.0, 3.0, -2.0))
    check_rule(builtins.max, [1.0, -3.0, 2.0], kwargs={"key": abs})
    ct = pyfuncs.d_builtin_max(4.0, 3.0, 3.0, 1.0, 3.0)
    assert ct == (2.0, None, 2.0)
    ct = pyfuncs.d_builtin_max(1.0, 3.0, [3.0, 1.0, 3.0, 3.0])
    assert ct == ([1 / 3, None, 1 / 3, 1 / 3],)


def test_sorted_list_tuple_prod_dist():
    xs = [0.3, -1.2, 2.5, 0.9]
    check_rule(builtins.sorted, xs)
    check_rule(builtins.sorted, xs, kwargs={"reverse": True, "key": abs})
    check_rule(builtins.list, (0.3, RNG.standard_normal(2)))
    check_rule(builtins.tuple, [0.3, 1.5])
    check_rule(builtins.list, RNG.standard_normal((3, 2)))
    check_rule(math.prod, xs)
    check_rule(math.prod, xs, kwargs={"start": 2.0})
    assert pyfuncs.d_math_prod(1.0, 0.0, [2.0, 0.0, 3.0]) == ([0.0, 6.0, 0.0],)
    check_rule(math.dist, [0.3, -1.2], [2.5, 0.9])
    check_rule(builtins.divmod, 7.5, 2.0)
    check_rule(math.hypot, 0.3, -1.2, 2.0)


def test_sorted_min_max_of_an_array_give_an_array():
    """Entries not used get zero, never NaN (a list with None made into an array)."""
    x = np.array([0.3, -1.2, 2.5, 0.9])
    check_rule(builtins.sorted, x)
    check_rule(builtins.max, x)
    check_rule(builtins.min, x)
    (ct,) = pyfuncs.d_sorted([1.0, None, None, 2.0], None, x)
    np.testing.assert_array_equal(ct, [0.0, 1.0, 2.0, 0.0])
    (ct,) = pyfuncs.d_builtin_max(3.0, 2.5, x)
    np.testing.assert_array_equal(ct, [0.0, 0.0, 3.0, 0.0])


def test_copies_and_dict():
    a = RNG.standard_normal(3)
    check_rule(copy.copy, [a, 1.5])
    check_rule(copy.copy, a)
    check_rule(copy.deepcopy, {"a": a, "b": [1.5, a]})
    check_rule(builtins.dict, {"a": a, "b": 1.5})
    check_rule(builtins.dict, [("a", a), ("b", 1.5)])
    # a key given again (or as a keyword) overrides: the first value gets zero
    pairs = [("a", 1.0), ("b", 2.0), ("a", 3.0)]
    ct = pyfuncs.d_dict({"a": 5.0, "b": 7.0}, None, pairs)
    assert ct == ([None, (None, 7.0), (None, 5.0)],)
    ct = pyfuncs.d_dict({"a": 5.0, "b": 7.0}, None, {"a": 1.0, "b": 2.0}, b=0.0)
    assert ct == ({"a": 5.0},)


def test_iterator_builtins_send_entries_back():
    """zip, enumerate, reversed (called as list(zip(...))): each entry's cotangent
    goes back to where it came from; entries past the shortest input get zero."""
    xs, arr = [0.5, 0.7, 0.9], np.array([1.0, 2.0])
    assert builtins.list(builtins.zip(xs, arr)) == [(0.5, 1.0), (0.7, 2.0)]
    g = [(1.0, 2.0), None]
    cts = pyfuncs.d_zip(g, None, xs, arr)
    assert cts[0] == [1.0, None, None]
    np.testing.assert_array_equal(cts[1], [2.0, 0.0])
    g = [None, (None, 4.0)]
    (ct, ct_start) = pyfuncs.d_enumerate(g, None, arr, 1)
    np.testing.assert_array_equal(ct, [0.0, 4.0])
    assert ct_start is None
    assert pyfuncs.d_reversed([1.0, None, 3.0], None, xs) == ([3.0, None, 1.0],)
    (ct,) = pyfuncs.d_reversed([np.ones(3), None], None, RNG.standard_normal((2, 3)))
    np.testing.assert_array_equal(ct, [np.zeros(3), np.ones(3)])


@pytest.mark.parametrize("fn", pyfuncs.NONDIFFERENTIABLE, ids=lambda f: f.__name__)
def test_zero_gradient_functions(fn):
    args = {
        builtins.range: (3,),
        builtins.isinstance: (1.5, float),
        builtins.issubclass: (bool, int),
        builtins.len: ([1.5],),
        builtins.any: ([1.5],),
        builtins.all: ([1.5],),
        builtins.format: (1.5,),
        math.isclose: (1.5, 1.5000001),
        math.comb: (5, 2),
        math.perm: (5, 2),
        math.gcd: (6, 4),
        math.lcm: (6, 4),
        math.isqrt: (17,),
        math.factorial: (4,),
        builtins.print: (),
    }.get(fn, (1.7,))
    check_nondifferentiable(fn, *args)


def test_every_rule_is_tested(family_coverage):
    tested = {fn for fn, _ in MATH_UNARY} | {fn for fn, _, _ in MATH_BINARY}
    tested |= {builtins.sum, math.fsum, builtins.sorted, builtins.list, builtins.tuple,
               math.prod, math.dist, builtins.divmod, builtins.zip, builtins.enumerate,
               builtins.reversed, builtins.dict, copy.copy, copy.deepcopy}  # fmt: skip
    family_coverage("pyfuncs", tested | set(pyfuncs.NONDIFFERENTIABLE))


# The finite-difference helpers of s2sad.testing, on plain Python functions.


def test_numerical_grad_of_floats_arrays_and_containers():
    from s2sad.testing import numerical_grad

    def f(x, params):
        return math.sin(x) * np.sum(params["w"] ** 2) + params["b"][1] ** 3

    params = {"w": np.array([1.0, -2.0]), "b": [0.5, 1.5]}
    gx, gp = numerical_grad(f, (0.3, params), (0, 1))
    assert np.isclose(gx, math.cos(0.3) * 5.0)
    assert np.allclose(gp["w"], 2 * math.sin(0.3) * params["w"])
    assert np.isclose(gp["b"][0], 0.0) and np.isclose(gp["b"][1], 3 * 1.5**2)
    g32 = numerical_grad(lambda v: np.sum(v**2), (np.ones(3, np.float32),), 0)
    assert g32.dtype == np.float64 and np.allclose(g32, 2.0)
