"""Optimizers and initialisers of s2sad.optim."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from s2sad import optim
from s2sad.runtime.sparse import RowSparse

# Dyadic numbers keep SGD and Momentum arithmetic exact, so equality is exact.
P0 = [1.0, -2.0]
G1 = [0.5, 0.25]
G2 = [-1.0, 2.0]


def two_steps(opt, dtype=np.float64):
    p = np.array(P0, dtype=dtype)
    alias = p
    opt.step({"w": p}, {"w": np.array(G1)})
    first = p.copy()
    opt.step({"w": p}, {"w": np.array(G2)})
    assert p is alias
    return first, p


def test_sgd_two_steps_exact():
    first, second = two_steps(optim.SGD(0.5))
    np.testing.assert_array_equal(first, [0.75, -2.125])  # p - 0.5 g1
    np.testing.assert_array_equal(second, [1.25, -3.125])  # - 0.5 g2


def test_momentum_two_steps_exact():
    first, second = two_steps(optim.Momentum(0.5, momentum=0.5))
    # v1 = g1 = [0.5, 0.25];             p1 = p0 - 0.5 v1
    np.testing.assert_array_equal(first, [0.75, -2.125])
    # v2 = 0.5 v1 + g2 = [-0.75, 2.125]; p2 = p1 - 0.5 v2
    np.testing.assert_array_equal(second, [1.125, -3.1875])


def adam_by_hand(p, grads, lr, b1, b2, eps):
    """The textbook form of Adam on Python floats, one coordinate."""
    m = v = 0.0
    out = []
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
        p = p - lr * m_hat / (math.sqrt(v_hat) + eps)
        out.append(p)
    return out


def test_adam_two_steps_match_textbook():
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
    first, second = two_steps(optim.Adam(lr, b1, b2, eps))
    for i in range(2):
        expected = adam_by_hand(P0[i], [G1[i], G2[i]], lr, b1, b2, eps)
        assert first[i] == pytest.approx(expected[0], rel=1e-14)
        assert second[i] == pytest.approx(expected[1], rel=1e-14)
    # step 1 moves each coordinate by about lr against the gradient's sign
    np.testing.assert_allclose(first, [0.9, -2.1], rtol=1e-7)
    # a huge eps turns Adam into (bias-corrected) momentum-free scaled SGD
    huge = optim.Adam(lr=1.0, eps=1e6)
    p = np.array([0.0])
    huge.step([p], [np.array([2e6])])
    assert p[0] == pytest.approx(-2e6 / (math.sqrt(4e12) + 1e6), rel=1e-12)


@pytest.mark.parametrize(
    "make",
    [lambda: optim.SGD(0.1), lambda: optim.Momentum(0.05), lambda: optim.Adam(0.1)],
)
def test_minimises_a_quadratic_in_place_over_a_pytree(make):
    rng = np.random.default_rng(0)
    targets = {"a": rng.standard_normal(3), "b": [rng.standard_normal((2, 2)), ()]}
    params = {"a": np.zeros(3), "b": [np.zeros((2, 2)), ()]}
    arrays = [params["a"], params["b"][0]]
    curv = {"a": np.array([1.0, 2.0, 3.0]), "b": np.full((2, 2), 0.5)}
    opt = make()
    for _ in range(500):
        grads = {
            "a": curv["a"] * (params["a"] - targets["a"]),
            "b": [curv["b"] * (params["b"][0] - targets["b"][0]), ()],
        }
        opt.step(params, grads)
    assert params["a"] is arrays[0] and params["b"][0] is arrays[1]
    np.testing.assert_allclose(params["a"], targets["a"], atol=1e-3)
    np.testing.assert_allclose(params["b"][0], targets["b"][0], atol=1e-3)


@pytest.mark.parametrize(
    "make",
    [lambda: optim.SGD(0.1), lambda: optim.Momentum(0.1), lambda: optim.Adam(0.1)],
)
def test_float32_stays_float32_and_no_allocation_after_first_step(make):
    p = np.ones(250_000, dtype=np.float32)
    g = np.full(250_000, 0.5, dtype=np.float32)
    opt = make()
    opt.step([p], [g])
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        opt.step([p], [g])
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert p.dtype == np.float32
    assert peak < p.nbytes // 10  # no array-sized temporaries


@pytest.mark.parametrize(
    "make",
    [lambda: optim.SGD(0.1), lambda: optim.Momentum(0.3), lambda: optim.Adam(0.1)],
)
def test_row_sparse_gradient_equals_dense_update(make):
    rng = np.random.default_rng(1)
    table = rng.standard_normal((6, 3))
    grads = [RowSparse([1, 4], rng.standard_normal((2, 3)), (6, 3)) for _ in range(3)]
    sparse_p, dense_p = table.copy(), table.copy()
    sparse_opt, dense_opt = make(), make()
    for g in grads:
        sparse_opt.step({"emb": sparse_p}, {"emb": g})
        dense_opt.step({"emb": dense_p}, {"emb": g.to_dense()})
    np.testing.assert_allclose(sparse_p, dense_p, rtol=1e-14, atol=1e-15)
    if isinstance(sparse_opt, optim.SGD):
        untouched = [0, 2, 3, 5]
        np.testing.assert_array_equal(sparse_p[untouched], table[untouched])


def test_none_gradient_is_zero():
    p, q = np.ones(2), np.ones(2)
    optim.SGD(1.0).step({"p": p, "q": q}, {"p": None, "q": np.ones(2)})
    np.testing.assert_array_equal(p, [1, 1])
    np.testing.assert_array_equal(q, [0, 0])
    m = optim.Momentum(1.0, momentum=0.5)
    m.step([p], [np.ones(2)])  # v = 1, p = 0
    m.step([p], None)  # v = 0.5, p = -0.5
    np.testing.assert_array_equal(p, [-0.5, -0.5])


def test_bad_trees_are_rejected():
    with pytest.raises(TypeError):
        optim.SGD(0.1).step({"w": 1.0}, {"w": 1.0})
    with pytest.raises(TypeError):
        optim.SGD(0.1).step([np.arange(3)], [np.ones(3)])
    with pytest.raises(ValueError):
        optim.SGD(0.1).step([np.ones(2)], [np.ones(2), np.ones(2)])
    opt = optim.Adam()
    opt.step([np.ones(2)], [np.ones(2)])
    with pytest.raises(ValueError):
        opt.step([np.ones(3)], [np.ones(3)])


def test_step_walks_the_tree_as_leaves_does():
    # the optimizers' walk (a list, no generators) pairs the same leaves in the
    # same order: dict keys in params' order looked up by name in grads, lists
    # and tuples by position, None subtrees, an ndarray subclass as a leaf
    memmap_like = np.ones(2).view(np.matrix)
    params = {
        "b": np.ones(3),
        "a": [np.ones(2), (np.ones(1), {"z": np.ones(4)})],
        "m": memmap_like,
        "e": {},
    }
    grads = {
        "a": [None, (np.full(1, 2.0), {"z": np.full(4, 3.0)})],
        "b": np.full(3, 4.0),
        "m": np.full((1, 2), 5.0),
    }
    want = list(optim.leaves(params, grads))
    got = optim._pairs(params, grads, [])
    assert [(p is q, g is h) for (p, g), (q, h) in zip(got, want)] == [
        (True, True)
    ] * len(want)
    assert len(got) == len(want) == 5
    assert optim._pairs(params, None, []) == [(p, None) for p, _ in want]
    for bad in ({"w": 1.0}, [np.arange(3)], ("x",)):
        with pytest.raises(TypeError):
            optim._pairs(bad, None, [])
    with pytest.raises(ValueError):
        optim._pairs([np.ones(2)], [None, None], [])
    sgd = optim.SGD(0.5)
    sgd.step(params, grads)
    np.testing.assert_array_equal(params["b"], [-1.0] * 3)
    np.testing.assert_array_equal(params["a"][0], [1.0, 1.0])
    np.testing.assert_array_equal(params["a"][1][1]["z"], [-0.5] * 4)
    np.testing.assert_array_equal(params["m"], [[-1.5, -1.5]])


INITS = [
    (optim.xavier_uniform, lambda i, o: 2.0 / (i + o)),
    (optim.xavier_normal, lambda i, o: 2.0 / (i + o)),
    (optim.he_uniform, lambda i, o: 2.0 / i),
    (optim.he_normal, lambda i, o: 2.0 / i),
]


@pytest.mark.parametrize("init,variance", INITS)
def test_initialiser_variance(init, variance):
    rng = np.random.default_rng(7)
    w = init(rng, 200, 300)
    assert w.shape == (200, 300) and w.dtype == np.float32
    assert np.var(w, dtype=np.float64) == pytest.approx(variance(200, 300), rel=0.03)
    assert abs(np.mean(w, dtype=np.float64)) < 0.01 * np.sqrt(variance(200, 300))
    if "uniform" in init.__name__:
        assert np.abs(w).max() <= np.sqrt(3 * variance(200, 300))
    conv = init(rng, 50 * 3, 8 * 3, shape=(8, 50, 3), dtype=np.float64)
    assert conv.shape == (8, 50, 3) and conv.dtype == np.float64
    again = init(np.random.default_rng(7), 200, 300)
    np.testing.assert_array_equal(w, again)


def test_lazy_sparse_adam_touches_only_gradient_rows():
    rng = np.random.default_rng(2)
    table = rng.standard_normal((5, 2))
    lazy_p, dense_p = table.copy(), table.copy()
    lazy, dense = optim.Adam(0.1, lazy_sparse=True), optim.Adam(0.1)
    for _ in range(3):  # rows 0 and 3 are touched every step: lazy == dense there
        g = RowSparse([0, 3], rng.standard_normal((2, 2)), (5, 2))
        lazy.step([lazy_p], [g])
        dense.step([dense_p], [g.to_dense()])
    np.testing.assert_allclose(lazy_p[[0, 3]], dense_p[[0, 3]], rtol=1e-14)
    np.testing.assert_array_equal(lazy_p[[1, 2, 4]], table[[1, 2, 4]])
    g = RowSparse([1], np.ones((1, 2)), (5, 2))
    lazy.step([lazy_p], [g])  # a first visit at step 4: m = 0.1, v = 0.001
    c1, c2 = 1 - 0.9**4, 1 - 0.999**4
    expected = table[1] - 0.1 * (0.1 / c1) / (math.sqrt(0.001 / c2) + 1e-8)
    np.testing.assert_allclose(lazy_p[1], expected, rtol=1e-13)
    np.testing.assert_array_equal(lazy_p[[2, 4]], table[[2, 4]])
    before = dense_p.copy()
    dense.step([dense_p], [np.zeros((5, 2))])  # dense Adam keeps moving on momentum
    assert not np.any(dense_p[[0, 3]] == before[[0, 3]])
