"""Scalar code (issue 16): Python numbers get plain arithmetic, ``math`` calls and
``grad``'s fast path, with the gradients and NumPy's edge values unchanged.

Every gradient here is checked against central finite differences in float64,
and every mapped math function at 0, inf, nan and outside its domain against
the general code on ``np.float64`` arguments (NumPy's own results).
"""

import math
import sys
import warnings

import numpy as np
import pytest

import s2sad
from s2sad import binding
from s2sad.runtime import scalar

W = np.array([0.5, -1.5, 2.0])


def fd(f, args, i, h=1e-6):
    """Central difference of ``f`` in argument ``i``."""
    lo, hi = list(args), list(args)
    lo[i] -= h
    hi[i] += h
    return (f(*hi) - f(*lo)) / (2 * h)


def check(f, *args, argnums=0, rtol=1e-6, atol=1e-8):
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    value, grads = s2sad.value_and_grad(f, argnums=nums)(*args)
    np.testing.assert_allclose(value, f(*args), rtol=1e-12)
    for g, i in zip(grads, nums):
        assert type(g) is float, (i, type(g))
        np.testing.assert_allclose(g, fd(f, args, i), rtol=rtol, atol=atol)
    return value, grads


# ---------------------------------------------------------------- programs


def sincos(x):
    a = np.sin(x)
    b = np.cos(a * x)
    return np.sin(b) * a + np.cos(x * b)


def recurrence(x):
    s = x
    for i in range(20):
        s = 0.9 * np.sin(s) + 0.1 * x
    return s


def branchy_loop(x, y, n):
    s = 0.5
    for i in range(n):
        if i % 2 == 0:
            s = s + np.sin(x * s + y)
        else:
            s = s * y - x / (1.0 + s * s)
    return s


def while_loop(x):
    s = x
    k = 0
    while s < 10.0:
        s = s * 1.5 + np.exp(-s)
        k += 1
    return s * k


def nested(x, y):
    t = 0.0
    for i in range(3):
        u = x
        for j in range(i + 1):
            u = np.tanh(u * y + j)
        t = t + u * u
    return t


def _inner(a, b):
    return a * np.cos(b) + np.log1p(a * a)


def calls_in_loop(x, y):
    s = y
    for i in range(4):
        s = _inner(s, x) + 0.1 * i
    return s


def powers(x, y):
    return x**2 + x**3.0 + np.sqrt(x) ** 5 + x**y + (x * y) ** 0.5


def with_global_array(x):
    return np.sum(W * x) + np.sin(x) * x + np.sum(np.exp(W * x))


def builtins_mix(x, y):
    return abs(x - y) + max(x, y) * min(x, 2.0) + float(x) * np.maximum(x, y)


def mixed_int(x, n, k):
    s = x * n
    for i in range(k):
        s = s / (1.0 + i) + n * np.exp(-s)
    return s


def returns_argument(x):
    return x


def unused_argument(x, y):
    return np.sin(y)


def log_loop(x, n):
    s = 1.0
    for i in range(n):
        s = s + np.log(x)
    return s


@pytest.mark.parametrize("x", [0.3, 0.7, -1.2, 2.5])
def test_straight_line_and_loop(x):
    check(sincos, x)
    check(recurrence, x)


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_branches_inside_loops(n):
    check(branchy_loop, 0.3, 0.8, n, argnums=(0, 1))


@pytest.mark.parametrize("x", [0.5, 2.0, 9.0])
def test_while_loop_with_int_counter(x):
    check(while_loop, x)


def test_nested_loops_and_calls():
    check(nested, 0.4, 0.9, argnums=(0, 1))
    check(calls_in_loop, 0.4, 0.7, argnums=(0, 1))


def test_powers_and_builtins():
    check(powers, 1.3, 0.7, argnums=(0, 1))
    check(builtins_mix, 1.3, 0.7, argnums=(0, 1))
    check(builtins_mix, 0.3, 1.7, argnums=(0, 1))


def test_float_with_a_global_array():
    for x in (0.3, -0.8):
        check(with_global_array, x)


def test_mixed_int_and_float_arguments():
    check(mixed_int, 0.7, 3, 4)
    check(mixed_int, 0.7, 3, 0)


