"""fuse, loss heads: the written-out Bernoulli log-likelihood of a sigmoid and the
mean of integer-label picks of a log-softmax get closed-form cotangents.

Each matching idiom must be fused (the kernel appears, the intermediates get no
cotangent), give the same value to the bit as NumPy running the function and as
the code compiled without the pass, and gradients equal to central finite
differences (float64, several shapes, broadcasting, ``y`` differentiated, ``p``
or ``logp`` read again, in a loop and a callee, with workspaces, called twice);
float32 stays float32; second order (``hvp``) and forward mode stay right.  Each
near miss must be left exactly as without the pass.
"""

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.runtime import losses, nn
from s2sad.testing import numerical_grad
from tests.transforms.dumps import after

RNG = np.random.default_rng(7)


def bits(n):
    return (RNG.random(n) > 0.5).astype(float)


# ---------------------------------------------------------------- sigmoid log-loss


def logreg(w, b, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w + b)))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def other_spelling(w, X, y):
    z = X @ w
    p = 1 / (1 + np.exp(-z))
    ll = np.log(1 - p) * (1 - y) + np.log(p) * y
    return -np.sum(ll)


def log1p_spelling(w, X, y):
    z = X @ w
    p = np.reciprocal(np.exp(np.negative(z)) + 1.0)
    return -(y * np.log(p) + (1.0 - y) * np.log1p(-p)).mean()


def negated_spelling(w, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return np.mean(-y * np.log(p) - (1 - y) * np.log(1 - p))


def negated_outside(w, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return np.sum(-(np.log(p) * y) - (1.0 - y) * np.log1p(-p))


def library_sigmoid(w, X, y):
    p = nn.sigmoid(X @ w)
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def weighted(w, X, y, c):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return np.sum(c * (y * np.log(p) + (1.0 - y) * np.log(1.0 - p)))


def p_read_again(w, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    loss = -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))
    return loss + np.sum(p * p)


def in_loop(w, Xs, ys):
    total = 0.0
    for t in range(Xs.shape[0]):
        p = 1.0 / (1.0 + np.exp(-(Xs[t] @ w)))
        total = total - np.mean(ys[t] * np.log(p) + (1.0 - ys[t]) * np.log(1.0 - p))
    return total


def _bce(z, y):
    p = 1.0 / (1.0 + np.exp(-z))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def in_callee(w, X, y):
    return _bce(X @ w, y) + 0.5 * np.sum(w * w)


# near misses: left as written
def eps_inside_log(w, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return -np.mean(y * np.log(p + 1e-9) + (1.0 - y) * np.log(1.0 - p))


def two_probabilities(w, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    q = 1.0 / (1.0 + np.exp(-(X @ w) * 2.0))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - q))


def not_a_sigmoid(w, X, y):
    p = 1.0 / (2.0 + np.exp(-(X @ w)))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def negated_wrong_sign(w, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return np.mean(y * np.log(p) - (1 - y) * np.log(1 - p))


def other_label(w, X, y, u):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return -np.mean(y * np.log(p) + (1.0 - u) * np.log(1.0 - p))


# ---------------------------------------------------------------- picked log-softmax


def nll(W, x, y):
    z = x @ W
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(x.shape[0]), y])


def nll_sum_method(W, b, x, y):
    z = x @ W + b
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return -logp[np.arange(x.shape[0]), y].sum() / x.shape[0]


def nll_library(W, x, y):
    return -np.mean(nn.log_softmax(x @ W, axis=1)[np.arange(x.shape[0]), y])


def nll_rows_given(W, x, rows, y):
    z = x @ W
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[rows, y])


def nll_range(W, x, y):
    z = x @ W
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[range(x.shape[0]), y])


def nll_axis0(W, x, y):
    z = (x @ W).T
    logp = z - np.log(np.sum(np.exp(z), axis=0, keepdims=True))
    return -np.mean(logp[y, np.arange(x.shape[0])])


def nll_3d(W, x, y):
    z = x @ W  # (2, 5, 4): each pick is a row of 4
    logp = z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))
    return -np.mean(logp[np.arange(2), y])


def nll_logp_read_again(W, x, y):
    z = x @ W
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(x.shape[0]), y]) + 0.1 * np.sum(logp * logp)


def nll_in_loop(W, xs, ys):
    total = 0.0
    for t in range(xs.shape[0]):
        z = xs[t] @ W
        logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
        total = total - np.mean(logp[np.arange(z.shape[0]), ys[t]])
    return total


