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


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


RNG = np.random.default_rng(16)


def rand(*shape, scale=0.5):
    return RNG.standard_normal(shape) * scale


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


def numeric_grad(f, args, k, h=1e-6):
    a = np.array(args[k], dtype=float)
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        vals = []
        for s in (h, -h):
            b = a.copy()
            b[i] += s
            vals.append(f(*[b if j == k else np.array(x) for j, x in enumerate(args)]))
        g[i] = (vals[0] - vals[1]) / (2 * h)
    return g


@pytest.mark.parametrize("f,args", ARRAY_CASES, ids=IDS)
def test_buffered_against_finite_differences(f, args, monkeypatch):
    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    nums = tuple(range(len(args)))
    vg = s2sad.value_and_grad(f, argnums=nums)
    want_value = f(*[np.array(a) for a in args])
    want = [numeric_grad(f, args, k) for k in nums]
    for _ in range(3):  # the workspace's buffers are reused from the second call
        value, grads = vg(*[np.array(a) for a in args])
        np.testing.assert_allclose(value, want_value, rtol=1e-10)
        for g, w in zip(grads, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


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
    nums = tuple(range(len(args)))
    vg = s2sad.value_and_grad(f, argnums=nums)
    want = [numeric_grad(f, args, k) for k in nums]
    for _ in range(2):
        value, grads = vg(*[np.array(a) for a in args])
        np.testing.assert_allclose(value, f(*[np.array(a) for a in args]), rtol=1e-12)
        for g, w in zip(grads, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


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


# -- the cache key and grad's fast path --------------------------------------------


def tanh_dot(x, w):
    return np.sum(np.tanh(np.multiply(x, w)) * w) + np.sum(x) * 0.5


def test_one_gradient_called_with_floats_float32_lists_and_tuples():
    """The same ``grad`` object called with a float, a NumPy float32, a float32
    array, a list and a tuple (and back): each call's gradient is right, in the
    argument's own type and dtype (the cache key and the fast path tell them apart)."""
    w = np.array([0.3, -0.7, 1.1])
    gr = s2sad.grad(tanh_dot, argnums=(0, 1))
    calls = [
        (0.4, w),
        (np.float32(0.4), w),
        (0.4, w.astype(np.float32)),
        (0.4, [0.3, -0.7, 1.1]),
        (0.4, (0.3, -0.7, 1.1)),
        (np.array(0.4), w),
        (0.4, w),
    ]
    x64 = 0.4
    want_x = float(np.sum(w * w * (1 - np.tanh(x64 * w) ** 2)) + 0.5)
    want_w = np.tanh(x64 * w) + x64 * w * (1 - np.tanh(x64 * w) ** 2)
    for x, ws in calls + calls:
        gx, gw = gr(x, ws)
        tol = (
            1e-6
            if np.result_type(x, *np.asarray(ws).ravel()[:1]) == np.float64
            else 1e-3
        )
        if isinstance(ws, np.ndarray) and ws.dtype == np.float32:
            tol = 1e-3
        np.testing.assert_allclose(float(gx), want_x, rtol=tol)
        np.testing.assert_allclose(np.asarray(gw, dtype=float), want_w, rtol=tol)
        assert type(gw) is type(ws)
        if isinstance(ws, np.ndarray):
            assert gw.dtype == ws.dtype


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


MODULE = """
import numpy as np


def f(x, w):
    return np.sum(np.tanh(x * w) * w)
"""


class _SinNumPy:
    """``np`` with ``tanh`` standing for ``sin``."""

    def __getattr__(self, name):
        return np.sin if name == "tanh" else getattr(np, name)


def test_fast_path_after_np_is_rebound(tmp_path, monkeypatch):
    """A module's ``np`` rebound between calls of one gradient (which had taken
    the fast path): the next call differentiates the new ``np``'s function."""
    import importlib

    (tmp_path / "s6_rebound.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("s6_rebound")
    w = np.array([0.3, -0.7, 1.1])
    for x in (0.4, 0.4):
        gr = s2sad.grad(mod.f, argnums=(0, 1))
        np.testing.assert_allclose(
            gr(x, w)[1], np.tanh(x * w) + x * w / np.cosh(x * w) ** 2
        )
        gr(x, w)  # the fast path from here on
        monkeypatch.setattr(mod, "np", _SinNumPy())
        np.testing.assert_allclose(gr(x, w)[1], np.sin(x * w) + x * w * np.cos(x * w))
        monkeypatch.setattr(mod, "np", np)
        np.testing.assert_allclose(
            gr(x, w)[1], np.tanh(x * w) + x * w / np.cosh(x * w) ** 2
        )


# -- found by the second-order sweep (seed 6005, program 78, all new forms) --------


def mean_of_a_numpy_scalar(x, s):
    s1 = np.log(s * s + 1.0)  # a NumPy float: the methods pass writes s1.mean()
    return np.sum(x * np.mean(s1)) + np.max(s1) * np.sum(s1)


def method_of_a_numpy_scalar(x, s):
    s1 = np.log(s * s + 1.0)
    return np.sum(x * s1.mean()) + s1.sum()


def attribute_of_a_numpy_scalar(x, s):
    s1 = np.log(s * s + 1.0)
    return np.sum(x * s1.T) + s1.reshape(1)[0]


@pytest.mark.parametrize(
    "f",
    [mean_of_a_numpy_scalar, method_of_a_numpy_scalar, attribute_of_a_numpy_scalar],
)
def test_forward_mode_of_a_method_of_a_numpy_scalar(f):
    """``s1 = np.log(s * s + 1.0)`` of a Python float ``s`` is a NumPy float, whose
    tangent is a Python float: forward mode called ``t_s1.mean()`` on it
    (AttributeError), in ``s2sad.jvp`` and in the derivative of the emitted
    gradient (where the methods pass had written ``s1.mean()``); ``t_s1.T`` the
    same.  The tangent now takes the receiver's type first
    (``tangents.method_receiver``)."""
    x = np.array([0.3, -0.2, 0.5])
    s2sad.check_grads(f, (x, 0.7), order=2, modes=("rev", "fwd"))
    value, tangent = s2sad.jvp(f, (x, 0.7), (np.ones(3), 1.0))
    h = 1e-6
    want = (f(x + h, 0.7 + h) - f(x - h, 0.7 - h)) / (2 * h)
    np.testing.assert_allclose(tangent, want, rtol=1e-6)
    assert value == f(x, 0.7)


# -- found while checking the cache key on dicts: ``for k in d`` ---------------------


def loop_over_dict_argument(x, d):
    s = 0.0
    for k in d:  # the keys: 0 and 1 (s2sad read d[0], d[1], the values)
        s = s + x[k] * 2.0
    return s


def loop_over_local_dict(x, w):
    d = {0: x[1] * w, 2: x[0]}
    s = 0.0
    for k in d:  # noqa: PLC0206 - the pattern under test
        s = s + d[k] * x[k]
    return s


def loop_over_nested_dict(x, p):
    s = 0.0
    for name in p["layers"]:  # noqa: PLC0206 - the pattern under test
        s = s + np.sum(x * p["layers"][name])
    return s


def test_loop_over_a_dict_iterates_its_keys():
    """``for k in d`` over a dict (an argument, a path in one, or a local dict
    display) iterates the keys, as Python does; s2sad indexed ``d[0], d[1]...``:
    a silent wrong value and gradient for ``{0: 1, 1: 1}``, a TypeError or a
    KeyError for other dicts (present before session 6)."""
    x = np.array([1.0, 2.0, 3.0])
    value, g = s2sad.value_and_grad(loop_over_dict_argument, argnums=0)(x, {0: 1, 1: 1})
    assert value == loop_over_dict_argument(x, {0: 1, 1: 1}) == 6.0
    np.testing.assert_array_equal(g, [2.0, 2.0, 0.0])
    s2sad.check_grads(loop_over_local_dict, (x, 0.7), order=2, modes=("rev", "fwd"))
    a, b = np.array([0.3, 0.4]), np.array([1.0, -0.5])
    p = {"layers": {"a": np.array([1.0, 1.0]), "b": b}}
    s2sad.check_grads(loop_over_nested_dict, (a, p), order=2, modes=("rev", "fwd"))
    value, (ga, gp) = s2sad.value_and_grad(loop_over_nested_dict, argnums=(0, 1))(a, p)
    assert value == loop_over_nested_dict(a, p)
    np.testing.assert_allclose(ga, [2.0, 0.5])
    np.testing.assert_allclose(gp["layers"]["b"], a)
