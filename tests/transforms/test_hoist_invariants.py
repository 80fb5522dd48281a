"""hoist: loop-invariant reads (``params["Wx"]``, ``self.Wx``) and slice steps
(``x[:, t * C : (t + 1) * C]``) in reverse mode.

The reads leave the loop (in a one-step loop over the range's first step when
the range may be empty), the slices become one ``stepwise_matmul`` with their
bounds, checked at run time (overlapping or ragged slices are computed as
written); gradients stay equal to central finite differences in float64, with
workspaces on repeated calls, and forward mode and second order agree.
"""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad
from tests.transforms.dumps import after

C, STEPS = 3, 4


def dict_rnn(params, x):
    h = np.zeros((x.shape[0], params["Wh"].shape[0]))
    for t in range(STEPS):
        xt = x[:, t * C : (t + 1) * C]
        h = np.tanh(xt @ params["Wx"] + h @ params["Wh"] + params["bh"])
    return np.sum(h * h)


def plus_width(params, x):
    s = 0.0
    for t in range(x.shape[1] // C):
        s = s + np.sum(np.sin(x[:, t * C : t * C + C] @ params["W"]))
    return s


def rows(params, x):
    x = np.asarray(x)
    s = 0.0
    for t in range(2):
        s = s + np.sum(np.cos(x[C * t : C * (t + 1)] @ params["W"]))
    return s


def overlapping(params, x):
    # windows of width C every step of 1: they overlap, computed as written
    s = 0.0
    for t in range(3):
        s = s + np.sum(np.sin(x[:, t : t + C] @ params["W"]))
    return s


def offset_steps(params, x):
    # steps 1..3 of a slicing that starts one column in
    s = 0.0
    for t in range(1, 3):
        s = s + np.sum(np.sin(x[:, C * t + 1 : C * t + 1 + C] @ params["W"]))
    return s


def nested_loops(params, x):
    s = 0.0
    for k in range(2):
        for t in range(x.shape[1] // C):
            s = s + np.sum(np.sin(x[:, t * C : (t + 1) * C] @ params["W"]) * (k + 1))
    return s


def list_weights(ws, x):
    h = np.zeros((x.shape[0], ws[1].shape[0]))
    for t in range(STEPS):
        h = np.tanh(x[:, t * C : (t + 1) * C] @ ws[0] + h @ ws[1])
    return np.sum(h)


class Cell:
    def __init__(self, Wx, Wh):
        self.Wx, self.Wh = Wx, Wh

    def run(self, x):
        h = np.zeros((x.shape[0], self.Wh.shape[0]))
        for t in range(STEPS):
            h = np.tanh(x[:, t * C : (t + 1) * C] @ self.Wx + h @ self.Wh)
        return np.sum(h * h)


def attribute_rnn(Wx, Wh, x):
    return Cell(Wx, Wh).run(x)


def _params(r, h=4, w_rows=C):
    return {
        "Wx": r.normal(size=(C, h)) * 0.5,
        "Wh": r.normal(size=(h, h)) * 0.5,
        "bh": r.normal(size=h),
        "W": r.normal(size=(w_rows, 2)),
    }


HOISTED = [
    (dict_rnn, lambda r, n: (_params(r), r.normal(size=(n, C * STEPS)))),
    (dict_rnn, lambda r, n: (_params(r), r.normal(size=(n, C * STEPS + 2)))),
    (plus_width, lambda r, n: (_params(r), r.normal(size=(n, 2 * C)))),
    (rows, lambda r, n: (_params(r, w_rows=5), r.normal(size=(2 * C + n, 5)))),
    (overlapping, lambda r, n: (_params(r), r.normal(size=(n, 6)))),
    (offset_steps, lambda r, n: (_params(r), r.normal(size=(n, 3 * C + 1)))),
    (nested_loops, lambda r, n: (_params(r), r.normal(size=(n, 2 * C)))),
    (list_weights, lambda r, n: ([r.normal(size=(C, 3)), r.normal(size=(3, 3))],
                                 r.normal(size=(n, C * STEPS)))),
]  # fmt: skip


def _check(fn, args, argnums=(0,)):
    value, grads = s2sad.value_and_grad(fn, argnums=argnums)(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    for i, g in zip(argnums, grads):
        want = numerical_grad(fn, args, i)
        if isinstance(want, dict):
            for k in want:
                np.testing.assert_allclose(g[k], want[k], rtol=1e-6, atol=1e-8)
        elif isinstance(want, list):
            for a, b in zip(g, want):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
        else:
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)


def _loop_text(text: str) -> str:
    """The body of the last ``for`` loop of a dump (the main loop)."""
    return text[text.rindex("for t in") :]


@pytest.mark.parametrize("fn,make", HOISTED, ids=lambda v: getattr(v, "__name__", ""))
def test_hoisted_and_right(fn, make):
    r = np.random.default_rng(0)
    text = after("hoist", fn, (0,), example_args=make(r, 2))
    assert "stepwise_matmul(" in text or "stepwise_ahead(" in text
    assert "[:, t]" in text or "[t]" in text or "step_product(" in text
    for seed, n in ((0, 1), (1, 3), (2, 5)):
        _check(fn, make(np.random.default_rng(seed), n))


@pytest.mark.parametrize("fn,make", HOISTED, ids=lambda v: getattr(v, "__name__", ""))
def test_hoisted_buffered_twice(fn, make, monkeypatch):
    """Through the workspace: the same shapes three times (plain, recording,
    recorded), then new values."""
    from s2sad.runtime import workspace

    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    dfn = s2sad.value_and_grad(fn, argnums=0)
    for seed in (3, 3, 3, 4):
        args = make(np.random.default_rng(seed), 3)
        value, g = dfn(*args)
        np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
        want = numerical_grad(fn, args, 0)
        for k in want if isinstance(want, dict) else range(len(want)):
            np.testing.assert_allclose(g[k], want[k], rtol=1e-6, atol=1e-8)


def test_dict_reads_leave_the_loop():
    text = after("hoist", dict_rnn, (0,))
    loop = _loop_text(text)
    assert "params['Wx']" not in loop and "params['Wh']" not in loop
    # x is not differentiated: the steps computed ahead when small, read by
    # step_product and differentiated one step at a time
    assert "x_at_params_item_1 = stepwise_ahead(x, params_item_1, 1, r, (" in text
    assert "step_product(x_at_params_item_1, x, params_item_1, 1, t, (" in text
    # the range is a global: the reads run inside a one-step loop, once
    assert "r_once = r[:1]" in text
    # the index arithmetic only the slice read goes too
    assert "* C" not in loop


def test_literal_range_reads_without_a_guard():
    def literal(params, x):
        s = 0.0
        for t in range(2):
            s = s + np.sum(np.sin(x[:, t * C : (t + 1) * C] @ params["W"]))
        return s

    text = after("hoist", literal, (0,))
    assert "r_once" not in text
    assert text.index("params['W']") < text.index("for t in")


def test_attribute_reads_leave_the_loop():
    r = np.random.default_rng(5)
    args = (r.normal(size=(C, 3)), r.normal(size=(3, 3)) * 0.5, r.normal(size=(2, 12)))
    text = after("hoist", attribute_rnn, (0, 1))
    assert "stepwise_matmul(" in text or "stepwise_ahead(" in text
    _check(attribute_rnn, args, (0, 1, 2))


def test_zero_steps_read_nothing():
    def no_steps(params, x):
        s = np.sum(x)
        for t in range(x.shape[0] - x.shape[0]):
            s = s + np.sum(x[:, t * C : (t + 1) * C] @ params["missing"])
        return s

    x = np.random.default_rng(6).normal(size=(2, 6))
    value, g = s2sad.value_and_grad(no_steps, argnums=1)({"W": 1.0}, x)
    assert value == pytest.approx(np.sum(x))
    np.testing.assert_allclose(g, np.ones_like(x))


def test_ragged_last_slice_raises_as_written():
    """Ragged along the contraction axis: the product fails as in the loop."""
    r = np.random.default_rng(7)
    params, x = _params(r), r.normal(size=(2, C * STEPS - 1))
    with pytest.raises(ValueError):
        dict_rnn(params, x)
    with pytest.raises(ValueError):
        s2sad.value_and_grad(dict_rnn)(params, x)


def test_equal_to_the_per_step_code():
    """To rounding, the hoisted gradient is the per-step one (hoist off)."""
    from s2sad import pipeline

    r = np.random.default_rng(8)
    args = (_params(r), r.normal(size=(5, C * STEPS)))
    v1, g1 = s2sad.value_and_grad(dict_rnn)(*args)
    saved = pipeline.PASSES
    try:
        pipeline.PASSES = [p for p in saved if p[0] != "hoist"]
        text = after("reverse", dict_rnn, (0,))
        assert "stepwise_" not in text
    finally:
        pipeline.PASSES = saved
    want = numerical_grad(dict_rnn, args, 0)
    for k in ("Wx", "Wh", "bh"):
        np.testing.assert_allclose(g1[k], want[k], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(v1, dict_rnn(*args), rtol=1e-12)


def test_float32_stays_float32():
    r = np.random.default_rng(9)
    params = {k: v.astype(np.float32) for k, v in _params(r).items()}
    x = r.normal(size=(3, C * STEPS)).astype(np.float32)
    _, g = s2sad.value_and_grad(dict_rnn)(params, x)
    assert all(g[k].dtype == np.float32 for k in ("Wx", "Wh", "bh"))


def test_forward_mode_and_second_order():
    r = np.random.default_rng(10)
    Wx, Wh, x = (
        r.normal(size=(C, 3)),
        r.normal(size=(3, 3)) * 0.5,
        r.normal(size=(2, 12)),
    )
    v = r.normal(size=Wx.shape)
    _, tangent = s2sad.jvp(attribute_rnn, argnums=0)(Wx, Wh, x, v)
    g = s2sad.grad(attribute_rnn)(Wx, Wh, x)
    np.testing.assert_allclose(tangent, np.sum(g * v), rtol=1e-10)
    hv = s2sad.hvp(attribute_rnn)(Wx, Wh, x, v)
    eps = 1e-5
    gp = s2sad.grad(attribute_rnn)(Wx + eps * v, Wh, x)
    gm = s2sad.grad(attribute_rnn)(Wx - eps * v, Wh, x)
    np.testing.assert_allclose(hv, (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-7)
    # with respect to the sliced input (the tiles' lhs rule)
    u = r.normal(size=x.shape)
    hx = s2sad.hvp(attribute_rnn, argnums=2)(Wx, Wh, x, u)
    gp = s2sad.grad(attribute_rnn, argnums=2)(Wx, Wh, x + eps * u)
    gm = s2sad.grad(attribute_rnn, argnums=2)(Wx, Wh, x - eps * u)
    np.testing.assert_allclose(hx, (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-7)


# ----------------------------------------------------------------------------
# Near misses: the reads stay in the loop
# ----------------------------------------------------------------------------


def weight_rebound(params, x):
    W = params["W"]
    s = 0.0
    for t in range(2):
        s = s + np.sum(np.sin(x[:, t * C : (t + 1) * C] @ W))
        W = W * 0.9
    return s


def dict_written(params, x):
    d = {"W": params["W"]}
    s = 0.0
    for t in range(2):
        s = s + np.sum(np.sin(x[:, t * C : (t + 1) * C] @ d["W"]))
        d["W"] = d["W"] * 0.9
    return s


def dict_updated(params, x):
    d = {"W": params["W"]}
    s = 0.0
    for t in range(2):
        s = s + np.sum(np.sin(x[:, t * C : (t + 1) * C] @ d["W"]))
        d.update({"W": d["W"] * 0.9})
    return s


def key_changes(params, x):
    s = 0.0
    k = "W"
    for t in range(2):
        s = s + np.sum(np.sin(x[:, t * C : (t + 1) * C] @ params[k]))
        k = "V"
    return s


def attribute_written(Wx, Wh, x):
    cell = Cell(Wx, Wh)
    s = 0.0
    for t in range(2):
        s = s + np.sum(np.sin(x[:, t * C : (t + 1) * C] @ cell.Wx))
        cell.Wx = cell.Wx * 0.9
    return s


NEAR = [weight_rebound, dict_written, dict_updated, key_changes]


@pytest.mark.parametrize("fn", NEAR, ids=lambda f: f.__name__)
def test_near_miss_not_hoisted(fn):
    r = np.random.default_rng(11)
    params = {"W": r.normal(size=(C, 2)), "V": r.normal(size=(C, 2))}
    x = r.normal(size=(3, 2 * C))
    text = after("hoist", fn, (0,))
    assert "stepwise_" not in text
    _check(fn, (params, x))


def test_attribute_written_not_hoisted():
    r = np.random.default_rng(12)
    args = (r.normal(size=(C, 2)), r.normal(size=(2, 2)), r.normal(size=(3, 2 * C)))
    assert "stepwise_" not in after("hoist", attribute_written, (0,))
    _check(attribute_written, args, (0, 2))


def cell_argument(cell, x):
    return cell.run(x)


def cell_argument_written(cell, x):
    s = 0.0
    for t in range(2):
        s = s + np.sum(np.sin(x[:, t * C : (t + 1) * C] @ cell.Wx))
        cell.Wx = cell.Wx * 0.9
    return s


def test_attribute_of_an_argument_object():
    """``self.Wx`` read in the loop of a method of an object given in the call."""
    r = np.random.default_rng(13)
    x = r.normal(size=(2, C * STEPS))
    cell = Cell(r.normal(size=(C, 3)), r.normal(size=(3, 3)) * 0.5)
    text = after("hoist", cell_argument, (1,), example_args=(cell, x))
    assert "stepwise_matmul(" in text or "stepwise_ahead(" in text
    _check(cell_argument, (cell, x), (1,))


def test_attribute_written_on_an_argument_object():
    r = np.random.default_rng(14)
    x = r.normal(size=(2, 2 * C))
    W = r.normal(size=(C, 2))
    text = after("hoist", cell_argument_written, (1,), example_args=(Cell(W, W), x))
    assert "stepwise_" not in text
    _, g = s2sad.value_and_grad(cell_argument_written, argnums=1)(Cell(W, W), x)
    want = numerical_grad(lambda x: cell_argument_written(Cell(W, W), x), (x,), 0)
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)
