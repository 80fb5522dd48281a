"""A training step's fixed costs (issue 16): the softmax cross-entropy's rule
reusing the value's exponentials (runtime/crossentropy.py), dict cotangents
summed in place when only one name sees them, ``finalize`` of a dict of
parameters without a call per entry.  Each must leave every value and gradient
as it was: bits against the recomputing path, central differences in float64
on dict and nested parameters, a callee, a loop of losses, workspaces over
three calls, ``out=`` arrays, second order, and a rebound global."""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import crossentropy, nn
from s2sad.runtime.support import accumulate, finalize
from tests.corpus.fd import assert_close_tree, numerical_grad
from tests.repeated import buffer_everything  # noqa: F401 (fixture)

# ---------------------------------------------------------------- the loss head


def _recomputed(g, logits, labels, out=None):
    """The rule without the kept exponentials (the slot emptied first)."""
    crossentropy._KEPT.clear()
    return nn.d_softmax_cross_entropy(g, None, logits, labels, into=(out,))[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(100, 10), (7, 3), (1, 4), (40, 257)])
def test_kept_exponentials_give_the_recomputed_bits(dtype, shape):
    rng = np.random.default_rng(sum(shape))
    z = (rng.standard_normal(shape) * 4).astype(dtype)
    z[0, 0] = 0.0
    y = rng.integers(0, shape[1], shape[0])
    for g in (1.0, 0.5, np.float32(3.0), np.float64(-2.0)):
        value = nn.softmax_cross_entropy(z, y)
        assert crossentropy._KEPT and crossentropy._KEPT[0][0] is value
        got = nn.d_softmax_cross_entropy(g, value, z, y)[0]
        assert not crossentropy._KEPT  # taken by the gradient that used it
        want = _recomputed(g, z, y)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        value = nn.softmax_cross_entropy(z, y)
        buf = np.empty_like(z)
        got = nn.d_softmax_cross_entropy(g, value, z, y, into=(buf,))[0]
        assert got is buf and got.tobytes() == want.tobytes()


def test_the_value_is_np_means():
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        z = rng.standard_normal((33, 6)).astype(dtype)
        y = rng.integers(0, 6, 33)
        zs = z - z.max(axis=-1, keepdims=True)
        want = np.mean(np.log(np.exp(zs).sum(axis=-1)) - zs[np.arange(33), y])
        got = nn.softmax_cross_entropy(z, y)
        assert type(got) is type(want) and got.tobytes() == want.tobytes()


def test_another_value_or_other_arrays_recompute():
    rng = np.random.default_rng(4)
    z1, z2 = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    y = rng.integers(0, 4, 5)
    v1 = nn.softmax_cross_entropy(z1, y)
    v2 = nn.softmax_cross_entropy(z2, y)  # the slot is now v2's
    got = nn.d_softmax_cross_entropy(1.0, v1, z1, y)[0]
    np.testing.assert_array_equal(got, _recomputed(1.0, z1, y))
    v2 = nn.softmax_cross_entropy(z2, y)
    copy = z2.copy()  # the same values, another array: not the kept one's
    got = nn.d_softmax_cross_entropy(1.0, v2, copy, y)[0]
    np.testing.assert_array_equal(got, _recomputed(1.0, z2, y))
    v2 = nn.softmax_cross_entropy(z2, y)
    got = nn.d_softmax_cross_entropy(1.0, v2, z2, y.copy())[0]
    np.testing.assert_array_equal(got, _recomputed(1.0, z2, y))
    # a rule given no value of a kept call leaves the slot alone
    v2 = nn.softmax_cross_entropy(z2, y)
    nn.d_softmax_cross_entropy(1.0, v1, z1, y)
    assert crossentropy._KEPT and crossentropy._KEPT[0][0] is v2


def test_large_logits_are_not_kept(monkeypatch):
    monkeypatch.setattr(crossentropy, "KEEP_ENTRIES", 10)
    crossentropy._KEPT.clear()
    z, y = np.ones((4, 3)), np.array([0, 1, 2, 0])
    v = nn.softmax_cross_entropy(z, y)
    assert not crossentropy._KEPT
    got = nn.d_softmax_cross_entropy(1.0, v, z, y)[0]
    np.testing.assert_array_equal(got, _recomputed(1.0, z, y))


def test_labels_as_a_list_take_the_rows_path():
    z = np.random.default_rng(5).standard_normal((3, 4))
    labels = [1, 0, 3]
    v = nn.softmax_cross_entropy(z, labels)
    got = nn.softmax_cross_entropy_grad(1.0, z, labels, None, v)
    want = _recomputed(1.0, z, np.array(labels))
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- dict cotangents


def test_accumulate_sums_into_a_dict_only_one_name_sees():
    a = {"w": np.ones(2)}
    b = {"w": np.ones(2), "b": np.zeros(1)}
    got = accumulate(a, b)
    assert got is a and list(got) == ["w", "b"]
    np.testing.assert_array_equal(got["w"], [2.0, 2.0])
    shared = {"w": np.ones(2)}
    other = shared  # a second name: summed into a new dict
    got = accumulate(shared, {"w": np.ones(2)})
    assert got is not other and list(other) == ["w"]
    np.testing.assert_array_equal(other["w"], [1.0, 1.0])
    kept = [shared]  # a container sees it
    del other
    got = accumulate(shared, {"b": np.ones(1)})
    assert got is not shared and list(kept[0]) == ["w"]


