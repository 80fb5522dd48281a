"""Small arrays (issue 16, lever 7): ``grad``'s fast path for calls of small NumPy
arrays, ``finalize``'s direct copy and the filled cotangents of full sums and
means, with the gradients unchanged.

Gradients are checked against central finite differences in float64
(``s2sad.testing.numerical_grad``), on several shapes, through the fast path
(second and later calls) and the slow one.
"""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import workspace
from s2sad.runtime.reductions import SMALL_FILL, d_mean, d_sum, filled
from s2sad.runtime.support import finalize
from s2sad.testing import numerical_grad


def logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def logreg(w, b, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w + b)))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def weighted(x, w, k):
    return np.sum(np.tanh(x) * w) * k + np.mean(x * x)


def _close(got, want, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("shape", [(10,), (3, 4), (1,), (2, 1, 5)])
def test_logsumexp_fast_path_matches_finite_differences(shape):
    rng = np.random.default_rng(0)
    vg = s2sad.value_and_grad(logsumexp)
    for _ in range(3):  # first call compiles, the next ones take the fast path
        x = rng.normal(size=shape)
        value, g = vg(x)
        assert value == logsumexp(x)
        _close(g, numerical_grad(logsumexp, [x]))
        assert g.shape == x.shape and g.dtype == x.dtype
    assert vg._hot  # the fast path was taken


def test_logreg_fast_path_array_and_float_arguments():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 3))
    y = (rng.normal(size=20) > 0).astype(float)
    vg = s2sad.value_and_grad(logreg, argnums=(0, 1))
    for _ in range(3):
        w, b = 0.3 * rng.normal(size=3), float(rng.normal())
        value, (gw, gb) = vg(w, b, X, y)
        assert value == pytest.approx(logreg(w, b, X, y), rel=1e-14)
        want = numerical_grad(logreg, [w, b, X, y], (0, 1))
        _close(gw, want[0])
        _close(gb, want[1])
        assert type(gb) is float
    assert vg._hot


def test_fast_path_gradients_are_fresh_arrays():
    vg = s2sad.grad(weighted, argnums=(0, 1))
    x, w = np.linspace(-1, 1, 6), np.linspace(0.5, 2, 6)
    first = vg(x, w, 3)
    again = vg(x, w, 3)
    assert vg._hot
    for a, b in zip(first, again):
        assert a is not b and not np.shares_memory(a, b)
        assert a.flags.writeable
        _close(a, b, rtol=0, atol=0)
    want = numerical_grad(weighted, [x, w, 3], (0, 1))
    _close(again[0], want[0])
    _close(again[1], want[1])


def test_fast_path_leaves_large_arrays_to_the_buffered_module():
    """Arrays past SMALL_BYTES pick the buffered module: the fast path's guard
    sends them the slow way, with the same gradients."""
    vg = s2sad.grad(weighted, argnums=(0, 1))
    small = np.linspace(-1, 1, 8)
    vg(small, small, 2)
    vg(small, small, 2)
    assert vg._hot
    n = workspace.SMALL_BYTES // 8  # float64: exactly SMALL_BYTES per array
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=n), rng.normal(size=n)
    for _ in range(3):  # plain, recording and buffered calls
        gx, gw = vg(x, w, 2)
        _close(gx, 2 * w * (1 - np.tanh(x) ** 2) + 2 * x / n, rtol=1e-12)
        _close(gw, 2 * np.tanh(x), rtol=1e-12)
    assert len(vg._compiled) == 2  # the small module and the buffered one


def test_fast_path_refuses_integer_arrays_like_the_slow_path():
    vg = s2sad.grad(logsumexp)
    x = np.linspace(0, 1, 5)
    vg(x)
    vg(x)
    assert vg._hot
    with pytest.raises(s2sad.errors.S2SADError) as slow:
        s2sad.grad(logsumexp)(np.arange(5))
    with pytest.raises(type(slow.value)):
        vg(np.arange(5))


