"""NaN-safe masked branches (issue 13, item 9).

``np.where(x > 0, np.sqrt(x), 0.0)`` at ``x = 0``: the where rule gives the sqrt
branch an exact zero cotangent, which the sqrt rule used to turn into
``0 * inf = nan``.  A cotangent that a mask (where, maximum, minimum, clip, a
boolean multiply) makes zero now stays exactly zero through the rules behind
it.  Exact values at the masked points, central differences elsewhere.
"""

import ast
import math

import numpy as np
import pytest

import s2sad
from s2sad.transforms.reverse import masks
from tests.corpus.fd import numerical_grad


def where_sqrt(x):
    return np.sum(np.where(x > 0, np.sqrt(x), 0.0))


def where_log(x):
    return np.sum(np.where(x > 0, np.log(x), 0.0))


def where_log_else_x(x):
    return np.sum(np.where(x > 0, np.log(x), x))


def where_reciprocal(x):
    return np.sum(np.where(x != 0, 1.0 / x, 0.0))


def where_divide(x, y):
    return np.sum(np.where(y != 0, x / y, 0.0))


def where_sqrt_power(x):
    return np.sum(np.where(x > 0, x**0.5, 0.0))


def where_negative_power(x):
    return np.sum(np.where(x > 0, x**-1.5, 0.0))


def where_arcsin(x):
    return np.sum(np.where(np.abs(x) < 1, np.arcsin(x), 0.0))


def where_xlogx(x):
    return np.sum(np.where(x > 0, x * np.log(x), 0.0))


def where_exp_overflow(x):
    return np.sum(np.where(x < 100, np.exp(x), 0.0))


def where_log1p_log10(x):
    return np.sum(np.where(x > 0, np.log1p(x - 1.0) + np.log10(x), 0.0))


def maximum_log(x):
    return np.sum(np.maximum(np.log(x), -10.0))


def minimum_sqrt(x):
    return np.sum(np.minimum(-np.sqrt(x), -0.5))


def clip_log(x):
    return np.sum(np.clip(np.log(x), -5.0, 5.0))


def clip_method_log(x):
    return np.sum(np.log(x).clip(-5.0))


def mask_multiply_sqrt(x):
    return np.sum(np.sqrt(x) * (x > 0))


def mask_astype_sqrt(x):
    m = (x > 0).astype(float)
    return np.sum(m * np.sqrt(x))


def where_in_loop(x):
    s = 0.0
    for i in range(3):
        s = s + np.sum(np.where(x > 0, np.sqrt(x) * (i + 1), 0.0))
    return s


def helper_where(x):
    return np.where(x > 0, np.log(x), 0.0)


def calls_helper(x):
    return np.sum(helper_where(x) * 2.0)


def two_sqrt(x):  # a masked and an unmasked use: the true derivative is inf
    h = np.sqrt(x)
    return np.sum(np.where(x > 0, h, 0.0) + h)


