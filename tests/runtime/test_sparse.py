"""RowSparse cotangents behave like the dense arrays they stand for."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import support
from s2sad.runtime.sparse import RowSparse, coalesce

RNG = np.random.default_rng(3)


def make(rows, shape=(6, 2), dtype=np.float64):
    values = RNG.standard_normal((len(rows), *shape[1:])).astype(dtype)
    return RowSparse(np.array(rows), values, shape)


def test_to_dense_and_attributes():
    s = RowSparse([1, 4], [[1.0, 2.0], [3.0, 4.0]], (5, 2))
    np.testing.assert_array_equal(
        s.to_dense(), [[0, 0], [1, 2], [0, 0], [0, 0], [3, 4]]
    )
    assert (s.shape, s.ndim, s.size, s.dtype) == ((5, 2), 2, 10, np.float64)
    np.testing.assert_array_equal(np.asarray(s), s.to_dense())
    assert np.asarray(s, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError):
        np.array(s, copy=False)
    assert "2 of 5 rows" in repr(s)
    with pytest.raises(ValueError):
        RowSparse([1, 2], np.zeros((3, 2)), (5, 2))


def test_coalesce_sums_repeats_in_sorted_order():
    rows = np.array([[4, 1], [4, -1]])
    values = np.arange(8.0).reshape(2, 2, 2)
    s = coalesce(rows, values, (6, 2))
    np.testing.assert_array_equal(s.rows, [1, 4, 5])
    np.testing.assert_array_equal(s.values, [[2, 3], [0 + 4, 1 + 5], [6, 7]])
    expected = np.zeros((6, 2))
    np.add.at(expected, rows % 6, values)
    np.testing.assert_array_equal(s.to_dense(), expected)
    empty = coalesce(np.zeros((0,), int), np.zeros((0, 2)), (6, 2))
    assert empty.rows.size == 0
    np.testing.assert_array_equal(empty.to_dense(), np.zeros((6, 2)))
    vec = coalesce(np.array([2, 2, 0]), np.array([1.0, 2.0, 5.0]), (3,))
    np.testing.assert_array_equal(vec.to_dense(), [5.0, 0.0, 3.0])


def test_add_dense_either_order_gives_fresh_dense():
    s, d = make([0, 3]), RNG.standard_normal((6, 2))
    before = d.copy()
    for total in (s + d, d + s, np.add(d, s), support.add(d, s), support.add(s, d)):
        assert type(total) is np.ndarray
        np.testing.assert_allclose(total, before + s.to_dense(), rtol=1e-15)
    np.testing.assert_array_equal(d, before)  # never mutated


def test_add_sparse_stays_sparse():
    a, b = make([0, 3]), make([3, 5])
    total = a + b
    assert isinstance(total, RowSparse)
    np.testing.assert_array_equal(total.rows, [0, 3, 5])
    np.testing.assert_allclose(total.to_dense(), a.to_dense() + b.to_dense())
    assert isinstance(support.add(a, b), RowSparse)
    with pytest.raises(ValueError):
        a + make([1], shape=(7, 2))


def test_scalar_arithmetic_stays_sparse_and_keeps_dtype():
    s = make([2, 4], dtype=np.float32)
    dense = s.to_dense()
    for result, expected in [
        (s * 2.0, dense * 2),
        (3.0 * s, dense * 3),
        (s / 4.0, dense / 4),
        (-s, -dense),
        (np.float32(2) * s, dense * 2),
    ]:
        assert isinstance(result, RowSparse) and result.dtype == np.float32
        np.testing.assert_allclose(result.to_dense(), expected)


def test_other_operations_see_the_dense_array():
    s, d = make([1]), RNG.standard_normal((6, 2))
    np.testing.assert_allclose(s * d, s.to_dense() * d)
    np.testing.assert_allclose(s - d, s.to_dense() - d)
    np.testing.assert_allclose(d - s, d - s.to_dense())
    np.testing.assert_allclose(np.exp(s), np.exp(s.to_dense()))
    assert np.sum(s) == pytest.approx(s.values.sum())
    np.testing.assert_allclose(s + np.ones(2), s.to_dense() + 1)  # broadcasting


def test_support_helpers_pass_it_through_and_densify_at_the_end():
    table = np.zeros((6, 2), dtype=np.float32)
    s = make([1, 2], dtype=np.float32)
    assert support.unbroadcast(s, table) is s
    final = support.finalize(s, table)
    assert type(final) is np.ndarray and final.dtype == np.float32
    np.testing.assert_array_equal(final, s.to_dense())


@pytest.mark.parametrize("high", [3, 50, 10_000])
def test_coalesce_matches_add_at_on_random_rows(high):
    rows = RNG.integers(0, high, (7, 9))
    values = RNG.standard_normal((7, 9, 2, 3))
    s = coalesce(rows, values, (high, 2, 3))
    assert np.all(np.diff(s.rows) > 0)
    np.testing.assert_array_equal(s.rows, np.unique(rows))
    expected = np.zeros((high, 2, 3))
    np.add.at(expected, rows, values)
    np.testing.assert_allclose(s.to_dense(), expected, rtol=1e-13, atol=1e-15)
