"""The workspace optimization: buffers reused across calls must never change a
gradient.  Each case compares the buffered gradient, over repeated calls with
changing data and shapes, with central finite differences in float64."""

import threading

import numpy as np
import pytest

import s2sad
from s2sad.runtime import workspace
from tests.corpus.fd import assert_close_tree, numerical_grad


@pytest.fixture(autouse=True)
def buffers_for_small_arrays(monkeypatch):
    """These tests use small arrays; buffer them anyway (normally below
    SMALL_BYTES of array arguments the plain form is used, and without out=
    sites under SPEED_BYTES get no buffer, both being faster)."""
    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)


def mlp(W, b, x):
    h = np.tanh(x @ W + b)
    return np.sum(h * h) / x.shape[0]


def masked(x):
    pos = x[x > 0.0]  # a data-dependent shape: no buffers downstream
    return np.sum(np.exp(pos)) + np.sum(x * x)


def growing(x):
    s = x
    for i in range(3):
        s = np.concatenate([s, s])  # the site below changes shape each iteration
        t = np.tanh(s * 0.5)
    return np.sum(t * x[0])


def loop_tape(W, x):
    h = x
    for t in range(5):
        h = np.tanh(h @ W + 0.1)
    return np.sum(h * h)


def conditional(x, W):
    y = x @ W
    if np.sum(y) > 0.0:
        z = np.tanh(y)
    else:
        z = np.sin(y[:, :1])  # another shape on the other path
    return np.sum(z * z)


_GRADS: dict = {}


def _fd_check(f, args, argnums):
    """Finite differences against the buffered gradient: one gradient function
    per test function, called three times (the first call of a shape runs
    without buffers, the second records their shapes, the third uses them)."""
    dfn = _GRADS.setdefault((f, argnums), s2sad.grad(f, argnums=argnums))
    dfn(*args)
    dfn(*args)
    got = dfn(*args)
    for k, i in enumerate(argnums):
        assert_close_tree(got[k], numerical_grad(f, args, i), rtol=1e-5, atol=1e-7)
    return dfn


def test_buffers_are_used_and_gradients_stay_right_over_calls_and_shapes():
    rng = np.random.default_rng(0)
    dfn = s2sad.grad(mlp, argnums=(0, 1))
    for n in (5, 5, 5, 7, 5, 7, 7):  # shapes come back: two workspaces
        args = (rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(n, 3)))
        got = dfn(*args)
        for k in range(2):
            assert_close_tree(got[k], numerical_grad(mlp, args, k), rtol=1e-5)
    assert 'out=ws["matmul"]' in dfn.source
    pool = dfn._last[3]
    assert len(pool.layouts) == 2


def test_returned_gradients_are_not_overwritten_by_later_calls():
    rng = np.random.default_rng(1)
    dfn = s2sad.grad(mlp, argnums=(0, 1))
    a = (rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(6, 3)))
    b = (rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(6, 3)))
    first = dfn(*a)
    kept = [g.copy() for g in first]
    for _ in range(3):
        dfn(*b)
    for g, k in zip(first, kept):
        np.testing.assert_array_equal(g, k)


def test_out_arrays_receive_the_gradients():
    rng = np.random.default_rng(2)
    dfn = s2sad.value_and_grad(mlp, argnums=(0, 1))
    args = (rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(6, 3)))
    outs = (np.empty((3, 4)), np.empty(4))
    for _ in range(3):
        value, grads = dfn(*args, out=outs)
        assert grads[0] is outs[0] and grads[1] is outs[1]
        for k in range(2):
            assert_close_tree(grads[k], numerical_grad(mlp, args, k), rtol=1e-5)


def test_data_dependent_shapes_get_no_buffer():
    rng = np.random.default_rng(3)
    dfn = None
    for _ in range(4):  # a different number of positive entries each call
        dfn = _fd_check(masked, (rng.normal(size=9),), (0,))
    assert "np.exp(pos)" in dfn.source  # left as written: its shape depends on x