def _nll_head(z, y):
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(z.shape[0]), y])


def nll_in_callee(W, x, y):
    return _nll_head(np.tanh(x @ W), y)


# near misses
def nll_picked_twice(W, x, y):
    z = x @ W
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    picked = logp[np.arange(x.shape[0]), y]
    return -np.mean(picked) + np.sum(picked * picked)


def nll_mean_axis(W, x, y):
    z = x @ W
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.sum(np.mean(logp[np.arange(x.shape[0]), y], axis=0))


def nll_one_index(W, x, y):
    z = x @ W
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[y])


LABELS = np.array([0, 2, 1, 2, 3, 0])


def sig_args(n=6, d=3):
    return RNG.normal(size=d), 0.3, RNG.normal(size=(n, d)), bits(n)


def sig3():
    w, _, X, y = sig_args()
    return w, X, y


MATCHING = [
    (logreg, lambda: sig_args(), (0, 1), "sigmoid_log_likelihood_as_written("),
    (logreg, lambda: sig_args(9, 2), (0, 1, 3), "sigmoid_log_likelihood_as_written("),
    (
        logreg,  # b and y broadcast: z (6,), y (4, 1) -> terms (4, 6)
        lambda: (RNG.normal(size=3), RNG.normal(size=1), RNG.normal(size=(6, 3)),
                 RNG.random(size=(4, 1))),
        (0, 1, 3),
        "sigmoid_log_likelihood_as_written(",
    ),
    (
        other_spelling,  # int labels
        lambda: (RNG.normal(size=3), RNG.normal(size=(5, 3)), np.array([0, 1, 1, 0, 1])),
        0,
        "sigmoid_log_likelihood_as_written(",
    ),
    (log1p_spelling, lambda: sig3(), 0, "sigmoid_log_likelihood_as_written("),
    (library_sigmoid, lambda: sig3(), 0, "sigmoid_log_likelihood_as_written("),
    (negated_spelling, lambda: sig3(), (0, 2), "negated=True"),
    (negated_outside, lambda: sig3(), 0, "negated=True"),
    (
        weighted,
        lambda: (*sig3(), RNG.normal(size=6)),
        (0, 3),
        "sigmoid_log_likelihood_as_written(",
    ),
    (p_read_again, lambda: sig3(), (0, 2), "sigmoid_log_likelihood_as_written("),
    (
        in_loop,
        lambda: (RNG.normal(size=3), RNG.normal(size=(3, 5, 3)), bits(15).reshape(3, 5)),
        0,
        "sigmoid_log_likelihood_as_written(",
    ),
    (in_callee, lambda: sig3(), 0, None),
    (nll, lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3)), LABELS), 0,
     "picked_log_softmax_as_written("),
    (nll_sum_method,
     lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=4), RNG.normal(size=(6, 3)), LABELS),
     (0, 1), "picked_log_softmax_as_written("),
    (nll_library, lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3)), LABELS), 0,
     "picked_log_softmax_as_written("),
    (nll_rows_given,  # repeated rows: the rule's general path
     lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3)), np.array([0, 0, 5, 1]),
              np.array([1, 1, 3, 0])), 0, "picked_log_softmax_as_written("),
    (nll_range, lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3)), LABELS), 0,
     "picked_log_softmax_as_written("),
    (nll_axis0, lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3)), LABELS), 0,
     "picked_log_softmax_as_written("),
    (nll_3d, lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(2, 5, 3)), np.array([4, 1])),
     0, "picked_log_softmax_as_written("),
    (nll_logp_read_again, lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3)), LABELS),
     0, "picked_log_softmax_as_written("),
    (nll_in_loop,
     lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(2, 6, 3)), np.stack([LABELS, LABELS[::-1]])),
     0, "picked_log_softmax_as_written("),
    (nll_in_callee, lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3)), LABELS), 0, None),
]  # fmt: skip
NEAR_MISSES = [
    (eps_inside_log, lambda: sig3(), 0),
    (two_probabilities, lambda: sig3(), 0),
    (not_a_sigmoid, lambda: sig3(), 0),
    (other_label, lambda: (*sig3(), bits(6)), 0),
    (negated_wrong_sign, lambda: sig3(), 0),
    (nll_picked_twice, lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3)), LABELS), 0),
    (nll_mean_axis, lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3)), LABELS), 0),
    (nll_one_index, lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3)), LABELS), 0),
]  # fmt: skip


