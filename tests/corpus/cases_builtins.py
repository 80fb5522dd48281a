"""Corpus: builtins and constructors that carry differentiated values (issue 13).

dict (keywords, pairs, a dict), zip, enumerate and reversed outside a for header,
sorted/min/max over arrays, max with key=, copy.copy/deepcopy and .copy() of
containers.  Each once gave a zero (or NaN) gradient or tangent without a word.
"""

import copy

import numpy as np

from tests.corpus.registry import case, lst, scal, tree, vec


@case(vec(3), vec(3), argnums=(0, 1))
def dict_keywords(a, b):
    dd = dict(a=a, b=b)
    return np.sum(dd["a"] * dd["b"])


@case(vec(3), vec(3), argnums=(0, 1))
def dict_keywords_nested(a, b):
    dd = dict(p=dict(q=a * 2.0), b=b)
    return np.sum(dd["p"]["q"] * dd["b"])


@case(vec(3), scal(), argnums=(0, 1))
def dict_of_pairs(a, s):
    dd = dict([("a", a), ("s", s), ("a", a * s)])
    return np.sum(dd["a"] * dd["s"])


@case(vec(3), vec(3), argnums=(0, 1))
def dict_of_zip(a, b):
    dd = dict(zip(["a", "b"], [a, b]))
    return np.sum(dd["a"] * np.sin(dd["b"]))


@case(tree(w=vec(3), c=scal()), vec(3), argnums=(0, 1))
def dict_of_dict(p, x):
    q = dict(p)
    q["w"] = q["w"] * x
    return np.sum(q["w"]) * p["c"] + np.sum(p["w"])


@case(vec(3), vec(3), argnums=(0, 1))
def tuple_of_zip(x, y):
    pairs = tuple(zip(x, y))
    return pairs[0][0] * pairs[1][1] + pairs[2][0] * pairs[2][1]


@case(lst(scal(), scal(), scal()), vec(2), argnums=(0, 1))
def list_of_zip_truncated(xs, y):
    pairs = list(zip(xs, y))
    return pairs[0][0] * pairs[1][1] + pairs[1][0] * len(pairs)


@case(vec(3))
def zip_single_target_loop(x):
    s = 0.0
    for p in zip(x, x * x):
        s = s + p[0] * p[1]
    return s


@case(vec(3), vec(3), argnums=(0, 1))
def list_of_enumerate(x, y):
    items = list(enumerate(x, 1))
    s = 0.0
    for k in range(len(items)):
        s = s + items[k][0] * items[k][1] * y[k]
    return s


@case(vec(3))
def enumerate_single_target_loop(x):
    s = 0.0
    for p in enumerate(x):
        s = s + p[0] * p[1] * p[1]
    return s


@case(vec(3), vec(3), argnums=(0, 1))
def reversed_list_of_arrays(a, b):
    xs = list(reversed([a, b * 2.0]))
    return np.sum(xs[0] * 3.0 + xs[1] * xs[0])


@case(vec(4))
def reversed_loop(x):
    s = 0.0
    for v in reversed(x):
        s = s * 0.5 + v * v
    return s


@case(vec(3))
def reduce_reversed(x):
    lo = min(reversed([x[0], x[1] * 2.0]))
    hi = max(reversed(list(x)))
    return sum(reversed([x[0], x[2]])) * lo + hi


@case(vec(4))
def sorted_of_array(x):
    xs = sorted(x)
    return xs[0] * 2.0 + xs[3]


@case(vec(4), vec(4), argnums=(0, 1))
def min_max_of_arrays(x, y):
    return min(x) * max(y)


@case(vec(3), vec(3), argnums=(0, 1))
def max_with_key(a, b):
    m = max([a, b * 2.0], key=np.sum)
    return np.sum(m * m)


@case(vec(3), vec(3), argnums=(0, 1))
def copy_module(a, b):
    d = copy.copy({"a": a, "b": b})
    e = copy.deepcopy([a, d])
    return np.sum(d["a"] * e[1]["b"]) + np.sum(copy.copy(e[0]) * b)


@case(vec(3), vec(3), argnums=(0, 1))
def copy_methods_of_containers(a, b):
    d = {"a": a, "b": b}
    e = d.copy()
    xs = [a, b].copy()
    return np.sum(e["a"] * xs[1]) + np.sum(np.copy(a) * b)