def test_a_site_that_changes_shape_within_a_call_gets_no_buffer():
    rng = np.random.default_rng(4)
    for _ in range(3):
        _fd_check(growing, (rng.normal(size=3),), (0,))


def test_loop_values_on_the_tape_keep_their_own_buffers():
    rng = np.random.default_rng(5)
    for _ in range(3):
        dfn = _fd_check(
            loop_tape, (0.5 * rng.normal(size=(4, 4)), rng.normal(size=(2, 4))), (0, 1)
        )
    assert 'ws.take("h")' in dfn.source


def test_branches_with_different_shapes():
    rng = np.random.default_rng(6)
    W = rng.normal(size=(3, 4))
    for sign in (1.0, -1.0, 1.0, -1.0):
        x = sign * np.abs(rng.normal(size=(5, 3)))
        _fd_check(conditional, (x, np.abs(W)), (0, 1))


def test_boolean_array_arguments_bypass_the_workspace():
    def f(x, m):
        return np.sum(np.tanh(x[m]) * 2.0)

    rng = np.random.default_rng(7)
    for _ in range(3):
        x, m = rng.normal(size=8), rng.normal(size=8) > 0
        _fd_check(f, (x, m), (0,))


def test_scalar_code_is_left_plain():
    dfn = s2sad.grad(lambda x: np.sin(x) * np.cos(x))
    assert dfn(0.3) == pytest.approx(np.cos(0.6))
    assert "ws" not in dfn.source


def test_plain_form_on_request():
    dfn = s2sad.grad(mlp, optimize=False)
    dfn(np.ones((3, 4)), np.ones(4), np.ones((2, 3)))
    assert "ws" not in dfn.source and "x @ W" in dfn.source


def test_two_threads_share_a_gradient_function_safely():
    rng = np.random.default_rng(8)
    dfn = s2sad.grad(loop_tape, argnums=0)
    W = 0.5 * rng.normal(size=(4, 4))
    xs = [rng.normal(size=(3, 4)) for _ in range(2)]
    want = [s2sad.grad(loop_tape, argnums=0, optimize=False)(W, x) for x in xs]
    errors = []

    def work(k):
        for _ in range(200):
            if not np.allclose(dfn(W, xs[k]), want[k], rtol=1e-12, atol=1e-12):
                errors.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def scalar_fn(x, y):
    return np.sin(x * y) * np.exp(-x) + np.log1p(y * y) + np.tanh(y)


def test_scalar_code_runs_on_math_functions():
    rng = np.random.default_rng(9)
    dfn = None
    for _ in range(3):
        args = (float(rng.normal()), float(rng.normal()))
        dfn = _fd_check(scalar_fn, args, (0, 1))
    code = [ln for ln in dfn.source.splitlines() if not ln.lstrip().startswith("#")]
    assert "math.sin(" in dfn.source and not any("np." in ln for ln in code)
    value, _ = s2sad.value_and_grad(scalar_fn)(0.3, 0.4)
    assert type(value) is float  # no NumPy scalar was made on the way


def test_scalar_math_keeps_numpys_edge_cases():
    def f(x):
        return np.log(x) + np.exp(x * 1000.0)

    with np.errstate(all="ignore"):
        value, g = s2sad.value_and_grad(f)(-1.0)  # math.log(-1.0) would raise
        assert np.isnan(value) and g == -1.0 + 1000.0 * np.exp(-1000.0)
        value, _ = s2sad.value_and_grad(f)(1.0)  # math.exp(1000.0) would raise
        assert value == np.inf
    g32 = s2sad.grad(lambda x: np.sin(x) * x)(np.float32(0.5))
    assert type(g32) is np.float32  # NumPy scalars keep NumPy's functions


