"""shifts: a max subtracted only for stability gets no cotangent (reverse mode).

Each matching idiom must lose its ``d_max`` and keep gradients equal to central
finite differences (float64, several shapes); each near miss must keep its
``d_max`` (the pass leaves it alone) and its gradients right.
"""

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.testing import numerical_grad
from tests.transforms.dumps import after, job_after

# ----------------------------------------------------------------------------
# Idioms the pass proves shift-invariant
# ----------------------------------------------------------------------------


def logsumexp_all(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def logsumexp_rows(x):
    m = np.amax(x, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)) + m)


def log_softmax_ce(z, y):
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(z.shape[0]), y])


def softmax_weighted(z, w):
    e = np.exp(z - np.max(z, axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return np.sum(p * w)


def softmax_axis0_3d(z, w):
    m = np.max(z, axis=0, keepdims=True)
    e = np.exp(z - m)
    return np.sum(np.log(e / np.sum(e, axis=0, keepdims=True)) * w)


def log_softmax_in_loop(xs, w):
    total = 0.0
    for t in range(xs.shape[0]):
        z = xs[t] @ w
        m = np.max(z, axis=1, keepdims=True)
        s = z - m
        logp = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
        total = total + np.sum(logp[:, 0])
    return total


# ----------------------------------------------------------------------------
# Near misses: the cotangent of m is not provably zero, so m keeps it
# ----------------------------------------------------------------------------


def max_used_elsewhere(x):
    m = np.max(x, axis=1, keepdims=True)
    lse = np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)) + m
    return np.sum(lse) + 0.5 * np.sum(m)


def different_axes(x):
    m = np.max(x, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(x - m), axis=0, keepdims=True)) + m)


def no_keepdims(x):
    m = np.max(x, axis=0)
    return np.sum(np.log(np.sum(np.exp(x - m), axis=0)) + m)


def max_of_another_array(x, a):
    m = np.max(a * x, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)) + m)


def shift_not_cancelled(x):
    m = np.max(x, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)))


def scaled_shift(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(2.0 * (x - m))))


def max_returned_too(x):
    m = np.max(x)
    s = x - m
    return np.sum(np.exp(s)) * m


RNG = np.random.default_rng(0)
LABELS = np.array([0, 2, 1, 2])


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def check(fn, args, argnums):
    grads = s2sad.grad(fn, argnums=argnums)(*args)
    want = numerical_grad(fn, args, argnums)
    for g, w in zip(
        grads if isinstance(argnums, tuple) else (grads,),
        want if isinstance(argnums, tuple) else (want,),
    ):
        close(g, w)


MATCHING = [
    (logsumexp_all, lambda: (RNG.normal(size=7),), 0),
    (logsumexp_all, lambda: (RNG.normal(size=(3, 4)),), 0),
    (logsumexp_rows, lambda: (RNG.normal(size=(4, 5)),), 0),
    (log_softmax_ce, lambda: (RNG.normal(size=(4, 3)), LABELS), 0),
    (
        softmax_weighted,
        lambda: (RNG.normal(size=(2, 3, 4)), RNG.normal(size=4)),
        (0, 1),
    ),
    (
        softmax_axis0_3d,
        lambda: (RNG.normal(size=(3, 2, 2)), RNG.normal(size=(2, 1))),
        (0, 1),
    ),
    (
        log_softmax_in_loop,
        lambda: (RNG.normal(size=(2, 4, 3)), RNG.normal(size=(3, 3))),
        (0, 1),
    ),
]
NEAR_MISSES = [
    (max_used_elsewhere, lambda: (RNG.normal(size=(3, 4)),), 0),
    (different_axes, lambda: (RNG.normal(size=(3, 4)),), 0),
    (no_keepdims, lambda: (RNG.normal(size=(3, 4)),), 0),
    (
        max_of_another_array,
        lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=4)),
        (0, 1),
    ),
    (shift_not_cancelled, lambda: (RNG.normal(size=(3, 4)),), 0),
    (scaled_shift, lambda: (RNG.normal(size=5),), 0),
    (max_returned_too, lambda: (RNG.normal(size=5),), 0),
]


