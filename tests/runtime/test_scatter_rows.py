"""The row scatter behind ``E[ids]``'s cotangent (an embedding lookup).

Wide rows go in rounds of distinct rows, the rest (narrow rows, many repeats)
by ``np.add.at``: both must give ``np.add.at``'s sums, to rounding (the order
of the terms of a row may differ), exactly where every partial sum is exact.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest

import s2sad
from s2sad.runtime import indexing
from s2sad.testing import check_rule

RNG = np.random.default_rng(16)


def reference(table: np.ndarray, ids, g) -> np.ndarray:
    ct = np.zeros(table.shape, table.dtype)
    np.add.at(ct, ids, np.asarray(g).astype(table.dtype))
    return ct


def scattered(table, ids, g, into=None):
    return indexing.d_getitem(g, None, table, ids, into=into)[0]


def close(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 2e-6 if want.dtype == np.float32 else 1e-14
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale * 64)


#: (table shape, ids shape, ids drawn below): few repeats (rounds to the end),
#: a hot row among others (rounds, then np.add.at), many repeats (np.add.at
#: after the first probe), narrow rows (np.add.at alone), negative ids
CASES = [
    ((1000, 50), (64, 13), 1000),
    ((1000, 20), (40, 30), 1000),
    ((100, 50), (64, 130), 100),
    ((10000, 4), (64, 130), 10000),
    ((500, 3, 8), (700,), 500),
    ((400, 32), (30, 20), -400),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_equals_add_at(case, dtype):
    shape, ids_shape, high = case
    table = RNG.standard_normal(shape).astype(dtype)
    ids = RNG.integers(min(high, 0), abs(high), ids_shape)
    if case is CASES[1]:
        ids.ravel()[::3] = 7  # one hot row: a third of the positions
    g = RNG.standard_normal(ids_shape + shape[1:]).astype(dtype)
    close(scattered(table, ids, g), reference(table, ids, g))
    close(scattered(table, ids.astype(np.int32), g), reference(table, ids, g))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_exact_where_sums_are_exact(case):
    """Small integers: every order of the terms gives the same, exact sums."""
    shape, ids_shape, high = case
    table = np.zeros(shape, np.float32)
    ids = RNG.integers(min(high, 0), abs(high), ids_shape)
    g = RNG.integers(-8, 9, ids_shape + shape[1:]).astype(np.float32)
    np.testing.assert_array_equal(scattered(table, ids, g), reference(table, ids, g))


def test_forced_rounds_on_any_width(monkeypatch):
    """Rounds on every row shape (1-d and 3-d tables, a list of ids) and cast g."""
    monkeypatch.setattr(indexing, "WIDE", 1)
    monkeypatch.setattr(indexing, "SMALL", 0)
    monkeypatch.setattr(indexing, "ROUND_CHUNK", 7)  # several copies a round
    for shape in [(30,), (30, 1), (30, 2, 3)]:
        table = np.zeros(shape)
        for ids in [
            RNG.integers(0, 30, 50),
            RNG.integers(-30, 30, (6, 9)),
            [3, 3, -27],
        ]:
            g = RNG.standard_normal(np.shape(ids) + shape[1:])
            close(scattered(table, ids, g), reference(table, ids, g))
            f32 = table.astype(np.float32)  # float64 g cast to the table's float32
            close(scattered(f32, ids, g), reference(f32, ids, g))
            whole = np.broadcast_to(g[..., :1] if g.ndim > 1 else 2.0, g.shape)
            close(scattered(table, ids, whole), reference(table, ids, whole))


def test_buffers_reused():
    table = np.zeros((1000, 50))
    buf = np.full(table.shape, np.nan)
    for _ in range(2):
        ids = RNG.integers(0, 1000, (64, 13))
        g = RNG.standard_normal((64, 13, 50))
        got = scattered(table, ids, g, into=(buf,))
        assert got is buf
        close(got, reference(table, ids, g))


def test_rule_against_finite_differences():
    table = RNG.standard_normal((300, 20))
    check_rule(operator.getitem, table, RNG.integers(0, 300, (40, 10)), argnums=0)
    check_rule(operator.getitem, table, RNG.integers(-300, 0, 400), argnums=0)


def embed_loss(E, W, ids):
    total = 0.0
    for t in range(ids.shape[0]):  # a lookup inside a loop
        total = total + np.sum(np.tanh(E[ids[t]] @ W))
    return total + np.sum(E[ids] ** 2) * 0.1


def test_value_and_grad_with_workspaces():
    """Compiled: E's gradient (two lookups, one in a loop) on repeated calls."""
    E = RNG.standard_normal((200, 24))
    W = RNG.standard_normal((24, 3))
    grad = s2sad.value_and_grad(embed_loss, argnums=0)
    for ids in [RNG.integers(0, 200, (5, 60)), RNG.integers(0, 200, (5, 60))]:
        value, g = grad(E, W, ids)
        assert np.isclose(value, embed_loss(E, W, ids))
        v = RNG.standard_normal(E.shape)
        h = 1e-6
        fd = (embed_loss(E + h * v, W, ids) - embed_loss(E - h * v, W, ids)) / (2 * h)
        assert np.isclose(np.sum(g * v), fd, rtol=1e-7, atol=1e-8)


