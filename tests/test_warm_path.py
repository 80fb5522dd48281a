"""The warm path of buffered gradient calls (issue 16, per-call cost).

After a buffered call (arrays of ``workspace.SMALL_BYTES`` and more, dicts of
parameters) that went well, a call whose workspace key is the same goes
straight to the workspace pool (``fastpath.warm_call``).  These tests check
that only such calls take it: a changed shape, dtype, argument type or int, a
rebound global, keywords, ``has_aux``, a list for an array, a torch
or Dask array each go the slow way, and every gradient stays right (central
finite differences in float64, or the slow path's answer), also when
signatures alternate, and results handed back earlier are never overwritten.
"""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad

ACT = np.tanh


def net(W, b, x):
    return np.mean(ACT(x @ W + b) ** 2)


def scaled(W, x, k):
    return np.sum(np.tanh(x @ W)[:k]) * 0.5


def logits(p, x):
    h = np.tanh(x @ p["W"] + p["b"])
    return h @ p["V"]


def dict_loss(p, x):
    return np.mean(logits(p, x) ** 2)


def aux_net(W, b, x):
    v = net(W, b, x)
    return v, v * 2.0


def _data(rng, n=200, d=50, m=8, dtype=np.float64):
    W = (0.3 * rng.normal(size=(d, m))).astype(dtype)
    b = (0.1 * rng.normal(size=m)).astype(dtype)
    x = rng.normal(size=(n, d)).astype(dtype)  # 80 kB in float64: buffered
    return W, b, x


def _binds(gf):
    """Count the calls that go the slow way (binding their arguments)."""
    seen = []
    bind = gf._bind

    def counting(args, kwargs):
        seen.append(1)
        return bind(args, kwargs)

    gf._bind = counting
    return seen


def _check(got, want, rtol=1e-6, atol=1e-8):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("n", [200, 170])
def test_warm_calls_match_finite_differences(n):
    rng = np.random.default_rng(0)
    vg = s2sad.value_and_grad(net, argnums=(0, 1))
    slow = _binds(vg)
    kept = []
    for i in range(5):  # plain, recording, buffered, then warm calls
        W, b, x = _data(rng, n=n)
        value, grads = vg(W, b, x)
        assert value == pytest.approx(net(W, b, x), rel=1e-12)
        _check(grads, numerical_grad(net, [W, b, x], (0, 1)))
        kept.append(((W, b, x), [g.copy() for g in grads], grads))
    assert vg._warm is not None and len(slow) < 5
    for _, copies, grads in kept:  # later calls wrote into no earlier result
        _check(grads, copies, rtol=0, atol=0)


def test_dict_parameters_and_callee_take_the_warm_path():
    rng = np.random.default_rng(1)
    g = s2sad.grad(dict_loss)
    slow = _binds(g)
    for _ in range(5):
        W, b, x = _data(rng)
        p = {"W": W, "b": b, "V": rng.normal(size=(8, 3))}
        got = g(p, x)
        want = numerical_grad(dict_loss, [p, x], 0)
        assert set(got) == set(p)
        for k in p:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-8)
    assert len(slow) <= 3  # the warm path took the last calls


def test_alternating_signatures_go_the_slow_way_and_stay_right():
    rng = np.random.default_rng(2)
    vg = s2sad.value_and_grad(net, argnums=(0, 1))
    calls = [
        _data(rng),
        _data(rng, n=300),  # another shape
        _data(rng, dtype=np.float32),  # another dtype
        _data(rng, d=20),
    ]
    kept = []
    for W, b, x in calls + calls + calls:
        slow = _binds(vg)
        _, grads = vg(W, b, x)
        kept.append((grads, [g.copy() for g in grads]))
        x64 = [W.astype(np.float64), b.astype(np.float64), x.astype(np.float64)]
        want = numerical_grad(net, x64, (0, 1))
        tol = 1e-6 if W.dtype == np.float64 else 2e-3
        _check(grads, want, rtol=tol, atol=tol * 1e-2)
        assert grads[0].dtype == W.dtype
        assert len(slow) == 1  # the signature changed on every call
    for grads, copies in kept:  # the caller's: no later call wrote into them
        _check(grads, copies, rtol=0, atol=0)
    for W, b, x in calls[:1] * 4:  # warm again after the alternation
        _, grads = vg(W, b, x)
    assert vg._warm is not None
    _check(grads, numerical_grad(net, [W, b, x], (0, 1)))


