"""``max_along``/``min_along`` along a short last axis (runtime/extrema.py,
session 7): the method's bits with NaN, signed zeros, infinities, ties, integer
dtypes, one column and non-contiguous inputs; gradients through them against
central finite differences, and at ties against the methods' own path."""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import extrema
from tests.repeated import (  # noqa: F401 (a fixture)
    buffer_everything,
    check_repeated_calls,
    close_all,
    seeded_rand,
)

pytestmark = pytest.mark.usefixtures("buffer_everything")


RNG = np.random.default_rng(7)
rand = seeded_rand(7)
_close = close_all


# -- max_along / min_along along a short last axis ---------------------------------


def _same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))
    else:
        assert np.array_equal(got, want)


def _edge_rows(dtype, rows=600, cols=10):
    a = RNG.integers(-3, 4, size=(rows, cols)).astype(dtype)  # many ties
    if np.dtype(dtype).kind == "f":
        a[0] = np.nan
        a[1, 3] = np.nan
        a[2] = -0.0
        a[3, ::2] = 0.0
        a[3, 1::2] = -0.0
        a[4, 5] = np.inf
        a[5, 6] = -np.inf
        a[6] = -np.inf
        a[7, -1] = np.nan
    return a


@pytest.mark.parametrize(
    "dtype", [np.float64, np.float32, np.int64, np.int32, np.uint8]
)
@pytest.mark.parametrize("view", ["plain", "transposed", "strided", "one_column", "3d"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_max_min_along_the_last_axis_are_the_methods_bit_for_bit(dtype, view, keepdims):
    a = _edge_rows(dtype)
    if view == "transposed":
        a = np.ascontiguousarray(a.T).T  # an F-ordered (600, 10)
    elif view == "strided":
        a = _edge_rows(dtype, cols=20)[:, ::2]
    elif view == "one_column":
        a = a[:, :1]
    elif view == "3d":
        a = a.reshape(60, 10, 10)
    for along, method in [(extrema.max_along, "max"), (extrema.min_along, "min")]:
        for axis in (-1, a.ndim - 1):
            want = getattr(a, method)(axis=axis, keepdims=keepdims)
            _same_bits(along(a, axis, keepdims=keepdims), want)
            out = np.full(want.shape, 7, dtype=a.dtype)
            got = along(a, axis, out=out, keepdims=keepdims)
            assert got is out
            _same_bits(out, want)


def test_max_along_into_an_out_array_overlapping_its_input():
    a = _edge_rows(np.float64, cols=11)
    want = a[:, 1:].max(axis=-1)
    got = extrema.max_along(a[:, 1:], -1, out=a[:, 0])  # the out column is a's own
    _same_bits(got, want)


def stable_logsumexp(z):
    m = z.max(axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(z - m), axis=1)) + m[:, 0])


def shifted_min(z, w):
    m = np.min(z * w, axis=-1, keepdims=True)
    return np.sum((z - m) ** 2)


def max_in_loop(z, w):
    s = 0.0
    for k in range(3):
        s = s + np.sum(np.max(z * w + k, axis=1) ** 2)
    return s


@pytest.mark.parametrize(
    "f, nargs", [(stable_logsumexp, 1), (shifted_min, 2), (max_in_loop, 2)]
)
def test_gradients_through_a_max_along_the_last_axis(f, nargs):
    z = rand(300, 6)  # 1800 entries: the columns' path (300 rows >= MIN_OUTPUTS)
    args = [z, rand(6)][:nargs]
    vg = check_repeated_calls(f, args, calls=3)
    if f is not max_in_loop:
        assert "max_along" in vg.source or "min_along" in vg.source


@pytest.mark.parametrize("f, nargs", [(stable_logsumexp, 1), (shifted_min, 2)])
def test_gradients_at_ties_match_the_methods(f, nargs, monkeypatch):
    z = RNG.integers(-2, 3, size=(300, 6)).astype(float)  # ties in every row
    args = [z, np.ones(6)][:nargs]
    vg = s2sad.value_and_grad(f, argnums=tuple(range(nargs)))
    got = [vg(*args) for _ in range(3)]
    monkeypatch.setattr(extrema, "MIN_OUTPUTS", 10**9)  # the methods only
    vm = s2sad.value_and_grad(f, argnums=tuple(range(nargs)))
    want = [vm(*args) for _ in range(3)]
    for (v1, g1), (v2, g2) in zip(got, want):
        assert v1 == v2
        for a, b in zip(g1, g2):
            np.testing.assert_array_equal(a, b)
