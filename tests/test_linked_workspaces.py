"""Linked workspaces (s2sad/transforms/buffers/links.py): a backward callee
enters its workspace by its forward's, not by a key of every residual.

The emitted form is checked, and the gradients against central finite
differences in float64, over repeated calls (workspaces reused), shapes that
change between calls (the keys must miss), a module constant changed between
calls (its value is part of the link), ``out=`` and ``has_aux``, and Hessian-
vector products through the same callee."""

import sys

import numpy as np
import pytest

import s2sad
from s2sad.runtime import workspace
from s2sad.runtime.workspace import Layout, Recorder, Workspace
from tests.corpus.fd import assert_close_tree, numerical_grad

STEPS = 3
HERE = sys.modules[__name__]


@pytest.fixture(autouse=True)
def buffers_for_small_arrays(monkeypatch):
    """Small arrays, buffered anyway (see tests/test_workspace.py)."""
    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)


def recurrent(params, x):
    h = np.zeros((x.shape[0], params["W"].shape[0]), dtype=x.dtype)
    for t in range(STEPS):
        h = np.tanh(x[:, t : t + 2] @ params["U"] + h @ params["W"] + params["b"])
    return h


def rnn_loss(params, x):
    h = recurrent(params, x)
    return np.sum(h * h) / x.shape[0]


def rnn_loss_aux(params, x):
    h = recurrent(params, x)
    return np.sum(h * h), h.shape[0]


def broadcasting(w, x):
    return np.tanh(x * w + 1.0)  # w: (k,), x: (n, k): the cotangent unbroadcasts


def broadcast_loss(w, x):
    return np.sum(broadcasting(w, x) ** 2)


WIDTH = 3


def window(w, x):
    h = np.tanh(x * w)
    # the residuals' shapes follow WIDTH, the output's (and g_out's) do not
    return np.sum(h[:, :WIDTH] * w[:WIDTH], axis=1)


def window_loss(w, x):
    return np.sum(window(w, x) ** 2)


def data_branch(w, x):
    y = x * w
    if np.sum(y) > 0.0:  # a data-dependent test: no proof
        y = np.tanh(y)
    return y


def branch_loss(w, x):
    return np.sum(data_branch(w, x) ** 2)


def _params(rng, hidden=4):
    return {
        "U": rng.standard_normal((2, hidden)) * 0.5,
        "W": rng.standard_normal((hidden, hidden)) * 0.5,
        "b": rng.standard_normal(hidden) * 0.1,
    }


def _fd(f, args, argnum=0):
    return numerical_grad(f, args, argnum)


def test_the_backward_enters_by_the_forwards_workspace():
    rng = np.random.default_rng(0)
    vg = s2sad.value_and_grad(rnn_loss)
    params, x = _params(rng), rng.standard_normal((5, STEPS + 1))
    vg(params, x)
    vg(params, x)
    src = vg.source
    assert 'ws = ws.enter("recurrent_forward", (params, x))' in src
    assert "ws.link(" in src and "HERE.STEPS" not in src
    assert (
        'ws = ws.enter_linked(\n        "recurrent_backward", g_out, saved' in src
        or ('ws.enter_linked("recurrent_backward", g_out, saved' in src)
    )
    assert 'ws.enter("recurrent_backward"' not in src
    # the loop's bound is read from the test module live: its value is keyed
    assert ".STEPS,)" in src.replace("\n", "").replace(" ", "")


def test_a_data_dependent_forward_keeps_the_full_key():
    rng = np.random.default_rng(1)
    vg = s2sad.value_and_grad(branch_loss)
    w, x = rng.standard_normal(3), rng.standard_normal((4, 3))
    for _ in range(3):
        assert_close_tree(vg(w, x)[1], _fd(branch_loss, [w, x]))
    assert "enter_linked" not in vg.source and "ws.link" not in vg.source