# (function, point with masked entries, exact gradient there)
EXACT = [
    (where_sqrt, [0.0, 4.0], [0.0, 0.25]),
    (where_log, [0.0, 2.0], [0.0, 0.5]),
    (where_log_else_x, [0.0, 2.0], [1.0, 0.5]),
    (where_reciprocal, [0.0, 2.0], [0.0, -0.25]),
    (where_sqrt_power, [0.0, 4.0], [0.0, 0.25]),
    (where_negative_power, [0.0, 1.0], [0.0, -1.5]),
    (where_arcsin, [1.0, 0.5, 2.0, -1.0], [0.0, 1 / math.sqrt(0.75), 0.0, 0.0]),
    (where_xlogx, [0.0, math.e], [0.0, 2.0]),
    (where_exp_overflow, [1000.0, 1.0], [0.0, math.e]),
    (where_log1p_log10, [0.0, 2.0], [0.0, 0.5 + 1 / (2 * math.log(10))]),
    (maximum_log, [0.0, 2.0], [0.0, 0.5]),
    (minimum_sqrt, [0.0, 4.0], [0.0, -0.25]),
    (clip_log, [0.0, 2.0], [0.0, 0.5]),
    (clip_method_log, [0.0, 2.0], [0.0, 0.5]),
    (mask_multiply_sqrt, [0.0, 4.0], [0.0, 0.25]),
    (mask_astype_sqrt, [0.0, 4.0], [0.0, 0.25]),
    (where_in_loop, [0.0, 4.0], [0.0, 1.5]),
    (calls_helper, [0.0, 2.0], [0.0, 1.0]),
]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f, x, expected", EXACT, ids=[c[0].__name__ for c in EXACT])
def test_masked_points_get_exact_zero(f, x, expected, optimize):
    x = np.array(x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        g = s2sad.grad(f, optimize=optimize)(x)
    np.testing.assert_allclose(g, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("f, x, expected", EXACT, ids=[c[0].__name__ for c in EXACT])
def test_finite_differences_away_from_the_masked_points(f, x, expected):
    # masks active (5e-3 is clipped by clip_log, 1.3 and 2.0 outside arcsin's
    # branch), but no point within finite-difference reach of a kink
    x = np.array([5e-3, 0.3, 0.7, 1.3, 2.0])
    with np.errstate(invalid="ignore"):
        g = s2sad.grad(f)(x)
        expected = numerical_grad(f, [x], 0)
    np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8)


def test_divide_masked_by_the_denominator():
    x, y = np.array([3.0, 2.0]), np.array([0.0, 4.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        gx, gy = s2sad.grad(where_divide, argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx, [0.0, 0.25])
    np.testing.assert_array_equal(gy, [0.0, -2.0 / 16.0])


def test_no_floating_point_warning_in_the_backward_sweep():
    # sqrt(0) is fine going forward; the backward sweep must not compute 0 * inf
    with np.errstate(all="raise"):
        g = s2sad.grad(where_sqrt)(np.array([0.0, 4.0]))
    np.testing.assert_array_equal(g, [0.0, 0.25])


def test_float32_stays_float32():
    g = s2sad.grad(where_sqrt)(np.array([0.0, 4.0], dtype=np.float32))
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, np.array([0.0, 0.25], dtype=np.float32))


def test_an_unmasked_use_still_sees_the_infinite_derivative():
    with np.errstate(divide="ignore"):
        g = s2sad.grad(two_sqrt)(np.array([0.0, 4.0]))
    assert g[0] == np.inf  # never a silent 0 where the cotangent is not zero
    assert g[1] == 0.5


def test_the_masked_form_is_emitted_only_behind_a_mask():
    def plain(x):
        return np.sum(np.sqrt(x))

    gp, gm = s2sad.grad(plain), s2sad.grad(where_sqrt)
    gp(np.ones(3)), gm(np.ones(3))
    assert "== 0" not in gp.source
    assert "np.where(g_sqrt == 0, 1.0, sqrt)" in gm.source


def test_masked_names_analysis():
    # a boolean multiply masks both operands, and the fact flows on to x
    tree = ast.parse(
        "def f(x):\n"
        "    m = (x > 0)\n"
        "    h = np.sqrt(x)\n"
        "    k = h * m\n"
        "    u = np.log(x)\n"
        "    out = np.sum(k + u)\n"
        "    return out\n"
    )
    assert masks.masked_names(tree.body[0]) - {"np"} == {"h", "m", "x"}


def test_forward_mode_selects_the_finite_tangent():
    # jvp pushes tangents forward: where picks the selected branch's tangent, so
    # the unselected branch's inf never reaches the result
    with np.errstate(divide="ignore", invalid="ignore"):
        _, t = s2sad.jvp(where_sqrt)(np.array([0.0, 4.0]), np.array([1.0, 1.0]))
    assert t == 0.25


def test_hessian_vector_product_through_the_masked_forms():
    # forward over reverse differentiates the emitted masked forms like any code
    x, v = np.array([-1.0, 0.5, 4.0]), np.ones(3)
    with np.errstate(invalid="ignore"):
        hv = s2sad.hvp(where_sqrt)(x, v)
    np.testing.assert_allclose(hv, [0.0, -0.25 * 0.5**-1.5, -0.25 * 4.0**-1.5])
    with np.errstate(divide="ignore", invalid="ignore"):
        hv = s2sad.hvp(where_xlogx)(np.array([0.0, 2.0]), np.ones(2))
    np.testing.assert_allclose(hv, [0.0, 0.5])
