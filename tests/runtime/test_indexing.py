"""getitem on arrays and containers, take, take_along_axis, compress, item."""

from __future__ import annotations

import operator

import numpy as np
import pytest

from s2sad.runtime import indexing, support, workspace
from s2sad.testing import check_rule

RNG = np.random.default_rng(5)
X = RNG.standard_normal((4, 5, 3))

INDICES = [
    2, -1, slice(1, 3), slice(None, None, -2), Ellipsis, None, (1, 2), (1, slice(None), 0),
    (Ellipsis, 1), (None, 1, Ellipsis, None), np.array([0, 2, 2, 3]), [3, 1, 3],
    np.array([[0, 1], [1, 1]]), (np.array([0, 0, 2]), np.array([1, 1, 4])),
    (slice(None), [0, 0, 4]), (np.array([0, 0]), slice(1, 3), np.array([2, 2])),
    X[..., 0] > 0, X > 0.3, (X[:, 0, 0] > 0, 1), (1, [True, False, True, True, False]),
    np.int64(2), (np.array(1), 2),
]  # fmt: skip


@pytest.mark.parametrize("idx", INDICES, ids=lambda i: type(i).__name__)
def test_getitem_on_arrays(idx):
    check_rule(operator.getitem, X, idx)
    check_rule(operator.getitem, X.astype(np.float32), idx)


def test_repeated_indices_accumulate_exactly():
    x = np.zeros(4)
    g = np.array([1.0, 2.0, 4.0])
    ct, none = indexing.d_getitem(g, x[[1, 1, 3]], x, [1, 1, 3])
    assert none is None and np.array_equal(ct, [0.0, 3.0, 0.0, 4.0])
    x2 = np.zeros((3, 2))
    ct, _ = indexing.d_getitem(
        np.ones((2, 2, 2)), x2[[[0, 2], [2, 2]]], x2, [[0, 2], [2, 2]]
    )
    assert np.array_equal(ct, [[1, 1], [0, 0], [3, 3]])
    ct, _ = indexing.d_getitem(np.ones(3), x[[-1, 3, 0]], x, np.array([-1, 3, 0]))
    assert np.array_equal(ct, [1.0, 0.0, 0.0, 2.0])


def test_getitem_on_containers():
    a, b, c = RNG.standard_normal(3), 1.5, RNG.standard_normal((2, 2))
    check_rule(operator.getitem, [a, b, c], 0)
    check_rule(operator.getitem, [a, b, c], -1)
    check_rule(operator.getitem, (a, b, c), 1)
    check_rule(operator.getitem, [a, b, c], slice(1, None))
    check_rule(operator.getitem, [a, b, c], slice(None, None, 2))
    check_rule(operator.getitem, {"w": a, "b": b}, "w")
    ct, _ = indexing.d_getitem(np.ones(3), a, [a, b, c], 0)
    assert ct[1] is None and ct[2] is None and np.array_equal(ct[0], np.ones(3))
    ct, _ = indexing.d_getitem([1.0, None], None, [a, b, c], slice(1, 3))
    assert ct == [None, 1.0, None]
    ct, _ = indexing.d_getitem(2.0, b, {"w": a, "b": b}, "b")
    assert ct == {"b": 2.0}


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"axis": 0}, {"axis": 1}, {"axis": -1}, {"mode": "wrap"}, {"mode": "clip"},
     {"axis": 1, "mode": "wrap"}],
    ids=str,
)  # fmt: skip
def test_take(kwargs):
    indices = (
        np.array([[0, 2], [2, 7]]) if "mode" in kwargs else np.array([[0, 2], [2, 1]])
    )
    check_rule(np.take, X, indices, kwargs=kwargs)
    check_rule("take", X, indices, kwargs=kwargs)
    check_rule(np.take, X, 1, kwargs=kwargs)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_take_along_axis(axis):
    x = X[..., 0]
    if axis is None:
        idx = np.array([0, 3, 3, 19])
    else:
        idx = np.argsort(x, axis=axis)[(slice(None),) * (axis % 2) + (slice(0, 3),)]
        idx = np.concatenate([idx, idx], axis=axis)  # repeated entries accumulate
    check_rule(np.take_along_axis, x, idx, axis)