def test_fast_path_float32_arrays():
    vg = s2sad.value_and_grad(logsumexp)
    x64 = np.linspace(-2, 3, 7)
    vg(x64)
    vg(x64)
    x = x64.astype(np.float32)
    value, g = vg(x)
    assert g.dtype == np.float32
    _close(g, numerical_grad(logsumexp, [x64]), rtol=1e-5, atol=1e-6)


_scale = 2.0


def scaled_sum(x):
    return _scale * np.sum(x * x)


def test_fast_path_sees_a_rebound_global():
    global _scale
    vg = s2sad.grad(scaled_sum)
    x = np.array([1.0, -2.0, 0.5])
    vg(x)
    _close(vg(x), 4.0 * x, rtol=0, atol=0)
    assert vg._hot
    old = _scale
    try:
        _scale = np.float64(3.0)  # a rebound global of another type: compiled again
        _close(vg(x), 6.0 * x, rtol=0, atol=0)
    finally:
        _scale = old


# ---------------------------------------------------------------- the runtime pieces


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(), (1,), (10,), (3, 4), (2, 3, 2)])
def test_filled_sum_and_mean_cotangents_equal_the_broadcast_ones(shape, dtype):
    x = np.ones(shape, dtype)
    with np.errstate(over="ignore"):  # 1e300 to float32: inf both ways
        _check_filled(x, shape, dtype)


def _check_filled(x, shape, dtype):
    for g in (0.3, np.float64(-1.7), np.float32(2.5), 1e300, np.inf, np.nan):
        want_sum = np.broadcast_to(g, shape).astype(dtype)
        got = d_sum(g, None, x)[0]
        assert got.dtype == dtype and got.shape == shape and got.flags.writeable
        np.testing.assert_array_equal(got, want_sum)
        if x.size:
            want_mean = np.broadcast_to(g / x.size, shape).astype(dtype)
            got = d_mean(g, None, x)[0]
            assert got.dtype == dtype and got.shape == shape
            np.testing.assert_array_equal(got, want_mean)


def test_filled_leaves_large_integer_and_axis_cases_to_broadcasting():
    assert filled(0.5, np.ones(SMALL_FILL + 1)) is None
    assert filled(0.5, np.ones(3, dtype=int)) is None
    assert filled(np.ones(1), np.ones(3)) is None
    big = d_sum(0.5, None, np.ones(SMALL_FILL + 1))[0]
    assert not big.flags.writeable  # the read-only broadcast view, as before
    g = np.array([1.0, 2.0])
    np.testing.assert_array_equal(d_sum(g, None, np.ones((3, 2)), 0)[0], [g, g, g])
    ints = d_sum(0.5, None, np.ones(3, dtype=int))[0]
    np.testing.assert_array_equal(ints, [0.5, 0.5, 0.5])


@pytest.mark.parametrize("shape", [(10,), (4, 3), (2, 3, 4)])
def test_sum_and_mean_gradients_near_and_past_the_fill_size(shape):
    def f(x):
        return np.sum(np.sin(x)) + 3.0 * np.mean(x * x)

    rng = np.random.default_rng(3)
    for x in (rng.normal(size=shape), rng.normal(size=SMALL_FILL + 5)):
        g = s2sad.grad(f)(x)
        _close(g, np.cos(x) + 6.0 * x / x.size, rtol=1e-12, atol=1e-15)
    x = rng.normal(size=shape)
    _close(s2sad.grad(f)(x), numerical_grad(f, [x]))


def test_finalize_copies_same_shaped_cotangents_keeping_their_layout():
    x = np.zeros((3, 4))
    g = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    kept = g  # another name sees g: finalize must copy
    out = finalize(g, x)
    assert out is not g and not np.shares_memory(out, g) and kept is g
    np.testing.assert_array_equal(out, g)
    assert out.flags.f_contiguous  # like np.array(g, copy=True) before


