"""Adversarial programs for the passes merged in session 6 (issue 16, speed): scalar
code (``substitute``, ``states``), array loops' cotangent states, the hoist pass's
invariant reads and slice steps.  The loss heads, ``spreads``, ``likes`` and the
methods pass are in test_integration_session6_heads.py, hoisted slice steps in
..._steps.py, the cache key and the bugs found in ..._found.py.

Each program sits just outside (or just inside) a pass's preconditions.  Each is
checked by :func:`s2sad.check_grads` against central finite differences in
float64 (reverse, forward and ``order=2``), and the buffered form (every call
given buffers, and arrays above 64 KiB) over repeated calls, so that reused
workspaces are checked too.
"""

import math

import numpy as np
import pytest

import s2sad
from s2sad.runtime import workspace
from tests.repeated import check_repeated_calls, seeded_rand


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


rand = seeded_rand(16)


# -- substitute: scalar code ---------------------------------------------------


def scalar_carried_to_next_iteration(x, y):
    prev = 0.0
    out = 0.0
    for i in range(4):
        cur = math.sin(x * (i + 1)) + y
        out = out + prev * cur  # reads the previous iteration's value
        prev = cur * 0.5
    return out + prev


def scalar_read_after_break(x, y):
    t = 0.0
    s = x
    for i in range(6):
        t = s * y  # the last one bound before the break is read after the loop
        if t > 2.0:
            break
        s = s + math.cos(t)
    return t * s


def scalar_invariant_rebound_in_list(x, y):
    box = [x]
    s = 0.0
    for i in range(3):
        p = box[0] * y  # looks invariant, but box[0] changes
        s = s + p
        box[0] = math.sin(p)
    return s


def _rebind(v, y):
    return v * y + 0.1


def scalar_invariant_rebound_by_callee(x, y):
    a = x
    s = 0.0
    for i in range(3):
        p = a * y
        s = s + math.tanh(p)
        a = _rebind(a, y)
    return s


def scalar_tape_conditional(x, y):
    for i in range(6):
        if x > 0.2 * i - 0.3:
            x = math.sin(x) * y + 0.3
        else:
            x = x * x * 0.5
    return x


def scalar_tape_while(x, y):
    k = 0
    while k < 5:
        x = math.cos(x * y) + x * 0.5
        k += 1
        if k == 2:
            continue
        y = y * 1.1
    return x * y


def scalar_nested_reuse(x, y):
    s = 0.0
    for i in range(3):
        t = x * (i + 1)
        for i in range(2):  # the inner loop reuses the name
            t = math.sin(t) * y
        s = s + t
    return s + t


def scalar_tape_backwards(x, y):
    for i in range(5):
        x = math.sin(x) * y + 0.1 * i
    return x


def scalar_tape_backwards_with_break(x, y):
    for i in range(8):
        x = math.sin(x) * y + 0.3
        if x > 0.9:
            break
    return x * y


def scalar_two_loops(x, y):
    for i in range(3):
        x = math.sin(x) * y
    for i in range(2):
        x = math.cos(x) * y + x
    return x


def scalar_invariant_product_not_run(x, y):
    s = x
    for i in range(int(y > 5.0)):  # runs no step: the product is not read
        t = x * y
        s = s + t
    return s * y


SCALAR_CASES = [
    scalar_tape_backwards,
    scalar_tape_backwards_with_break,
    scalar_two_loops,
    scalar_invariant_product_not_run,
    scalar_carried_to_next_iteration,
    scalar_read_after_break,
    scalar_invariant_rebound_in_list,
    scalar_invariant_rebound_by_callee,
    scalar_tape_conditional,
    scalar_tape_while,
    scalar_nested_reuse,
]


@pytest.mark.parametrize("f", SCALAR_CASES, ids=[f.__name__ for f in SCALAR_CASES])
@pytest.mark.parametrize("x,y", [(0.7, 1.3), (-0.4, 0.8), (1.9, -0.6)])
def test_scalar_code(f, x, y):
    s2sad.check_grads(f, (x, y), order=2, modes=("rev", "fwd"))
    vg = s2sad.value_and_grad(f, argnums=(0, 1))
    for _ in range(2):
        v, g = vg(x, y)
        assert v == f(x, y)
        h = 1e-6
        fx = (f(x + h, y) - f(x - h, y)) / (2 * h)
        fy = (f(x, y + h) - f(x, y - h)) / (2 * h)
        np.testing.assert_allclose(g, (fx, fy), rtol=1e-5, atol=1e-7)


# -- array loops and the hoist pass -------------------------------------------


def loop_ct_read_after(x, w):
    h = x
    acc = np.zeros_like(x)
    for t in range(3):
        h = np.tanh(h * w)
        acc = acc + h
    return np.sum(acc * h) + np.sum(h)


