"""Reduction rules against finite differences, plus exact tie conventions."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import reductions as red
from s2sad.runtime.extrema import max_along, min_along
from s2sad.testing import check_nondifferentiable, check_rule

RNG = np.random.default_rng(7)


def distinct(*shape: int) -> np.ndarray:
    """Values far apart from each other (no ties, no kinks in max/sort/median)."""
    n = int(np.prod(shape))
    return (RNG.permutation(n) * 0.37 - 0.5 * n * 0.37 + 0.05).reshape(shape)


AXES = [
    ({}, (2, 3, 4)), ({"axis": 1}, (2, 3, 4)), ({"axis": -1}, (2, 3, 4)),
    ({"axis": (0, 2)}, (2, 3, 4)), ({"axis": (-1, 0)}, (2, 3, 4)),
    ({"axis": 1, "keepdims": True}, (2, 3, 4)), ({"keepdims": True}, (2, 3, 4)),
    ({"axis": (0, 2), "keepdims": True}, (2, 3, 4)), ({}, (5,)), ({"axis": 0}, (5,)),
    ({}, ()),
]  # fmt: skip
AXIS_FUNCS = [np.sum, np.mean, np.max, np.min, np.amax, np.amin, np.nansum,
              np.nanmean, np.nanmax, np.nanmin, np.prod, np.ptp,
              red.logsumexp, max_along, min_along]  # fmt: skip


@pytest.mark.parametrize("kwargs,shape", AXES, ids=str)
@pytest.mark.parametrize("fn", AXIS_FUNCS, ids=lambda f: f.__name__)
def test_axis_reductions(fn, kwargs, shape):
    if fn is np.ptp and shape == ():
        return
    check_rule(fn, distinct(*shape), kwargs=kwargs)


@pytest.mark.parametrize("fn", AXIS_FUNCS, ids=lambda f: f.__name__)
def test_float32_cotangents(fn):
    check_rule(fn, distinct(3, 4).astype(np.float32), kwargs={"axis": 0})


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod"])
def test_method_forms(name):
    x = distinct(3, 4)
    check_rule(name, x)
    check_rule(name, x, 1)
    check_rule(name, x, kwargs={"axis": (0, 1), "keepdims": True})


@pytest.mark.parametrize(
    "name", ["argmax", "argmin", "argsort", "any", "all", "nonzero"]
)
def test_zero_gradient_method_forms(name):
    check_nondifferentiable(name, distinct(3, 4))
    check_nondifferentiable(
        name, distinct(3, 4), kwargs={} if name == "nonzero" else {"axis": 0}
    )


def test_positional_arguments_like_the_method_form():
    x = distinct(3, 4)
    check_rule(np.sum, x, 0)
    check_rule(np.mean, x, -1, None, None, True)
    check_rule(np.max, x, 1, None, True)


def test_sum_and_mean_of_a_list_give_a_list():
    xs = [distinct(3), distinct(3)]
    check_rule(np.sum, xs, kwargs={"axis": 0})
    check_rule(np.mean, xs)
    check_rule(np.max, [1.5, 3.0, -2.0])


def test_where_masks():
    mask = np.array([[True, False, True, True]] * 3)
    check_rule(np.sum, distinct(3, 4), kwargs={"where": mask, "axis": 1})
    check_rule(np.mean, distinct(3, 4), kwargs={"where": mask, "axis": 1})
    check_rule(np.mean, distinct(3, 4), kwargs={"where": mask[0]})
    check_rule(
        np.max, distinct(3, 4), kwargs={"where": mask, "axis": 1, "initial": -9.0}
    )
    for fn in (red.d_nansum, red.d_nanmean):
        with pytest.raises(NotImplementedError):
            fn(np.ones(3), np.ones(3), distinct(3, 4), 1, where=mask)


def test_max_ties_split_equally():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    (g,) = red.d_max(np.array([6.0, 3.0]), np.max(x, axis=1), x, 1)
    assert np.array_equal(g, [[0.0, 3.0, 3.0], [1.0, 1.0, 1.0]])
    x = np.array([[1.0, 3.0, 3.0], [1.0, 1.0, 2.0]])
    (g,) = red.d_max(np.float64(1.0), np.min(x), x)
    assert np.array_equal(g, [[1 / 3, 0.0, 0.0], [1 / 3, 1 / 3, 0.0]])


def test_max_with_initial_that_wins():
    x = np.array([1.0, 2.0])
    g = red.d_max(np.float64(1.0), np.max(x, initial=5.0), x, initial=5.0)[0]
    assert np.array_equal(g, [0.0, 0.0])


def test_prod_is_exact_with_zeros():
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 4.0], [1.0, 2.0, 3.0]])
    (g,) = red.d_prod(np.ones(3), np.prod(x, axis=1), x, 1)
    assert np.array_equal(g, [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [6.0, 3.0, 2.0]])
    check_rule(np.prod, x, kwargs={"axis": 0})
    check_rule(np.prod, x)
    check_rule(np.prod, distinct(3), kwargs={"initial": 2.5})


def test_nan_reductions_skip_nans():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, 2.0, 4.0]])
    (g,) = red.d_nansum(np.ones(2), np.nansum(x, axis=1), x, 1)
    assert np.array_equal(g, [[1, 0, 1], [0, 1, 1]])
    (g,) = red.d_nanmean(np.ones(2), np.nanmean(x, axis=1), x, 1)
    assert np.array_equal(g, [[0.5, 0, 0.5], [0, 0.5, 0.5]])
    (g,) = red.d_max(np.ones(2), np.nanmax(x, axis=1), x, 1)
    assert np.array_equal(g, [[0, 0, 1], [0, 0, 1]])


def test_logsumexp_is_stable():
    x = np.array([1000.0, 1000.0, -np.inf])
    assert np.isclose(red.logsumexp(x), 1000.0 + np.log(2.0))
    (g,) = red.d_logsumexp(np.float64(1.0), red.logsumexp(x), x)
    assert np.allclose(g, [0.5, 0.5, 0.0])


NONDIFF_ARGS = {
    np.searchsorted: (np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.5])),
    np.digitize: (np.array([0.3, 1.7]), np.array([0.0, 1.0, 2.0])),
    np.lexsort: (np.array([[0.3, 1.7, 0.9]]),),
    np.argpartition: (np.array([0.3, 1.7, 0.9]), 1),
}


@pytest.mark.parametrize("fn", red.NONDIFFERENTIABLE, ids=lambda f: f.__name__)
def test_zero_gradient_functions(fn):
    args = NONDIFF_ARGS.get(fn, (np.array([[0.3, 1.7, 0.9], [2.2, -0.4, 1.1]]),))
    check_nondifferentiable(fn, *args)


def test_every_rule_is_tested(family_coverage):
    tested = set(AXIS_FUNCS) | set(red.NONDIFFERENTIABLE)
    family_coverage("reductions", tested)