def _linked_children(vg):
    """(forward workspace, backward workspace) pairs linked in vg's pool."""
    pool = vg._warm[1] if vg._warm else None
    if pool is None:
        return []
    found = []
    for free in pool.free.values():
        for ws in free:
            for child in ws.children.values():
                found += [(child, b) for b in child.after.values()]
    return found


def test_gradients_stay_right_over_calls_shapes_and_a_changed_constant(monkeypatch):
    rng = np.random.default_rng(2)
    vg = s2sad.value_and_grad(rnn_loss)
    params = _params(rng)
    for n in (5, 5, 5, 7, 7, 5, 1, 1):
        x = rng.standard_normal((n, STEPS + 1))
        value, grads = vg(params, x)
        assert value == pytest.approx(rnn_loss(params, x), rel=1e-12)
        assert_close_tree(grads, _fd(rnn_loss, [params, x]))
    assert _linked_children(vg)  # the link was taken
    monkeypatch.setattr(HERE, "STEPS", 2)  # fewer steps: the tape is shorter
    for n in (5, 5, 5, 7):
        x = rng.standard_normal((n, 4))
        value, grads = vg(params, x)
        assert value == pytest.approx(rnn_loss(params, x), rel=1e-12)
        assert_close_tree(grads, _fd(rnn_loss, [params, x]))


def test_a_module_constant_that_sizes_residuals_is_part_of_the_link(monkeypatch):
    rng = np.random.default_rng(6)
    vg = s2sad.value_and_grad(window_loss)
    w, x = rng.standard_normal(4), rng.standard_normal((5, 4))
    out = np.empty(4)
    for width in (3, 3, 3, 2, 2, 3):
        monkeypatch.setattr(HERE, "WIDTH", width)
        for kw in ({}, {"out": out}):
            assert_close_tree(vg(w, x, **kw)[1], _fd(window_loss, [w, x]))
    assert "ws.link(" in vg.source and ".WIDTH" in vg.source


def test_float32_out_and_has_aux():
    rng = np.random.default_rng(3)
    params = {k: v.astype(np.float32) for k, v in _params(rng, 3).items()}
    vg = s2sad.value_and_grad(rnn_loss)
    out = {k: np.empty_like(v) for k, v in params.items()}
    for n in (4, 4, 4, 6, 6, 6):
        x = rng.standard_normal((n, STEPS + 1)).astype(np.float32)
        _, grads = vg(params, x, out=out)
        assert grads is out
        want = _fd(rnn_loss, [{k: v.astype(np.float64) for k, v in params.items()}, x])
        assert_close_tree(
            {k: v.astype(np.float64) for k, v in grads.items()}, want, 1e-3, 1e-4
        )
    aux = s2sad.value_and_grad(rnn_loss_aux, has_aux=True)
    p64 = _params(rng)
    for n in (3, 3, 3, 5):
        x = rng.standard_normal((n, STEPS + 1))
        (_, n_rows), grads = aux(p64, x)
        assert n_rows == n
        assert_close_tree(grads, _fd(lambda p, x: rnn_loss_aux(p, x)[0], [p64, x]))


def test_broadcasting_cotangents_through_a_linked_callee():
    rng = np.random.default_rng(4)
    vg = s2sad.value_and_grad(broadcast_loss)
    w = rng.standard_normal(3)
    for n in (2, 2, 2, 6, 6, 2):
        x = rng.standard_normal((n, 3))
        assert_close_tree(vg(w, x)[1], _fd(broadcast_loss, [w, x]))
    assert "enter_linked" in vg.source


