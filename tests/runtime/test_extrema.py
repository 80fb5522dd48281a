"""``max_along``/``min_along`` (s2sad/runtime/extrema.py): the method's result,
bit for bit (NaN, infinities, signed zeros, ties), on every path."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime.extrema import _fast, _last_fast, _unambiguous, max_along, min_along

KERNELS = [(max_along, "max"), (min_along, "min")]
CASES = [
    ((64, 16, 8, 8), 2),
    ((64, 16, 8, 8), -2),
    ((64, 16, 8, 8), 1),
    ((300, 4, 3), 1),
    ((40, 2, 40), -2),
    ((20, 16, 40), 1),
    ((300, 3), 0),  # too few runs before the axis: the method
    ((2, 16, 128), 1),  # likewise
    ((50, 20, 30), 1),  # a long axis: the method
    ((30, 40, 6), 2),  # the last axis: the columns, checked
    ((30, 40, 6), -1),
    ((1024, 10), 1),
    ((300, 16), -1),
    ((100, 10), 1),  # too few rows: the method
    ((300, 17), 1),  # too long a row: the method
]


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def sample(shape, dtype, rng) -> np.ndarray:
    a = rng.normal(size=shape)
    if np.dtype(dtype).kind != "f":
        return (3 * a).astype(dtype)
    a = np.round(a, 1)  # ties
    for v, p in [(0.0, 0.05), (-0.0, 0.05), (np.inf, 0.02), (-np.inf, 0.02)]:
        a[rng.random(shape) < p] = v
    a[rng.random(shape) < 0.01] = np.nan
    return a.astype(dtype)


@pytest.mark.parametrize(
    "dtype", [np.float64, np.float32, np.float16, np.int32, np.uint8]
)
@pytest.mark.parametrize("shape,axis", CASES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_the_method_bit_for_bit(dtype, shape, axis, keepdims):
    rng = np.random.default_rng(abs(hash((str(dtype), shape, axis))) % 2**32)
    a = sample(shape, dtype, rng)
    for kernel, method in KERNELS:
        want = getattr(a, method)(axis, keepdims=keepdims)
        got = kernel(a, axis, keepdims=keepdims)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert np.array_equal(bits(got), bits(want))
        out = np.full_like(want, 7)
        for _ in range(2):  # a reused buffer
            assert kernel(a, axis, out, keepdims) is out
            assert np.array_equal(bits(out), bits(want))


def test_the_fast_path_is_taken_where_it_pays():
    a = np.zeros((64, 16, 8, 8), np.float32)
    assert _fast(a, 2, None) and _fast(a, -2, np.empty((64, 16, 8), np.float32))
    assert not _fast(a, 3, None) and not _fast(a, -1, None)  # the last axis
    assert not _fast(a, 2, np.empty((64, 16, 8)))  # out of another dtype
    assert not _fast(a, 2, a[:, :, 0])  # out overlaps a
    assert not _fast(a.astype(object), 2, None) and not _fast(a, None, None)
    assert not _fast(np.zeros((4, 32, 300)), 1, None)  # a long axis


def test_all_nan_and_signed_zero_slices():
    a = np.zeros((32, 4, 16))
    a[:, 0] = -0.0
    a[:5, 2] = np.nan
    a[7:9, 3] = -np.inf
    for kernel, method in KERNELS:
        assert np.array_equal(bits(kernel(a, 1)), bits(getattr(a, method)(1)))
        assert np.array_equal(bits(kernel(-a, 1)), bits(getattr(-a, method)(1)))


def test_errors_and_other_receivers_are_the_methods():
    a = np.zeros((32, 4, 16))
    with pytest.raises(ValueError):
        max_along(a, 1, out=np.empty((32, 16, 1)))
    with pytest.raises(ValueError):
        max_along(np.zeros((32, 0, 16)), 1)
    with pytest.raises(np.exceptions.AxisError):
        max_along(a, 3)
    m = np.ma.masked_array(a, mask=a > 0)
    assert type(max_along(m, 1)) is np.ma.MaskedArray
    assert max_along(np.arange(6.0).reshape(3, 2), None) == 5.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16])
def test_a_short_last_axis_takes_the_columns_where_unambiguous(dtype):
    rng = np.random.default_rng(7)
    a = (rng.normal(size=(1024, 10)) * 3).astype(dtype)
    a[a == 0] = 1  # no zero result: the columns' answer stands
    assert _last_fast(a, 1, None) and _last_fast(a, -1, np.empty((1024, 1), dtype))
    assert not _last_fast(a, 0, None) and not _last_fast(a[:100], 1, None)
    assert not _last_fast(a, 1, a[:, :1])  # out overlaps a
    for kernel, method in KERNELS:
        want = getattr(a, method)(axis=1, keepdims=True)
        assert _unambiguous(want)
        out = np.empty_like(want)
        for _ in range(2):
            assert kernel(a, 1, out, True) is out
            assert np.array_equal(bits(out), bits(want))


@pytest.mark.parametrize("special", [0.0, -0.0, np.nan])
def test_a_zero_or_nan_result_is_the_methods(special):
    a = np.random.default_rng(8).normal(size=(512, 8)) - 10.0
    a[5, :4] = -0.0
    a[5, 4:] = special if special != 0.0 else 0.0
    a[9, 3] = np.nan if special != special else -20.0
    for kernel, method in KERNELS:
        b = a if method == "max" else -a
        want = getattr(b, method)(axis=-1)
        got = kernel(b, -1)
        assert np.array_equal(bits(got), bits(want))
