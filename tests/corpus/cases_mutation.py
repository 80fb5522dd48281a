"""Corpus: mutation. Item assignment through containers and attributes
(min-char-rnn's ``xs[t][inputs[t]] = 1``); into an attribute it is refused."""

import numpy as np

from tests.corpus.registry import case, const, mat, vec

# ------------------------------------------------------------ (a) nested items


@case(mat(3, 4), const([1, 2, 0, 3]))
def min_char_rnn_onehot(Wxh, inputs):
    xs, hs = {}, {}
    hs[-1] = np.zeros(3)
    loss = 0.0
    for t in range(len(inputs)):
        xs[t] = np.zeros(4)
        xs[t][inputs[t]] = 1
        hs[t] = np.tanh(Wxh @ xs[t] + hs[t - 1])
        loss += np.sum(hs[t] ** 2)
    return loss


@case(vec(3), mat(2, 3))
def nested_item_of_list(x, W):
    hs = [np.zeros(3), np.ones(3)]
    hs[0][1] = x[0] * 2.0
    hs[1][:] = np.tanh(x)
    hs[1][2] = hs[0][1] * x[2]
    return np.sum(W @ hs[0] * (W @ hs[1]))


@case(vec(4), argnums=0)
def nested_item_three_deep(x):
    d = {"a": [np.zeros(4), np.zeros((2, 4))]}
    d["a"][1][0] = x * x
    d["a"][1][1][2] = np.sin(x[0])
    d["a"][0][:2] = x[2:]
    return np.sum(d["a"][1] ** 2) + np.sum(d["a"][0] * x)


@case(vec(3), const(2))
def nested_augassign_in_loop(x, n):
    xs = {}
    for t in range(n):
        xs[t] = np.ones(3)
        xs[t][t] += x[t] * x[2]
        xs[t][:] *= x
    return np.sum(xs[0] * xs[1])


@case(vec(3))
def nested_item_of_local_array(x):
    A = np.zeros((3, 3))
    A[1][2] = x[0]
    A[0][:] = x**2
    A[2][1:] = np.exp(x[:2])
    return np.sum(A @ x)


def _two_rows(v, w):
    rows = [np.zeros(3), np.zeros(3)]
    rows[1][:] = np.tanh(v)
    rows[0][1:] = w[:2] * v[0]
    return rows


@case(vec(3), mat(2, 3))
def nested_item_in_callee(x, W):
    rows = _two_rows(W[1] * x, x)
    return np.sum(rows[0] * rows[1])


# ------------------------------------------- (b) arguments not differentiated


def _bn_param(rng):
    return {"mode": "train", "running_mean": rng.normal(size=3)}


@case(mat(5, 3), vec(3), _bn_param, argnums=(0, 1))
def batchnorm_running_mean(x, gamma, bn_param):
    mu = x.mean(axis=0)
    bn_param["running_mean"] = 0.9 * bn_param["running_mean"] + 0.1 * mu
    return np.sum(gamma * (x - mu) ** 2)


@case(mat(5, 3), _bn_param, argnums=0)
def config_read_after_write(x, bn_param):
    bn_param["running_mean"] = 0.5 * bn_param["running_mean"] + x.mean(axis=0)
    bn_param["count"] = 1
    rm = bn_param["running_mean"]
    return np.sum(np.tanh(x - rm) * rm)


@case(vec(4), lambda rng: [rng.normal(size=4), rng.normal(size=4)], const(3))
def cache_list_in_loop(x, cache, n):
    h = x
    for t in range(n):
        h = np.tanh(h * cache[0])
        cache[1][t] = h[t]
        cache[1][:t] *= 0.5
    return np.sum(h * cache[1])


@case(vec(3), lambda rng: {"buf": rng.normal(size=3)})
def alias_of_config_item(x, cfg):
    a = cfg["buf"]
    a[0] = np.sum(x * a)
    return np.sum(x * a[0])


@case(vec(3), mat(2, 3))
def view_of_buffer_row(x, buf):
    row = buf[0]
    row[1:] = np.tanh(x[:2])
    return np.sum(row * x)


# --------------------------------- (c) a differentiated argument changed in place
# (the gradient is with respect to the value on entry; the caller's array ends as
# Python leaves it: tests/test_mutation.py)


@case(vec(4))
def differentiated_arg_changed(x):
    x[0] = 2.0 * x[1]
    x *= 3.0
    return np.sum(x * x)


@case(mat(3, 4), vec(3), argnums=(0, 1))
def arg_changed_in_loop_broadcast(x, b):
    for t in range(3):
        x[:, t] += b * x[:, t + 1]
        x -= 0.1 * np.tanh(x)
    return np.sum(np.sin(x) * x)


@case(vec(4), vec(4), argnums=(0, 1))
def arg_changed_then_early_return(x, w):
    x[1:] *= w[:3]
    if np.sum(x) > 100.0:
        return np.sum(x)
    x[0] = np.sum(w * x)
    return np.sum(x**2) + x[0]


@case(mat(3, 3), vec(3), argnums=(0, 1))
def two_args_one_changed(W, x):
    W[0, :] = 0.0
    W *= x
    W[:, 1] += x
    return np.sum(np.tanh(W @ x))


@case(vec(3), mat(2, 3), argnums=0)
def undifferentiated_array_changed(x, buf):
    buf *= 2.0
    buf[0] = x * buf[1]
    return np.sum(buf * x)
