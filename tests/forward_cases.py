"""Small functions for the forward-mode tests (module level, so s2sad can read them)."""

from __future__ import annotations

import numpy as np

from s2sad.runtime import nn

SCALE = 2.0


def tanh_layer(x, W):
    h = np.tanh(x @ W)
    return np.sum(h * h)


def vector_out(x, A):
    return np.sin(A @ x) * x[0]


def with_dict(params, x):
    h = np.tanh(params["W"] @ x + params["b"])
    return {"h": h, "s": np.sum(h) * SCALE}


def fresh_copy_then_mutate(x):
    y = x + 0.0  # a new array whose tangent would be x's own
    y[0] = 3.0 * x[1]
    return x * y


def stack_with_pops(x):
    stack = []
    for i in range(3):
        stack.append(x * (i + 1.0))
    a = stack.pop()
    b = stack.pop()
    return a * b + stack[0]


def holey_list(x, c):
    items = [x, c, x * x]
    total = 0.0
    for v in items:
        total = total + np.sum(v * v)
    return total


def mutates_argument(x):
    x[0] = 1.0
    return np.sum(x)


def keyword_active(x):
    return np.sum(x.clip(min=x[0], max=5.0))


def extend_list(x):
    out = [x]
    more = [x]
    out.extend(more)
    return np.sum(out[1])


def opaque(x):
    return x * 2.0


def calls_opaque(x):
    return np.sum(OPAQUE(x))


OPAQUE = np.vectorize(opaque)


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def quadratic(x, A):
    return 0.5 * x @ A @ x


def lse(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def cube_times(a, x):
    return a * a * a * np.sum(x * x)


def mlp_loss(params, x, labels):
    h = nn.relu(x @ params["W1"] + params["b1"])
    logits = h @ params["W2"]
    return nn.softmax_cross_entropy(logits, labels)


def smooth_mlp_loss(W1, W2, x, labels):
    h = np.tanh(x @ W1)
    return nn.softmax_cross_entropy(h @ W2, labels)


def recursive_power(x, n):
    if n == 0:
        return x * 0.0 + 1.0
    return x * recursive_power(x, n - 1)


def uses_recursion(x):
    return np.sum(recursive_power(x, 3))


def moments(x):
    return np.std(x) + np.var(x) * np.mean(x)


def det_of(x):
    return np.linalg.det(x.reshape(2, 2))


def norm_of(x):
    return np.linalg.norm(x) * np.prod(x)


def cumprod_of(x):
    return np.sum(np.cumprod(x))


SQUARE = np.frompyfunc(lambda v: v * v, 1, 1)  # no source s2sad can read, no rule


def square_all(x):
    return np.sum(np.asarray(SQUARE(x), dtype=float) * x)


def squared(x):  # given an adjoint rule (and no tangent rule) by a test
    return x * x


def squared_of(x):
    return np.sum(squared(x))
