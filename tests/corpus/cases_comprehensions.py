"""Corpus: list and dict comprehensions and generator expressions (desugared to loops)."""

import numpy as np

from tests.corpus.registry import case, const, lst, mat, tree, vec


def _sq(v):
    return np.sum(v * v)


@case(lst(vec(3), vec(3), vec(3)))
def gen_in_sum(xs):
    return sum(_sq(v) for v in xs)


@case(vec(5))
def rosenbrock_deap(x):
    return sum(
        100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(len(x) - 1)
    )


@case(lst(mat(3, 2), mat(2, 2)))
def weight_norm_penalty(weights):
    return sum(np.linalg.norm(w) ** 2 for w in weights)


@case(vec(6))
def listcomp_with_if(x):
    ys = [np.sin(x[i]) * x for i in range(len(x)) if i % 2 == 0]
    return np.sum(np.stack(ys))


@case(vec(5))
def listcomp_filter_on_values(x):
    return sum([v * v for v in x if v > 0.0]) + float(len(x))


@case(mat(3, 3))
def nested_listcomp(X):
    rows = [[X[i, j] * X[j, i] for j in range(X.shape[1])] for i in range(X.shape[0])]
    return sum(sum(r) for r in rows)


@case(mat(3, 2))
def listcomp_two_fors(X):
    return sum(X[i, j] ** 2 * (i + 1) for i in range(3) for j in range(2) if i != j)


@case(tree(a=vec(3), b=vec(3)))
def dictcomp_items(d):
    e = {k: v * 2 for k, v in d.items()}
    return np.sum(e["a"] * e["b"])


@case(lst(vec(3), vec(3)), lst(vec(3), vec(3)), lst(vec(3), vec(3)))
def comp_over_zip(qs, ks, vs):
    outs = [np.tanh(q * k) + v for q, k, v in zip(qs, ks, vs)]
    return np.sum(np.stack(outs) ** 2)


@case(vec(4))
def comp_over_enumerate(x):
    return np.sum(np.array([v * (i + 1) for i, v in enumerate(x)]) ** 2)


@case(vec(3))
def comp_inside_loop(x):
    s = 0.0
    for k in range(3):
        s = s + sum(x[i] * k + x[i] ** 2 for i in range(len(x)))
    return s


def _mix(a, b):
    return [a * w + b for w in (1.0, 2.0, 3.0)]


@case(vec(3), vec(3))
def comp_in_callee(x, y):
    return np.sum(np.stack(_mix(x, y)) ** 2)


@case(vec(3))
def np_stack_comp(x):
    w = x * 2
    return np.sum(np.stack([x[i] * w for i in range(3)]) ** 2)


@case(vec(3))
def comp_keeps_outer_names(x):
    i = 2
    v = x * 3.0
    t = sum(v * i for i in range(3) for v in [x, x * x])
    return np.sum(t * v) + i


@case(vec(3))
def comp_in_return_and_if(x):
    if max(abs(float(v)) for v in x) > 10.0:
        return np.sum(x)
    return np.sum(np.stack([x * x, np.sin(x)]) * np.array([float(i) for i in range(3)]))


@case(vec(3, positive=True))
def comp_in_while_test(x):
    y = x * 1.0
    n = 0
    while sum(float(v) for v in y) < 20.0 and n < 10:
        y = y * 1.5
        n += 1
    return np.sum(y)


@case(vec(3), const(2))
def comp_tuple_and_min(x, n):
    parts = tuple(np.exp(x * k) for k in range(n + 1))
    return np.sum(parts[-1]) + min(np.sum(p) for p in parts)
