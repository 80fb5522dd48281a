"""The picked log-softmax's shortcuts in ``s2sad/runtime/losses.py``: the mean of
float64 picks without ``np.mean``'s wrapper (the same bits), and the check that
the rows are ``arange(n)`` by their bytes (the one-pick-per-row rule)."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.runtime import losses
from s2sad.testing import numerical_grad

RNG = np.random.default_rng(16)


@pytest.mark.parametrize("shape", [(1,), (7,), (100,), (3, 5), (2, 3, 4)])
def test_float64_mean_same_bits_as_np_mean(shape):
    v = RNG.standard_normal(shape) * 1e3
    got = losses._reduce(v, "mean")
    assert type(got) is type(np.mean(v))
    assert got.tobytes() == np.mean(v).tobytes()
    assert losses._reduce(v, "sum").tobytes() == np.sum(v).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.longdouble])
def test_other_float_means_same_bits(dtype):
    for n in (1, 3, 33, 1000):
        v = (RNG.standard_normal(n) * 7).astype(dtype)
        got, want = losses._reduce(v, "mean"), np.mean(v)
        assert type(got) is type(want) and got.tobytes() == want.tobytes()


def test_other_means_go_through_np_mean():
    with pytest.warns(RuntimeWarning):
        assert np.isnan(losses._reduce(np.zeros(0), "mean"))
    assert losses._reduce([1.0, 2.0], "mean") == 1.5


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16, np.intp])
def test_is_arange_by_bytes(dtype):
    for n in (1, 5, 100):
        rows = np.arange(n, dtype=dtype)
        assert losses._is_arange(rows, n)
        assert losses._is_arange(rows[::-1][::-1], n)  # a view, same values
        if n > 1:
            assert not losses._is_arange(rows[::-1].copy(), n)
            other = rows.copy()
            other[-1] = 0
            assert not losses._is_arange(other, n)


def test_is_arange_large_and_cache_bound():
    n = 5000
    assert losses._is_arange(np.arange(n), n)
    rows = np.arange(n)
    rows[7] = 8
    assert not losses._is_arange(rows, n)
    for n in range(1, 80):
        assert losses._is_arange(np.arange(n), n)
    assert len(losses._ARANGE_BYTES) <= 64


def test_one_per_row_rejects_non_arange_rows():
    logp = np.log(np.full((4, 3), 1 / 3))
    cols = np.array([0, 2, 1, 1])
    assert losses._one_per_row(logp, np.arange(4), cols, 1)
    assert not losses._one_per_row(logp, np.array([0, 1, 1, 3]), cols, 1)
    assert not losses._one_per_row(logp, np.arange(4), cols[:3], 1)


def head(W, b, x, y):
    z = np.tanh(x @ W + b)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(x.shape[0]), y])


def rows_given(W, x, rows, y):
    z = x @ W
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[rows, y])


@pytest.mark.parametrize("n,d,k", [(1, 3, 2), (6, 4, 5), (33, 2, 3)])
def test_head_gradients_twice_with_workspaces(n, d, k):
    W, b = RNG.standard_normal((d, k)), RNG.standard_normal(k)
    x, y = RNG.standard_normal((n, d)), RNG.integers(-k, k, n)
    vg = s2sad.value_and_grad(head, argnums=(0, 1))
    for _ in range(2):
        value, (gW, gb) = vg(W, b, x, y)
        assert value == pytest.approx(head(W, b, x, y), rel=1e-14)
        np.testing.assert_allclose(
            gW, numerical_grad(head, (W, b, x, y), 0), rtol=1e-6, atol=1e-9
        )
        np.testing.assert_allclose(
            gb, numerical_grad(head, (W, b, x, y), 1), rtol=1e-6, atol=1e-9
        )


def test_repeated_rows_take_the_general_rule():
    W, x = RNG.standard_normal((3, 4)), RNG.standard_normal((5, 3))
    y = RNG.integers(0, 4, 5)
    for rows in (np.array([0, 0, 2, 3, 4]), np.arange(5, dtype=np.int32)):
        g = s2sad.grad(rows_given, argnums=0)
        for _ in range(2):
            np.testing.assert_allclose(
                g(W, x, rows, y),
                numerical_grad(rows_given, (W, x, rows, y), 0),
                rtol=1e-6,
                atol=1e-9,
            )


@pytest.mark.parametrize(
    "shape,axis",
    [((5,), -1), ((4, 7), 1), ((4, 7), 0), ((2, 3, 4), (1, 2)), ((3, 4), None)],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_log_softmax_as_written_same_bits(shape, axis, dtype):
    from s2sad.runtime.activations import d_log_softmax, log_softmax_as_written

    x = RNG.standard_normal(shape).astype(dtype)
    want = x - np.log(np.sum(np.exp(x), axis=axis, keepdims=True))
    for out in (np.empty_like(x), None, x, np.empty(x.shape, np.float32)):
        got = log_softmax_as_written(x, axis=axis, out=out)
        assert got.dtype == x.dtype and got.tobytes() == want.tobytes()
        assert got is not x
    g = RNG.standard_normal(shape).astype(dtype)
    e = np.exp(want)
    ref = g - e * np.sum(g, axis=axis, keepdims=True)
    for into in (None, (np.empty_like(x),)):
        assert d_log_softmax(g, want, x, axis, into=into)[0].tobytes() == ref.tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_one_per_row_rule_same_bits_as_the_indexed_add(dtype):
    n, k = 40, 6
    x = RNG.standard_normal((n, k)).astype(dtype)
    logp = x - np.log(np.sum(np.exp(x), axis=1, keepdims=True))
    rows, cols = np.arange(n), RNG.integers(-k, k, n)
    for g in (-1.0, np.float64(0.37), np.float32(2.5)):
        for reduce in ("mean", "sum"):
            c = g / n if reduce == "mean" else g
            want = np.exp(logp)
            want *= -c
            want[rows, cols] += c
            for into in (None, (np.empty_like(logp),)):
                got = losses.d_picked_log_softmax(
                    g, None, x, logp, rows, cols, 1, reduce, into=into
                )[0]
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
