"""``out=`` arrays as the buffers of the sites computing the gradients (issue 16).

A gradient that one site (outside loops) computes is written straight into the
caller's ``out=`` array (runtime/outinto.py), which serves as that site's
buffer for the call; arrays that alias an argument or another ``out=`` array,
are not C-contiguous or have another dtype keep the workspace's buffer and the
copy.  Every case is checked against central finite differences in float64, on
first, recording and buffered calls (the workspace reused).
"""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import outinto
from s2sad.testing import numerical_grad


def mlp(W1, b1, W2, b2, x):
    h = np.tanh(x @ W1 + b1)
    return np.mean((h @ W2 + b2) ** 2)


def relu_net(W, b, x):
    return np.sum(np.maximum(x @ W + b, 0.0) ** 2)


def branchy(W, x, flag):
    if flag > 0:
        z = x @ W
    else:
        z = x @ (2.0 * W)
    return np.sum(np.tanh(z))


def _mlp_data(rng, n=300, d=40, m=16, k=3):  # x: 96 kB in float64, buffered
    return (
        0.3 * rng.normal(size=(d, m)),
        0.1 * rng.normal(size=m),
        0.3 * rng.normal(size=(m, k)),
        0.1 * rng.normal(size=k),
        rng.normal(size=(n, d)),
    )


def _spy(monkeypatch):
    """Record the site keys each call writes into out= arrays."""
    seen = []
    plan = outinto.plan

    def spying(*a):
        chosen = plan(*a)
        seen.append(sorted(chosen))
        return chosen

    monkeypatch.setattr(outinto, "plan", spying)
    return seen


def _close(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-8)


def test_the_table_maps_each_site_to_its_gradient():
    rng = np.random.default_rng(0)
    args = _mlp_data(rng)
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    vg(*args)
    fn = vg._last[0]
    assert fn.buffer_results == {"g_b2": 3, "g_W2": 2, "g_b1": 1, "g_W1": 0}
    assert 'buffer_results = {"g_b2": 3, "g_W2": 2, "g_b1": 1, "g_W1": 0}' in vg.source


@pytest.mark.parametrize("n", [300, 257])
def test_gradients_written_in_place_match_finite_differences(n, monkeypatch):
    rng = np.random.default_rng(n)
    args = _mlp_data(rng, n=n)
    want = numerical_grad(mlp, args, (0, 1, 2, 3))
    seen = _spy(monkeypatch)
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    outs = tuple(np.empty_like(a) for a in args[:4])
    for _ in range(5):  # first, recording, then buffered calls (workspace reused)
        for o in outs:
            o[...] = np.nan
        value, got = vg(*args, out=outs)
        assert all(g is o for g, o in zip(got, outs))
        assert value == pytest.approx(mlp(*args), rel=1e-12)
        _close(outs, want)
    assert seen[-1] == ["g_W1", "g_W2", "g_b1", "g_b2"]
    pool = vg._last[3]
    for ws in (w for free in pool.free.values() for w in free):
        assert not any(ws.get(k) is o for k in seen[-1] for o in outs)
    plain = vg(*args)[1]  # the plain form afterwards: its own arrays
    assert not any(g is o for g, o in zip(plain, outs))
    _close(plain, want)


def test_relu_and_a_single_argnum(monkeypatch):
    rng = np.random.default_rng(1)
    W, b = 0.3 * rng.normal(size=(40, 16)), 0.1 * rng.normal(size=16)
    x = rng.normal(size=(300, 40))
    want = numerical_grad(relu_net, [W, b, x], 0)
    seen = _spy(monkeypatch)
    g = s2sad.grad(relu_net)
    out = np.empty_like(W)
    for _ in range(4):
        out[...] = np.nan
        assert g(W, b, x, out=out) is out
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-8)
    assert len(seen[-1]) == 1  # the one gradient's site


def _calls(vg, args, outs, want, times=4):
    for _ in range(times):
        for o in outs:
            if isinstance(o, np.ndarray) and o.flags.writeable:
                o[...] = np.nan
        vg(*args, out=outs)
    _close(outs, want)


