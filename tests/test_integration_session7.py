"""Adversarial programs for the code merged in session 7 (issue 16, speed):
``out=`` arrays written straight by the sites (runtime/outinto.py), the
``loopsums`` pass and ``step_product``/``stepwise_ahead``/``sum_steps``
(runtime/stepreads.py), d_matmul's ``ans`` treated as no read by buffer sharing,
and ``max_along``/``min_along`` along a short last axis (runtime/extrema.py).

Each program is checked against the plain Python function and central finite
differences in float64, and called several times so that reused workspaces are
checked too.  Small arrays get buffers here (the module's fixture), so the
buffered code runs on the test's small shapes.
"""

import numpy as np
import pytest

import s2sad
from tests.repeated import (  # noqa: F401 (a fixture)
    buffer_everything,
    check_repeated_calls,
    close_all,
    numeric_grad,
    seeded_rand,
)

pytestmark = pytest.mark.usefixtures("buffer_everything")


rand = seeded_rand(7)
_close = close_all


# -- out=: arrays the function reads besides its arguments -----------------------

M_GLOBAL = rand(12)


def reads_a_global(b, v):
    u = v * M_GLOBAL  # the backward reads M_GLOBAL after g_b's site
    z = np.tanh(u + b)
    return np.sum(z * z)


class _Holder:
    pass


HELD = _Holder()
HELD.M = rand(12)


def reads_an_attribute(b, v):
    u = v * HELD.M
    z = np.tanh(u + b)
    return np.sum(z * z)


def _closure():
    M = rand(12)

    def reads_a_cell(b, v):
        u = v * M
        z = np.tanh(u + b)
        return np.sum(z * z)

    return reads_a_cell, M


def get_m():
    return M_GLOBAL


def reads_through_a_call(b, v):
    u = v * get_m()
    z = np.tanh(u + b)
    return np.sum(z * z)


@pytest.mark.parametrize("which", ["global", "attribute", "cell", "call"])
def test_an_out_array_the_function_reads_keeps_the_gradient_right(which):
    """Found in session 7: passing the global a loss reads as the ``out=`` array
    of a gradient bound by one site (g_b = unbroadcast(...) into it) had the
    backward read the global after the site overwrote it (g_v wrong).  A module
    reading anything but its arguments now gives no gradient's place in its
    ``buffer_results`` table."""
    f, M = {
        "global": (reads_a_global, M_GLOBAL),
        "attribute": (reads_an_attribute, HELD.M),
        "cell": _closure(),
        "call": (reads_through_a_call, M_GLOBAL),
    }[which]
    b, v = rand(12), rand(30, 12)
    want = [numeric_grad(f, (b, v), k) for k in (0, 1)]
    want_value = f(b, v)
    vg = s2sad.value_and_grad(f, argnums=(0, 1))
    kept = M.copy()
    for _ in range(4):  # recording, then buffered calls
        M[...] = kept
        value, grads = vg(b, v, out=(M, np.empty_like(v)))
        assert grads[0] is M
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        _close(grads, want)
    M[...] = kept
    assert set(vg._last[0].buffer_results.values()) == {None}


def mlp(W1, b1, W2, b2, x):
    h = np.tanh(x @ W1 + b1)
    return np.mean((h @ W2 + b2) ** 2)


def _mlp_args():
    return [rand(8, 6), rand(6), rand(6, 3), rand(3), rand(20, 8)]


def test_the_arguments_alone_keep_the_table():
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    args = _mlp_args()
    for _ in range(3):
        vg(*args, out=tuple(np.empty_like(a) for a in args[:4]))
    assert vg._last[0].buffer_results == {"g_b2": 3, "g_W2": 2, "g_b1": 1, "g_W1": 0}


def test_a_parameter_passed_as_its_own_gradients_out():
    args = _mlp_args()
    want = [numeric_grad(mlp, args, k) for k in range(4)]
    want_value = mlp(*args)
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    for _ in range(4):
        mine = [a.copy() for a in args]
        outs = (mine[0], np.empty(6), mine[2], np.empty(3))  # W1 and W2 themselves
        value, grads = vg(*mine, out=outs)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        _close(grads, want)
        assert grads[0] is mine[0] and grads[2] is mine[2]


def test_out_arrays_aliasing_each_other_or_views_of_an_argument():
    args = _mlp_args()
    want = [numeric_grad(mlp, args, k) for k in range(4)]
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    for _ in range(3):
        same = np.empty(6)  # g_b1's and (a view of it) g_b2's
        _, grads = vg(*args, out=(np.empty((8, 6)), same, np.empty((6, 3)), same[:3]))
        _close(grads[:1] + grads[2:3], want[:1] + want[2:3])
        np.testing.assert_allclose(same[:3], want[3], rtol=1e-5, atol=1e-7)  # the last
        np.testing.assert_allclose(same[3:], want[1][3:], rtol=1e-5, atol=1e-7)
    for _ in range(3):  # W1 and its gradient halves of one array
        both = np.empty((2, 8, 6))
        both[0] = args[0]
        mine = [both[0]] + [a.copy() for a in args[1:]]
        _, grads = vg(*mine, out=(both[1], np.empty(6), np.empty((6, 3)), np.empty(3)))
        _close(grads, want)
        np.testing.assert_array_equal(both[0], args[0])