BASIC = [
    (slice(None), slice(2, 10), slice(None)), 3, -1, (Ellipsis, 4), (1, Ellipsis),
    (slice(3, 3),), (slice(7, 2),), (slice(1, None), -2, slice(None, 40)),
    (slice(None, None, 2),), (None, 1), (Ellipsis,), Ellipsis, (),
    (slice(-3, None), Ellipsis, slice(-5, -1)), (True,), (np.int64(2), slice(1, 4)),
]  # fmt: skip


@pytest.mark.parametrize("idx", BASIC, ids=str)
def test_basic_index_into_a_buffer(idx):
    """Only what x[idx] leaves out is cleared (ints, unit-step slices, ...);
    other basic indices clear the whole buffer: zeros with g written at idx."""
    x = RNG.standard_normal((9, 10, 50))
    want = np.zeros_like(x)
    want[idx] = 2 * x[idx] + 1
    for _ in range(2):  # a NaN buffer, then the same buffer again
        buf = np.full_like(x, np.nan)
        got = scattered(x, idx, 2 * x[idx] + 1, into=(buf,))
        assert got is buf
        np.testing.assert_array_equal(got, want)
    small = x[:4, :5, :6]  # under SMALL entries: cleared whole, same values
    np.testing.assert_array_equal(
        scattered(small, idx, small[idx], into=(np.full_like(small, np.nan),)),
        scattered(small, idx, small[idx]),
    )


def sliced_loss(x, W):
    n = x.shape[1] - 2
    conv = x[:, 0:n, :] @ W[0] + x[:, 1 : n + 1, :] @ W[1] + x[:, 2:, :] @ W[2]
    return np.sum(np.tanh(conv)) + np.sum(x[..., 3] ** 2)


def test_sliced_reads_against_finite_differences():
    grad = s2sad.value_and_grad(sliced_loss, argnums=(0, 1))
    x, W = RNG.standard_normal((8, 30, 20)), RNG.standard_normal((3, 20, 4))
    for _ in range(2):  # workspaces reused
        value, (gx, gW) = grad(x, W)
        assert np.isclose(value, sliced_loss(x, W))
        vx, vW = RNG.standard_normal(x.shape), RNG.standard_normal(W.shape)
        h = 1e-6
        fd = (
            sliced_loss(x + h * vx, W + h * vW) - sliced_loss(x - h * vx, W - h * vW)
        ) / (2 * h)
        assert np.isclose(np.sum(gx * vx) + np.sum(gW * vW), fd, rtol=1e-7, atol=1e-8)


def test_hessian_vector_product():
    """Second order through the lookups: H v against differences of gradients."""
    E, W = RNG.standard_normal((200, 24)), RNG.standard_normal((24, 3))
    ids = RNG.integers(0, 200, (5, 60))
    grad = s2sad.grad(embed_loss, argnums=0)
    v = RNG.standard_normal(E.shape)
    eps = 1e-6
    want = (grad(E + eps * v, W, ids) - grad(E - eps * v, W, ids)) / (2 * eps)
    hvp = s2sad.hvp(embed_loss, argnums=0)
    for _ in range(2):
        np.testing.assert_allclose(hvp(E, W, ids, v), want, rtol=1e-5, atol=1e-7)