def nums(argnums):
    return argnums if isinstance(argnums, tuple) else (argnums,)


def as_tuple(grads, argnums):
    return grads if isinstance(argnums, tuple) else (grads,)


def check(fn, args, argnums):
    vg = s2sad.value_and_grad(fn, argnums=argnums)
    want = as_tuple(numerical_grad(fn, args, argnums), argnums)
    for _ in range(2):  # the second call reuses what the first one set up
        value, grads = vg(*args)
        assert value == fn(*args)  # the same operations: the same value, to the bit
        for g, w in zip(as_tuple(grads, argnums), want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-8)
    return value, grads


def without_fuse(monkeypatch):
    """The pipeline without the losses pass (the log-softmax is fused still)."""
    passes = [p for p in pipeline.PASSES if p[0] != "losses"]
    monkeypatch.setattr(pipeline, "PASSES", passes)


@pytest.mark.parametrize(
    "fn,make,argnums,kernel", MATCHING, ids=lambda v: getattr(v, "__name__", "")
)
def test_loss_heads_are_fused_and_grads_match_fd(
    fn, make, argnums, kernel, monkeypatch
):
    args = make()
    value, grads = check(fn, args, argnums)
    if kernel is None:  # a callee's body is compiled apart: see below
        return
    code = after("cleanup", fn, nums(argnums))
    assert kernel in code, code
    without_fuse(monkeypatch)
    assert kernel not in after("cleanup", fn, nums(argnums))
    plain_value, plain_grads = s2sad.value_and_grad(fn, argnums=argnums)(*args)
    assert plain_value == value
    for g, p in zip(as_tuple(grads, argnums), as_tuple(plain_grads, argnums)):
        np.testing.assert_allclose(g, p, rtol=1e-9, atol=1e-12)


def test_the_intermediates_get_no_cotangent():
    code = after("cleanup", logreg, (0, 1))
    assert "d_sigmoid_log_likelihood_z(" in code, code
    for name in ("g_p", "g_log", "g_mul", "g_sub", "g_exp"):
        assert name not in code, code
    code = after("cleanup", nll, (0,))
    assert "d_picked_log_softmax(" in code and " d_log_softmax(" not in code, code
    assert "g_logp" not in code and "d_getitem" not in code, code


def test_a_value_read_again_keeps_its_own_cotangent():
    code = after("cleanup", p_read_again, (0,))
    assert "sigmoid_log_likelihood_as_written(" in code and "g_p" in code, code
    code = after("cleanup", nll_logp_read_again, (0,))
    assert "d_picked_log_softmax(" in code and " d_log_softmax(" in code, code


def test_callees_are_fused_too():
    for fn, make, kernel in [
        (in_callee, lambda: sig3(), "sigmoid_log_likelihood_as_written("),
        (
            nll_in_callee,
            lambda: (RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3)), LABELS),
            "picked_log_softmax_as_written(",
        ),
    ]:
        vg = s2sad.value_and_grad(fn, argnums=0)
        vg(*make())
        assert kernel in vg.source


@pytest.mark.parametrize(
    "fn,make,argnums", NEAR_MISSES, ids=lambda v: getattr(v, "__name__", "")
)
def test_near_misses_are_left_as_written(fn, make, argnums, monkeypatch):
    code = after("cleanup", fn, nums(argnums))
    assert "_as_written(x" not in code and "sigmoid_log_likelihood" not in code, code
    assert "picked_log_softmax" not in code, code
    check(fn, make(), argnums)
    without_fuse(monkeypatch)
    assert after("cleanup", fn, nums(argnums)) == code


def test_workspaces_float32_and_two_calls():
    """Large enough for workspace buffers (the rules write into them); float32
    arguments give float32 gradients and the written-out values."""
    n = 4096
    X, w, y = RNG.normal(size=(n, 3)), RNG.normal(size=3), bits(n)
    check(logreg, (w, 0.1, X, y), (0, 1))
    W, x, labels = (
        RNG.normal(size=(3, 5)),
        RNG.normal(size=(n, 3)),
        RNG.integers(0, 5, n),
    )
    check(nll, (W, x, labels), 0)
    for fn, args in [
        (logreg, (w.astype(np.float32), np.float32(0.1), X.astype(np.float32), y)),
        (nll, (W.astype(np.float32), x.astype(np.float32), labels)),
    ]:
        vg = s2sad.value_and_grad(fn, argnums=0)
        for _ in range(2):
            value, g = vg(*args)
            assert value == fn(*args)
            assert g.dtype == np.float32
            want = numerical_grad(fn, args, 0)
            np.testing.assert_allclose(g, want, rtol=2e-3, atol=2e-4)


