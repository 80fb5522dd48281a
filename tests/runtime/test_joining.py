"""Rules for joining, splitting, tiling, repeating and padding arrays."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import joining
from s2sad.testing import check_rule

RNG = np.random.default_rng(3)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


# ---------------------------------------------------------------- joining and splitting


def test_joining():
    a, b, c = rand(2, 3), rand(4, 3), rand(1, 3).astype(np.float32)
    check_rule(np.concatenate, [a, b, c])
    check_rule(np.concatenate, (a, b.T[:, :2].T), 0)
    check_rule(np.concatenate, [a, rand(2, 2)], kwargs={"axis": -1})
    check_rule(np.concatenate, [a, rand(5), 1.5 * np.ones(1)], kwargs={"axis": None})
    check_rule(np.stack, [a, a * 2, rand(2, 3)])
    check_rule(np.stack, [a, rand(2, 3)], -1)
    check_rule(np.stack, [1.5, 2.5, np.float64(3.0)])
    check_rule(np.vstack, [rand(3), rand(2, 3), 1.0 + rand(3)])
    check_rule(np.hstack, [rand(3), rand(2), 4.0])
    check_rule(np.hstack, [rand(2, 3), rand(2, 1)])
    check_rule(np.dstack, [rand(2, 3), rand(2, 3, 2), rand(2, 3, 1)])
    check_rule(np.column_stack, [rand(3), rand(3, 2)])
    check_rule(np.append, rand(2, 3), rand(4))
    check_rule(np.append, rand(2, 3), rand(1, 3), 0)
    check_rule(np.append, rand(2, 3), rand(2, 2), kwargs={"axis": 1})


def test_splitting_gives_list_outputs():
    x = rand(6, 4)
    check_rule(np.split, x, 3)
    check_rule(np.split, x, [1, 4], 0)
    check_rule(np.split, x, [3], kwargs={"axis": 1})
    check_rule(np.array_split, x, 4)
    check_rule(np.array_split, rand(7), 3)
    check_rule(np.hsplit, x, 2)
    check_rule(np.hsplit, rand(6), 3)
    check_rule(np.vsplit, x, [2])
    check_rule(np.dsplit, rand(2, 2, 4), 2)
    ct, _ = joining.d_split([None, np.ones((3, 4))], np.split(x, 2), x, 2)
    assert np.array_equal(ct, np.concatenate([np.zeros((3, 4)), np.ones((3, 4))]))
    if hasattr(np, "unstack"):
        check_rule(np.unstack, x)
        check_rule(np.unstack, rand(2, 3, 4), kwargs={"axis": 1})


# ---------------------------------------------------------------- repeating and padding


def test_tile_and_repeat():
    check_rule(np.tile, rand(2, 3), 2)
    check_rule(np.tile, rand(2, 3), (2, 1, 3))
    check_rule(np.tile, rand(2, 3, 2), (3, 2))
    check_rule(np.tile, 1.5, 3)
    check_rule(np.repeat, rand(2, 3), 2)
    check_rule(np.repeat, rand(2, 3), 3, 1)
    check_rule(np.repeat, rand(2, 3), [1, 0, 2], kwargs={"axis": -1})
    check_rule(np.repeat, rand(2, 3), np.array([2, 1, 1, 0, 3, 1]))
    check_rule("repeat", rand(2, 3), 2, 0)


@pytest.mark.parametrize(
    "pad_width,kwargs",
    [(1, {}), ((1, 2), {}), (((0, 1), (2, 0)), {}), (((2,), (1,)), {}),
     (1, {"constant_values": 3.0}), (2, {"mode": "edge"}), (2, {"mode": "reflect"}),
     ((1, 3), {"mode": "symmetric"}), (3, {"mode": "wrap"})],
    ids=str,
)  # fmt: skip
def test_pad(pad_width, kwargs):
    check_rule(np.pad, rand(3, 4), pad_width, kwargs=kwargs)
    check_rule(np.pad, rand(3, 4).astype(np.float32), pad_width, kwargs=kwargs)


def test_pad_modes_without_rule_are_loud():
    with pytest.raises(NotImplementedError):
        joining.d_pad(np.ones(5), None, np.ones(3), 1, mode="mean")
    with pytest.raises(NotImplementedError):
        joining.d_pad(
            np.ones(7), None, np.ones(3), 2, mode="reflect", reflect_type="odd"
        )


# ---------------------------------------------------------------- deleting, resizing, choosing


def test_delete():
    check_rule(np.delete, rand(6), [1, 3])
    check_rule(np.delete, rand(4, 5), 2, 1)
    check_rule(np.delete, rand(4, 5), slice(0, 2), kwargs={"axis": 0})
    check_rule(np.delete, rand(3, 4), [0, 5])  # flattened: axis None
    check_rule(np.delete, rand(4, 5), [-1], -1)
    check_rule(np.delete, rand(2, 3, 4), np.array([True, False, True]), 1)


def test_resize_sums_the_copies_of_each_entry():
    check_rule(np.resize, rand(5), (3, 4))
    check_rule(np.resize, rand(2, 3), 4)
    check_rule(np.resize, rand(2, 3), (2, 2))
    ct, _ = joining.d_resize(np.ones(7), None, np.ones(3), 7)
    assert np.array_equal(ct, [3.0, 2.0, 2.0])


def test_select_gives_each_choice_its_taken_entries():
    x = rand(3, 4)
    conds = [x > 0.3, x < -0.5]
    check_rule(np.select, conds, [x * 2.0, rand(4)], argnums=(1,))
    check_rule(np.select, conds, [rand(3, 4), rand(3, 1)], rand(4), argnums=(1, 2))
    check_rule(np.select, [x > 0.0], [rand(3, 4)], 1.5, argnums=(1,))
    # the first true condition wins where two hold
    both = [np.ones(3, bool), np.array([True, False, True])]
    _, cts, ct_default = joining.d_select(
        np.ones(3), np.zeros(3), both, [np.zeros(3), np.zeros(3)], np.zeros(3)
    )
    assert np.array_equal(cts[0], np.ones(3)) and not cts[1].any()
    assert not ct_default.any()


TESTED_HERE = {
    np.concatenate, np.stack, np.vstack, np.hstack, np.dstack, np.column_stack,
    np.append, np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit, np.tile,
    np.repeat, np.pad, np.delete, np.resize, np.select,
}  # fmt: skip
if hasattr(np, "unstack"):
    TESTED_HERE.add(np.unstack)


def test_every_rule_is_tested(family_coverage):
    family_coverage("joining", TESTED_HERE)
