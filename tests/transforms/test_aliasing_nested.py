"""What a callee's result may share (front/returns.py) when the callee holds nested
functions, or calls other user functions: false refusals the fuzzer found
(issue 16, session 7), and the near misses that must stay refused.

Before, any nested ``def`` or lambda in a callee (even one never called) made its
result "may share every argument", and a call of another user function shared
all of its arguments: ``r = helper(x, v)`` then linked ``x`` with ``v``, and an
in-place ``v -= ...`` made a later read of ``x`` an AliasingError.
"""

import ast
import textwrap

import numpy as np
import pytest

import s2sad
from s2sad.errors import AliasingError
from s2sad.testing import numerical_grad
from s2sad.transforms.front import returns


def _returns_none(a, b, e):
    pass


def _row(a, b):
    return b[1]


def _rows_of_second(a, b):
    return _row(a, b)


def _with_unused_lambda(a, b, c=0.8):
    inner = lambda z: c + b - np.sum(z)  # noqa: F841 - the pattern under test
    return np.sqrt(np.linspace(0.9, 0.5, 3) * np.mean(a) + 1.0)


def _with_unused_def(a, b):
    def inner(z):
        pass

    return np.tanh(a) * 2.0


def _with_called_def(a, b):
    def scale(z):
        return z * 2.0

    return scale(np.tanh(a))


def unused_lambda_in_callee(x, w):
    v = w * 1.0
    s = _with_unused_lambda(x, v, c=np.mean(v))
    v -= np.tanh(np.dot(x, x))  # changes v only: s is a new array
    return np.sum(x * s) + np.sum(v)


def defs_in_callees(x, w):
    v = w * 1.0
    s = _with_unused_def(x, v) + _with_called_def(x, v)
    v *= x[0]
    return np.sum(x * s) + np.sum(v * x)


def callee_returning_none(x, w):
    v = w * 1.0
    _returns_none(x, v, {"a": v, "c": x})
    r = _returns_none(np.cos(x), {"a": v}, v)
    v += np.sum(x)
    return np.sum(x * v) + (0.0 if r is None else 1.0)


def local_function_calling_a_user_function(x, w):
    s = w * 1.0
    for i in range(2):

        def inner(z):
            return _returns_none(np.cos(s), {"a": s, "c": x}, z)  # noqa: B023

        v = inner(np.tanh(x))
        s += np.tanh(np.sum(x))  # s is an array here: changed in place
    return np.sum(s * x) + (0.0 if v is None else 1.0)


@pytest.mark.parametrize(
    "fn, args",
    [
        (
            unused_lambda_in_callee,
            (np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.4, -0.6])),
        ),
        (defs_in_callees, (np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.4, -0.6]))),
        (callee_returning_none, (np.array([0.3, -0.2]), np.array([0.5, 0.1]))),
        (
            local_function_calling_a_user_function,
            (np.array([0.3, -0.2]), np.array([0.5, 0.1])),
        ),
    ],
)
def test_callees_with_nested_functions_or_user_calls_are_accepted(fn, args):
    nums = tuple(range(len(args)))
    fresh = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    vg = s2sad.value_and_grad(fn, argnums=nums)
    for _ in range(2):
        value, grads = vg(*fresh())
        assert np.allclose(value, fn(*fresh()))
        for g, e in zip(grads, numerical_grad(fn, fresh(), nums)):
            np.testing.assert_allclose(g, e, atol=1e-6)
    s2sad.check_grads(fn, tuple(fresh()), modes=("rev", "fwd"))


# -- near misses: the result does share what is changed, through the nested code


def _keep(a, b):
    out = []

    def put(v):
        out.append(v)

    put(b)
    return out


def stored_by_a_closure(x):
    y = np.outer(x, x)
    held = _keep(x, y)  # holds y
    y[0] = x
    return np.sum(held[0] * x)


def _first_row(a, b):
    pick = lambda m: m[0]
    return pick(b)


def view_through_a_lambda(x):
    y = np.outer(x, x)
    r = _first_row(x, y)
    r *= x[0]  # changes y
    return np.sum(y * x)


def view_through_another_callee(x):
    y = np.outer(x, x)
    z = np.sin(x)
    r = _rows_of_second(z, y)
    r *= x[0]  # changes y
    return np.sum(y * x)


