"""Adversarial programs for session 6's ``losses`` (sigmoid log-likelihood and picked
log-softmax heads), ``spreads``, ``likes`` and ``methods`` passes (issue 16).

Each program sits just outside (or just inside) a pass's preconditions.  Each is
checked by :func:`s2sad.check_grads` against central finite differences in
float64 (reverse, forward and ``order=2``), and the buffered form (every call
given buffers, and arrays above 64 KiB) over repeated calls.
"""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import workspace
from tests.repeated import check_repeated_calls, seeded_rand


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


RNG = np.random.default_rng(16)
rand = seeded_rand(16)


# -- spreads, likes, losses, array loops, hoist: array code --------------------


def sum_read_twice(x, y):
    s = np.sum(x * y)
    m = np.mean(np.exp(x))
    return s * s + m * s + np.sum(np.sin(s * y))


def sum_of_broadcast(x, b):
    s = np.sum(x + b)  # b broadcast against x
    return s * np.mean(x * b)


def sigmoid_loss_y_differentiated(z, y):
    p = 1.0 / (1.0 + np.exp(-z))
    t = y * np.log(p) + (1.0 - y) * np.log(1.0 - p)
    return -np.mean(t)


def sigmoid_loss_p_reused(z, y):
    p = 1.0 / (1.0 + np.exp(-z))
    t = y * np.log(p) + (1.0 - y) * np.log(1.0 - p)
    return -np.mean(t) + np.sum(p * p)


def sigmoid_loss_y_broadcast(z, y):
    p = 1.0 / (1.0 + np.exp(-z))  # z (n,), y (k, n)
    t = y * np.log(p) + (1.0 - y) * np.log(1.0 - p)
    return -np.sum(t)


def sigmoid_loss_p_broadcast(z, y):
    p = 1.0 / (1.0 + np.exp(-z))  # z (k, n), y (n,)
    t = y * np.log(p) + (1.0 - y) * np.log(1.0 - p)
    return -t.mean()


def sigmoid_loss_negated(z, y):
    p = 1.0 / (1.0 + np.exp(-z))
    a = -y * np.log(p)
    b = (1.0 - y) * np.log(1.0 - p)
    return np.sum(a - b)


def sigmoid_loss_in_loop(z, y):
    s = 0.0
    for k in range(2):
        p = 1.0 / (1.0 + np.exp(-(z * (k + 1))))
        t = y * np.log(p) + (1.0 - y) * np.log(1.0 - p)
        s = s + np.mean(t)
    return s


LABELS = np.array([2, 0, 3, 3, 1])


def picked_rows_permuted(x):
    m = np.max(x, axis=1, keepdims=True)
    s = x - m
    logp = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
    rows = np.arange(x.shape[0])[::-1]
    return -np.mean(logp[rows, np.array([2, 0, 3, 3, 1])])


def picked_rows_repeated(x):
    m = np.max(x, axis=1, keepdims=True)
    s = x - m
    logp = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
    rows = np.arange(x.shape[0]) // 2 * 2
    return -np.mean(logp[rows, np.array([2, 0, 3, 3, 1])])


def picked_negative_labels(x):
    m = np.max(x, axis=1, keepdims=True)
    s = x - m
    logp = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(5), np.array([-1, 0, -2, 3, -4])])


def picked_sum_and_logp_reused(x):
    m = np.max(x, axis=1, keepdims=True)
    s = x - m
    logp = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
    i = logp[np.arange(x.shape[0]), np.array([2, 0, 3, 3, 1])]
    return -np.sum(i) + np.sum(np.exp(logp[:, 0]))


def picked_columns_axis0(x):
    m = np.max(x, axis=0, keepdims=True)  # a log-softmax down the columns
    s = x - m
    logp = s - np.log(np.sum(np.exp(s), axis=0, keepdims=True))
    return -np.mean(logp[np.arange(4), np.array([1, 0, 3, 2])])


def picked_in_loop(x):
    total = 0.0
    for k in range(2):
        z = x * (k + 1.0)
        m = np.max(z, axis=1, keepdims=True)
        s = z - m
        logp = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
        total = total - np.mean(logp[np.arange(5), LABELS])
    return total


def picked_3d(x):
    m = np.max(x, axis=2, keepdims=True)
    s = x - m
    logp = s - np.log(np.sum(np.exp(s), axis=2, keepdims=True))
    return -np.mean(logp[np.arange(2), np.array([1, 0])])


