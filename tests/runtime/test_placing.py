"""Rules for np.insert and np.partition, against finite differences (the
rules, and through grad, jvp and hvp)."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import placing
from s2sad.testing import check_rule
from tests.runtime.through import check_through
from tests.test_forward_rules import check_jvp

RNG = np.random.default_rng(43)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


def distinct(*shape: int) -> np.ndarray:
    """Entries far apart (no ties: a permutation's derivative is defined)."""
    n = int(np.prod(shape))
    return (RNG.permutation(n) * 0.37 + 0.1).reshape(shape)


def both(fn, *args, **kwargs):
    check_rule(fn, *args, kwargs=kwargs)
    check_jvp(fn, *args, **kwargs)


INSERTS = [
    ((5,), 1, (), None), ((5,), -1, (), None),  # a negative index: before the last
    ((5,), [0, 2, 2, -1], (4,), None), ((5,), [1, 3], (), None),  # one value twice
    ((5,), slice(1, 4), (3,), None), ((3, 4), [2, 5], (2,), None),  # flattened
    ((3, 4), 1, (3,), 1), ((3, 4), [1, 3], (3, 1), 1), ((3, 4), -2, (4,), 0),
    ((3, 4), slice(None, None, 2), (4,), 0), ((2, 3), 1, (2, 1), 1),
    ((2, 3), 1, (1, 3), 0), ((2, 3), 3, (3, 1), 1),  # scalar obj, two columns
    ((2, 3, 2), [0, -1], (2, 1, 2), 1),
]  # fmt: skip


@pytest.mark.parametrize("sa, obj, sv, axis", INSERTS, ids=str)
def test_insert_in_the_array_and_the_values(sa, obj, sv, axis):
    kwargs = {} if axis is None else {"axis": axis}
    values = rand(*sv) if sv else float(rand())
    both(np.insert, rand(*sa), obj, values, **kwargs)


def test_insert_with_negative_indices_follows_numpy():
    # -1 inserts before the last entry; a value broadcast to two places gets
    # both places' cotangents
    g = np.arange(1.0, 8.0)
    g_arr, _, g_v = placing.d_insert(g, None, np.zeros(5), [-1, 0], np.zeros(2))
    assert np.array_equal(np.insert(np.zeros(5), [-1, 0], [7.0, 9.0]),
                          [9.0, 0, 0, 0, 0, 7.0, 0])  # fmt: skip
    assert np.array_equal(g_v, [6.0, 1.0])
    assert np.array_equal(g_arr, [2.0, 3.0, 4.0, 5.0, 7.0])
    _, _, g_one = placing.d_insert(g[:7], None, np.zeros(5), [1, 3], 0.5)
    assert g_one == 2.0 + 5.0 and isinstance(g_one, float)


PARTITIONS = [((7,), 3, -1), ((7,), [1, 4], -1), ((3, 6), 2, 1), ((5, 3), [0, 4], 0),
              ((3, 4), 5, None), ((2, 3, 4), -1, 1)]  # fmt: skip


@pytest.mark.parametrize("shape, kth, axis", PARTITIONS, ids=str)
def test_partition(shape, kth, axis):
    both(np.partition, distinct(*shape), kth, axis)


def test_partition_where_argpartition_arranges_the_slice_differently():
    # long enough that NumPy's argpartition and partition place the entries
    # of a partition differently: the permutation comes from the values then
    a = np.random.default_rng(0).normal(size=300)
    assert not np.array_equal(a[np.argpartition(a, 200)], np.partition(a, 200))
    both(np.partition, a, 200)
    both(np.partition, np.stack([a, -a]), 100, 1)


def test_partition_with_ties_gives_each_entry_one_cotangent():
    a = np.array([1.0, 2.0, 2.0, 1.0, 3.0, 1.0, np.nan])
    ans = np.partition(a, 2)
    ct = placing.d_partition(np.arange(7.0), ans, a, 2)[0]
    assert sorted(ct) == list(range(7))  # a permutation of g
    assert ct[6] == 6.0  # NaN sorts last
    with pytest.raises(NotImplementedError, match="order="):
        placing.d_partition(np.ones(3), None, np.ones(3), 1, order="x")


def insert_and_weigh(a, v):
    b = np.insert(a, [1, -1], v, axis=1)
    return np.sum(np.sin(b) * np.arange(b.shape[1]))


def insert_flat(a, v):
    return np.sum(np.insert(a, 2, v) ** 3)


def smallest_two(a, w):
    """The partial sort of a published top-k: the two smallest, weighted."""
    low = np.partition(a * w, 1, axis=-1)[..., :2]
    return np.sum(low**2 * np.array([1.0, 0.5]))


def test_insert_through_grad_jvp_and_hvp():
    check_through(insert_and_weigh, rand(3, 4), rand(3, 1), argnums=(0, 1))
    check_through(insert_and_weigh, rand(2, 3), rand(2, 2), argnums=(0, 1))
    check_through(insert_flat, rand(2, 3), rand(2), argnums=(0, 1))


def test_partition_through_grad_jvp_and_hvp():
    check_through(smallest_two, distinct(3, 5), 1.0 + 0.01 * rand(3, 5), argnums=(0, 1))
    check_through(smallest_two, distinct(6), 1.0 + 0.01 * rand(6), argnums=(0, 1))


def test_every_rule_is_tested(family_coverage):
    family_coverage("placing", {np.insert, np.partition})