def test_an_out_array_aliasing_an_argument_keeps_the_copy(monkeypatch):
    rng = np.random.default_rng(2)
    W1, b1, W2, b2, x = _mlp_data(rng)
    want = numerical_grad(mlp, [W1, b1, W2, b2, x], (0, 1, 2, 3))
    seen = _spy(monkeypatch)
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    # gW1's out= array is a view into x's memory: the function still reads x
    big = np.concatenate([x.ravel(), np.zeros(W1.size)])
    xv = big[: x.size].reshape(x.shape)
    alias = big[x.size - W1.size // 2 : x.size + W1.size - W1.size // 2]
    alias = alias.reshape(W1.shape)
    outs = (alias, np.empty_like(b1), np.empty_like(W2), np.empty_like(b2))
    for _ in range(4):
        big[: x.size] = x.ravel()
        vg(W1, b1, W2, b2, xv, out=outs)
    np.testing.assert_allclose(alias, want[0], rtol=1e-6, atol=1e-8)
    _close(outs[1:], want[1:])
    assert "g_W1" not in seen[-1] and "g_W2" in seen[-1]


def test_out_arrays_sharing_memory_keep_the_copies(monkeypatch):
    rng = np.random.default_rng(3)
    args = list(_mlp_data(rng))
    args[3] = 0.1 * rng.normal(size=args[1].shape)  # b2 of b1's shape (k == m)
    args[2] = 0.3 * rng.normal(size=(16, 16))
    want = numerical_grad(mlp, args, (0, 1, 2, 3))
    seen = _spy(monkeypatch)
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    shared = np.empty_like(args[1])
    outs = (np.empty_like(args[0]), shared, np.empty_like(args[2]), shared)
    for _ in range(4):
        vg(*args, out=outs)
    # as with copies in order: the later gradient is the one the array keeps
    np.testing.assert_allclose(shared, want[3], rtol=1e-6, atol=1e-8)
    _close([outs[0], outs[2]], [want[0], want[2]])
    assert "g_b1" not in seen[-1] and "g_b2" not in seen[-1]
    assert "g_W1" in seen[-1]


def test_non_contiguous_and_other_dtype_arrays_keep_the_copy(monkeypatch):
    rng = np.random.default_rng(4)
    args = _mlp_data(rng)
    want = numerical_grad(mlp, args, (0, 1, 2, 3))
    seen = _spy(monkeypatch)
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    fortran = np.asfortranarray(np.empty_like(args[0]))
    strided = np.empty((args[1].size, 2))[:, 0]
    outs = (
        fortran,
        strided,
        np.empty(args[2].shape, np.float32),
        np.empty_like(args[3]),
    )
    for _ in range(4):
        vg(*args, out=outs)
    _close([fortran, strided], want[:2])
    np.testing.assert_allclose(outs[2], want[2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[3], want[3], rtol=1e-6, atol=1e-8)
    assert seen[-1] == ["g_b2"]


def test_a_gradient_bound_by_two_sites_keeps_the_copy(monkeypatch):
    rng = np.random.default_rng(5)
    W, x = 0.3 * rng.normal(size=(40, 16)), rng.normal(size=(300, 40))
    g = s2sad.grad(branchy)
    out = np.empty_like(W)
    for flag in (1, 1, 1, -1, -1, -1):
        want = numerical_grad(branchy, [W, x, flag], 0)
        out[...] = np.nan
        assert g(W, x, flag, out=out) is out
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-8)


def test_objects_among_the_arguments_keep_the_copy():
    class Holder:
        pass

    layout = type("L", (), {"fixed": {"g_W": ((3, 2), np.dtype(float))}})()
    out = np.empty((3, 2))
    sites = {"g_W": 0}
    assert list(outinto.plan((out,), [np.ones(2), 1.0], layout, sites)) == ["g_W"]
    assert outinto.plan((out,), [Holder()], layout, sites) == {}
    assert outinto.plan((out,), [[out[:1]]], layout, sites) == {}
    assert outinto.plan((out,), [{"a": np.ones(3)}], layout, sites) == {"g_W": out}
    assert outinto.plan((out,), [out.T], layout, sites) == {}
    assert outinto.plan((out,), [], layout, {"g_W": None}) == {}
    assert outinto.plan((out,), [], layout, {"g_W": 0, "g_W.2": 0}) == {}
    ro = np.empty((3, 2))
    ro.flags.writeable = False
    assert outinto.plan((ro,), [], layout, sites) == {}


def test_the_last_plan_is_reused_only_for_the_very_same_arrays(monkeypatch):
    rng = np.random.default_rng(6)
    W1, b1, W2, b2, x = _mlp_data(rng, n=600, d=16)  # x: 77 kB, W1: 16 x 16
    want = numerical_grad(mlp, [W1, b1, W2, b2, x], (0, 1, 2, 3))
    seen = _spy(monkeypatch)
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    outs = tuple(np.empty_like(a) for a in (W1, b1, W2, b2))
    for _ in range(4):  # the same arrays: the plan kept
        vg(W1, b1, W2, b2, x, out=outs)
        _close(outs, want)
    assert "g_W1" in seen[-1]
    # the same out= arrays, but now an argument is a view of gW1's array
    W1_view = outs[0].reshape(-1).reshape(W1.shape)
    for _ in range(2):
        W1_view[...] = W1
        vg(W1_view, b1, W2, b2, x, out=outs)
        np.testing.assert_allclose(outs[0], want[0], rtol=1e-6, atol=1e-8)
        _close(outs[1:], want[1:])
    assert "g_W1" not in seen[-1] and "g_W2" in seen[-1]