def test_changed_int_argument_and_list_for_an_array():
    rng = np.random.default_rng(3)
    W, _, x = _data(rng)
    g = s2sad.grad(scaled)
    for k in (50, 50, 50, 50, 120, 50, 7):
        np.testing.assert_allclose(
            g(W, x, k), numerical_grad(scaled, [W, x, k], 0), rtol=1e-6, atol=1e-8
        )
    h = s2sad.grad(net)
    W, b, x = _data(rng, n=40, d=4, m=3)
    for Wi in (W, W, W, W.tolist(), W, W.tolist()):
        got = h(Wi, b, x)
        want = numerical_grad(net, [np.asarray(Wi), b, x], 0)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-8)
        assert type(got) is type(Wi)


def test_rebound_global_compiles_again():
    rng = np.random.default_rng(4)
    W, b, x = _data(rng)
    vg = s2sad.value_and_grad(net)
    for _ in range(4):
        vg(W, b, x)
    assert vg._warm is not None
    global ACT
    try:
        ACT = np.sin
        value, gW = vg(W, b, x)
        assert value == pytest.approx(np.mean(np.sin(x @ W + b) ** 2), rel=1e-12)
        np.testing.assert_allclose(
            gW, numerical_grad(net, [W, b, x], 0), rtol=1e-6, atol=1e-8
        )
    finally:
        ACT = np.tanh
    value, gW = vg(W, b, x)
    np.testing.assert_allclose(
        gW, numerical_grad(net, [W, b, x], 0), rtol=1e-6, atol=1e-8
    )


def test_keywords_and_has_aux_go_the_slow_way_out_the_warm_one():
    rng = np.random.default_rng(5)
    W, b, x = _data(rng)
    want = numerical_grad(net, [W, b, x], (0, 1))
    g = s2sad.grad(net, argnums=(0, 1))
    for _ in range(4):
        g(W, b, x)
    slow = _binds(g)
    oW, ob = np.empty_like(W), np.empty_like(b)
    for _ in range(2):  # out=: the warm path, twice (the workspace reused)
        oW[...], ob[...] = np.nan, np.nan
        got = g(W, b, x, out=(oW, ob))
        assert got[0] is oW and got[1] is ob and len(slow) == 0
        _check((oW, ob), want)
    _check(g(W, b, x=x), want)
    assert len(slow) == 1
    _check(g(W, b, x), want)
    assert len(slow) == 1  # warm again
    a = s2sad.value_and_grad(aux_net, has_aux=True)
    for _ in range(4):
        (_, aux), gW = a(W, b, x)
        assert aux == pytest.approx(2.0 * net(W, b, x), rel=1e-12)
        np.testing.assert_allclose(gW, want[0], rtol=1e-6, atol=1e-8)
    assert a._warm is None


def test_errors_on_the_warm_path_are_the_slow_paths():
    rng = np.random.default_rng(6)
    W, b, x = _data(rng)
    g = s2sad.grad(net)
    for _ in range(4):
        g(W, b, x)
    bad = b.copy()
    bad[:] = np.nan
    assert np.isnan(g(W, bad, x)).all()
    with pytest.raises(ValueError):
        g(W, b, x[:, :10])  # another shape: the slow way, NumPy's error
    np.testing.assert_allclose(
        g(W, b, x), numerical_grad(net, [W, b, x], 0), rtol=1e-6, atol=1e-8
    )


def test_torch_arrays_go_the_slow_way():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    W, b, x = _data(rng)
    g = s2sad.grad(net, argnums=(0, 1))
    for _ in range(4):
        want = g(W, b, x)
    got = g(*(torch.from_numpy(a) for a in (W, b, x)))
    assert isinstance(got[0], torch.Tensor)
    _check([t.numpy() for t in got], want, rtol=1e-10, atol=1e-12)
    _check(g(W, b, x), want, rtol=0, atol=0)


def test_dask_arrays_go_the_slow_way():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(8)
    W, b, x = _data(rng)
    g = s2sad.grad(net, argnums=(0, 1))
    for _ in range(4):
        want = g(W, b, x)
    got = g(W, b, da.from_array(x, chunks=(100, 50)))
    _check([np.asarray(t) for t in got], want, rtol=1e-10, atol=1e-12)
    _check(g(W, b, x), want, rtol=0, atol=0)