def test_finalize_copies_what_a_workspace_or_a_view_holds():
    x = {"a": np.zeros(3), "b": np.zeros(3), "n": {"c": np.zeros(2)}}
    held = np.ones(3)
    keep = [held]
    g = {"a": held, "b": np.ones(4)[:3], "n": {"c": np.ones(2)}}
    out = finalize(g, x)
    assert out["a"] is not held and not np.shares_memory(out["a"], keep[0])
    assert out["b"].base is None
    np.testing.assert_array_equal(out["n"]["c"], [1.0, 1.0])


# ---------------------------------------------------------------- whole models

STEPS = 3


def act(h):
    return np.tanh(h)


def scores(params, x):
    h = np.zeros((x.shape[0], params["rec"]["Wh"].shape[0]), dtype=x.dtype)
    for t in range(STEPS):
        h = act(x[:, t, :] @ params["Wx"] + h @ params["rec"]["Wh"] + params["b"])
    return h @ params["out"]["W"] + params["out"]["b"]


def rnn_loss(params, x, y):
    return nn.softmax_cross_entropy(scores(params, x), y)


def per_step_loss(params, x, y):
    """A loss per step: several values and rules of the loss head in one call."""
    h = np.zeros((x.shape[0], params["rec"]["Wh"].shape[0]))
    total = 0.0
    for t in range(STEPS):
        h = np.tanh(x[:, t, :] @ params["Wx"] + h @ params["rec"]["Wh"])
        total = total + nn.softmax_cross_entropy(h @ params["out"]["W"], y[:, t])
    return total


def _model(rng, n, d=4, hidden=5, classes=3):
    params = {
        "Wx": rng.standard_normal((d, hidden)) * 0.5,
        "rec": {"Wh": rng.standard_normal((hidden, hidden)) * 0.5},
        "b": rng.standard_normal(hidden) * 0.1,
        "out": {
            "W": rng.standard_normal((hidden, classes)),
            "b": rng.standard_normal(classes) * 0.1,
        },
    }
    x = rng.standard_normal((n, STEPS, d))
    return params, x


def _copy(tree):
    if isinstance(tree, dict):
        return {k: _copy(v) for k, v in tree.items()}
    return np.array(tree)


@pytest.mark.parametrize("loss", [rnn_loss, per_step_loss])
@pytest.mark.parametrize("n", [1, 6])
def test_models_against_central_differences_over_three_calls(
    buffer_everything, loss, n  # noqa: F811
):
    rng = np.random.default_rng(n)
    params, x = _model(rng, n)
    y = (
        rng.integers(0, 3, (n, STEPS))
        if loss is per_step_loss
        else rng.integers(0, 3, n)
    )
    want_value = loss(_copy(params), x, y)
    want = numerical_grad(loss, [_copy(params), x, y], 0)
    vg = s2sad.value_and_grad(loss)
    got = []
    for _ in range(3):
        value, g = vg(_copy(params), x, y)
        assert not crossentropy._KEPT  # the last value's, taken by its rule
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        assert_close_tree(g, want)
        got.append((g, _copy(g)))
    for g, snapshot in got:  # no later call wrote into an earlier result
        assert_close_tree(g, snapshot, rtol=0, atol=0)


def test_out_arrays_receive_the_gradients(buffer_everything):  # noqa: F811
    rng = np.random.default_rng(8)
    params, x = _model(rng, 5)
    y = rng.integers(0, 3, 5)
    want = numerical_grad(rnn_loss, [_copy(params), x, y], 0)
    out = _copy(params)
    vg = s2sad.value_and_grad(rnn_loss)
    for _ in range(3):
        _, g = vg(_copy(params), x, y, out=out)
        assert g["rec"]["Wh"] is out["rec"]["Wh"]
        assert_close_tree(g, want)


def test_second_order_through_the_kept_exponentials():
    rng = np.random.default_rng(9)
    z = rng.standard_normal((4, 3))
    y = rng.integers(0, 3, 4)
    v = rng.standard_normal((4, 3))

    def head(z, y):
        return nn.softmax_cross_entropy(z * z, y)

    got = s2sad.hvp(head)(z, y, v)
    grad = s2sad.grad(head)
    h = 1e-5
    want = (grad(z + h * v, y) - grad(z - h * v, y)) / (2 * h)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_a_rebound_global_compiles_again(buffer_everything):  # noqa: F811
    global act
    rng = np.random.default_rng(10)
    params, x = _model(rng, 4)
    y = rng.integers(0, 3, 4)
    vg = s2sad.value_and_grad(rnn_loss)
    for _ in range(3):
        vg(_copy(params), x, y)
    saved = act
    try:
        act = np.sin
        value, g = vg(_copy(params), x, y)
        np.testing.assert_allclose(value, rnn_loss(_copy(params), x, y), rtol=1e-12)
        assert_close_tree(g, numerical_grad(rnn_loss, [_copy(params), x, y], 0))
    finally:
        act = saved


def test_threads_sharing_the_slot_get_their_own_gradients():
    import threading

    rng = np.random.default_rng(11)
    cases = [(rng.standard_normal((6, 4)), rng.integers(0, 4, 6)) for _ in range(4)]
    want = [_recomputed(1.0, z, y) for z, y in cases]
    bad = []

    def work(i):
        z, y = cases[i]
        for _ in range(300):
            v = nn.softmax_cross_entropy(z, y)
            got = nn.d_softmax_cross_entropy(1.0, v, z, y)[0]
            if got.tobytes() != want[i].tobytes():
                bad.append(i)

    import sys

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch inside the value and the rule
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not bad
