"""The support helpers' in-place fast paths never change an array someone else sees."""

import numpy as np

from s2sad.runtime import support


def test_accumulate_never_changes_a_shared_array():
    shared = np.ones(3)
    other_name = shared  # a second reference: the update must not be in place
    result = support.accumulate(shared, np.ones(3))
    np.testing.assert_array_equal(other_name, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(result, [2.0, 2.0, 2.0])


def test_accumulate_never_changes_a_view_or_its_base():
    base = np.ones((2, 3))
    view = base[0]
    support.accumulate(view, np.ones(3))
    np.testing.assert_array_equal(base, np.ones((2, 3)))


def test_accumulate_keeps_the_wider_dtype():
    a = np.ones(3, dtype=np.float32)
    out = support.accumulate(a * 1, np.ones(3, dtype=np.float64))
    assert out.dtype == np.float64  # never squeezed into a float32 buffer


def test_accumulate_adds_in_place_into_an_array_nobody_else_sees():
    def fresh():
        return np.ones(3) * 2.0  # only this call's result refers to it

    a = fresh()
    before = id(a)
    result = support.accumulate(a, np.ones(3))
    assert id(result) == before  # no new array
    np.testing.assert_array_equal(result, [3.0, 3.0, 3.0])