def loop_break_continue(x, w):
    h = x
    for t in range(5):
        if t == 1:
            continue
        h = np.sin(h * w) + x
        if np.sum(h) > 100.0 or t == 3:
            break
    return np.sum(h * h)


def loop_nested_names(x, w):
    h = x
    for t in range(2):
        g = h * w
        for t in range(2):
            g = np.tanh(g + h)
        h = g * 0.5 + h
    return np.sum(h)


def loop_while(x, w):
    h = x
    k = 0
    while k < 3:
        h = np.cos(h) * w + h * 0.3
        k += 1
    return np.sum(h * x)


def loop_reset_each_iteration(x, w):
    acc = np.zeros_like(x)
    for t in range(3):
        z = x * w  # bound afresh each iteration
        z = np.tanh(z + acc)
        acc = acc + z * (t + 1)
    return np.sum(acc) + np.sum(z)


def loop_bound_in_some_iterations(x, w):
    acc = np.zeros_like(x)
    z = x * 0.5
    for t in range(4):
        if t % 2 == 0:
            z = np.tanh(x * w + t)  # read again in the next iteration, unbound
        acc = acc + z * w
    return np.sum(acc * acc)


def loop_read_before_bound(x, w):
    acc = np.zeros_like(x)
    z = np.sin(x)
    for t in range(4):
        acc = acc + z * w  # the previous iteration's z
        if t == 1:
            continue
        z = np.cos(z * w)
    return np.sum(acc) + np.sum(z * x)


def loop_bound_after_break(x, w):
    z = x
    for t in range(4):
        y = np.tanh(z * w)
        if t == 2:
            break
        z = y + x  # not bound in the last iteration
    return np.sum(z * y)


def loop_nested_inner_reset(x, w):
    acc = np.zeros_like(x)
    for t in range(2):
        z = x * (t + 1.0)
        for u in range(2):
            z = np.sin(z * w)  # reset by the outer loop, carried by the inner one
            acc = acc + z
    return np.sum(acc * x)


def loop_while_reset(x, w):
    acc = np.zeros_like(x)
    k = 0
    while k < 3:
        z = np.tanh(x * w * (k + 1.0))
        acc = acc * 0.5 + z
        k += 1
    return np.sum(acc * z)


def hoist_key_changes(xs, W):
    params = {"a": W, "b": W * 2.0}
    keys = ["a", "b"]
    h = np.zeros((xs.shape[0], W.shape[1]))
    for t in range(xs.shape[1]):
        key = keys[t % 2]
        w = params[key]
        h = np.tanh(xs[:, t, :] @ w + h)
    return np.sum(h)


def hoist_runs_no_step(xs, W):
    params = {"W": W}
    h = np.zeros((xs.shape[0], W.shape[1]))
    for t in range(xs.shape[1] - 4):  # no step
        w = params["W"]
        h = np.tanh(xs[:, t, :] @ w + h)
    return np.sum(h) + np.sum(W)


def slice_step_strided(x, W):
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(2):
        xt = x[:, t * 4 : t * 4 + 4 : 2]
        h = np.tanh(xt @ W + h)
    return np.sum(h)


def slice_step_rows(x, w):
    s = 0.0
    for t in range(3):
        xt = x[t * 2 : t * 2 + 2]
        s = s + np.sum(np.tanh(xt @ w))
    return s


def _mutate_params(params):
    params["W"] = params["W"] * 0.9


def hoist_dict_alias(xs, W):
    params = {"W": W}
    alias = params
    h = np.zeros((xs.shape[0], W.shape[1]))
    for t in range(xs.shape[1]):
        w = params["W"]
        h = np.tanh(xs[:, t, :] @ w + h)
        alias["W"] = w * 0.9
    return np.sum(h)


def hoist_dict_callee(xs, W):
    params = {"W": W}
    h = np.zeros((xs.shape[0], W.shape[1]))
    for t in range(xs.shape[1]):
        w = params["W"]
        h = np.tanh(xs[:, t, :] @ w + h)
        _mutate_params(params)
    return np.sum(h)


class Cell:
    def __init__(self, W):
        self.W = W

    def decay(self):
        self.W = self.W * 0.8

    def run(self, xs):
        h = np.zeros((xs.shape[0], self.W.shape[1]))
        for t in range(xs.shape[1]):
            w = self.W
            h = np.tanh(xs[:, t, :] @ w + h)
            self.decay()
        return h


def hoist_self_rebound(xs, W):
    return np.sum(Cell(W).run(xs))


def slice_step_negative(x, W):
    C = -2  # steps read x[:, -2t : -2t - 2]: empty slices
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(1, 3):
        xt = x[:, t * C - 2 : t * C]
        h = np.tanh(xt @ W + h)
    return np.sum(h)


