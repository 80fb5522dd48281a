"""Rules for np.convolve, np.correlate, np.polyval and np.trapezoid."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import sequences
from s2sad.testing import check_rule

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


def test_every_rule_is_tested(family_coverage):
    tested = {np.convolve, np.correlate, np.polyval, np.trapezoid}
    family_coverage("sequences", tested)