@pytest.mark.parametrize(
    "fn", [stored_by_a_closure, view_through_a_lambda, view_through_another_callee]
)
def test_sharing_through_nested_code_stays_refused(fn):
    with pytest.raises(AliasingError, match="'(y|held)' shares memory"):
        s2sad.grad(fn)(np.array([0.3, -0.2, 0.5]))


def _summary(src: str, **env):
    node = ast.parse(textwrap.dedent(src)).body[0]
    return returns.summary(node, {"np": np, **env})


def test_summaries_with_nested_functions_and_user_calls():
    unused = """
    def f(a, b):
        def g(z):
            pass
        h = lambda z: b
        return np.tanh(a)
    """
    assert _summary(unused) == set()
    captured = """
    def f(a, b):
        def g(z):
            return b[1:]
        return g(np.tanh(a))
    """
    assert _summary(captured) == {1}
    stored = """
    def f(a, b):
        out = []
        def put(v):
            out.append(v)
        put(b)
        return out
    """
    assert _summary(stored) == {1}
    # a nested function that escapes (returned, passed, stored): unknown
    for tail in ("return g", "return h(g, a)", "return [g]", "k = g\n    return k"):
        assert (
            _summary(f"def f(a, b):\n    def g(z):\n        return z\n    {tail}\n")
            is None
        )
    assert _summary("def f(a, b):\n    return sorted(a, key=lambda v: v)\n") is None
    rebound = (
        "def f(a, b):\n    def g(z):\n        return z\n    g = b\n    return g(a)\n"
    )
    assert _summary(rebound) is None
    # a global a nested function reads is not the function's own name: np stays np
    uses_np = """
    def f(a, b):
        def g(z):
            return np.sum(z)
        v = g(b)
        return np.where(a > 0, a, 0.0)
    """
    assert _summary(uses_np) == set()
    # another user function: what its own summary says
    env = {"_row": _row, "_returns_none": _returns_none}
    # (a call may store any argument into another: fresh ones show the summary)
    assert _summary("def f(a, b):\n    return _row(a, b)\n", **env) == {0, 1}
    assert _summary("def f(a, b):\n    return _row(np.sin(a), b)\n", **env) == {1}
    assert _summary("def f(a, b):\n    return _row(b, np.sin(a))\n", **env) == set()
    assert _summary("def f(a, b):\n    return _row(b=np.sin(b), a=a)\n", **env) == set()
    assert _summary("def f(a, b):\n    return _returns_none(a, b, b)\n", **env) == set()
    # a recursive callee: unknown while it is analysed, so all its arguments
    (shared, _), _ = returns.shared_params(_swap_recursively, False)
    assert {0, 1} <= shared


def _swap_recursively(a, b, n):
    if n > 0:
        return _swap_recursively(b, a, n - 1)
    return a


# -- scalars the aliasing pass now knows: np.clip of scalars, items of a fixed dict


def clipped_scalar_changed(x, w):
    c = np.clip(np.mean(w) - 1.05, a_min=-1.2, a_max=1.2)  # a NumPy scalar
    y = np.tanh(x) * 2.0
    pick = y if np.sum(x) > 10.0 else c
    c -= pick  # rebinds c: y is not changed
    return np.sum(y * x) + np.sum(c)


def scalar_item_of_a_fixed_dict(x, s):
    d = {"c": np.dot(x, x), "b": np.tanh(s), "a": x}
    v = d["b"]  # a scalar: x, also held by d, is not changed below
    v += np.sum(x)
    return np.sum(x * v) + d["c"]


def array_item_of_a_fixed_dict(x, s):
    y = np.sin(x)
    d = {"b": y, "s": np.tanh(s)}
    v = d["b"]  # the array y itself
    v += s
    return np.sum(y * x)


def changed_dict_item(x, s):
    y = np.sin(x)
    d = {"b": np.tanh(s)}
    d["b"] = y  # d's items change: nothing is known of them
    v = d["b"]
    v += s
    return np.sum(y * x)