def test_returned_and_unused_arguments():
    assert s2sad.value_and_grad(returns_argument)(2.5) == (2.5, 1.0)
    _, (gx, gy) = s2sad.value_and_grad(unused_argument, argnums=(0, 1))(1.0, 0.5)
    assert (gx, gy) == (0.0, math.cos(0.5)) and type(gx) is float


def test_loop_that_may_not_run_keeps_zero_gradients_exact():
    # log'(0) is inf: a contribution of 0 * inf would be nan; none is added
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert s2sad.grad(log_loop)(0.0, 0) == 0.0
    assert s2sad.grad(log_loop)(0.5, 3) == pytest.approx(6.0)


# ---------------------------------------------------------------- the emitted code


def test_scalar_code_is_plain_arithmetic_and_math():
    vg = s2sad.value_and_grad(sincos)
    vg(0.7)
    src = vg.source
    for helper in ("accumulate(", "unbroadcast(", "finalize(", "scalar."):
        assert helper not in src, helper
    assert "math.sin(x)" in src and "import math" in src


def test_loop_tapes_only_the_values_the_backward_reads():
    vg = s2sad.value_and_grad(recurrence)
    vg(0.4)
    src = vg.source
    assert src.count("tape.append(") == 1 and "tape.append(s)" in src
    assert "accumulate(" not in src and "unbroadcast(" not in src
    assert "is not None" not in src  # the loop head's states are known
    assert "g_x = g_x + " in src


def summed(x):
    return np.sum(np.sin(x) * x)


def test_arrays_keep_the_general_code():
    vg = s2sad.value_and_grad(summed)
    vg(np.ones(3))
    assert "math." not in vg.source and "np.sin(x)" in vg.source
    vg(0.5)
    assert "math.sin(x)" in vg.source


def test_numpy_scalars_get_code_of_their_own():
    assert binding.type_signature([0.5]) != binding.type_signature([np.float64(0.5)])
    assert binding.type_signature([0.5]) != binding.type_signature([None])
    assert binding.type_signature([np.float32(0.5)]).endswith(";scalar")
    vg = s2sad.value_and_grad(sincos)
    _, g1 = vg(0.7)
    _, g2 = vg(np.float32(0.7))
    assert type(g1) is float and g2.dtype == np.float32
    assert g2 == pytest.approx(g1, rel=1e-5)


# ---------------------------------------------------------------- edges: NumPy's answers


def np_sin(x):
    return np.sin(x) * 2.0


def np_cos(x):
    return np.cos(x) * 2.0


def np_tan(x):
    return np.tan(x) * 2.0


def np_tanh(x):
    return np.tanh(x) * 2.0


def np_sinh(x):
    return np.sinh(x) * 2.0


def np_cosh(x):
    return np.cosh(x) * 2.0


def np_exp(x):
    return np.exp(x) * 2.0


def np_expm1(x):
    return np.expm1(x) * 2.0


def np_log(x):
    return np.log(x) * 2.0


def np_log1p(x):
    return np.log1p(x) * 2.0


def np_log2(x):
    return np.log2(x) * 2.0


def np_log10(x):
    return np.log10(x) * 2.0


def np_sqrt(x):
    return np.sqrt(x) * 2.0


def np_arctan(x):
    return np.arctan(x) * 2.0


def np_arcsin(x):
    return np.arcsin(x) * 2.0


def np_arccos(x):
    return np.arccos(x) * 2.0


def np_arcsinh(x):
    return np.arcsinh(x) * 2.0


def np_arccosh(x):
    return np.arccosh(x) * 2.0


def np_arctanh(x):
    return np.arctanh(x) * 2.0


INSIDE = {"arccosh": 1.7, "arcsin": 0.3, "arccos": 0.3, "arctanh": 0.3}
EDGES = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 1000.0, -1000.0, np.inf, -np.inf, np.nan]


def same(a, b):
    """Equal, nan to nan, inf to inf (math and NumPy may differ in the last bit)."""
    if np.isnan(a) or np.isnan(b):
        return bool(np.isnan(a) and np.isnan(b))
    return a == b or abs(a - b) <= 4e-16 * abs(b)


@pytest.mark.parametrize("name", sorted(scalar.MATH_NAMES))
def test_every_math_function_against_finite_differences(name):
    f = getattr(sys.modules[__name__], f"np_{name}")
    vg = s2sad.value_and_grad(f)
    vg(INSIDE.get(name, 0.6))
    assert f"math.{scalar.MATH_NAMES[name]}(x)" in vg.source
    check(f, INSIDE.get(name, 0.6))


