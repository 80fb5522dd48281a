"""Time-major step products and their stacked weight cotangent.

``stepwise_ahead`` copies a loop's steps of ``x`` time-major once and runs
one product (a ``StepProducts``) where a step's product is small; in buffered
code the ``loopsums`` pass stacks the backward sweep's per-step cotangents of
``step_product`` for ``w`` (``stack_step``) and sums them with one product
after the loop (``stacked_product``), one for both loops of a peeled loop.

Gradients against central differences in float64 (step axis 1 and 2, tiles,
peeled and unpeeled loops, loops that skip steps or visit them backwards,
steps in a callee, both run-time choices), the workspace on repeated calls,
float32, forward mode and hvp, and the runtime helpers' fallbacks.
"""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import stepreads, stepstacks
from tests.repeated import buffer_everything, check_repeated_calls, seeded_rand

__all__ = ["buffer_everything"]


@pytest.fixture(autouse=True)
def _buffered(buffer_everything):
    """Workspaces for every size (the buffered code runs on small shapes)."""


@pytest.fixture(params=["time-major", "each step"])
def layout(request, monkeypatch):
    """Steps made time-major at any size, or never (each step's own product)."""
    big = request.param == "time-major"
    monkeypatch.setattr(stepreads, "TIME_MAJOR_ENTRIES", 1 << 40 if big else -1)
    monkeypatch.setattr(stepreads, "AHEAD_ENTRIES", -1)
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
    assert src.count("stack_step(") == 2  # the peeled loop's two backward loops
    # ... continue one stack: one product after both
    assert "g_Wx_steps_1 = g_Wx_steps\n" in src
    assert src.count("stacked_product(") == 1
    # ... and one sum of the bias's steps, summed down once after both loops
    assert "g_b_steps_1 = g_b_steps\n" in src
    assert src.count("unbroadcast(g_b_steps") == 1
    # where the steps are not stacked (each step's own product) the sum is an
    # array: a workspace buffer for it
    assert 'out=ws.take("g_Wx_steps")' in src
    assert "g_Wx = accumulate(g_Wx, stacked_product(g_Wx_steps_1, xs_at_Wx))" in src
    # the plain module that hvp differentiates keeps one product a step
    plain = s2sad.value_and_grad(fn, argnums=argnums, optimize=False)
    plain(*args)
    assert "stack_step" not in plain.source


def read_in_loop(W, x):  # g_W read in the loop: W's cotangent stays per step
    s = 0.0
    for t in range(x.shape[1]):
        s = s + np.sum(np.sin(x[:, t, :] @ W)) * np.sum(W)
    return s


def test_cotangent_read_in_loop_stays_per_step(layout):
    rand = seeded_rand(5)
    args = (rand(3, 2), rand(4, 5, 3))
    vg = check_repeated_calls(read_in_loop, args, (0,))
    assert "stack_step" not in vg.source and "d_step_product_rhs" in vg.source


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
    "order", [[3, 2, 1, 0], [5, 3, 1], [0, 7], [2, 2, 1], [-1, -2]]
)
def test_stacked_product_runtime(order, monkeypatch):
    """Dense steps (one product), steps with gaps (zeros between), sparse
    steps (one product each), a step visited twice, negative steps; a step
    whose cotangent has another shape or dtype is differentiated at once."""
    monkeypatch.setattr(stepreads, "TIME_MAJOR_ENTRIES", 1 << 40)
    rand = seeded_rand(8)
    x, w = rand(3, 8, 2, 4), rand(4, 5)
    prod = stepreads.stepwise_ahead(x, w, 1, range(8))
    assert type(prod) is stepreads.StepProducts
    stack, want = None, np.zeros((4, 5))
    for t in order:
        np.testing.assert_allclose(
            stepreads.step_product(prod, x, w, 1, t), x[:, t] @ w
        )
        g = rand(3, 2, 5)
        stack = stepstacks.stack_step(stack, g, prod, x, w, 1, t)
        want += _per_step(g, x, 1, t)
    odd = rand(3, 2, 5).astype(np.float32)  # another dtype: at once
    stack = stepstacks.stack_step(stack, odd, prod, x, w, 1, 4)
    want += _per_step(odd.astype(np.float64), x, 1, 4)
    np.testing.assert_allclose(stepstacks.stacked_product(stack, prod), want)
    # no StepProducts (each step's own product): one product a step, summed
    stack, want = None, np.zeros((4, 5))
    for t in order:
        g = rand(3, 2, 5)
        stack = stepstacks.stack_step(stack, g, None, x, w, 1, t)
        want += _per_step(g, x, 1, t)
    np.testing.assert_allclose(stepstacks.stacked_product(stack, None), want)
    assert stepstacks.stacked_product(None, prod) is None


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
def test_empty_steps(shapes, monkeypatch):
    """Steps with no rows or no columns: products and cotangents of zeros."""
    monkeypatch.setattr(stepreads, "TIME_MAJOR_ENTRIES", 1 << 40)
    x, w = np.ones(shapes[0]), np.ones(shapes[1])
    prod = stepreads.stepwise_ahead(x, w, 1, range(4))
    stack = None
    for t in (3, 0):
        step = stepreads.step_product(prod, x, w, 1, t)
        np.testing.assert_array_equal(step, x[:, t] @ w)
        stack = stepstacks.stack_step(stack, np.ones(step.shape), prod, x, w, 1, t)
    np.testing.assert_array_equal(stepstacks.stacked_product(stack, prod), 0 * w)


def test_sum_without_stack_into_buffer():
    """No StepProducts: the sum itself, into ``out`` (never into the sum of
    the earlier steps, which another name may hold), else a new array."""
    rand = seeded_rand(10)
    x, w = rand(3, 4, 2), rand(2, 5)
    gs = [rand(3, 5) for _ in range(3)]
    out = np.empty((2, 5))
    first = stepstacks.stack_step(None, gs[0], None, x, w, 1, 0, out=out)
    assert first is out
    kept = first.copy()
    out2 = np.empty((2, 5))
    second = stepstacks.stack_step(first, gs[1], None, x, w, 1, 1, out=out2)
    assert second is out2
    np.testing.assert_array_equal(first, kept)
    third = stepstacks.stack_step(second, gs[2], None, x, w, 1, 2, out=second)
    assert third is not second  # (out is the sum itself: not used)
    want = sum(x[:, t].T @ gs[t] for t in range(3))
    np.testing.assert_allclose(stepstacks.stacked_product(third, None), want)
    # float32 steps into a float64 sum, a buffer of another dtype: no cast
    g32 = gs[0].astype(np.float32)
    got = stepstacks.stack_step(None, g32, None, x, w, 1, 0, out=np.empty((2, 5)))
    np.testing.assert_allclose(got, x[:, 0].T @ g32, rtol=1e-6)


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
