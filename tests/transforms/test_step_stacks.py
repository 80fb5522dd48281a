"""Step products ahead of the loop and their stacked weight cotangent.

``stepwise_ahead`` copies a loop's steps of ``x`` time-major once and runs
one product (a ``StepProducts``) where a step's product is small, or one
product in ``x``'s own layout where its steps are one matrix without a copy;
in buffered code the ``loopsums`` pass stacks the backward sweep's per-step
cotangents of ``step_product`` for ``w`` inline (``S[:, t] = g`` into
``step_stack``'s array) and sums them with one product after the loop
(``stacked_steps``), one for both loops of a peeled loop.

Gradients against central differences in float64 (step axis 1 and 2, tiles,
peeled and unpeeled loops, loops that skip steps or visit them backwards,
steps in a callee, both run-time choices), the workspace on repeated calls,
float32, forward mode and hvp, and the runtime helpers' fallbacks.
"""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import stepreads, steps, stepstacks
from tests.repeated import buffer_everything, check_repeated_calls, seeded_rand

__all__ = ["buffer_everything"]


@pytest.fixture(autouse=True)
def _buffered(buffer_everything):
    """Workspaces for every size (the buffered code runs on small shapes)."""


@pytest.fixture(params=["time-major", "own layout", "each step"])
def layout(request, monkeypatch):
    """Steps made time-major at any size, or never: in x's own layout where
    that needs no copy, or each step's own product."""
    big = request.param == "time-major"
    monkeypatch.setattr(stepreads, "TIME_MAJOR_ENTRIES", 1 << 40 if big else -1)
    monkeypatch.setattr(stepreads, "AHEAD_ENTRIES", -1)
    monkeypatch.setattr(stepreads, "OWN_LAYOUT", request.param != "each step")
    return request.param


