"""Shape-and-float-dtype classes (s2sad/transforms/reverse/likes.py): ``unbroadcast``
is dropped where the operand provably has the output's shape and float dtype,
kept everywhere else; gradients against finite differences, dtypes unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.testing import numerical_grad


def after(fn, example_args=(), argnums=(0,)) -> str:
    out: list[str] = []
    pipeline.compile_function(
        fn, argnums, None, example_args, dump_after="reverse", dump=out.append
    )
    return "\n".join(out)


def lse(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def logreg(w, b, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w + b)))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def logreg_like(w, b, X, y):
    """logreg with a term the losses pass does not match (``1.5 - p``), so its
    written-out backward stays."""
    p = 1.0 / (1.0 + np.exp(-(X @ w + b)))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.5 - p))


def outer(x, y):
    z = x * y  # broadcasts: (3, 1) * (4,)
    return np.sum(np.tanh(z) * 2.0 + x)


def shifted(x, c):
    return np.sum(np.exp(x - c))


def helper(u):
    return np.sin(u) * 3.0 - u


def with_callee(x):
    return np.sum(helper(x) / 2.0 + x)


def in_loop(x):
    s = 0.0
    for i in range(3):
        t = np.exp(x * 0.5) - x
        s = s + np.sum(t * t)
    return s


def _logreg_data(rng, n=6, k=3):
    X = rng.normal(size=(n, k))
    y = (rng.normal(size=n) > 0).astype(np.float64)
    return 0.3 * rng.normal(size=k), 0.1, X, y


def test_same_shape_float64_operands_lose_unbroadcast():
    code = after(lse, (np.ones(4),))
    assert "g_x = g_sub" in code and "unbroadcast(g_sub" not in code
    code = after(logreg_like, _logreg_data(np.random.default_rng(0)), (0, 1))
    assert "g_matmul = g_add" in code
    assert "g_exp = g_add_1" in code
    assert "g_b = unbroadcast(g_add, b)" in code  # a float: summed
    assert "g_mul = unbroadcast(g_add_2, mul)" in code  # y * log: not proven


@pytest.mark.parametrize(
    "fn,args",
    [
        (shifted, (np.ones(4, np.float32), np.float64(0.5))),  # promotes: kept
        (shifted, (np.ones(4, np.float32), np.zeros(4))),  # a float64 array
        (shifted, (np.ones(4, np.float32), np.arange(4))),  # an int array: float64
        (lse, ([1.0, 2.0],)),  # a list
        (lse, ()),  # compiled ahead of time: nothing known
        (outer, (np.ones((3, 1)), np.ones(4))),  # broadcasting
    ],
)
def test_unbroadcast_kept_where_not_proven(fn, args):
    code = after(fn, args)
    assert "unbroadcast(g_sub, x)" in code or "g_x = unbroadcast" in code


def test_float32_values_and_gradients_keep_their_dtype():
    x = np.array([0.5, -1.0, 2.0], np.float32)
    value, g = s2sad.value_and_grad(lse)(x)
    plain_value, plain_g = s2sad.value_and_grad(lse, optimize=False)(x)
    assert type(value) is type(plain_value) and g.dtype == np.float32
    np.testing.assert_array_equal(g, plain_g)


@pytest.mark.parametrize(
    "fn,make",
    [
        (lse, lambda r: (r.normal(size=7),)),
        (lse, lambda r: (r.normal(size=(2, 3)),)),
        (lse, lambda r: (np.array(r.normal()),)),  # a 0-d array
        (outer, lambda r: (r.normal(size=(3, 1)), r.normal(size=4))),
        (with_callee, lambda r: (r.normal(size=5),)),
        (in_loop, lambda r: (r.normal(size=(2, 2)),)),
        (in_loop, lambda r: (0.1 * r.normal(size=(100, 90)),)),  # workspaces
    ],
)
def test_gradients_match_finite_differences_twice(fn, make):
    rng = np.random.default_rng(3)
    vg = s2sad.value_and_grad(fn)
    plain = s2sad.value_and_grad(fn, optimize=False)
    for _ in range(2):  # workspaces are reused on the second call
        args = make(rng)
        value, g = vg(*args)
        want_value, want_g = plain(*args)
        assert value == want_value
        np.testing.assert_array_equal(g, want_g)
        assert g.dtype == want_g.dtype and g.shape == np.shape(args[0])
        num = numerical_grad(fn, list(args))
        np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-6)


def test_logreg_gradients_and_types_are_keyed():
    rng = np.random.default_rng(5)
    vg = s2sad.value_and_grad(logreg, argnums=(0, 1))
    plain = s2sad.value_and_grad(logreg, argnums=(0, 1), optimize=False)
    w, b, X, y = _logreg_data(rng)
    for b_value in (b, np.array([0.1, -0.2, 0.0, 0.3, 0.1, 0.2]), b):
        value, (gw, gb) = vg(w, b_value, X, y)
        want_value, (ww, wb) = plain(w, b_value, X, y)
        assert value == want_value
        np.testing.assert_array_equal(gw, ww)
        np.testing.assert_array_equal(gb, wb)
        assert np.shape(gb) == np.shape(b_value)
        nw, nb = numerical_grad(logreg, [w, b_value, X, y], (0, 1))
        np.testing.assert_allclose(gw, nw, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(gb, nb, rtol=1e-5, atol=1e-7)


def test_second_order_through_the_dropped_calls():
    x = np.array([0.2, -0.4, 1.1])
    v = np.array([1.0, 0.5, -0.3])
    hv = s2sad.hvp(lse)(x, v)
    g = s2sad.grad(lse)
    eps = 1e-6
    want = (g(x + eps * v) - g(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hv, want, rtol=1e-5, atol=1e-8)


# -- reverse/spreads.py: a full sum's or mean's cotangent multiplied, not filled


def mean_exp(x):
    return np.mean(np.exp(x * 0.5))


def sum_read_twice(x):
    e = np.exp(x)
    s = np.sum(e)
    return s * s + np.sum(e * x)


def callee_sum(u):
    return np.sum(np.exp(u))


def through_callee(x):
    return callee_sum(x * 2.0) + np.sum(np.sin(x))


def test_full_reductions_cotangent_is_a_factor():
    vg = s2sad.value_and_grad(lse)
    vg(np.ones(4))
    assert "g_x = g_sum_1 * exp" in vg.source  # g_sub forwarded into g_x
    assert "d_sum" not in vg.source  # nor its import
    vg = s2sad.value_and_grad(mean_exp)
    vg(np.ones(4))
    assert "g_mul = g_out / exp.size * exp" in vg.source
    vg = s2sad.value_and_grad(sum_read_twice)
    vg(np.ones(4))
    assert "g_mul_1 = d_sum(g_sum_1, sum_1, mul_1)[0]" in vg.source  # read twice
    vg = s2sad.value_and_grad(lse)
    vg(np.ones(4, np.float32))
    assert "d_sum(g_sum_1, sum_1, exp)[0]" in vg.source  # float32: left as is


@pytest.mark.parametrize("fn", [mean_exp, sum_read_twice, through_callee, lse])
@pytest.mark.parametrize(
    "shape,dtype",
    [((5,), np.float64), ((2, 3), np.float64), ((), np.float64), ((4,), np.float32)],
)
def test_spread_gradients_match(fn, shape, dtype):
    rng = np.random.default_rng(11)
    vg = s2sad.value_and_grad(fn)
    plain = s2sad.value_and_grad(fn, optimize=False)
    for _ in range(2):
        x = np.asarray(0.5 * rng.normal(size=shape)).astype(dtype)
        value, g = vg(x)
        want_value, want_g = plain(x)
        assert value == want_value and type(value) is type(want_value)
        np.testing.assert_array_equal(g, want_g)
        assert g.dtype == dtype and g.shape == shape
        if dtype == np.float64:
            num = numerical_grad(fn, [x])
            np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


def test_spread_second_order():
    x = np.array([0.3, -0.1, 0.8, 0.2])
    v = np.array([0.5, 1.0, -1.0, 0.25])
    g = s2sad.grad(mean_exp)
    eps = 1e-6
    want = (g(x + eps * v) - g(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(s2sad.hvp(mean_exp)(x, v), want, rtol=1e-5)


def _forwarded(src: str) -> str:
    import ast

    from s2sad.transforms.reverse.spreads import forward_copies

    fn = ast.parse(src).body[0]
    forward_copies(fn)
    return ast.unparse(fn)


def test_copies_forwarded_only_where_nothing_reads_in_between():
    out = _forwarded(
        "def f(x, r):\n"
        "    for i in r:\n"
        "        c = g_x + 1.0\n"
        "        b = x * 2.0\n"
        "        g_x = b\n"
        "    return g_x\n"
    )
    assert "g_x = x * 2.0" in out and "b" not in out
    kept = (
        "def f(x, r):\n"
        "    for i in r:\n"
        "        b = x * 2.0\n"
        "        c = g_x + 1.0\n"  # the old g_x, read between
        "        g_x = b\n"
        "    return (g_x, c)\n"
    )
    assert _forwarded(kept) == _forwarded(_forwarded(kept)) and "g_x = b" in (
        _forwarded(kept)
    )
    twice = "def f(x):\n    b = x * 2.0\n    g_x = b\n    return (g_x, b)\n"
    assert "g_x = b" in _forwarded(twice)  # b read elsewhere


def test_fast_path_tells_dtypes_apart():
    vg = s2sad.value_and_grad(lse)
    plain = s2sad.value_and_grad(lse, optimize=False)
    x = np.array([0.25, -1.5, 0.75])
    for arg in (x, x.astype(np.float32), x, x.astype(np.float32), x):
        value, g = vg(arg)
        want_value, want_g = plain(arg)
        assert value == want_value and type(value) is type(want_value)
        assert g.dtype == arg.dtype
        np.testing.assert_array_equal(g, want_g)
    assert sorted(vg._compiled) == ["a<f4;small", "a<f8;small"]
