"""fuse: a written-out log-softmax becomes ``log_softmax_as_written`` (reverse mode).

Each matching idiom must be fused (one ``d_log_softmax`` in the backward, no
``d_sum``), give the same value to the bit as NumPy running the function, and
gradients equal to central finite differences (float64, several shapes, with
broadcasting, in a loop and a callee; second order through ``hvp``).  Each near
miss must be left exactly as without the pass.
"""

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.runtime.activations import log_softmax_as_written
from s2sad.testing import numerical_grad
from tests.transforms.dumps import after

RNG = np.random.default_rng(1)
LABELS = np.array([0, 2, 1, 2])


def ce_shifted(z, y):
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(z.shape[0]), y])


def unshifted_axis0_broadcast(x, b, w):
    a = x + b  # (3, 4) + (4,)
    e = np.exp(a)
    s = e.sum(axis=0, keepdims=True)
    return np.sum(w * (a - np.log(s)))


def all_axes_subtract(x, w):
    logp = np.subtract(x, np.log(np.sum(np.exp(x), keepdims=True)))
    return np.sum(logp * w)


def last_axis_3d(x, w):
    logp = x - np.log(np.sum(np.exp(x), axis=-1, keepdims=True))
    return np.sum(np.tanh(logp) * w)


def _logp(z):
    return z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))


def in_callee(x, W):
    return np.sum(_logp(x @ W)[:, 0])


def in_loop(xs, w):
    total = 0.0
    for t in range(xs.shape[0]):
        z = xs[t] @ w
        logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
        total = total + np.sum(logp[:, 0] * logp[:, 1])
    return total


# near misses: left as written
def exp_read_twice(x):
    e = np.exp(x)
    s = np.sum(e, axis=1, keepdims=True)
    return np.sum(x - np.log(s)) + np.sum(e)


def no_keepdims(x):
    return np.sum(x.T - np.log(np.sum(np.exp(x.T), axis=0)))


def reversed_subtract(x):
    return np.sum(np.log(np.sum(np.exp(x), axis=1, keepdims=True)) - x)


def other_array(x, a):
    return np.sum(a - np.log(np.sum(np.exp(x), axis=1, keepdims=True)))


MATCHING = [
    (ce_shifted, lambda: (RNG.normal(size=(4, 3)), LABELS), 0),
    (ce_shifted, lambda: (RNG.normal(size=(4, 7)), LABELS), 0),
    (
        unshifted_axis0_broadcast,
        lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=4), RNG.normal(size=(3, 4))),
        (0, 1, 2),
    ),
    (all_axes_subtract, lambda: (RNG.normal(size=(2, 5)), RNG.normal(size=5)), (0, 1)),
    (all_axes_subtract, lambda: (RNG.normal(size=6), RNG.normal(size=6)), (0, 1)),
    (last_axis_3d, lambda: (RNG.normal(size=(2, 3, 4)), RNG.normal(size=4)), (0, 1)),
    (in_callee, lambda: (RNG.normal(size=(5, 3)), RNG.normal(size=(3, 4))), (0, 1)),
    (in_loop, lambda: (RNG.normal(size=(3, 4, 3)), RNG.normal(size=(3, 3))), (0, 1)),
]
NEAR_MISSES = [
    (exp_read_twice, lambda: (RNG.normal(size=(3, 4)),), 0),
    (no_keepdims, lambda: (RNG.normal(size=(3, 4)),), 0),
    (reversed_subtract, lambda: (RNG.normal(size=(3, 4)),), 0),
    (other_array, lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(3, 1))), (0, 1)),
]


def nums(argnums):
    return argnums if isinstance(argnums, tuple) else (argnums,)


def check(fn, args, argnums):
    value, grads = s2sad.value_and_grad(fn, argnums=argnums)(*args)
    assert value == fn(*args)  # the same operations: the same value, to the bit
    want = numerical_grad(fn, args, argnums)
    for g, w in zip(grads if isinstance(argnums, tuple) else (grads,), nums(want)):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-8)


def without_fuse(monkeypatch):
    passes = [p for p in pipeline.PASSES if p[0] != "fuse"]
    monkeypatch.setattr(pipeline, "PASSES", passes)


@pytest.mark.parametrize(
    "fn,make,argnums", MATCHING, ids=lambda v: getattr(v, "__name__", "")
)
def test_written_out_log_softmax_is_fused_and_grads_match_fd(
    fn, make, argnums, monkeypatch
):
    args = make()
    check(fn, args, argnums)
    if fn is in_callee:  # a callee's body is compiled apart: see below
        return
    code = after("cleanup", fn, nums(argnums))
    assert "log_softmax_as_written(" in code and "d_log_softmax(" in code, code
    without_fuse(monkeypatch)
    plain = after("cleanup", fn, nums(argnums))
    assert "log_softmax_as_written" not in plain
    # the spread of the sum and the accumulation into the input are gone
    assert code.count("d_sum(") == plain.count("d_sum(") - 1, plain


@pytest.mark.parametrize(
    "fn,make,argnums", NEAR_MISSES, ids=lambda v: getattr(v, "__name__", "")
)
def test_near_misses_are_left_as_written(fn, make, argnums, monkeypatch):
    code = after("cleanup", fn, nums(argnums))
    assert "log_softmax_as_written" not in code, code
    check(fn, make(), argnums)
    without_fuse(monkeypatch)
    assert after("cleanup", fn, nums(argnums)) == code


def test_callee_is_fused_too():
    vg = s2sad.value_and_grad(in_callee, argnums=(0, 1))
    vg(RNG.normal(size=(5, 3)), RNG.normal(size=(3, 4)))
    assert "log_softmax_as_written(" in vg.source


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_rule_gives_the_written_out_values_to_the_bit(dtype):
    x = RNG.normal(size=(6, 5)).astype(dtype) * 10
    for axis in (0, 1, -1, None):
        want = x - np.log(np.sum(np.exp(x), axis=axis, keepdims=True))
        got = log_softmax_as_written(x, axis=axis)
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_second_order_through_the_fused_rule():
    x, w = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    v = RNG.normal(size=(3, 4))

    def f(x):
        return last_axis_3d(x, w)

    hv = s2sad.hvp(f)(x, v)
    h = 1e-5
    g = s2sad.grad(f)
    np.testing.assert_allclose(
        hv, (g(x + h * v) - g(x - h * v)) / (2 * h), rtol=1e-5, atol=1e-7
    )


def test_forward_mode_agrees_with_reverse():
    x, w = RNG.normal(size=(3, 4)), RNG.normal(size=4)
    t = RNG.normal(size=(3, 4))
    _, jt = s2sad.jvp(last_axis_3d, argnums=0)(x, w, t)
    np.testing.assert_allclose(
        jt, np.sum(s2sad.grad(last_axis_3d)(x, w) * t), rtol=1e-10
    )
