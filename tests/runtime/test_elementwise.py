"""Elementwise rules against central finite differences, plus exact values at kinks."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import elementwise as ew
from s2sad.runtime import registry
from s2sad.runtime.registry import lookup
from s2sad.runtime.support import unbroadcast
from s2sad.testing import check_nondifferentiable, check_rule

RNG = np.random.default_rng(42)


def uniform(lo: float, hi: float):
    return lambda shape: RNG.uniform(lo, hi, shape)


ANY = uniform(-2.0, 2.0)
POS = uniform(0.5, 2.0)
UNIT = uniform(-0.9, 0.9)
ABOVE1 = uniform(1.5, 3.0)
NONZERO = lambda shape: RNG.uniform(0.3, 2.0, shape) * RNG.choice(
    [-1, 1], shape
)  # noqa

UNARY = [
    (np.negative, ANY), (np.positive, ANY), (np.conjugate, ANY), (np.square, ANY),
    (np.reciprocal, NONZERO), (np.exp, ANY), (np.exp2, ANY), (np.expm1, ANY),
    (np.log, POS), (np.log2, POS), (np.log10, POS), (np.log1p, POS), (np.sqrt, POS),
    (np.cbrt, NONZERO), (np.sin, ANY), (np.cos, ANY), (np.tan, UNIT),
    (np.arcsin, UNIT), (np.arccos, UNIT), (np.arctan, ANY), (np.sinh, ANY),
    (np.cosh, ANY), (np.tanh, ANY), (np.arcsinh, ANY), (np.arccosh, ABOVE1),
    (np.arctanh, UNIT), (np.deg2rad, ANY), (np.radians, ANY), (np.rad2deg, ANY),
    (np.degrees, ANY), (np.sinc, NONZERO), (np.absolute, NONZERO), (np.fabs, NONZERO),
    (np.nan_to_num, ANY), (np.real, ANY),
]  # fmt: skip

BINARY = [
    (np.add, ANY, ANY), (np.subtract, ANY, ANY), (np.multiply, ANY, ANY),
    (np.divide, ANY, NONZERO), (np.power, POS, ANY), (np.float_power, POS, ANY),
    (np.maximum, ANY, ANY), (np.minimum, ANY, ANY), (np.fmax, ANY, ANY),
    (np.fmin, ANY, ANY), (np.logaddexp, ANY, ANY), (np.logaddexp2, ANY, ANY),
    (np.arctan2, NONZERO, NONZERO), (np.hypot, NONZERO, NONZERO),
    (np.copysign, NONZERO, NONZERO),
]  # fmt: skip

SHAPES = [(), (5,), (3, 4)]
PAIRS = [((), ()), ((5,), (5,)), ((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)),
         ((), (3, 4)), ((2, 1, 4), (3, 4))]  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fn,domain", UNARY, ids=lambda v: getattr(v, "__name__", ""))
def test_unary(fn, domain, shape):
    check_rule(fn, domain(shape))


@pytest.mark.parametrize("fn,domain", UNARY, ids=lambda v: getattr(v, "__name__", ""))
def test_unary_float32_and_python_float(fn, domain):
    check_rule(fn, domain((3, 4)).astype(np.float32))
    check_rule(fn, float(domain(())))


@pytest.mark.parametrize("shapes", PAIRS, ids=str)
@pytest.mark.parametrize("fn,dx,dy", BINARY, ids=lambda v: getattr(v, "__name__", ""))
def test_binary(fn, dx, dy, shapes):
    argnums = (0,) if fn is np.copysign else None
    check_rule(fn, dx(shapes[0]), dy(shapes[1]), argnums=argnums)


@pytest.mark.parametrize("fn,dx,dy", BINARY, ids=lambda v: getattr(v, "__name__", ""))
def test_binary_float32_and_python_floats(fn, dx, dy):
    argnums = (0,) if fn is np.copysign else None
    x32, y32 = dx((3, 4)).astype(np.float32), dy((4,)).astype(np.float32)
    check_rule(fn, x32, y32, argnums=argnums)
    check_rule(fn, x32, float(dy(())), argnums=argnums)  # float32 stays float32
    check_rule(fn, float(dx(())), float(dy(())), argnums=argnums)


def test_remainder_and_fmod_away_from_jumps():
    x = np.array([[2.3, -2.3, 5.1], [0.4, -0.6, 7.7]])
    y = np.array([1.1, 1.7, -2.2])
    check_rule(np.remainder, x, y)
    check_rule(np.fmod, x, y)
    check_rule(np.remainder, 5.3, 2.0)


def test_ldexp_differentiates_the_mantissa():
    check_rule(np.ldexp, ANY((3, 4)), np.array([1, -2, 0, 3]))


def test_power_with_constant_exponents():
    x = ANY((3, 4))
    check_rule(np.power, x, 2, argnums=0)
    check_rule(np.power, x, 3.0, argnums=0)
    check_rule(np.power, POS((3, 4)), 0.5, argnums=0)
    check_rule(np.power, 2.0, ANY((4,)), argnums=1)
    check_rule(np.power, 1.5, 2.0)


def test_power_exact_values_at_zero():
    g = np.ones(3)
    x = np.array([0.0, -1.0, 2.0])
    gx, gy = ew.d_power(g, x**2, x, 2)
    assert np.array_equal(gx, [0.0, -2.0, 4.0])
    assert np.all(np.isfinite(gy)) and gy[0] == 0 and gy[1] == 0
    gx0, _ = ew.d_power(g, x**0, x, 0)
    assert np.array_equal(gx0, [0.0, 0.0, 0.0])


def test_maximum_minimum_ties_split_equally():
    x, y = np.array([1.0, 2.0, 3.0]), np.array([1.0, 5.0, 0.0])
    g = np.array([2.0, 2.0, 2.0])
    for fn in (np.maximum, np.fmax):
        gx, gy = lookup(fn).adjoint(g, fn(x, y), x, y)
        assert np.array_equal(gx, [1.0, 0.0, 2.0]) and np.array_equal(
            gy, [1.0, 2.0, 0.0]
        )
    for fn in (np.minimum, np.fmin):
        gx, gy = lookup(fn).adjoint(g, fn(x, y), x, y)
        assert np.array_equal(gx, [1.0, 2.0, 0.0]) and np.array_equal(
            gy, [1.0, 0.0, 2.0]
        )


def test_fmax_fmin_ignore_nan():
    x, y = np.array([np.nan, 1.0]), np.array([3.0, np.nan])
    for fn in (np.fmax, np.fmin):
        gx, gy = lookup(fn).adjoint(np.ones(2), fn(x, y), x, y)
        assert np.array_equal(gx, [0.0, 1.0]) and np.array_equal(gy, [1.0, 0.0])


def test_where_condition_gets_nothing():
    cond = np.array([[True, False, True, False]] * 3)
    check_rule(np.where, cond, ANY((3, 4)), ANY((4,)))
    check_rule(np.where, cond, ANY((3, 4)), 0.0, argnums=1)
    assert ew.d_where(np.ones(2), None, np.array([True, False]), 1.0, 2.0)[0] is None


def test_clip_bounds_and_method_form():
    x = np.array([[-1.0, -0.2, 0.3, 0.9], [0.1, -0.7, 0.65, -0.05]])
    check_rule(np.clip, x, -0.5, 0.5)
    check_rule(np.clip, x, ANY((4,)) - 3, 0.5)
    check_rule(np.clip, x, np.full(4, -0.6), np.array([0.2, 0.2, 0.7, 0.2]))
    check_rule("clip", x, -0.5, 0.5)
    check_rule(np.clip, x, None, 0.5, argnums=0)
    g = np.ones_like(x)
    gx, gmin, gmax = ew.d_clip(g, np.clip(x, -0.5, 0.5), x, -0.5, 0.5)
    assert np.array_equal(gx, (np.abs(x) <= 0.5).astype(float))
    assert unbroadcast(gmin, -0.5) == 2 and unbroadcast(gmax, 0.5) == 2


def test_method_forms():
    x = ANY((3, 4))
    check_rule("conj", x)
    check_rule("conjugate", x)
    check_nondifferentiable("round", x + 0.05)
    check_nondifferentiable("round", x, 2)


def test_stability_at_extremes():
    big = np.array([1000.0, 1000.0])
    gx, gy = ew.d_logaddexp(np.ones(2), np.logaddexp(big, big), big, big)
    assert np.allclose(gx, 0.5) and np.allclose(gy, 0.5)
    gx, gy = ew.d_logaddexp2(np.ones(2), np.logaddexp2(-big, -big), -big, -big)
    assert np.allclose(gx, 0.5) and np.allclose(gy, 0.5)
    tiny = np.array([1e-12, -1e-12, 0.0])
    (g,) = ew.d_log1p(np.ones(3), np.log1p(tiny), tiny)
    assert np.allclose(g, 1.0)
    (g,) = ew.d_expm1(np.ones(3), np.expm1(tiny), tiny)
    assert np.allclose(g, 1.0)


def test_values_at_kinks_are_finite():
    zero = np.zeros(3)
    assert np.array_equal(ew.d_sinc(np.ones(3), np.sinc(zero), zero)[0], zero)
    assert np.array_equal(ew.d_absolute(np.ones(3), zero, zero)[0], zero)
    gx, gy = ew.d_hypot(np.ones(3), np.hypot(zero, zero), zero, zero)
    assert np.array_equal(gx, zero) and np.array_equal(gy, zero)
    x = np.array([np.nan, np.inf, 1.0])
    assert np.array_equal(
        ew.d_nan_to_num(np.ones(3), np.nan_to_num(x), x)[0], [0, 0, 1]
    )


def test_binary_rules_keep_float32():
    x = np.ones((2, 3), np.float32)
    for fn, _, _ in BINARY:
        rule = lookup(fn)
        cts = rule.adjoint(x, fn(x, x), x, x)
        for c in cts:
            if c is not None:
                assert unbroadcast(c, x).dtype == np.float32, fn


FLOAT_ARGS = {
    1: lambda: (np.array([0.3, -1.4, 2.6]),),
    2: lambda: (np.array([0.3, -1.4, 2.6]), np.array([1.1, -1.2, 2.1])),
}
INT_FUNCS = {np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert, np.left_shift,
             np.right_shift, np.gcd, np.lcm}  # fmt: skip
UNARY_ZERO = {np.sign, np.floor, np.ceil, np.rint, np.trunc, np.fix, np.round, np.around,
              np.spacing, np.signbit, np.logical_not, np.isnan, np.isinf, np.isfinite,
              np.isneginf, np.isposinf, np.iscomplex, np.isreal, np.invert,
              np.imag, np.int8, np.int16, np.int32, np.int64, np.intp, np.uint8,
              np.uint16, np.uint32, np.uint64, np.bool_,
              np.linalg.matrix_rank}  # fmt: skip


@pytest.mark.parametrize("fn", ew.NONDIFFERENTIABLE, ids=lambda f: f.__name__)
def test_zero_gradient_functions(fn):
    arity = 1 if fn in UNARY_ZERO else 2
    if fn in INT_FUNCS:
        args = (np.array([3, 4, 6]),) * arity
    else:
        args = FLOAT_ARGS[arity]()
    if fn is np.spacing:  # not constant, but its derivative is zero almost everywhere
        assert not lookup(fn).differentiable
        return
    check_nondifferentiable(fn, *args)


def test_every_rule_is_tested(family_coverage):
    tested = {fn for fn, _ in UNARY} | {fn for fn, _, _ in BINARY}
    tested |= {np.remainder, np.fmod, np.ldexp, np.where, np.clip}
    tested |= set(ew.NONDIFFERENTIABLE)
    family_coverage("elementwise", tested)


# ------------------------------------------- maximum/minimum: ties, partial rules


def _max_min_cases():
    rng = np.random.default_rng(3)
    tied = np.array([[0.0, 1.5, -2.0], [0.0, 0.25, 0.0]])
    yield tied, 0.0  # a ReLU with exact zeros
    yield tied, tied[1]  # broadcasting, ties in both rows
    yield rng.normal(size=(4, 1)), rng.normal(size=(3,))  # no ties, both broadcast
    yield np.array([1.0, 2.0, 3.0]), np.array([1.0, 5.0, 0.0])
    yield 2.0, np.array([2.0, 1.0, 3.0])  # a float operand


def _expected(g, x, y, wins):
    """The tie convention spelled out: g where x wins, g / 2 on ties."""
    gb = np.broadcast_to(g, np.broadcast_shapes(np.shape(g), np.shape(x), np.shape(y)))
    share = np.where(wins(x, y), gb, 0.0) + np.where(np.equal(x, y), gb / 2, 0.0)
    return unbroadcast(share, x)


@pytest.mark.parametrize("fn,wins", [(np.maximum, np.greater), (np.minimum, np.less)])
def test_maximum_minimum_partial_rules_exact_at_ties(fn, wins):
    """The full rule (unbroadcast by the compiler) and both partial rules, plain
    and into buffers, give exactly the tie-splitting shares."""
    lhs = registry.lookup_partial(fn, 0).adjoint
    rhs = registry.lookup_partial(fn, 1).adjoint
    for x, y in _max_min_cases():
        ans = fn(x, y)
        g = np.arange(1.0, np.size(ans) + 1).reshape(np.shape(ans))
        want = (_expected(g, x, y, wins), _expected(g, y, x, wins))
        full = lookup(fn).adjoint(g, ans, x, y)
        got = [unbroadcast(full[0], x), unbroadcast(full[1], y)]
        got += [lhs(g, ans, x, y)[0], rhs(g, ans, x, y)[0]]
        for i, operand in ((0, x), (1, y)):
            buf = np.full(np.shape(operand), np.nan) if np.ndim(operand) else None
            rule = lhs if i == 0 else rhs
            ct = rule(g, ans, x, y, into=(buf,))[0]
            if buf is not None:
                assert ct is buf, "the buffer was not used"
            got.append(ct)
        for k, ct in enumerate(got):
            assert np.shape(ct) == np.shape(want[k % 2])
            np.testing.assert_array_equal(ct, want[k % 2])


@pytest.mark.parametrize("fn", [np.maximum, np.minimum])
@pytest.mark.parametrize("sx,sy", [((3, 4), ()), ((3, 1), (4,)), ((4,), (2, 4))])
def test_maximum_minimum_broadcasting_finite_differences(fn, sx, sy):
    rng = np.random.default_rng(7)
    check_rule(fn, rng.normal(size=sx), rng.normal(size=sy))


def test_relu_buffer_float32_no_ties_and_ties():
    """float32 ReLU into a buffer: exact products, ties half, g's dtype kept."""
    x = np.array([[-1.0, 0.0, 2.0]], dtype=np.float32)
    g = np.array([[4.0, 4.0, 4.0]], dtype=np.float32)
    buf = np.empty_like(x)
    rule = registry.lookup_partial(np.maximum, 0).adjoint
    ct = rule(g, np.maximum(x, 0.0), x, 0.0, into=(buf,))[0]
    assert ct is buf and ct.dtype == np.float32
    np.testing.assert_array_equal(ct, [[0.0, 2.0, 4.0]])
    ct = rule(g, np.maximum(x + 5, 0.0), x + 5, 0.0, into=(buf,))[0]
    np.testing.assert_array_equal(ct, g)
