"""aliasing: refuse reading a view after its base was changed in place."""

import numpy as np
import pytest

from s2sad.errors import AliasingError
from tests.transforms.dumps import after, code


def reads_a_stale_view(x):
    y = np.zeros(3)
    z = y[0:2]
    y[0] = x[0]
    return np.sum(z * x[:2])


def reads_a_copy(x):
    y = np.zeros(3)
    z = y[0:2].copy()
    y[0] = x[0]
    return np.sum(z * x[:2])


def test_aliasing_refuses_a_view_read_after_its_base_changed():
    first = reads_a_stale_view.__code__.co_firstlineno
    with pytest.raises(AliasingError) as info:
        after("aliasing", reads_a_stale_view)
    err = info.value
    assert (err.filename, err.line) == (__file__, first + 4)
    assert str(err) == (
        f"{__file__}:{first + 4}:19: 'z' shares memory with an array that was "
        f"modified in place at line {first + 3}, so its gradient would be wrong\n"
        "    return np.sum(z * x[:2])\n"
        "                  ^\n"
        "hint: take a copy where 'z' is created (e.g. '.copy()'), "
        "or modify a copy of the array"
    )


def test_aliasing_accepts_a_copy_and_leaves_the_code_alone():
    assert after("aliasing", reads_a_copy) == after("activity", reads_a_copy)
    assert after("aliasing", reads_a_copy) == code("""
        # reads_a_copy_value_and_grad
        def reads_a_copy(x):
            y = np.zeros(3)
            y_item = y[0:2]
            z = y_item.copy()
            x_item = x[0]
            y[0] = x_item
            x_item_1 = x[:2]
            mul = z * x_item_1
            out = np.sum(mul)
            return out
    """)
