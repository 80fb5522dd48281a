"""workspace.shape_key: float arrays keyed inline give the keys _key gives."""

import numpy as np

from s2sad.runtime.workspace import _key, shape_key


def test_float_arrays_inline_and_everything_else_through_key():
    f32 = np.zeros((3, 4), np.float32)
    c = np.zeros(2, complex)
    n = np.arange(3)
    one = np.array([5])
    values = [f32, c, n, one, 1.0, 3, (f32, n, 2.0), [c], {"a": f32}, None]
    key = shape_key(values)
    assert key == tuple(_key(v) for v in values)
    assert key[0] == ((3, 4), np.dtype(np.float32))
    assert key[3][2] == (5,)  # a 1-element int array: its value is part of the key
    assert key[6] == (tuple, (_key(f32), _key(n), float))


def test_a_boolean_array_anywhere_gives_no_key():
    mask = np.ones(3, bool)
    assert shape_key([np.zeros(3), mask]) is None
    assert shape_key([(np.zeros(3), mask)]) is None