def test_hvp_through_the_callee():
    rng = np.random.default_rng(5)
    w, x, v = (
        rng.standard_normal(3),
        rng.standard_normal((4, 3)),
        rng.standard_normal(3),
    )
    hv = s2sad.hvp(broadcast_loss)
    g = s2sad.grad(broadcast_loss)
    eps = 1e-5
    want = (g(w + eps * v, x) - g(w - eps * v, x)) / (2 * eps)
    for _ in range(3):
        np.testing.assert_allclose(hv(w, x, v), want, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- the runtime


def _forward(ws, a):
    ws = ws.enter("f_forward", (a,))
    h = a * 2.0
    return h, ws.link((h, a.shape[0]), (STEPS,))


def _backward(g, saved, ws):
    return ws.enter_linked("f_backward", g, saved, (0,))


def test_the_recorder_links_only_keys_without_values():
    rec = Recorder()
    a = np.ones(3)
    _, saved = _forward(rec, a)
    child = _backward(np.ones(3), saved, rec)
    layout = rec.layout()
    assert list(layout.links.values()) == [child.key]
    # a residual at a checked position holding an int (keyed by its value): no link
    rec = Recorder()
    fwd = rec.enter("f_forward", (a,))
    saved = fwd.link((3, a), (STEPS,))
    _backward(np.ones(3), saved, rec)
    assert rec.layout().links == {}
    # two different backward keys after one forward's: no link either
    rec = Recorder()
    fwd = rec.enter("f_forward", (a,))
    for h in (np.ones(3), np.ones(4)):
        _backward(np.ones(3), fwd.link((h, 3)), rec)
    assert rec.layout().links == {}


def test_a_workspace_enters_linked_children_and_falls_back_otherwise():
    rec = Recorder()
    a = np.ones(3)
    _, saved = _forward(rec, a)
    _backward(np.ones(3), saved, rec)
    layout = rec.layout()
    ws = Workspace(layout)
    _, saved = _forward(ws, a)
    linked = _backward(np.ones(3), saved, ws)
    assert linked is ws.children[next(iter(layout.links.values()))]
    assert ws.links == {}  # taken by the backward
    # another g key, a residual tuple no forward linked: the full key, as enter
    _, saved = _forward(ws, a)
    assert _backward(np.ones(5), saved, ws) is workspace.NO_WORKSPACE
    assert _backward(np.ones(3), (a * 2.0, 3), ws) is linked
    assert workspace.NO_WORKSPACE.link(saved) is saved
    assert workspace.NO_WORKSPACE.enter_linked("f", 1.0, saved, ()) is (
        workspace.NO_WORKSPACE
    )
    assert Layout().links == {}


def test_rings_grow_after_a_miss_and_workspaces_without_rings_take_nothing():
    layout = Layout()
    layout.rings["r"] = (((2,), np.dtype(float)), 1)
    child = Layout()
    child.rings["c"] = (((3,), np.dtype(float)), 1)
    layout.children[("f", ())] = child
    ws = Workspace(layout)
    first = ws.take("r")
    assert first is not None and ws.take("r") is None  # busy: a miss
    inner = ws.children[("f", ())]
    held = inner.take("c")
    assert held is not None and inner.take("c") is None
    ws.grow()
    assert len(ws.rings["r"]) == 2 and len(inner.rings["c"]) == 2
    del first, held
    ws.grow()  # nothing missed: nothing added
    assert len(ws.rings["r"]) == 2 and len(inner.rings["c"]) == 2
    bare = Workspace(Layout())
    assert bare.take("r") is None and workspace.NO_WORKSPACE.take("r") is None
    bare.grow()
    assert bare.rings == {}


class Scale:
    def __init__(self, w):
        self.w = w


def scaled(layer, x):
    return np.tanh(x * layer.w)  # an object's attribute: not in its key


def scaled_loss(x, layer):
    return np.sum(scaled(layer, x) ** 2)


def test_a_forward_reading_an_objects_attribute_keeps_the_full_key():
    rng = np.random.default_rng(7)
    vg = s2sad.value_and_grad(scaled_loss)
    layer, x = Scale(rng.standard_normal(3)), rng.standard_normal((4, 3))
    for w_shape in (3, 3, 3, 1, 1):  # the attribute changes shape: keys must tell
        layer.w = rng.standard_normal(w_shape)
        assert_close_tree(vg(x, layer)[1], _fd(scaled_loss, [x, layer]))
    assert "enter_linked" not in vg.source