def likes_zero_d(x, a0):
    return np.sum(np.tanh(x * a0 + a0))


def likes_int_array(x):
    k = np.arange(x.size).reshape(x.shape)
    return np.sum(np.sin(x * k + k))


def likes_float32_promoted(x):
    c = np.ones(x.shape, dtype=np.float32) * 0.5
    return np.sum(np.sin(x * (c * 2.0)) + c)


def likes_list(x):
    return np.sum(np.tanh(x * [1.0, 2.0, 3.0]))


def methods_max_and_size(x):
    a = np.exp(x)
    return x.max() * (a.sum() / a.size) + np.mean(x)


def picked_big(x):
    m = np.max(x, axis=1, keepdims=True)
    s = x - m
    logp = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
    cols = np.arange(x.shape[0]) % x.shape[1]
    return -np.mean(logp[np.arange(x.shape[0]), cols])


def picked_big_rows_reversed(x):
    m = np.max(x, axis=1, keepdims=True)
    s = x - m
    logp = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
    cols = np.arange(x.shape[0]) % x.shape[1] - 2  # negative labels too
    return -np.sum(logp[np.arange(x.shape[0])[::-1], cols])


ARRAY_CASES = [
    (sum_read_twice, (rand(3, 4), rand(3, 4))),
    (sum_of_broadcast, (rand(3, 4), rand(4))),
    (sigmoid_loss_y_differentiated, (rand(6), RNG.uniform(0.1, 0.9, 6))),
    (sigmoid_loss_p_reused, (rand(6), RNG.uniform(0.1, 0.9, 6))),
    (sigmoid_loss_y_broadcast, (rand(5), RNG.uniform(0.1, 0.9, (3, 5)))),
    (sigmoid_loss_p_broadcast, (rand(3, 5), RNG.uniform(0.1, 0.9, 5))),
    (sigmoid_loss_negated, (rand(6), RNG.uniform(0.1, 0.9, 6))),
    (sigmoid_loss_in_loop, (rand(6), RNG.uniform(0.1, 0.9, 6))),
    (picked_rows_permuted, (rand(5, 4),)),
    (picked_rows_repeated, (rand(5, 4),)),
    (picked_negative_labels, (rand(5, 4),)),
    (picked_sum_and_logp_reused, (rand(5, 4),)),
    (picked_columns_axis0, (rand(5, 4),)),
    (picked_in_loop, (rand(5, 4),)),
    (picked_3d, (rand(2, 3, 4),)),
    (likes_zero_d, (rand(3, 4), np.array(0.7))),
    (likes_int_array, (rand(3, 4),)),
    (likes_float32_promoted, (rand(3, 4),)),
    (likes_list, (rand(2, 3),)),
    (methods_max_and_size, (rand(3, 4),)),
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


# -- the losses pass where its preconditions almost hold --------------------------


def sigmoid_entropy(z):
    p = 1.0 / (1.0 + np.exp(-z))  # y is p itself
    t = p * np.log(p) + (1.0 - p) * np.log(1.0 - p)
    return -np.mean(t)


def sigmoid_y_from_z(z):
    y = np.tanh(z) * 0.4 + 0.5  # y depends on z: its cotangent flows back to z
    p = 1.0 / (1.0 + np.exp(-z))
    t = y * np.log(p) + (1.0 - y) * np.log(1.0 - p)
    return -np.mean(t)


def sigmoid_y_is_z(z):
    p = 1.0 / (1.0 + np.exp(-z))
    t = z * np.log(p) + (1.0 - z) * np.log(1.0 - p)
    return -np.sum(t)


def sigmoid_z_rebound(z, y):
    p = 1.0 / (1.0 + np.exp(-z))
    z = z * 2.0  # after p: the rule must not read the new z
    t = y * np.log(p) + (1.0 - y) * np.log(1.0 - p)
    return -np.sum(t) + np.sum(z)


def sigmoid_p_written(z, y):
    p = 1.0 / (1.0 + np.exp(-z))
    p[0] = 0.5
    t = y * np.log(p) + (1.0 - y) * np.log(1.0 - p)
    return -np.sum(t)


def sigmoid_y_written(z, y):
    p = 1.0 / (1.0 + np.exp(-z))
    a = y * np.log(p)
    y[0] = 0.25  # between the two terms
    b = (1.0 - y) * np.log(1.0 - p)
    return -np.sum(a + b)


def sigmoid_two_labels(z, y, v):
    p = 1.0 / (1.0 + np.exp(-z))
    t = y * np.log(p) + (1.0 - v) * np.log(1.0 - p)
    return -np.sum(t)


def picked_not_a_log_softmax(x, u):
    m = np.max(x, axis=1, keepdims=True)
    s = x - m
    logp = s - np.log(np.sum(np.exp(u), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(x.shape[0]), np.array([0, 1, 2])])


def picked_logp_written(x):
    m = np.max(x, axis=1, keepdims=True)
    s = x - m
    logp = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
    logp[0, 0] = 0.0
    return -np.mean(logp[np.arange(x.shape[0]), np.array([0, 1, 2])])


def picked_mean_with_axis(x):
    m = np.max(x, axis=1, keepdims=True)
    s = x - m
    logp = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(x.shape[0]), np.array([0, 1, 2])], axis=0)