def slice_step_zero(x, W):
    C = 0
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(3):
        xt = x[:, t * C : t * C + 2]
        h = np.tanh(xt @ W + h)
    return np.sum(h)


def slice_step_changing(x, W):
    C = 2
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(2):
        xt = x[:, t * C : t * C + 2]
        h = np.tanh(xt @ W + h)
        C = 3
    return np.sum(h)


def slice_step_overlapping(x, W):
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(3):
        xt = x[:, t : t + 2]
        h = np.tanh(xt @ W + h)
    return np.sum(h)


ARRAY_CASES = [
    (loop_ct_read_after, (rand(3, 4), rand(3, 4))),
    (loop_break_continue, (rand(3, 4), rand(4))),
    (loop_nested_names, (rand(3, 4), rand(3, 4))),
    (loop_while, (rand(3, 4), rand(4))),
    (loop_reset_each_iteration, (rand(3, 4), rand(3, 4))),
    (hoist_self_rebound, (rand(2, 4, 3), rand(3, 5))),
    (loop_bound_in_some_iterations, (rand(3, 4), rand(4))),
    (loop_read_before_bound, (rand(3, 4), rand(3, 4))),
    (loop_bound_after_break, (rand(3, 4), rand(4))),
    (loop_nested_inner_reset, (rand(3, 4), rand(3, 4))),
    (loop_while_reset, (rand(3, 4), rand(4))),
    (hoist_key_changes, (rand(2, 4, 3), rand(3, 3))),
    (hoist_runs_no_step, (rand(2, 4, 3), rand(3, 5))),
    (slice_step_strided, (rand(2, 8), rand(2, 3))),
    (slice_step_rows, (rand(6, 3), rand(3))),
    (slice_step_negative, (rand(2, 8), rand(2, 3))),
    (slice_step_zero, (rand(2, 8), rand(2, 3))),
    (slice_step_changing, (rand(2, 8), rand(2, 3))),
    (slice_step_overlapping, (rand(2, 8), rand(2, 3))),
]
IDS = [c[0].__name__ for c in ARRAY_CASES]


@pytest.mark.parametrize("f,args", ARRAY_CASES, ids=IDS)
def test_reverse_forward_and_second_order(f, args):
    s2sad.check_grads(f, args, order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("f,args", ARRAY_CASES, ids=IDS)
def test_buffered_against_finite_differences(f, args, monkeypatch):
    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    check_repeated_calls(f, args)


@pytest.mark.parametrize(
    "f,where",
    [
        (hoist_dict_alias, 'w = params["W"]'),
        (hoist_dict_callee, "_mutate_params(params)"),
    ],
    ids=["dict_changed_through_an_alias", "dict_changed_by_a_callee"],
)
def test_hoisted_read_of_a_dict_changed_in_the_loop_is_refused_at_its_line(f, where):
    """A dict of differentiated arrays changed in the loop (through an alias or a
    callee): refused at the user's line, never hoisted into a wrong gradient."""
    with pytest.raises(s2sad.errors.S2SADError) as info:
        s2sad.grad(f, argnums=(0, 1))(rand(2, 4, 3), rand(3, 5))
    text = str(info.value)
    assert "test_integration_session6.py:" in text and where in text, text


def slices_big(x, W):
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(4):
        xt = x[:, t * 3 : t * 3 + 3]
        h = np.tanh(xt @ W + h)
    return np.sum(h * h)


def _directional(f, args, k, v, h=1e-6):
    plus, minus = list(args), list(args)
    plus[k], minus[k] = args[k] + h * v, args[k] - h * v
    return (f(*plus) - f(*minus)) / (2 * h)


BIG = [
    (loop_ct_read_after, (rand(100, 100), rand(100, 100))),
    (loop_reset_each_iteration, (rand(100, 100), rand(100, 100))),
    (slices_big, (rand(900, 12), rand(3, 5))),
]


@pytest.mark.parametrize("f,args", BIG, ids=[c[0].__name__ for c in BIG])
def test_arrays_above_the_buffer_threshold(f, args):
    """Arrays above 64 KiB get buffers: three calls (the workspace reused), each
    gradient checked along random directions against central differences."""
    nums = tuple(range(len(args)))
    vg = s2sad.value_and_grad(f, argnums=nums)
    rng = np.random.default_rng(3)
    dirs = [rng.standard_normal(np.shape(a)) for a in args]
    want = [_directional(f, args, k, dirs[k]) for k in nums]
    for _ in range(3):
        value, grads = vg(*[np.array(a) for a in args])
        np.testing.assert_allclose(value, f(*args), rtol=1e-10)
        got = [float(np.sum(g * d)) for g, d in zip(grads, dirs)]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
