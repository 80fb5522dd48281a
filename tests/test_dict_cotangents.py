"""Dict cotangents at the end of a gradient (the optimizers' input): ``finalize``
of a dict returns each fresh entry array that only the dict holds, and copies
every other one (a shared array, a view, another shape or dtype); gradients of
dict parameters stay right and private over repeated calls."""

import numpy as np

import s2sad
from s2sad.runtime.support import finalize
from tests.corpus.fd import assert_close_tree, numerical_grad


def test_fresh_entries_are_returned_and_shared_ones_copied():
    x = {"a": np.zeros(3), "b": np.zeros((2, 2)), "c": np.zeros(2), "d": 1.0}
    kept = np.ones((2, 2))  # another name sees it
    base = np.ones(4)
    g = {"a": np.ones(3), "b": kept, "c": base[:2], "d": np.float64(2.0)}
    fresh = id(g["a"])  # (no second name: that would make it shared)
    out = finalize(g, x)
    assert id(out["a"]) == fresh
    assert out["b"] is not kept and not np.shares_memory(out["b"], kept)
    assert out["c"].base is None and not np.shares_memory(out["c"], base)
    assert type(out["d"]) is float and out["d"] == 2.0
    shared = np.ones(3)
    out = finalize({"a": shared, "z": shared}, {"a": x["a"], "z": x["a"]})
    assert out["a"] is not out["z"] and not np.shares_memory(out["a"], out["z"])


def test_missing_broadcast_and_cast_entries_take_the_long_way():
    x = {"w": np.zeros((2, 3)), "b": np.zeros(3, np.float32), "m": np.zeros(2)}
    g = {"w": np.ones(3), "b": np.ones(3)}  # w broadcast, b float64, m missing
    out = finalize(g, x)
    np.testing.assert_array_equal(out["w"], np.full((2, 3), 0.5) * 2)
    assert out["b"].dtype == np.float32 and out["m"].shape == (2,)
    np.testing.assert_array_equal(out["m"], [0.0, 0.0])


def params_loss(p, x):
    h = np.tanh(x @ p["W"] + p["b"])
    return np.sum(h * h) + np.sum(p["W"] * p["W"])


def test_dict_gradients_are_right_and_not_shared_across_calls():
    rng = np.random.default_rng(0)
    p = {"W": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    vg = s2sad.value_and_grad(params_loss)
    got = []
    for n in (4, 4, 4, 6):
        x = rng.standard_normal((n, 3))
        _, g = vg(p, x)
        assert_close_tree(g, numerical_grad(params_loss, [p, x], 0))
        got.append((g, {k: v.copy() for k, v in g.items()}))
    for g, snapshot in got:  # later calls wrote into no earlier result
        for k in g:
            np.testing.assert_array_equal(g[k], snapshot[k])