@pytest.mark.parametrize("kind", ["fortran", "float32", "list"])
def test_out_arrays_of_other_layouts_and_dtypes(kind):
    args = _mlp_args()
    want = [numeric_grad(mlp, args, k) for k in range(4)]
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    for _ in range(3):
        outs = [np.empty_like(a) for a in args[:4]]
        if kind == "fortran":
            outs[0] = np.asfortranarray(outs[0])
        elif kind == "float32":
            outs[0] = outs[0].astype(np.float32)
        _, grads = vg(*args, out=outs if kind == "list" else tuple(outs))
        _close(grads, want, atol=1e-6)
        assert all(g is o for g, o in zip(grads, outs))


@pytest.mark.parametrize("kind", ["readonly", "shape", "int", "short"])
def test_out_arrays_that_cannot_take_the_gradient_raise_and_nothing_sticks(kind):
    args = _mlp_args()
    want = [numeric_grad(mlp, args, k) for k in range(4)]
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    for _ in range(3):
        vg(*args, out=tuple(np.empty_like(a) for a in args[:4]))
    outs = [np.empty_like(a) for a in args[:4]]
    if kind == "readonly":
        outs[0].flags.writeable = False
    elif kind == "shape":
        outs[0] = np.empty((6, 8))
    elif kind == "int":
        outs[0] = np.empty((8, 6), dtype=np.int64)
    else:
        outs = outs[:3]  # fewer arrays than gradients: no gradient silently dropped
    with pytest.raises((ValueError, TypeError)):
        vg(*args, out=tuple(outs))
    for _ in range(2):  # later calls, plain and with out=, are right
        _close(vg(*args)[1], want)
        good = tuple(np.empty_like(a) for a in args[:4])
        _close(vg(*args, out=good)[1], want)


def test_one_out_tuple_reused_with_other_arguments():
    vg = s2sad.value_and_grad(mlp, argnums=(0, 1, 2, 3))
    outs = None
    for i in range(5):
        args = _mlp_args() if i % 2 else [a * 0.5 for a in _mlp_args()]
        if outs is None:
            outs = tuple(np.empty_like(a) for a in args[:4])
        want = [numeric_grad(mlp, args, k) for k in range(4)]
        value, grads = vg(*args, out=outs)
        np.testing.assert_allclose(value, mlp(*args), rtol=1e-12)
        _close(grads, want)


def mlp_aux(W1, b1, W2, b2, x):
    h = np.tanh(x @ W1 + b1)
    return np.mean((h @ W2 + b2) ** 2), h


def mlp_dict(p, x):
    h = np.tanh(x @ p["W1"] + p["b1"])
    return np.mean((h @ p["W2"] + p["b2"]) ** 2)


def mlp_list(p, x):
    h = np.tanh(x @ p[0] + p[1])
    return np.mean((h @ p[2] + p[3]) ** 2)


def test_out_with_has_aux_an_int_argnum_dicts_and_lists():
    args = _mlp_args()
    want = [numeric_grad(mlp, args, k) for k in range(4)]
    va = s2sad.value_and_grad(mlp_aux, argnums=(0, 1, 2, 3), has_aux=True)
    v1 = s2sad.value_and_grad(mlp, argnums=2)
    vd = s2sad.value_and_grad(mlp_dict)
    vl = s2sad.value_and_grad(mlp_list)
    names = ["W1", "b1", "W2", "b2"]
    for _ in range(3):
        outs = tuple(np.empty_like(a) for a in args[:4])
        (value, h), grads = va(*args, out=outs)
        np.testing.assert_allclose(value, mlp(*args), rtol=1e-12)
        np.testing.assert_allclose(h, np.tanh(args[4] @ args[0] + args[1]))
        _close(grads, want)
        one = np.empty((6, 3))
        _, g = v1(*args, out=one)
        assert g is one
        np.testing.assert_allclose(g, want[2], rtol=1e-5, atol=1e-7)
        p = dict(zip(names, args[:4]))
        od = {k: np.empty_like(a) for k, a in p.items()}
        _, gd = vd(p, args[4], out=od)
        _close([gd[k] for k in names], want)
        ol = [np.empty_like(a) for a in args[:4]]
        _, gl = vl(list(args[:4]), args[4], out=ol)
        _close(gl, want)


def raises_when_told(W, b, x, stop):
    h = np.tanh(x @ W + b)
    if stop > 0:
        raise RuntimeError("stopped half way")
    return np.sum(h * h)