def test_compress_extract_item():
    x = X[..., 0]
    check_rule(np.compress, [True, False, True, True], x, 0)
    check_rule(np.compress, [True, False, True], x, kwargs={"axis": 1})
    check_rule(np.compress, [False, True, True], x)
    check_rule(np.extract, x > 0, x)
    check_rule(indexing.item, x, 7)
    check_rule(indexing.item, x, 1, 2)
    check_rule(indexing.item, x, (3, 4))
    check_rule(indexing.item, np.array([2.5]))
    check_rule("item", x, 2, 1)
    assert isinstance(indexing.item(x, 3), float)


def test_every_rule_is_tested(family_coverage):
    tested = {operator.getitem, np.take, np.take_along_axis, np.compress, np.extract,
              indexing.item}  # fmt: skip
    family_coverage("indexing", tested)


# ------------------------------------------- add_at_index: g_x + a part's cotangent


def _reference(acc, g, x, idx):
    return support.add(acc, indexing.d_getitem(g, None, x, idx)[0])


@pytest.mark.parametrize(
    "idx",
    [
        (slice(None), slice(1, 4)),  # overlapping taps of a convolution
        (slice(None), slice(0, 3)),
        (1, slice(None, None, -1)),
        (Ellipsis, 2),
        np.array([[True, False, True, False, True]] * 3),  # a mask
        np.array([0, 2, 0]),  # repeats: np.add.at semantics
    ],
    ids=str,
)
def test_add_at_index_equals_the_scattered_sum(idx):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5))
    g = rng.normal(size=np.shape(x[idx]))
    acc = rng.normal(size=x.shape)
    want = _reference(acc.copy(), g, x, idx)
    seen = acc  # a second reference: acc must not be changed in place
    got = indexing.add_at_index(acc, g, x, idx)
    np.testing.assert_array_equal(seen, acc)
    assert got is not seen
    np.testing.assert_allclose(got, want, rtol=1e-15)
    got = indexing.add_at_index(rng.normal(size=x.shape) * 0 + acc, g, x, idx)
    np.testing.assert_allclose(got, want, rtol=1e-15)  # a private acc, in place


def test_add_at_index_buffers_none_containers_and_dtypes():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 6)).astype(np.float32)
    g = rng.normal(size=(4, 3))  # float64 into a float32 cotangent: cast first
    idx = (slice(None), slice(2, 5))
    acc = rng.normal(size=x.shape).astype(np.float32)
    want = _reference(acc.copy(), g, x, idx)
    out = np.full(x.shape, np.nan, np.float32)
    keep = acc
    got = indexing.add_at_index(acc, g, x, idx, out=out)
    assert got is out and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(keep, acc)  # acc itself untouched
    first = indexing.add_at_index(None, g, x, idx, out=out)
    assert first is out
    np.testing.assert_array_equal(first, indexing.d_getitem(g, None, x, idx)[0])
    lst = [1.0, 2.0, 3.0]
    assert indexing.add_at_index([None, 1.0, None], 2.0, lst, 1) == [None, 3.0, None]
    d = indexing.add_at_index({"a": 1.0}, 2.0, {"a": 0.0, "b": 0.0}, "b")
    assert d == {"a": 1.0, "b": 2.0}


def test_add_at_index_adds_into_a_private_workspace_buffer():
    """A workspace buffer only the caller's variable holds is added into; one
    that another name also holds is copied first."""
    layout = workspace.Layout()
    layout.fixed["g"] = ((3, 4), np.dtype(np.float64))
    ws = workspace.Workspace(layout)
    x, g = np.zeros((3, 4)), np.ones((3, 2))
    acc = ws["g"]
    acc[...] = 1.0
    got = indexing.add_at_index(acc, g, x, (slice(None), slice(0, 2)))
    assert got is ws["g"]
    np.testing.assert_array_equal(got[:, :2], 2.0)
    other = acc  # noqa: F841 - a second name: no longer private
    got = indexing.add_at_index(acc, g, x, (slice(None), slice(0, 2)))
    assert got is not ws["g"] and ws["g"][0, 0] == 2.0 and got[0, 0] == 3.0
