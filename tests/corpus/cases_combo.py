"""Corpus: combinations of features (loops in calls, branches in loops, mutation in loops...)."""

import math

import numpy as np

from tests.corpus.registry import case, const, mat, scal, tree, vec


def cell(h, x, W):
    return np.tanh(W @ h + x)


def clipped_step(y):
    if np.sum(y) > 2.0:
        return y * 0.5
    return y * 1.5


def fill(x):
    y = np.zeros(x.shape[0] * 2)
    for i in range(x.shape[0]):
        y[2 * i] = x[i]
        y[2 * i + 1] = x[i] * x[i]
    return y


def accumulate_list(x, n):
    out = []
    for i in range(n):
        out.append(np.sin(x * (i + 1)))
    return out


def count_down(x, n):
    while n > 0:
        x = x * 0.9 + 0.1
        n = n - 1
    return x


def poly(x, coeffs):
    y = 0.0
    for c in coeffs:
        y = y * x + c
    return y


@case(mat(3, 3), mat(4, 3), vec(3), argnums=(0, 1, 2))
def rnn_with_cell_fn(W, xs, h):
    for t in range(4):
        h = cell(h, xs[t], W)
    return np.sum(h)


@case(vec(3))
def branch_fn_in_loop(x):
    y = x
    for i in range(5):
        y = clipped_step(y)
    return np.sum(y * x)


@case(vec(3))
def mutation_in_callee(x):
    return np.sum(fill(x) ** 2)


@case(vec(3))
def list_returned_from_callee(x):
    parts = accumulate_list(x, 3)
    return np.sum(parts[0] + parts[2] * 2)


@case(vec(3))
def while_in_callee(x):
    return np.sum(count_down(x, 4))


@case(scal())
def loop_over_constant_list(x):
    return poly(x, [1.0, -2.0, 0.5, 3.0])


@case(vec(3))
def loop_break_inside_branch_inside_loop(x):
    y = x * 1.0
    for i in range(3):
        for j in range(4):
            if j == 2:
                if np.sum(y) > -1e9:
                    break
            y = y + np.sin(y) * (i + 1)
    return np.sum(y)


@case(vec(4))
def continue_and_mutation(x):
    y = np.zeros(4)
    for i in range(4):
        if i == 1:
            continue
        y[i] = x[i] * x[(i + 1) % 4]
    return np.sum(y)


@case(vec(3))
def return_from_nested_loops(x):
    y = x * 1.0
    for i in range(4):
        for j in range(4):
            y = y * 1.1
            if i * j == 2:
                return np.sum(y * y)
    return np.sum(y)


@case(vec(3))
def ternary_in_loop(x):
    y = x
    for i in range(4):
        y = y * 2 if i % 2 == 0 else np.sin(y)
    return np.sum(y)


@case(vec(3))
def lambda_in_loop(x):
    g = lambda t, k: t * k + np.cos(t)
    y = x
    for i in range(3):
        y = g(y, 0.5)
    return np.sum(y)


@case(vec(3), vec(3))
def zip_with_calls(x, w):
    s = 0.0
    for a, b in zip(x, w):
        s = s + square_plus(a, b)
    return s


def square_plus(a, b):
    return a * a + b


@case(mat(3, 2))
def enumerate_rows_mutation(X):
    out = np.zeros((3, 2))
    for i, row in enumerate(X):
        out[i] = row * (i + 1) + np.sum(out)
    return np.sum(out**2)


@case(scal())
def math_in_loop(x):
    y = x
    for i in range(3):
        y = math.sin(y) + math.cos(x) * 0.5
    return y


@case(tree(w=vec(3), b=scal()), mat(5, 3), vec(5))
def logistic_regression(params, X, y):
    z = X @ params["w"] + params["b"]
    p = 1.0 / (1.0 + np.exp(-z))
    return -np.mean(y * np.log(p + 1e-9) + (1 - y) * np.log(1 - p + 1e-9))


@case(vec(6))
def logsumexp_stable(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


@case(mat(4, 3), mat(3, 2), argnums=(0, 1))
def mlp_two_layers(X, W):
    h = np.maximum(X @ W, 0.0)
    return np.sum(h * h) + np.sum(np.tanh(W))


@case(vec(3))
def early_return_in_callee_loop(x):
    return np.sum(first_big(x) * x)


def first_big(x):
    y = x
    for i in range(10):
        y = y * 1.5
        if np.max(np.abs(y)) > 2:
            return y
    return y


@case(vec(3))
def recursion_with_branch(x):
    return np.sum(halve_until(x, 5))


def halve_until(x, n):
    if n == 0:
        return x
    if np.sum(x * x) > 1.0:
        return halve_until(x * 0.5, n - 1)
    return halve_until(x + 0.1, n - 1)


@case(vec(3))
def nested_list_of_tuples(x):
    pairs = [(x, x * 2), (np.sin(x), x)]
    s = 0.0
    for p in pairs:
        s = s + np.sum(p[0] * p[1])
    return s


@case(vec(3))
def dict_built_in_loop(x):
    d = {}
    for i in range(3):
        d[i] = x * (i + 1)
    return np.sum(d[0] * d[2] + d[1])


@case(vec(3))
def while_with_computed_condition_and_break(x):
    y = x * 1.0
    n = 0
    while np.sum(y * y) < 50.0:
        y = y * 1.3 + 0.1
        n = n + 1
        if n > 20:
            break
    return np.sum(y)


@case(vec(4))
def slice_assign_in_loop_with_read(x):
    y = np.zeros(4)
    for i in range(1, 4):
        y[i:] = y[i - 1] + x[i:] * x[i]
    return np.sum(y * y)


@case(vec(3))
def keyword_call_in_loop(x):
    y = x
    for i in range(2):
        y = scaled(y, factor=1.5)
    return np.sum(y)


def scaled(v, factor=2.0, offset=0.0):
    return v * factor + offset


@case(vec(3))
def bool_and_in_loop(x):
    y = x
    for i in range(4):
        if i > 0 and np.sum(y) > -100:
            y = y * 0.7 + x
    return np.sum(y)


@case(vec(3))
def reuse_after_loop(x):
    y = x
    for i in range(3):
        y = y + x * i
    z = y * y
    return np.sum(z + y)


@case(vec(3))
def loop_not_reaching_output(x):
    unused = x
    for i in range(3):
        unused = unused * 100
    return np.sum(x * 2)


@case(vec(3))
def unpack_in_loop(x):
    a, b = x, x * 2
    for i in range(3):
        a, b = b * 0.5, a + b
    return np.sum(a * b)


@case(mat(2, 3))
def nested_call_with_method(X):
    return np.sum(row_norms(X))


def row_norms(X):
    return np.sqrt((X * X).sum(axis=1) + 1.0)


@case(scal(), scal())
def pure_python_floats_loop(a, b):
    s = 0.0
    for i in range(5):
        s = s + a * i - b / (i + 1)
        if s > 100:
            s = s - 100
    return s * s


@case(vec(3))
def empty_list_then_stack(x):
    rows = []
    for i in range(3):
        rows.append(x * i)
    return np.sum(sum(rows) ** 2)


@case(vec(3), const(3))
def int_loop_bound_argument(x, n):
    y = x
    for i in range(n):
        y = np.sin(y) * 2
    return np.sum(y)
