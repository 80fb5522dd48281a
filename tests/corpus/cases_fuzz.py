"""Corpus: minimal programs found by a random-program fuzzer (each once a crash,
a refusal or a wrong gradient)."""

import numpy as np

from tests.corpus.registry import case, mat, scal, tree, vec


class Identity:
    def apply(self, u):
        return u

    def twice(self, u):
        return self.apply(u) * 2.0


class Squarer(Identity):
    def apply(self, u):
        return u * u


IDENTITY = Identity()
SQUARER = Squarer()


@case(vec(3))
def method_inactive_argument(x):
    m = IDENTITY.apply(1)
    return np.sum(x * m)


@case(vec(3))
def method_calls_method(x):
    return np.sum(IDENTITY.twice(x) * SQUARER.twice(x))


@case(vec(3))
def nested_function_default(x):
    w = x * 2.0

    def scaled(t, scale=3.0):
        return t * scale + w

    return np.sum(scaled(x) * scaled(x, 0.5))


def setitem_untaken_helper(a, w):
    if np.sum(w) > 1.0:  # taken for one of the two inputs
        v = w * 1.0
        v[0] = 2.0
        a = a + np.sum(v)
    return a


@case(vec(3))
def setitem_in_untaken_branch_of_callee(x):
    return np.sum(setitem_untaken_helper(x, x))


@case(vec(3))
def while_and_break(x):
    s = 1.0
    k = 0
    y = x
    while s > 0.05 and k < 4:
        y = np.sin(y) * 0.9
        s = s * 0.5
        k = k + 1
        if x[0] > 0.2:  # taken for one of the two inputs
            break
    return np.sum(y)


@case(vec(3))
def while_and_return(x):
    s = 1.0
    k = 0
    y = x
    while s > 0.05 and k < 4:
        y = np.sin(y) * 0.9
        s = s * 0.5
        k = k + 1
        if np.sum(x) > 1.0:  # taken for one of the two inputs
            return np.sum(y * y)
    return np.sum(y)


@case(vec(3))
def while_or_break_array_test(x):
    k = 0
    y = x
    while np.sum(y * y) > 0.01 or k < 2:
        y = np.tanh(y) * 0.8 + x * 0.1
        k = k + 1
        if k > 5 and y[1] > -10.0:
            break
        if k > 2:
            continue
        y = y * 1.1
    return np.sum(y * x)


@case(vec(3))
def cotangent_on_one_branch(x):
    e = x * 1.0
    if np.sum(x) < 100:
        e = e * 2.0
    else:
        return np.sum(e)
    return np.sum(x)


@case(vec(3))
def while_array_test_break(x):
    y = x
    k = 0
    while np.sum(y * y) > 0.01:
        y = np.tanh(y) * 0.8 + x * 0.1
        k = k + 1
        if k > 4:
            break
    return np.sum(y * x)


def nested_inner(w, x):
    return np.tanh(x) * 2


def nested_outer(w, x):
    return nested_inner(w, x)


@case(vec(3), tree(w=vec(3)))
def nested_calls_dict_argument(x, b):
    return np.sum(nested_outer(b["w"], x))


@case(vec(3))
def fancy_setitem_repeated_index(x):
    y = np.zeros(2)
    y[[1, 1, 1]] = x
    return y.sum()


@case(mat(2, 2))
def fancy_setitem_repeated_rows(x):
    y = np.ones((2, 3))
    y[[1, 0, 1], 1:] = np.vstack([x, x[1:] * 2.0])
    return np.sum(y * y)


@case(vec(3))
def slice_assign_itself(x):
    acc = x * 1.0
    acc[:] = acc
    return np.sum(acc)


@case(vec(3), vec(3))
def nested_calls_plain_argument(x, w):
    return np.sum(nested_outer(w, x))


@case(vec(3), vec(3))
def loop_iterable_rebound(x, m):
    acc = x * 1.0
    for e in acc:
        acc = acc * 0.5 + m * e
        acc[1] = e
    return np.sum(acc * acc)


@case(mat(3, 2), vec(2), argnums=(0, 1))
def loop_iterable_rebound_rows(X, m):
    for row in X:
        X = np.tanh(X + row * m)
    return np.sum(X)


@case(scal(), vec(3), argnums=(0, 1))
def float_argument_rebound_after_return(w, x):
    if w < 0.2:  # taken for one of the two inputs
        return w
    w = x
    return np.sum(w * w)


@case(vec(3), scal())
def rebound_then_conditional_expression(x, s):
    # `s` is bound inside the if that the conditional expression becomes, so the
    # first statement must not be read as s's only binding (its cotangent was lost)
    s *= 0.5
    s = s * np.mean(x) if np.mean(x) < -0.95 else s * s
    return 1.26 * s + np.sum(x)


@case(vec(3), scal())
def rebound_then_boolean_operator(x, s):
    s = s * 0.5
    s = (np.sum(x) > 10.0) and s or s * s
    return 1.26 * s