@pytest.mark.parametrize("name", sorted(scalar.MATH_NAMES))
def test_every_math_function_keeps_numpys_edge_values(name):
    f = getattr(sys.modules[__name__], f"np_{name}")
    fast = s2sad.value_and_grad(f)
    general = s2sad.value_and_grad(f)  # np.float64 arguments: NumPy's functions
    for x in EDGES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            value, g = fast(x)
            want_value, want_g = general(np.float64(x))
            again = fast(x)  # the fast path, once the types are known
            direct = f(np.float64(x))
        assert same(value, direct), (x, value)
        assert same(value, want_value) and same(g, want_g), (x, value, g, want_g)
        assert same(again[0], value) and same(again[1], g)
        assert type(g) is float


def test_numpy_warns_where_math_raises():
    fast = s2sad.value_and_grad(np_log)
    for _ in range(2):  # the slow path, then the fast one
        with pytest.warns(RuntimeWarning, match="divide by zero"):
            value, g = fast(0.0)
        assert value == -np.inf and g == np.inf


def test_the_users_own_math_errors_stay_theirs():
    with pytest.raises(ValueError, match="math domain error"):
        s2sad.grad(users_math)(-1.0)
    assert s2sad.grad(users_math)(4.0) == pytest.approx(0.25)


def users_math(x):
    return math.sqrt(x)


def raises_value_error(x):
    if x > 1.0:
        raise ValueError("x too large")
    return np.sin(x)


def test_other_value_errors_are_not_rerun():
    vg = s2sad.value_and_grad(raises_value_error)
    vg(0.5)
    vg(0.5)
    with pytest.raises(ValueError, match="x too large"):
        vg(2.0)


# ---------------------------------------------------------------- the fast path


def _helper(x):
    return np.sin(x)


def calls_helper(x):
    return _helper(x) * x


def test_fast_path_sees_a_rebound_global():
    global _helper
    g = s2sad.grad(calls_helper)
    first = g(0.5)
    assert g(0.5) == first  # the fast path
    assert g._hot
    old = _helper
    try:
        _helper = lambda_cos
        want = math.cos(0.5) - 0.5 * math.sin(0.5)
        assert g(0.5) == pytest.approx(want)
        assert g(0.5) == pytest.approx(want)
    finally:
        _helper = old
    assert g(0.5) == first


def lambda_cos(x):
    return np.cos(x)


def test_fast_path_keeps_the_checks_and_result_forms():
    g = s2sad.grad(mixed_int, argnums=(0,))
    assert g(0.7, 3, 2) == g(0.7, 3, 2)
    assert isinstance(g(0.7, 3, 2), tuple)
    with pytest.raises(s2sad.errors.NonDifferentiableArgumentError):
        s2sad.grad(sincos)(1)
    vg = s2sad.value_and_grad(sincos)
    assert vg(0.7) == vg(0.7) == vg(x=0.7)
    assert s2sad.grad(sincos)(0.7) == vg(0.7)[1]


# ---------------------------------------------------------------- control flow


def early_exit(x, y):
    s = x
    for i in range(6):
        if s > 3.0:
            return s * y
        s = s * 1.7 + np.sin(y)
    return s - y


def break_continue(x, y):
    s = 0.0
    k = 0
    while True:
        k += 1
        if k % 3 == 0:
            continue
        s = s + np.cos(s * x) * y
        if k > 7:
            break
    return s


def conditional_accumulation(x, y):
    t = x
    for i in range(5):
        if i > 2:
            t = t + y * np.exp(-t)
    return t * x


def reassigned_parameter(x, y):
    for i in range(3):
        x = np.sin(x) * y + x
    return x * y


@pytest.mark.parametrize("x", [0.4, 1.1, 2.9])
def test_early_return_break_and_continue(x):
    check(early_exit, x, 0.6, argnums=(0, 1))
    check(break_continue, x, 0.6, argnums=(0, 1))


def test_contributions_on_some_iterations_and_reassigned_parameters():
    check(conditional_accumulation, 0.4, 0.7, argnums=(0, 1))
    check(reassigned_parameter, 0.4, 0.7, argnums=(0, 1))
    check(reassigned_parameter, 0.4, 0.7, argnums=1)
