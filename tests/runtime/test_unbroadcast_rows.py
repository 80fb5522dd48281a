"""unbroadcast of a bias's cotangent (2-d to 1-d): the rows summed, with or
without a buffer, the same values and dtypes as the general path."""

import numpy as np
import pytest

from s2sad.runtime.support import unbroadcast


@pytest.mark.parametrize("gdt", [np.float32, np.float64])
@pytest.mark.parametrize("ldt", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [0, 1, 7])
def test_rows_summed_into_a_buffer_or_a_new_array(gdt, ldt, rows):
    rng = np.random.default_rng(0)
    g = rng.normal(size=(rows, 5)).astype(gdt)
    like = np.zeros(5, ldt)
    want = g.astype(np.float64).sum(axis=0)
    out = np.full(5, np.nan, ldt)
    got = unbroadcast(g, like, out=out)
    assert got is out and got.dtype == ldt
    np.testing.assert_allclose(got, want, rtol=1e-6)
    plain = unbroadcast(g, like)
    assert plain.shape == (5,) and plain.dtype == ldt
    np.testing.assert_allclose(plain, want, rtol=1e-6)


def test_other_shapes_take_the_general_path():
    g = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(unbroadcast(g, np.zeros((1, 4))), [[12, 15, 18, 21]])
    np.testing.assert_array_equal(unbroadcast(g, np.zeros(1)), [66.0])  # (3,4)->(1,)
    np.testing.assert_array_equal(unbroadcast(g, np.zeros((3, 1))), [[6], [22], [38]])
    out = np.empty(1)
    np.testing.assert_array_equal(unbroadcast(g, np.zeros(1), out=out), [66.0])
    g3 = np.ones((2, 3, 4))
    np.testing.assert_array_equal(unbroadcast(g3, np.zeros(4)), np.full(4, 6.0))
    assert unbroadcast(g, g) is g  # same shape and dtype: g itself