@pytest.mark.parametrize(
    "fn, args",
    [
        (clipped_scalar_changed, (np.array([0.3, -0.2]), np.array([0.5, 0.1]))),
        (clipped_scalar_changed, (np.array([0.3, -0.2]), 0.4)),
        (scalar_item_of_a_fixed_dict, (np.array([0.3, -0.2, 0.5]), 0.7)),
    ],
)
def test_scalars_changed_with_augmented_assignments_are_rebound(fn, args):
    nums = tuple(range(len(args)))
    fresh = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    vg = s2sad.value_and_grad(fn, argnums=nums)
    for _ in range(2):
        value, grads = vg(*fresh())
        assert np.allclose(value, fn(*fresh()))
        for g, e in zip(grads, numerical_grad(fn, fresh(), nums)):
            np.testing.assert_allclose(g, e, atol=1e-6)
    s2sad.check_grads(fn, tuple(fresh()), modes=("rev", "fwd"))


@pytest.mark.parametrize("fn", [array_item_of_a_fixed_dict, changed_dict_item])
def test_array_items_of_dicts_stay_watched(fn):
    with pytest.raises(AliasingError, match="'y' shares memory"):
        s2sad.grad(fn)(np.array([0.3, -0.2, 0.5]), 0.7)


def _apply_fn(f, a, twice=False):
    out = f(a)
    if twice:
        out = f(out)
    return out + f(a * 0.5)


def lambda_given_to_a_callee(x, s):
    v = _apply_fn(lambda z: (x**2)[1] * z, s)  # a new number: x**2 is a new array
    v += np.tanh(s**2)
    return 0.59 * np.sum(x) + v


def test_operators_that_make_new_values():
    """Only ``+``, ``*`` and ``|`` can give a container that keeps its operands'
    items; ``a ** 2``, ``a - b``, ``a / b`` give new values (seed 9001 program
    166: a lambda's ``(x ** 2)[1]`` was taken for a part of ``x``)."""
    assert _summary("def f(a, b):\n    return a ** 2, a - b, a / b, a @ b\n") == set()
    assert _summary("def f(a, b):\n    return a + b\n") == {0, 1}
    assert _summary("def f(a, b):\n    return a | b\n") == {0, 1}
    x = np.array([0.3, -0.2, 0.5])
    fn = lambda_given_to_a_callee
    value, (gx, gs) = s2sad.value_and_grad(fn, argnums=(0, 1))(x.copy(), 0.7)
    assert np.isclose(value, fn(x.copy(), 0.7))
    ex, es = numerical_grad(fn, [x.copy(), 0.7], (0, 1))
    np.testing.assert_allclose(gx, ex, atol=1e-6)
    np.testing.assert_allclose(gs, es, atol=1e-6)


# -- floats put in a list, taken out and rebound (``t = lst[1]; t *= 2.0``)


def floats_in_a_list(x, s):
    lst = [s, np.tanh(s)]
    s += np.sum(x)
    t = lst[1]
    t *= 2.0  # a float: rebinds t, lst keeps its items
    return np.sum(x) * lst[0] + s + t


def appended_floats(x, s):
    lst = []
    for i in range(2):
        lst.append(s * 1.5 + i)
    for v in lst:
        v += np.sum(x)
    w = lst[0]
    w += np.sum(x * x)
    return np.sum(x * w) + lst[1] + v


def a_float_beside_an_array(x, w):
    y = np.sin(x)
    lst = [np.mean(w), y]
    a = lst[0]  # the float, not y
    a -= 1.0
    return np.sum(y * a)


@pytest.mark.parametrize(
    "fn", [floats_in_a_list, appended_floats, a_float_beside_an_array]
)
def test_floats_taken_out_of_a_list_are_rebound(fn):
    args = (np.array([0.3, -0.2, 0.5]), 0.7)
    vg = s2sad.value_and_grad(fn, argnums=(0, 1))
    for _ in range(2):
        value, grads = vg(args[0].copy(), args[1])
        assert np.isclose(value, fn(*args))
        for g, e in zip(grads, numerical_grad(fn, list(args), (0, 1))):
            np.testing.assert_allclose(g, e, atol=1e-6)
    s2sad.check_grads(fn, args, modes=("rev", "fwd"))


def array_item_taken_out(x, s):
    y = np.sin(x)
    lst = [s, y]
    a = lst[1]
    a *= 2.0
    return np.sum(y * x)


def array_appended(x, s):
    y = np.sin(x)
    lst = [s]
    lst.append(y)
    a = lst[-1]
    a += 1.0
    return np.sum(y * x)


