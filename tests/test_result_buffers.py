"""Returned gradients: no workspace buffer (and no copy) in calls without ``out=``.

The buffers pass lists the sites that bind a gradient ``finalize`` returns
(``<fn>.buffer_results``); a workspace for calls without ``out=`` gives them no
buffer, so the site's fresh array is the gradient and ``finalize`` returns it
without copying.  Calls with ``out=`` keep the buffers and write into ``out``.
"""

import numpy as np

import s2sad


def layer(W, b, x):
    return np.sum(np.tanh(x @ W + b) ** 2)


def exact(W, b, x):
    h = np.tanh(x @ W + b)
    gz = 2.0 * h * (1.0 - h * h)
    return x.T @ gz, gz.sum(axis=0)


def data(seed):
    rng = np.random.default_rng(seed)  # W: 480 KB, past the small-buffer threshold
    return (
        rng.normal(size=(300, 200)) * 0.1,
        rng.normal(size=200),
        rng.normal(size=(100, 300)),
    )


def test_returned_gradients_are_fresh_right_and_never_reused():
    vg = s2sad.value_and_grad(layer, argnums=(0, 1))
    kept = []
    for seed in range(5):  # the second call records, later ones have buffers
        args = data(seed)
        value, grads = vg(*args)
        kept.append((args, [g.copy() for g in grads], grads))
        np.testing.assert_allclose(value, layer(*args), rtol=1e-12)
    for args, copies, grads in kept:  # no later call wrote over an earlier result
        for g, c, want in zip(grads, copies, exact(*args)):
            np.testing.assert_array_equal(g, c)
            np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)
            assert g.base is None and g.flags.writeable
    ids = {id(g) for _, _, grads in kept for g in grads}
    assert len(ids) == 10
    assert (
        "buffer_results" in vg.source
        and '"g_W"' in vg.source.split("buffer_results")[1]
    )


def test_the_workspace_without_out_has_no_buffer_for_returned_gradients():
    vg = s2sad.value_and_grad(layer, argnums=(0, 1))
    for seed in range(3):
        vg(*data(seed))
    pool = vg._last[3]
    (_key, full), spaces = next(iter(pool.free.items()))
    assert not full and spaces
    ws = spaces[0]
    assert "g_W" in ws.layout.results and ws["g_W"] is None
    assert any(v is not None for v in ws.values())  # other sites keep buffers


def test_with_out_the_gradients_are_written_into_it():
    vg = s2sad.value_and_grad(layer, argnums=(0, 1))
    args = data(7)
    outs = (np.empty((300, 200)), np.empty(200))
    for _ in range(3):
        _, grads = vg(*args, out=outs)
        assert all(g is o for g, o in zip(grads, outs))
        for g, want in zip(grads, exact(*args)):
            np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)