def test_an_elementwise_site_reuses_the_buffer_of_a_temporary_that_dies_there():
    from s2sad.runtime.workspace import shape_key

    rng = np.random.default_rng(10)
    dfn = s2sad.grad(mlp, argnums=(0, 1))
    args = (rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(6, 3)))
    for _ in range(3):
        got = dfn(*args)
    for k in range(2):
        assert_close_tree(got[k], numerical_grad(mlp, args, k), rtol=1e-5)
    fn, _, _, pool = dfn._last
    shares = fn.buffer_shares  # e.g. g_add = g_h * (1 - h*h): one buffer, not three
    ws = pool.free[(shape_key(list(args)), False)][0]
    assert shares and all(ws[site] is ws[donor] for site, donor in shares.items())


def test_small_arrays_get_the_plain_form(monkeypatch):
    monkeypatch.setattr(workspace, "SMALL_BYTES", 64 * 1024)
    dfn = s2sad.grad(mlp)
    small = (np.ones((3, 4)), np.ones(4), np.ones((2, 3)))
    dfn(*small)
    assert "ws" not in dfn.source
    big = (np.ones((30, 400)), np.ones(400), np.ones((20, 30)))  # 100 KB of W
    g = dfn(*big)
    assert 'out=ws["matmul"]' in dfn.source and g.shape == (30, 400)


def layer(W, b, x):
    return np.tanh(x @ W + b)


def two_layers(W1, b1, W2, b2, x):
    return np.sum(layer(W2, b2, layer(W1, b1, x)) ** 2)


def test_a_helper_called_with_two_shapes_gets_a_workspace_for_each():
    rng = np.random.default_rng(11)
    args = (
        rng.normal(size=(3, 5)),
        rng.normal(size=5),
        rng.normal(size=(5, 2)),
        rng.normal(size=2),
        rng.normal(size=(4, 3)),
    )
    nums = (0, 1, 2, 3, 4)  # x too: both calls of layer are the same specialization
    dfn = None
    for _ in range(2):
        dfn = _fd_check(two_layers, args, nums)
    assert 'ws.enter("layer_backward"' in dfn.source
    pool = _GRADS[(two_layers, nums)]._last[3]
    layout = next(iter(pool.layouts.values()))
    names = sorted(name for name, _ in layout.children)
    assert names.count("layer_backward") == 2  # one per shape signature


def test_a_batch_of_one_label_with_large_arrays_runs_buffered():
    """A 1-element int array (the labels of a last batch of one) is part of the
    shape key by value: it must be hashable (tolist() of shape (1,) is a list)."""

    def loss(W, x, y):
        z = x @ W
        return np.sum(z * z) + np.sum(W[y])

    rng = np.random.default_rng(12)
    W, x = rng.normal(size=(100, 100)), rng.normal(size=(1, 100))  # 80 KB of W
    dfn = s2sad.grad(loss)
    for y in (np.array([3]), np.array([3]), np.array([3]), np.array([[5]])):
        args = (W, x, y)
        assert_close_tree(dfn(*args), numerical_grad(loss, args, 0), rtol=1e-6)
    assert "ws" in dfn.source


def test_take_answers_keys_without_a_ring_in_c_and_keeps_no_cycle():
    """``ws.take`` of a key without a ring is a dict lookup (None, cached);
    a key with a ring hands out its free buffers, then None when all are
    held (a miss, for the ring to grow)."""
    from s2sad.runtime.workspace import Layout, Workspace

    layout = Layout()
    layout.rings["h"] = (((4, 3), np.dtype(np.float64)), 2)
    ws = Workspace(layout)
    assert ws.take("g_small") is None and ws.take("g_small") is None
    first = ws.take("h")
    assert first.shape == (4, 3)
    second = ws.take("h")
    assert second is not first  # the first is held here
    assert ws.take("h") is None and ws.misses == {"h": 1} and ws.root.missed
    del first, second
    assert ws.take("h") is not None  # free again