def _z(n, seed):
    return np.random.default_rng(seed).standard_normal(n)


def _y(shape, seed):
    return np.random.default_rng(seed).uniform(0.1, 0.9, shape)


EDGES = [
    (sigmoid_entropy, (_z(5, 1),)),
    (sigmoid_y_from_z, (_z(5, 2),)),
    (sigmoid_y_is_z, (_y(5, 3),)),
    (sigmoid_z_rebound, (_z(5, 4), _y(5, 5))),
    (sigmoid_p_written, (_z(5, 6), _y(5, 7))),
    (sigmoid_y_written, (_z(5, 8), _y(5, 9))),
    (sigmoid_two_labels, (_z(5, 10), _y(5, 11), _y(5, 12))),
    (picked_not_a_log_softmax, (rand(3, 4), rand(3, 4))),
    (picked_logp_written, (rand(3, 4),)),
    (picked_mean_with_axis, (rand(3, 4),)),
]


@pytest.mark.parametrize("f,args", EDGES, ids=[c[0].__name__ for c in EDGES])
def test_loss_heads_almost_matched(f, args):
    s2sad.check_grads(f, args, order=2, modes=("rev", "fwd"))
    check_repeated_calls(f, args, calls=2, value_rtol=1e-12)


def sigmoid_loss_float32(z, y):
    p = 1.0 / (1.0 + np.exp(-z))
    t = y * np.log(p) + (1.0 - y) * np.log(1.0 - p)
    return -np.mean(t)


@pytest.mark.parametrize(
    "zt,yt",
    [(np.float32, np.float64), (np.float64, np.float32), (np.float32, np.float32)],
)
def test_sigmoid_loss_with_float32_operands_matches_the_unfused_gradient(zt, yt):
    """float32 logits or labels: the fused head's value and gradients are those
    of the code as written (compiled without the optimisations), to float32's
    precision, on every call."""
    z, y = _z(7, 13).astype(zt), _y(7, 14).astype(yt)
    want_v, want_g = s2sad.value_and_grad(
        sigmoid_loss_float32, argnums=(0, 1), optimize=False
    )(z, y)
    vg = s2sad.value_and_grad(sigmoid_loss_float32, argnums=(0, 1))
    for _ in range(2):
        v, g = vg(z.copy(), y.copy())
        assert np.result_type(v) == np.result_type(want_v)
        np.testing.assert_allclose(v, want_v, rtol=1e-6)
        for a, b, arg in zip(g, want_g, (z, y)):
            assert a.dtype == arg.dtype
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6)


def _directional(f, args, k, v, h=1e-6):
    plus, minus = list(args), list(args)
    plus[k], minus[k] = args[k] + h * v, args[k] - h * v
    return (f(*plus) - f(*minus)) / (2 * h)


BIG = [
    (sum_read_twice, (rand(100, 100), rand(100, 100))),
    (sigmoid_loss_y_differentiated, (rand(9000), RNG.uniform(0.1, 0.9, 9000))),
    (sigmoid_loss_y_broadcast, (rand(3000), RNG.uniform(0.1, 0.9, (4, 3000)))),
    (sigmoid_loss_p_broadcast, (rand(4, 3000), RNG.uniform(0.1, 0.9, 3000))),
    (sigmoid_loss_in_loop, (rand(9000), RNG.uniform(0.1, 0.9, 9000))),
    (picked_big, (rand(3000, 4),)),
    (picked_big_rows_reversed, (rand(3000, 4),)),
    (methods_max_and_size, (rand(100, 100),)),
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