def array_stored_over_a_float(x, s):
    y = np.sin(x)
    lst = [s, 1.0]
    lst[0] = y
    a = lst[0]
    a += 1.0
    return np.sum(y * x)


def list_passed_on(x, s):
    y = np.sin(x)
    lst = [s, 1.0]
    z = _keep_first(lst, y)  # may put y into lst
    a = lst[0]
    a += 1.0
    return np.sum(y * x) + z


def _keep_first(lst, v):
    lst[0] = v
    return 0.0


@pytest.mark.parametrize(
    "fn", [array_item_taken_out, array_appended, array_stored_over_a_float]
)
def test_arrays_in_lists_stay_watched(fn):
    with pytest.raises(AliasingError, match="'y' shares memory"):
        s2sad.grad(fn)(np.array([0.3, -0.2, 0.5]), 0.7)


def test_a_list_passed_to_a_function_is_not_tracked():
    with pytest.raises(s2sad.errors.S2SADError):
        s2sad.grad(list_passed_on)(np.array([0.3, -0.2, 0.5]), 0.7)


# -- a callee that "changes" a float argument in place (rebinds it)


def _bump(a, b):
    v = b
    v += 0.5  # b a float: rebinds v, the caller's b stays
    return (0.5, 0.5)


def callee_bumps_a_float(x, s):
    _bump(np.tanh(x), s)  # result unused: run as plain Python
    u, t = _bump(x, s * 2.0)
    return np.sum(x * s) + u * t


def callee_bumps_an_array(x, s):
    y = np.sin(x)
    _bump(x, y)  # y may change in place: refused
    return np.sum(y * s)


def test_a_callee_rebinding_a_float_argument_is_accepted():
    """Fuzzer seed 8000 program 131: ``v6 = b; v6 += 0.5`` in a callee whose
    result is not used was refused as an in-place change of the argument even
    when the caller passes an immutable scalar."""
    args = (np.array([0.3, -0.2, 0.5]), 0.7)
    value, grads = s2sad.value_and_grad(callee_bumps_a_float, argnums=(0, 1))(*args)
    assert np.isclose(value, callee_bumps_a_float(*args))
    for g, e in zip(grads, numerical_grad(callee_bumps_a_float, list(args), (0, 1))):
        np.testing.assert_allclose(g, e, atol=1e-6)
    s2sad.check_grads(callee_bumps_a_float, args, modes=("rev", "fwd"))
    for transform in (s2sad.grad, lambda f: lambda *a: s2sad.jvp(f, a, a)):
        with pytest.raises(s2sad.errors.UnsupportedSyntaxError, match="_bump"):
            transform(callee_bumps_an_array)(*args)


# -- more scalars and new values (fuzzer seed 8000, programs 106, 131, 174)


def _halved_plus(a, depth):
    if depth <= 0:
        return np.sum(np.linspace(0.8, 0.3, 4) * np.mean(a))
    return np.tanh(_halved_plus(-a, depth - 1)) * 0.5 + a  # new: a float times 0.5


def reductions_and_floating_chains(x, s):
    t = (np.linspace(1.3, 0.7, 4) * np.mean(s))[3]  # an item of a vector: a scalar
    u = np.sum(np.outer(x, x) * s, axis=None) * 0.5  # a full reduction
    y = np.tanh(x)
    r = _halved_plus(y, 1)  # a new array, not y
    t += np.sum(x)
    u -= t
    r *= 2.0
    return np.sum(y * x) + t * u + np.sum(r)


def test_full_reductions_and_floating_results():
    assert _summary("def f(a, b):\n    return np.tanh(a) * 0.5 + b\n") == set()
    assert _summary("def f(a, b):\n    return -np.exp(a) + b\n") == set()
    assert _summary("def f(a, b):\n    return (a - b) + b\n") == {
        1
    }  # ints: maybe lists
    args = (np.array([0.3, -0.2, 0.5]), 0.7)
    fn = reductions_and_floating_chains
    value, grads = s2sad.value_and_grad(fn, argnums=(0, 1))(args[0].copy(), args[1])
    assert np.isclose(value, fn(*args))
    for g, e in zip(grads, numerical_grad(fn, list(args), (0, 1))):
        np.testing.assert_allclose(g, e, atol=1e-6)
    s2sad.check_grads(fn, args, modes=("rev", "fwd"))