def argnums_of(argnums):
    return argnums if isinstance(argnums, tuple) else (argnums,)


@pytest.mark.parametrize(
    "fn,make,argnums", MATCHING, ids=lambda v: getattr(v, "__name__", "")
)
def test_shift_only_max_gets_no_cotangent_and_grads_match_fd(
    fn, make, argnums, monkeypatch
):
    code = after("cleanup", fn, argnums_of(argnums))
    assert "d_max" not in code and "d_amax" not in code, code
    check(fn, make(), argnums)
    # without the pass the max has its cotangent (what the pass saves)
    passes = [p for p in pipeline.PASSES if p[0] != "shifts"]
    monkeypatch.setattr(pipeline, "PASSES", passes)
    assert "d_max" in after("cleanup", fn, argnums_of(argnums))


@pytest.mark.parametrize(
    "fn,make,argnums", NEAR_MISSES, ids=lambda v: getattr(v, "__name__", "")
)
def test_near_misses_keep_the_max_cotangent_and_grads_match_fd(
    fn, make, argnums, monkeypatch
):
    code = after("cleanup", fn, argnums_of(argnums))
    assert "d_max" in code, code
    check(fn, make(), argnums)
    # exactly today's code: the same as with the pass taken out of the pipeline
    passes = [p for p in pipeline.PASSES if p[0] != "shifts"]
    monkeypatch.setattr(pipeline, "PASSES", passes)
    assert after("cleanup", fn, argnums_of(argnums)) == code


def test_the_pass_only_takes_the_max_out_of_the_activity():
    job, _ = job_after("shifts", log_softmax_ce)
    assert "max_1" not in job.act.active
    assert {"z", "z_1", "exp", "sum_1", "log", "logp"} <= job.act.active
    before, _ = job_after("aliasing", log_softmax_ce)
    assert "max_1" in before.act.active


def test_ties_in_the_max_give_the_exact_softmax():
    x = np.array([1.0, 3.0, 3.0, -2.0])
    value, g = s2sad.value_and_grad(logsumexp_all)(x)
    e = np.exp(x - 3.0)
    close(value, 3.0 + np.log(e.sum()))
    close(g, e / e.sum())


def test_forward_mode_and_hessians_still_agree():
    x = RNG.normal(size=5)
    h = s2sad.hessian(logsumexp_all)(x)
    p = np.exp(x - x.max())
    p /= p.sum()
    close(h, np.diag(p) - np.outer(p, p))


def log_softmax_rows(z):
    s = z - np.max(z, axis=1, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))


def calls_a_log_softmax(W, x, y):
    logp = log_softmax_rows(np.tanh(x @ W))
    return -np.mean(logp[np.arange(x.shape[0]), y])


def test_a_called_function_gets_the_same_treatment_and_its_hessian_is_right():
    W, x = RNG.normal(size=(3, 3)), RNG.normal(size=(4, 3))
    code = after("cleanup", calls_a_log_softmax, (0,))
    assert "d_max" not in code, code
    check(calls_a_log_softmax, (W, x, LABELS[:4] % 3), 0)
    h = s2sad.hessian(calls_a_log_softmax)(W, x, LABELS[:4] % 3)
    g = s2sad.grad(calls_a_log_softmax)
    eps = 1e-6
    for k in range(W.size):
        d = np.zeros(W.size)
        d[k] = eps
        d = d.reshape(W.shape)
        col = (g(W + d, x, LABELS[:4] % 3) - g(W - d, x, LABELS[:4] % 3)) / (2 * eps)
        np.testing.assert_allclose(
            h.reshape(W.size, W.size)[:, k], col.ravel(), rtol=1e-5, atol=1e-7
        )
