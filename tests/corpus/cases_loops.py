"""Corpus: for/while loops, break, continue, return inside loops, loop-carried values."""

import numpy as np

from tests.corpus.registry import case, const, mat, scal, vec


@case(vec(3))
def for_range_accumulate(x):
    s = 0.0
    for i in range(4):
        s = s + np.sum(x * i)
    return s


@case(vec(3), const(5))
def for_computed_bound(x, n):
    y = x * 1.0
    for i in range(n // 2 + 1):
        y = np.sin(y) + x
    return np.sum(y)


@case(vec(3))
def for_range_start_stop_step(x):
    y = x * 1.0
    for i in range(1, 8, 3):
        y = y * i + x
    return np.sum(y)


@case(mat(4, 3))
def for_over_rows(X):
    s = 0.0
    for row in X:
        s = s + np.sum(row * row)
    return s


@case(vec(3), vec(3))
def for_zip(x, y):
    s = 0.0
    for a, b in zip(x, y):
        s = s + a * b
    return s


@case(vec(4))
def for_enumerate(x):
    s = 0.0
    for i, v in enumerate(x):
        s = s + v * i
    return s


@case(vec(4))
def for_enumerate_start(x):
    s = 0.0
    for i, v in enumerate(x, 1):
        s = s + v**2 * i
    return s


@case(scal())
def while_loop(x):
    y = x
    k = 0
    while k < 5:
        y = y * 0.9 + np.sin(y)
        k = k + 1
    return y


@case(scal())
def while_value_condition(x):
    y = x * x + 0.1
    while y < 10.0:
        y = y * 1.7
    return y


@case(vec(3))
def for_break(x):
    y = x * 1.0
    for i in range(10):
        if i >= 3:
            break
        y = y * 2 + np.cos(y)
    return np.sum(y)


@case(vec(3))
def for_break_on_value(x):
    y = x * 1.0
    for i in range(50):
        y = y * 1.5
        if np.sum(y * y) > 30:
            break
    return np.sum(y)


@case(vec(3))
def for_continue(x):
    y = x * 1.0
    for i in range(6):
        if i % 2 == 0:
            continue
        y = y * np.sin(y) + x
    return np.sum(y)


@case(vec(3))
def return_inside_loop(x):
    y = x * 1.0
    for i in range(10):
        y = y * 1.3
        if i == 4:
            return np.sum(y * x)
    return np.sum(y)


@case(scal())
def while_break_continue(x):
    y = x
    k = 0
    while True:
        k = k + 1
        if k > 6:
            break
        if k == 2:
            continue
        y = y * 0.8 + 0.1 * y * y
    return y


@case(mat(3, 3), vec(3))
def nested_loops(W, x):
    h = x * 1.0
    for i in range(2):
        for j in range(3):
            h = np.tanh(W @ h) + h * j
    return np.sum(h)


@case(vec(3))
def nested_break(x):
    s = 0.0
    for i in range(3):
        for j in range(5):
            if j > i:
                break
            s = s + np.sum(x**2) * (i + j)
    return s


@case(vec(3))
def branch_inside_loop(x):
    y = x * 1.0
    for i in range(5):
        if np.sum(y) > 0:
            y = y * 0.5
        else:
            y = y * y + 1.0
    return np.sum(y)


@case(mat(4, 3), mat(3, 3), vec(3), argnums=(0, 1, 2))
def rnn_loop(xs, W, h0):
    h = h0
    for t in range(4):
        h = np.tanh(W @ h + xs[t])
    return np.sum(h * h)


@case(vec(5))
def loop_list_append(x):
    out = []
    for i in range(5):
        out.append(x[i] * x[i] * (i + 1))
    return sum(out)


@case(vec(4))
def loop_item_assign(x):
    y = np.zeros(4)
    for i in range(4):
        y[i] = x[i] * 2 + np.sum(y)
    return np.sum(y * y)


@case(vec(4))
def loop_slice_assign(x):
    y = np.zeros(8)
    for i in range(2):
        y[4 * i : 4 * i + 4] = x * (i + 1)
    return np.sum(np.sin(y))


@case(mat(3, 4))
def loop_row_assign(X):
    H = np.zeros((4, 4))
    for t in range(3):
        H[t + 1] = np.tanh(H[t] + X[t])
    return np.sum(H)


@case(scal())
def scalar_recurrence(x):
    y = x
    for i in range(100):
        y = y - 0.01 * y * y + 0.001 * x
    return y


@case(vec(3))
def loop_reassign_param(x):
    for i in range(3):
        x = x * 0.5 + np.sin(x)
    return np.sum(x)


@case(vec(3))
def loop_variable_after_loop(x):
    i = 0
    for i in range(3):
        pass
    return np.sum(x * i)


@case(vec(3))
def loop_zero_iterations(x):
    y = x * 2
    for i in range(0):
        y = y * 100
    return np.sum(y)


@case(vec(3))
def loop_over_list_of_arrays(x):
    parts = [x, x * 2, np.sin(x)]
    s = 0.0
    for p in parts:
        s = s + np.sum(p * p)
    return s


@case(vec(3))
def while_with_return(x):
    y = x * 1.0
    k = 0
    while k < 10:
        y = y + 0.1 * np.sin(y)
        if k == 3:
            return np.sum(y)
        k = k + 1
    return np.sum(y * 0)


@case(vec(3))
def reversed_range(x):
    s = 0.0
    for i in reversed(range(3)):
        s = s * 0.5 + np.sum(x * i)
    return s


@case(mat(3, 2))
def loop_accumulate_matrix(X):
    acc = np.zeros(2)
    for i in range(3):
        acc = acc + X[i] * X[i]
    return np.sum(np.sqrt(acc + 1))
