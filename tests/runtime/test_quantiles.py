"""Rules for np.quantile and np.percentile (method "linear", one q)."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import quantiles
from s2sad.testing import check_rule

RNG = np.random.default_rng(5)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


# q away from the kinks q * (n - 1) = integer, where d/dq jumps
@pytest.mark.parametrize(
    "shape, q, kwargs",
    [
        ((7,), 0.3, {}),
        ((4, 5), 0.7, {"axis": 1}),
        ((4, 5), 0.1, {"axis": 0, "keepdims": True}),
        ((3, 4, 5), 0.45, {"axis": (0, 2)}),
        ((2, 6), np.float64(0.35), {"axis": -1, "keepdims": True}),
    ],
)
def test_quantile_and_percentile_in_the_array_and_in_q(shape, q, kwargs):
    x = rand(*shape)
    check_rule(np.quantile, x, q, kwargs=kwargs)
    check_rule(np.percentile, x, 100.0 * q, kwargs=kwargs)


def test_the_ends_pick_one_order_statistic():
    x = rand(4, 5)
    for q in (0.0, 1.0, 0.5):  # (n - 1) * q integral: the array only
        check_rule(np.quantile, x, q, kwargs={"axis": 1}, argnums=(0,))
    ct, _ = quantiles.d_quantile(1.0, None, np.array([3.0, 1.0, 2.0]), 1.0)
    assert np.array_equal(ct, [1.0, 0.0, 0.0])


def test_other_methods_weights_and_arrays_of_q_are_loud():
    x = rand(6)
    with pytest.raises(NotImplementedError, match="method='linear'"):
        quantiles.d_quantile(1.0, None, x, 0.3, method="nearest")
    with pytest.raises(NotImplementedError, match="one q"):
        quantiles.d_percentile(np.ones(2), None, x, np.array([10.0, 90.0]))


def test_every_rule_is_tested(family_coverage):
    family_coverage("quantiles", {np.quantile, np.percentile})
