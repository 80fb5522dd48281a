"""Rules for np.convolve, np.correlate, np.polyval and np.trapezoid."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.runtime import sequences
from s2sad.testing import check_rule
from tests.runtime.through import check_through
from tests.test_forward_rules import check_jvp

RNG = np.random.default_rng(21)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


@pytest.mark.parametrize("n, m", [(5, 3), (3, 5), (4, 4), (6, 1), (1, 4), (2, 7)])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_and_correlate_in_each_mode_and_length(n, m, mode):
    # NumPy swaps the operands when the second is longer; "same" of a
    # correlation is then no slice of the reversed convolution
    check_rule(np.convolve, rand(n), rand(m), mode)
    check_rule(np.correlate, rand(n), rand(m), kwargs={"mode": mode})


def test_polyval():
    check_rule(np.polyval, rand(4), rand(3, 2))
    check_rule(np.polyval, rand(1), rand(3))  # a constant polynomial
    check_rule(np.polyval, rand(3), 0.7)


def test_trapezoid():
    check_rule(np.trapezoid, rand(6))
    check_rule(np.trapezoid, rand(3, 5), np.sort(rand(5)))  # in y and in x
    check_rule(np.trapezoid, rand(4, 3), None, 0.3, 0)  # in y and in dx
    check_rule(np.trapezoid, rand(5), kwargs={"dx": 0.25})
    check_rule(np.trapezoid, rand(1))  # one sample: zero


def test_what_has_no_rule_is_loud():
    with pytest.raises(NotImplementedError, match="real 1-d"):
        sequences.d_convolve(np.ones(3), None, np.ones((2, 2)), np.ones(2))
    with pytest.raises(NotImplementedError, match="real 1-d"):
        sequences.d_correlate(np.ones(3), None, np.ones(2) * 1j, np.ones(2))
    with pytest.raises(NotImplementedError, match="1-d coefficients"):
        sequences.d_polyval(np.ones(2), None, np.ones((2, 2)), np.ones(2))


BREAKS = np.array([-1.5, -0.4, 0.3, 0.35, 1.2, 2.0])  # one short segment


@pytest.mark.parametrize("x", [rand(9) * 2.0, rand(2, 5) * 2.0, 0.37, np.array(1.1)],
                         ids=["vector", "matrix", "number", "0-d"])  # fmt: skip
def test_interp_in_x_breakpoints_fp_and_the_ends(x):
    # entries below, inside and above the breakpoints (away from them)
    fp = rand(6)
    check_rule(np.interp, x, BREAKS, fp)
    check_rule(np.interp, x, BREAKS, fp, -4.0, 5.0)  # left and right too
    check_jvp(np.interp, x, BREAKS, fp)
    check_jvp(np.interp, x, BREAKS, fp, -4.0, 5.0)


def test_interp_at_the_breakpoints_follows_numpys_segment():
    # on a breakpoint NumPy takes the segment to its right (the last one on
    # the last breakpoint): x's cotangent is that segment's slope
    xp, fp = np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0, 3.0])
    g_x, _, g_fp, _, _ = sequences.d_interp(
        np.ones(4), None, np.array([0.0, 1.0, 3.0, 4.0]), xp, fp
    )
    assert np.array_equal(g_x, [2.0, 0.5, 0.5, 0.0])
    assert np.array_equal(g_fp, [1.0, 1.0, 2.0])  # 4.0 is right of xp: fp[-1]
    g_x, _, g_fp, _, _ = sequences.d_interp(1.0, None, 2.0, np.array([2.0]), [5.0])
    assert g_x == 0.0 and np.array_equal(g_fp, [1.0])  # one breakpoint


def test_interp_refuses_period_and_complex_values():
    with pytest.raises(NotImplementedError, match="period="):
        sequences.d_interp(np.ones(2), None, np.ones(2), BREAKS, rand(6), period=2.0)
    with pytest.raises(NotImplementedError, match="real 1-d"):
        sequences.d_interp(np.ones(2), None, np.ones(2), BREAKS, rand(6) * 1j)
    with pytest.raises(NotImplementedError, match="xp is not increasing"):
        sequences.d_interp(np.ones(2), None, np.ones(2), BREAKS[::-1], rand(6))


def periodic(x, fp):
    return np.sum(np.interp(x, BREAKS, fp, period=4.0))


def test_interp_period_is_refused_at_the_users_line():
    with pytest.raises(NotImplementedError, match="no rule for period=") as info:
        s2sad.grad(periodic)(rand(3), rand(6))
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "test_sequences.py" in notes and "period=4.0" in notes


def lookup_table(x, fp):
    """A calibration curve read off a table, as published: np.interp of data."""
    return np.sum(np.interp(x, BREAKS, fp) ** 2 * np.cos(x))


def moving_breakpoints(x, xp, fp):
    return np.sum(np.interp(x, xp, fp, left=0.5, right=-0.5) ** 3)


def test_interp_through_grad_jvp_and_hvp():
    x, fp = rand(3, 4) * 2.0, rand(6)
    check_through(lookup_table, x, fp, argnums=(0, 1))
    xs, xp = rand(8) * 2.0, BREAKS + 0.01 * rand(6)
    check_through(moving_breakpoints, xs, xp, fp, argnums=(0, 1, 2))


def test_interp_hessian_of_the_rule_itself():
    """Forward over reverse: d_interp's JVP in g, x, xp and fp."""
    x, fp = rand(7) * 2.0, rand(6)
    ans = np.interp(x, BREAKS, fp)
    check_jvp(sequences.d_interp, rand(7), ans, x, BREAKS, fp, argnums=[0, 2, 3, 4])


def test_every_rule_is_tested(family_coverage):
    tested = {np.convolve, np.correlate, np.polyval, np.trapezoid, np.interp}
    family_coverage("sequences", tested)
