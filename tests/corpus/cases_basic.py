"""Corpus: assignment, arithmetic, operators, constants, branches."""

import math

import numpy as np

from tests.corpus.registry import case, vec, mat, scal

SCALE = 1.5


@case(vec(3), vec(3))
def add_mul(x, y):
    return np.sum(x * y + x)


@case(vec(4))
def rebind_many(x):
    y = x * 2
    y = y + 1.0
    y = y * y
    y = np.sin(y)
    return np.sum(y)


@case(vec(3), vec(3))
def tuple_unpack(x, y):
    a, b = x * 2, y - 1
    c, (d, e) = a, (b, a * b)
    return np.sum(c + d * e)


@case(vec(3))
def augassign(x):
    y = x * 1.0
    y += x
    y -= 0.5
    y *= x
    y /= 2.0
    return np.sum(y)


@case(mat(2, 3), vec(3))
def matmul_op(W, x):
    return np.sum(np.tanh(W @ x))


@case(vec(3, positive=True))
def pow_ops(x):
    return np.sum(x**2 + x**0.5 + 2.0**x + x**x)


@case(vec(3))
def unary(x):
    return np.sum(-x + (+x) * 3)


@case(scal(), scal())
def python_floats(a, b):
    c = a * b + 2 * a - b / 3.0
    return c * c


@case(vec(3), vec(3, positive=True))
def division(x, y):
    return np.sum(x / y + 1 / y)


@case(vec(3))
def int_constants(x):
    return np.sum(x * 2 + 3 - x * 4 // 1)


@case(vec(3))
def global_constant(x):
    return np.sum(x * SCALE)


@case(vec(3))
def if_positive(x):
    s = np.sum(x)
    if s > 0:
        y = x * 2
    else:
        y = x * -3
    return np.sum(y * y)


@case(vec(3))
def if_elif_else(x):
    s = np.sum(x)
    if s > 10:
        y = x
    elif s > -10:
        y = np.sin(x)
    else:
        y = x * x
    return np.sum(y)


@case(vec(3))
def if_no_else(x):
    y = x * 1.0
    if np.sum(x) < 100:
        y = y * 3
    return np.sum(y)


@case(scal())
def ternary(x):
    y = x * 2 if x > 0 else x * -1
    return y * y


@case(scal())
def ternary_nested(x):
    return x if x > 5 else (x * x if x > -5 else -x)


@case(vec(3))
def condition_on_computed(x):
    y = np.tanh(x)
    if np.max(y) > 0.5 and np.min(y) < 0.9:
        z = y * x
    else:
        z = y + x
    return np.sum(z)


@case(vec(3))
def bool_or(x):
    c = np.sum(x) > 100 or np.sum(x) < 100
    if c:
        return np.sum(x * x)
    return np.sum(x)


@case(scal())
def math_module(x):
    return math.sin(x) * math.exp(x) + math.log(x * x + 1.0) + math.sqrt(x * x + 2.0)


@case(scal())
def math_tanh_cos(x):
    return math.tanh(x) + math.cos(2 * x) + math.pow(x, 2)


@case(vec(3), vec(3))
def chained_compare(x, y):
    s = np.sum(x)
    if -100 < s < 100:
        return np.sum(x * y)
    return np.sum(x)


@case(vec(4))
def early_return_top(x):
    if np.sum(x) > 100:
        return np.sum(x)
    y = x * x
    return np.sum(y)


@case(vec(4))
def early_return_both(x):
    if np.sum(x) > -100:
        return np.sum(np.sin(x))
    else:
        return np.sum(x)


@case(vec(3))
def reuse_variable_many_times(x):
    a = x * x
    b = a + a + a * a
    return np.sum(b * a)


@case(vec(3), vec(3), argnums=(0, 1))
def two_argnums(x, y):
    return np.sum(np.sin(x) * np.cos(y))


@case(vec(3), vec(3), argnums=1)
def second_argnum(x, y):
    return np.sum(x * y * y)


@case(vec(3))
def exp_log_sqrt(x):
    return np.sum(np.exp(x) + np.log(x * x + 1) + np.sqrt(x * x + 1))


@case(vec(3), vec(3))
def maximum_minimum(x, y):
    return np.sum(np.maximum(x, y) + np.minimum(x, 0.1) * 2)


@case(vec(4))
def where_abs(x):
    return np.sum(np.where(x > 0, x * 2, -x) + np.abs(x))


@case(vec(3))
def pass_and_docstring(x):
    """A docstring is ignored."""
    pass
    return np.sum(x)


@case(vec(3))
def unused_computation(x):
    unused = np.exp(x) * 100
    y = x * 2
    return np.sum(y)


@case(vec(3))
def constant_output_part(x):
    k = np.ones(3)
    return np.sum(x * k + 1.0)


@case(scal())
def abs_builtin(x):
    return abs(x) * 2 + abs(x - 3)


@case(scal(), scal())
def min_max_scalars(a, b):
    return max(a, b) * 2 + min(a, b * 2)


@case(vec(3))
def float_builtin(x):
    s = float(np.sum(x * x))
    return s * 3


@case(vec(3))
def max_routes_to_constant(x):
    return max(float(x[1]), 5.0) + max(float(x[0]) * 0.0 + 10.0, float(x[2]))