def test_finalize_returns_a_fresh_cotangent_nobody_else_sees_without_a_copy():
    x = np.zeros((3, 4))
    g = np.arange(12.0).reshape(3, 4).copy()
    assert finalize(g, x) is g  # only this frame's variable refers to g
    view = g[1:]
    assert finalize(g, x) is not g  # a view keeps g alive elsewhere
    assert finalize(view, np.zeros((2, 4))) is not view  # a view: always copied
    buf = np.ones((3, 4))
    g2 = buf.reshape(3, 4)  # a view of another array
    assert finalize(g2, x) is not g2
    view = np.broadcast_to(np.float64(2.0), (3, 4))
    got = finalize(view, x)
    assert got.flags.writeable and got.flags.owndata
    np.testing.assert_array_equal(got, np.full((3, 4), 2.0))
    # other shapes and dtypes still go the long way
    np.testing.assert_array_equal(finalize(np.ones((2, 3, 4)), x), np.full((3, 4), 2.0))
    assert finalize(np.ones((3, 4)), x.astype(np.float32)).dtype == np.float32


@pytest.mark.parametrize("shape", [(3,), (2, 3), (4, 1, 2)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unbroadcast_to_a_python_float_sums_everything(shape, dtype):
    from s2sad.runtime.support import unbroadcast

    g = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape).astype(dtype)
    got = unbroadcast(g, 0.5)
    want = g.sum(axis=tuple(range(g.ndim)))
    assert type(got) is type(want) and got == want
    zero_d = np.array(2.0)
    assert unbroadcast(zero_d, 0.5) is zero_d  # nothing broadcast: as before


def test_float_offset_gradient_against_finite_differences():
    def f(w, b, X):
        return np.sum(np.tanh(X @ w + b) ** 2)

    rng = np.random.default_rng(4)
    X = rng.normal(size=(7, 3))
    vg = s2sad.grad(f, argnums=(0, 1))
    for _ in range(3):
        w, b = rng.normal(size=3), float(rng.normal())
        gw, gb = vg(w, b, X)
        want = numerical_grad(f, [w, b, X], (0, 1))
        _close(gw, want[0])
        _close(gb, want[1])
        assert type(gb) is float


def test_accumulate_adds_same_shaped_arrays_in_place_only_when_exclusive():
    from s2sad.runtime.support import accumulate

    a, b = np.ones(4), np.full(4, 2.0)
    kept = a
    out = accumulate(a, b)  # `kept` refers to a: a new array
    assert out is not a and np.all(kept == 1.0) and np.all(out == 3.0)
    out = accumulate(np.ones(4), b)
    np.testing.assert_array_equal(out, np.full(4, 3.0))
    f32 = accumulate(np.ones(4, np.float32), np.ones(4))  # a float64 addend
    assert f32.dtype == np.float64


AXES = [
    (0, False),
    (1, True),
    (-1, False),
    ((0, 2), False),
    ((0, 2), True),
    (None, True),
]


@pytest.mark.parametrize("axis,keepdims", AXES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_spread_written_out_equals_the_broadcast_view(axis, keepdims, dtype):
    from s2sad.runtime.reductions import axes_of, spread

    for shape in [(2, 3, 4), (40, 30, 5)]:  # under and over SMALL_FILL
        x = np.zeros(shape, dtype)
        reduced = np.sum(x, axis=axis, keepdims=keepdims)
        g = np.arange(1.0, 1.0 + reduced.size).reshape(reduced.shape)
        if g.ndim == 2:
            g = np.asfortranarray(g)  # a non-contiguous layout reshapes too
        kept = g if keepdims else np.expand_dims(g, axes_of(3, axis))
        want = np.broadcast_to(kept, shape)
        got = spread(g, x, axis, keepdims)
        assert got.shape == shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        if x.size > SMALL_FILL:
            assert not got.flags.writeable  # still the view for large arrays
        for rule in (d_sum, d_mean):
            ct = rule(g, None, x, axis, keepdims=keepdims)[0]
            assert ct.dtype == dtype and ct.shape == shape


def _reducing(x, w):
    s = np.sum(x * w, axis=1, keepdims=True)
    m = np.mean(np.tanh(x), axis=0)
    return np.sum(np.exp(x - s) * w) + np.sum(m * m) + np.mean(x, axis=(0, 1)).sum()


def _looped(x, w):
    total = 0.0
    for i in range(3):
        total = total + np.sum(np.sum(x * w, axis=1) ** 2) * (i + 1)
    return total


def _outer(x, w):
    return _reducing(x, w) * 0.5


@pytest.mark.parametrize("fn", [_reducing, _looped, _outer])
@pytest.mark.parametrize("shape", [(3, 4), (5, 2), (70, 80)])
def test_axis_reduction_gradients_against_finite_differences(fn, shape):
    rng = np.random.default_rng(5)
    x, w = 0.3 * rng.normal(size=shape), 0.3 * rng.normal(size=shape[1])
    vg = s2sad.grad(fn, argnums=(0, 1))
    for _ in range(3):  # plain, then fast-path (or recording and buffered) calls
        gx, gw = vg(x, w)
    if x.size > 1000:  # finite differences on a few entries only
        idx = [(0, 0), (shape[0] - 1, 3), (7, shape[1] - 1)]
        h = 1e-6
        for i in idx:
            d = np.zeros(shape)
            d[i] = h
            fd = (fn(x + d, w) - fn(x - d, w)) / (2 * h)
            _close(gx[i], fd, rtol=1e-5, atol=1e-7)
        return
    want = numerical_grad(fn, [x, w], (0, 1))
    _close(gx, want[0])
    _close(gw, want[1])


def test_axis_reduction_forward_and_second_order():
    rng = np.random.default_rng(6)
    x, w, v = rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(3, 4))
    hv = s2sad.hvp(_reducing)(x, w, v)
    g = s2sad.grad(_reducing)
    h = 1e-5
    _close(hv, (g(x + h * v, w) - g(x - h * v, w)) / (2 * h), rtol=1e-5, atol=1e-7)
    _, tangent = s2sad.jvp(_reducing)(x, w, v)
    _close(tangent, np.sum(g(x, w) * v), rtol=1e-10)


def test_alternating_signatures_stay_right_and_source_follows_the_last_call():
    vg = s2sad.grad(weighted)
    x, w = np.linspace(-1, 1, 4), np.linspace(0.5, 2, 4)
    for k in (2.0, 3, 2.0, 3, 2.0):
        g = vg(x, w, k)
        _close(g, k * w * (1 - np.tanh(x) ** 2) + 2 * x / x.size, rtol=1e-12)
        kind = "a<f8,a<f8,-;small" if type(k) is float else "a<f8,a<f8,i;small"
        assert vg._compiled[kind] is vg._last


def test_out_arrays_through_the_fast_path():
    vg = s2sad.value_and_grad(weighted, argnums=(0, 1))
    x, w = np.linspace(-1, 1, 5), np.linspace(0.5, 2, 5)
    outs = (np.empty(5), np.empty(5))
    want = numerical_grad(weighted, [x, w, 2.0], (0, 1))
    for _ in range(3):
        outs[0].fill(np.nan)
        value, grads = vg(x, w, 2.0, out=outs)
        assert grads[0] is outs[0] and grads[1] is outs[1]
        _close(outs[0], want[0])
        _close(outs[1], want[1])
        assert value == weighted(x, w, 2.0)
    assert vg._hot
    single = s2sad.grad(logsumexp)
    buf = np.empty(3)
    for _ in range(3):
        assert single(np.array([0.1, 0.2, 0.3]), out=buf) is buf
    _close(buf, numerical_grad(logsumexp, [np.array([0.1, 0.2, 0.3])]))


def test_out_arrays_when_a_global_was_rebound():
    global _scale
    vg = s2sad.grad(scaled_sum)
    x, buf = np.array([1.0, -2.0]), np.empty(2)
    vg(x, out=buf)
    vg(x, out=buf)
    old = _scale
    try:
        _scale = np.float64(5.0)
        assert vg(x, out=buf) is buf
        _close(buf, 10.0 * x, rtol=0, atol=0)
    finally:
        _scale = old