def test_second_order_through_the_fused_rules():
    X, b, y = RNG.normal(size=(6, 3)), 0.2, bits(6)
    x, labels = RNG.normal(size=(6, 3)), LABELS

    def f(w):
        return logreg(w, b, X, y)

    def h(W):
        return nll(W, x, labels)

    for fn, w in [(f, RNG.normal(size=3)), (h, RNG.normal(size=(3, 4)))]:
        v = RNG.normal(size=w.shape)
        hv = s2sad.hvp(fn)(w, v)
        g, eps = s2sad.grad(fn), 1e-5
        np.testing.assert_allclose(
            hv, (g(w + eps * v) - g(w - eps * v)) / (2 * eps), rtol=1e-5, atol=1e-7
        )
    s = 1.0 / (1.0 + np.exp(-b))  # p at w = 0: H = p (1 - p) X'X / n
    np.testing.assert_allclose(
        s2sad.hessian(f)(np.zeros(3)), s * (1 - s) * X.T @ X / 6, rtol=1e-8
    )


def test_forward_mode_agrees_with_reverse():
    w, b, X, y = sig_args()
    t = RNG.normal(size=3)
    _, jt = s2sad.jvp(logreg, argnums=0)(w, b, X, y, t)
    np.testing.assert_allclose(jt, s2sad.grad(logreg)(w, b, X, y) @ t, rtol=1e-10)
    W, x = RNG.normal(size=(3, 4)), RNG.normal(size=(6, 3))
    T = RNG.normal(size=(3, 4))
    _, jt = s2sad.jvp(nll, argnums=0)(W, x, LABELS, T)
    np.testing.assert_allclose(
        jt, np.sum(s2sad.grad(nll)(W, x, LABELS) * T), rtol=1e-10
    )


def test_the_kernels_compute_the_written_out_values():
    x = RNG.normal(size=(5, 4)).astype(np.float32)
    logp = x - np.log(np.sum(np.exp(x), axis=1, keepdims=True))
    rows, cols = np.arange(5), np.array([0, 3, 1, 1, 2])
    got = losses.picked_log_softmax_as_written(x, logp, rows, cols, axis=1)
    assert got == np.mean(logp[rows, cols]) and got.dtype == np.float32
    got = losses.picked_log_softmax_as_written(x, logp, rows, cols, 1, "sum")
    assert got == np.sum(logp[rows, cols])
    z = RNG.normal(size=7)
    y = bits(7)
    p = 1.0 / (1.0 + np.exp(-z))
    a, b = y * np.log(p), (1.0 - y) * np.log(1.0 - p)
    assert losses.sigmoid_log_likelihood_as_written(z, y, p, a, b, "mean") == np.mean(
        a + b
    )
    assert np.array_equal(
        losses.sigmoid_log_likelihood_as_written(z, y, p, a, b), a + b
    )


@pytest.mark.parametrize(
    "fn,make",
    [
        (in_loop, lambda n: (RNG.normal(size=3), RNG.normal(size=(2, n, 3)),
                             bits(2 * n).reshape(2, n))),
        (nll_in_loop, lambda n: (RNG.normal(size=(3, 4)), RNG.normal(size=(2, n, 3)),
                                 RNG.integers(0, 4, (2, n)))),
        (in_callee, lambda n: (RNG.normal(size=3), RNG.normal(size=(n, 3)), bits(n))),
        (nll_in_callee, lambda n: (RNG.normal(size=(3, 4)), RNG.normal(size=(n, 3)),
                                   RNG.integers(0, 4, n))),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)  # fmt: skip
def test_loops_and_callees_with_workspaces(fn, make):
    """Large enough for buffers taken in loops and callees (``ws.take``)."""
    args = make(3000)
    vg = s2sad.value_and_grad(fn, argnums=0)
    want = numerical_grad(fn, args, 0)
    for _ in range(2):
        value, g = vg(*args)
        assert value == fn(*args)
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)
    assert "ws" in vg.source