def peeled(Wx, Wh, b, x):  # h starts at zeros: the peel pass splits the loop
    xs = x.reshape(x.shape[0], 4, -1)
    h = np.zeros((x.shape[0], Wh.shape[0]), dtype=x.dtype)
    for t in range(4):
        h = np.tanh(xs[:, t, :] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def unpeeled(Wx, Wh, b, x, h):
    xs = x.reshape(x.shape[0], 4, -1)
    for t in range(4):
        h = np.tanh(xs[:, t, :] @ Wx + h @ Wh + b)
    return np.sum(np.sin(h))


def axis2(W, x):  # steps along axis 2 of a 4-d x
    s = 0.0
    for t in range(x.shape[2]):
        s = s + np.sum(np.cos(x[:, :, t, :] @ W))
    return s


def tiles(W, U, x):  # steps as slices x[:, t*C:(t+1)*C] (examples/rnn_mnist.py)
    h = np.ones((x.shape[0], U.shape[0]))
    for t in range(3):
        h = np.tanh(x[:, t * 4 : (t + 1) * 4] @ W + h @ U)
    return np.sum(h)


def skips(W, x):  # steps 1, 3, 5: a gap between each
    s = 0.0
    for t in range(1, x.shape[1], 2):
        s = s + np.sum(np.tanh(x[:, t, :] @ W) ** 2)
    return s


def tail(W, x):  # steps 1.. only
    s = 0.0
    for t in range(1, x.shape[1]):
        s = s + np.sum(np.sin(x[:, t, :] @ W))
    return s


def backwards(W, x):  # negative steps: from the end
    s = 0.0
    for t in range(-1, -x.shape[1] - 1, -1):
        s = s * 0.5 + np.sum(np.sin(x[:, t, :] @ W))
    return s


def _cell(W, U, xs, h):
    for t in range(xs.shape[1]):
        h = np.tanh(xs[:, t, :] @ W + h @ U)
    return h


def callee(W, U, x):  # the loop in a function the differentiated one calls
    h = _cell(W, U, x, np.ones((x.shape[0], U.shape[0])))
    return np.sum(h * h)


def shared(W, U, x):  # W read after the loop too: its cotangent has a value first
    h = np.ones((x.shape[0], U.shape[0]))
    for t in range(x.shape[1]):
        h = np.tanh(x[:, t, :] @ W + h @ U)
    return np.sum(h * h) + np.sum(np.sin(W))


def _cases(rand, n):
    return [
        (peeled, (rand(3, 5), rand(5, 5), rand(5), rand(n, 12)), (0, 1, 2)),
        (
            unpeeled,
            (rand(3, 4), rand(4, 4), rand(4), rand(n, 12), rand(n, 4)),
            (0, 1, 2, 4),
        ),
        (axis2, (rand(3, 2), rand(n, 2, 4, 3)), (0,)),
        (tiles, (rand(4, 3), rand(3, 3), rand(n, 13)), (0, 1)),
        (skips, (rand(3, 2), rand(n, 6, 3)), (0,)),
        (tail, (rand(3, 2), rand(n, 5, 3)), (0,)),
        (backwards, (rand(3, 2), rand(n, 4, 3)), (0,)),
        (callee, (rand(3, 4), rand(4, 4), rand(n, 5, 3)), (0, 1)),
        (shared, (rand(3, 4), rand(4, 4), rand(n, 5, 3)), (0, 1)),
    ]


CASES = [c[0] for c in _cases(seeded_rand(0), 1)]


@pytest.mark.parametrize("k", range(len(CASES)), ids=[f.__name__ for f in CASES])
def test_gradients_called_again(k, layout):
    """Central differences in float64 on several shapes; three calls each
    (the workspace's buffers, the kept scratch arrays reused)."""
    for seed, n in ((1, 1), (2, 3), (3, 7)):
        fn, args, argnums = _cases(seeded_rand(seed), n)[k]
        check_repeated_calls(fn, args, argnums)


def test_emitted_form():
    fn, args, argnums = _cases(seeded_rand(4), 3)[0]
    vg = s2sad.value_and_grad(fn, argnums=argnums)
    vg(*args)
    src = vg.source
    assert "d_step_product_rhs" not in src
    # the peeled loop's two backward loops write the steps inline, into one
    # stack made before both (for both loops' steps), summed once after both
    assert "g_Wx_stack = step_stack(xs_at_Wx, xs, Wx, 1, None, r_rest, r_first)" in src
    assert src.count("g_Wx_stack[:, t] = g_matmul") == 1
    assert src.count("g_Wx_stack_1[:, t] = g_matmul") == 1
    assert src.count("[:, t] = 0") == 2  # (a step with no cotangent)
    assert "g_Wx_stack_1 = g_Wx_stack\n" in src
    assert src.count("stacked_steps(") == 1
    # ... into the gradient's own place (buffer_results: no copy out of a
    # workspace buffer, or the caller's out= array)
    assert "g_Wx = stacked_steps(g_Wx_stack_1, xs_at_Wx, xs, Wx, 1, None, g_Wx" in src
    assert '"g_Wx": 0' in src
    # ... and one sum of the bias's steps, summed down once after both loops
    assert "g_b_steps_1 = g_b_steps\n" in src
    assert src.count("unbroadcast(g_b_steps") == 1
    # the plain module that hvp differentiates keeps one product a step
    plain = s2sad.value_and_grad(fn, argnums=argnums, optimize=False)
    plain(*args)
    assert "step_stack(" not in plain.source


def read_in_loop(W, x):  # g_W read in the loop: W's cotangent stays per step
    s = 0.0
    for t in range(x.shape[1]):
        s = s + np.sum(np.sin(x[:, t, :] @ W)) * np.sum(W)
    return s


def test_cotangent_read_in_loop_stays_per_step(layout):
    rand = seeded_rand(5)
    args = (rand(3, 2), rand(4, 5, 3))
    vg = check_repeated_calls(read_in_loop, args, (0,))
    assert "step_stack(" not in vg.source and "d_step_product_rhs" in vg.source


def test_float32(layout):
    rand = seeded_rand(6)
    args = (rand(3, 5), rand(5, 5), rand(5), rand(6, 12))
    vg = s2sad.value_and_grad(peeled, argnums=(0, 1, 2))
    want = vg(*args)[1]
    f32 = [a.astype(np.float32) for a in args]
    for _ in range(3):
        value, got = vg(*f32)
        assert value.dtype == np.float32
        for g, w in zip(got, want):
            assert g.dtype == np.float32
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_forward_mode_and_hvp(layout):
    rand = seeded_rand(7)
    Wx, Wh, b, x = rand(3, 5), rand(5, 5), rand(5), rand(4, 12)
    v = rand(3, 5)
    _, tangent = s2sad.jvp(peeled, argnums=0)(Wx, Wh, b, x, v)
    g = s2sad.grad(peeled)(Wx, Wh, b, x)
    np.testing.assert_allclose(tangent, np.sum(g * v), rtol=1e-10)
    hv = s2sad.hvp(peeled)(Wx, Wh, b, x, v)
    eps = 1e-5
    gp = s2sad.grad(peeled)(Wx + eps * v, Wh, b, x)
    gm = s2sad.grad(peeled)(Wx - eps * v, Wh, b, x)
    np.testing.assert_allclose(hv, (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-7)


def _per_step(g, x, axis, t):
    xt = x[(slice(None),) * axis + (t,)]
    return np.tensordot(xt, g, axes=(list(range(xt.ndim - 1)),) * 2)


@pytest.mark.parametrize(
    "written, ranges",
    [
        ([3, 2, 1, 0], [range(4)]),  # every step, one loop
        ([3, 2, 1, 0], [range(1, 4), range(1)]),  # a peeled loop's two
        ([3, 1], [range(1, 4, 2)]),  # steps no loop visits: zeros
        ([-1, -2, -3, -4], [range(-1, -5, -1)]),  # negative steps
        ([1, 0], [range(2)]),  # the tail of x's axis unvisited
    ],
)
@pytest.mark.parametrize("kind", ["time-major", "own layout", "each step"])
def test_step_stack_runtime(written, ranges, kind, monkeypatch):
    """The stack ``step_stack`` makes, written as the emitted sweep writes it
    (a step with no cotangent as zero), sums to the per-step cotangents."""
    monkeypatch.setattr(
        stepreads, "TIME_MAJOR_ENTRIES", 1 << 40 if kind == "time-major" else -1
    )
    monkeypatch.setattr(stepreads, "AHEAD_ENTRIES", -1)
    monkeypatch.setattr(stepreads, "OWN_LAYOUT", kind == "own layout")
    rand = seeded_rand(8)
    x, w = rand(3, 4, 2, 4), rand(4, 5)
    steps = ranges[0] if len(ranges) == 1 else range(4)
    prod = stepreads.stepwise_ahead(x, w, 1, steps)
    want_type = {
        "time-major": stepreads.StepProducts,
        "own layout": np.ndarray,
        "each step": type(None),
    }[kind]
    if kind == "own layout" and steps == range(2):
        want_type = type(None)  # the steps do not reach x's end: a copy would do
    assert type(prod) is want_type
    stack = stepstacks.step_stack(prod, x, w, 1, None, *ranges)
    want = np.zeros((4, 5))
    for t in written:
        np.testing.assert_allclose(
            stepreads.step_product(prod, x, w, 1, t), x[:, t] @ w
        )
        g = rand(3, 2, 5)
        stack[:, t] = g
        want += _per_step(g, x, 1, t)
        g[...] = np.nan  # (a buffer the sweep writes again: copied at once)
    if prod is not None:
        assert type(stack) is np.ndarray
    np.testing.assert_allclose(stepstacks.stacked_steps(stack, prod, x, w, 1), want)


def test_step_stack_zeroes_unvisited_steps():
    """Steps no range visits are zero in the stack, whatever the kept scratch
    array held before; a range that is none or out of bounds: per step."""
    rand = seeded_rand(9)
    x, w = rand(3, 4, 2), rand(2, 5)
    prod = steps.stepwise_matmul(x, w, 1, range(4))
    first = stepstacks.step_stack(prod, x, w, 1, None, range(4))
    first[...] = np.nan
    del first  # (its kept array: reused)
    stack = stepstacks.step_stack(prod, x, w, 1, None, range(1, 4, 2))
    assert type(stack) is np.ndarray
    np.testing.assert_array_equal(stack[:, 0], 0)
    np.testing.assert_array_equal(stack[:, 2], 0)
    for bad in ([0, 1], range(7)):
        other = stepstacks.step_stack(prod, x, w, 1, None, bad)
        assert type(other) is stepstacks.StepCotangents
    # tiles: step t is the slice t * 2 : (t + 1) * 2 of the last axis
    flat = rand(3, 8)
    tiled = steps.stepwise_matmul(flat, w, 1, range(4), (2, 0, 2, 2))
    stack = stepstacks.step_stack(tiled, flat, w, 1, (2, 0, 2, 2), range(4))
    assert type(stack) is np.ndarray
    want = np.zeros((2, 5))
    for t in range(4):
        g = rand(3, 5)
        stack[:, t] = g
        want += flat[:, 2 * t : 2 * t + 2].T @ g
    got = stepstacks.stacked_steps(stack, tiled, flat, w, 1, (2, 0, 2, 2))
    np.testing.assert_allclose(got, want)


def test_scratch_arrays_not_reused_while_held(monkeypatch):
    monkeypatch.setattr(stepreads, "TIME_MAJOR_ENTRIES", 1 << 40)
    rand = seeded_rand(9)
    x, w = rand(3, 4, 2), rand(2, 5)
    first = stepreads.stepwise_ahead(x, w, 1, range(4))
    step = stepreads.step_product(first, x, w, 1, 2)
    keep = step.copy()
    del first  # its product's step still held (a view)
    second = stepreads.stepwise_ahead(x * 2.0, w, 1, range(4))
    np.testing.assert_array_equal(step, keep)
    np.testing.assert_allclose(second.prod[2], 2.0 * keep)


@pytest.mark.parametrize("shapes", [((3, 4, 0), (0, 5)), ((0, 4, 2), (2, 5))])
@pytest.mark.parametrize("kind", ["time-major", "own layout"])
def test_empty_steps(shapes, kind, monkeypatch):
    """Steps with no rows or no columns: products and cotangents of zeros."""
    monkeypatch.setattr(
        stepreads, "TIME_MAJOR_ENTRIES", 1 << 40 if kind == "time-major" else -1
    )
    monkeypatch.setattr(stepreads, "AHEAD_ENTRIES", -1)
    x, w = np.ones(shapes[0]), np.ones(shapes[1])
    prod = stepreads.stepwise_ahead(x, w, 1, range(4))
    stack = stepstacks.step_stack(prod, x, w, 1, None, range(4))
    for t in range(4):
        step = stepreads.step_product(prod, x, w, 1, t)
        np.testing.assert_array_equal(step, x[:, t] @ w)
        stack[:, t] = np.ones(step.shape)
    np.testing.assert_array_equal(stepstacks.stacked_steps(stack, prod, x, w, 1), 0 * w)


def test_a_held_gradient_is_not_overwritten(layout):
    """The weight cotangent the stacked steps give after the loop (their
    stack a kept scratch array) survives the next calls while the caller
    holds it."""
    rand = seeded_rand(11)
    vg = s2sad.value_and_grad(peeled, argnums=(0, 1, 2))
    first = (rand(3, 5), rand(5, 5), rand(5), rand(4, 12))
    kept = vg(*first)[1]
    want = [g.copy() for g in kept]
    for seed in range(3):  # other arguments, same shapes
        other = seeded_rand(20 + seed)
        vg(other(3, 5), other(5, 5), other(5), other(4, 12))
    for g, w in zip(kept, want):
        np.testing.assert_array_equal(g, w)