def test_a_loss_raising_half_way_then_normal_calls():
    W, b, x = rand(8, 6), rand(6), rand(20, 8)
    f = raises_when_told
    want = [numeric_grad(lambda W, b: f(W, b, x, 0), (W, b), k) for k in (0, 1)]
    vg = s2sad.value_and_grad(f, argnums=(0, 1))
    for _ in range(3):
        outs = (np.empty_like(W), np.empty_like(b))
        _close(vg(W, b, x, 0, out=outs)[1], want)
    with pytest.raises(RuntimeError, match="half way"):
        vg(W, b, x, 1, out=outs)
    for _ in range(3):
        _close(vg(W, b, x, 0)[1], want)
        outs = (np.empty_like(W), np.empty_like(b))
        _close(vg(W, b, x, 0, out=outs)[1], want)


# -- buffer sharing: d_matmul's ans is no read --------------------------------------


def product_read_after_the_bias(W, b, x):
    h = x @ W
    h2 = h + b
    return np.sum(np.tanh(h2) * h)


def product_changed_in_place(W, b, x):
    h = x @ W
    h += b
    h2 = np.tanh(h)
    return np.sum(h2 * h)


def product_scaled_after_the_bias(W, b, x):
    h = x @ W
    z = h + b
    h *= 2.0
    return np.sum(np.tanh(z) * h)


def product_of_a_product(W, V, b, x):
    h = x @ W
    h2 = h @ V
    z = h2 + b
    return np.sum(z * z) + np.sum(h)


def product_exp_and_bias(W, b, x):
    h = x @ W
    y = h + b
    return np.sum(np.exp(h) * y)


def product_returned_as_aux(W, b, x):
    h = x @ W
    z = np.tanh(h + b)
    return np.sum(z * z), h


def product_in_a_loop(W, b, x):
    s = 0.0
    for k in range(3):
        h = x @ W
        z = h + b * k
        s = s + np.sum(np.tanh(z) * h)
    return s


SHARED = [
    (product_read_after_the_bias, [rand(5, 4), rand(4), rand(7, 5)]),
    (product_changed_in_place, [rand(5, 4), rand(4), rand(7, 5)]),
    (product_scaled_after_the_bias, [rand(5, 4), rand(4), rand(7, 5)]),
    (product_of_a_product, [rand(5, 4), rand(4, 3), rand(3), rand(7, 5)]),
    (product_exp_and_bias, [rand(5, 4), rand(4), rand(7, 5)]),
    (product_in_a_loop, [rand(5, 4), rand(4), rand(7, 5)]),
]


@pytest.mark.parametrize("f, args", SHARED, ids=lambda v: getattr(v, "__name__", ""))
def test_a_product_read_after_the_bias_site(f, args):
    nums = tuple(range(len(args)))
    vg = check_repeated_calls(f, args, calls=3)
    want = [numeric_grad(f, args, k) for k in nums]
    for _ in range(3):  # out= too
        outs = tuple(np.empty_like(a) for a in args)
        _close(vg(*[a.copy() for a in args], out=outs)[1], want)
    s2sad.check_grads(f, args, order=2)


def test_a_product_returned_as_aux_is_not_written_over():
    args = [rand(5, 4), rand(4), rand(7, 5)]
    f = product_returned_as_aux
    want = [numeric_grad(lambda *a: f(*a)[0], args, k) for k in range(3)]
    vg = s2sad.value_and_grad(f, argnums=(0, 1, 2), has_aux=True)
    kept = []
    for _ in range(4):
        (value, h), grads = vg(*args)
        np.testing.assert_allclose(h, args[2] @ args[0], rtol=1e-12)
        np.testing.assert_allclose(value, f(*args)[0], rtol=1e-12)
        _close(grads, want)
        kept.append(h)
    for h in kept:  # each call's aux still what it was
        np.testing.assert_allclose(h, args[2] @ args[0], rtol=1e-12)


DEFAULT_M = rand(12)


def reads_a_default(b, v, M=DEFAULT_M):
    u = v * M
    z = np.tanh(u + b)
    return np.sum(z * z)


@pytest.mark.parametrize("how", ["default", "keyword", "positional"])
def test_an_out_array_given_as_another_argument(how):
    M = DEFAULT_M
    b, v = rand(12), rand(30, 12)
    f = reads_a_default
    want = [numeric_grad(f, (b, v, M.copy()), k) for k in (0, 1)]
    vg = s2sad.value_and_grad(f, argnums=(0, 1))
    kept = M.copy()
    for _ in range(4):
        M[...] = kept
        outs = (M, np.empty_like(v))
        if how == "default":
            _, grads = vg(b, v, out=outs)
        elif how == "keyword":
            _, grads = vg(b, v, M=M, out=outs)
        else:
            _, grads = vg(b, v, M, out=outs)
        _close(grads, want)
    M[...] = kept
