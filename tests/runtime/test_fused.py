"""The fused kernels of elementwise rules (s2sad/runtime/fused.py): the same bits
as the rule's written-out expression, one array, their own rules right."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from s2sad.runtime import activations, fused, registry

#: kernel -> (primal, inputs' range): ans = primal(x)
PRIMALS = {
    fused.tanh_grad: (np.tanh, (-2.0, 2.0)),
    fused.tan_grad: (np.tan, (-1.2, 1.2)),
    fused.sigmoid_grad: (activations.sigmoid, (-4.0, 4.0)),
    fused.reciprocal_grad: (np.reciprocal, (0.5, 2.0)),
    fused.arctan_grad: (np.arctan, (-3.0, 3.0)),
    fused.arctanh_grad: (np.arctanh, (-0.9, 0.9)),
    fused.sin_grad: (np.sin, (-3.0, 3.0)),
    fused.cos_grad: (np.cos, (-3.0, 3.0)),
    fused.sinh_grad: (np.sinh, (-2.0, 2.0)),
    fused.cosh_grad: (np.cosh, (-2.0, 2.0)),
    fused.square_grad: (np.square, (-2.0, 2.0)),
    fused.sqrt_grad: (np.sqrt, (0.5, 3.0)),
    fused.cbrt_grad: (np.cbrt, (0.5, 3.0)),
    fused.expm1_grad: (np.expm1, (-1.0, 1.0)),
    fused.log1p_grad: (np.log1p, (-0.5, 2.0)),
    fused.arcsin_grad: (np.arcsin, (-0.9, 0.9)),
    fused.arccos_grad: (np.arccos, (-0.9, 0.9)),
    fused.arcsinh_grad: (np.arcsinh, (-3.0, 3.0)),
    fused.arccosh_grad: (np.arccosh, (1.2, 3.0)),
}
SHAPES = [(7,), (3, 5), (2, 3, 4), (100, 64)]


def _rule_of(kernel):
    return next(r for r, k in fused.FUSED.items() if k is kernel)


def _operands(kernel, shape, dtype, seed=0):
    """(g, ans, x) of the kernel's rule, in ``dtype``."""
    primal, (lo, hi) = PRIMALS[kernel]
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, size=shape).astype(dtype)
    g = rng.normal(size=shape).astype(dtype)
    ans = np.asarray(primal(x))
    return g, ans, x


def _call(kernel, g, ans, x, **kw):
    names = [p for p in inspect.signature(kernel).parameters if p != "out"]
    values = {"g": g, "ans": ans, "x": x}
    return kernel(*[values[p] for p in names], **kw)


def test_every_kernel_is_registered_and_tested():
    assert set(fused.FUSED.values()) == set(fused.KERNELS) == set(PRIMALS)
    for kernel in fused.KERNELS:
        assert registry.lookup(kernel).adjoint is not None


@pytest.mark.parametrize("kernel", fused.KERNELS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_same_bits_as_the_written_out_rule(kernel, dtype, shape):
    g, ans, x = _operands(kernel, shape, dtype)
    want = _rule_of(kernel)(g, ans, x)[0]
    before = (g.copy(), ans.copy(), x.copy())
    got = _call(kernel, g, ans, x)
    assert got.dtype == want.dtype == dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    for a, b in zip((g, ans, x), before):  # operands untouched
        np.testing.assert_array_equal(a, b)
    # into a buffer: the same bits, the buffer itself returned
    out = np.full(shape, 7, dtype)
    assert _call(kernel, g, ans, x, out=out) is out
    np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("kernel", fused.KERNELS, ids=lambda k: k.__name__)
def test_unfit_buffers_are_left_alone(kernel):
    g, ans, x = _operands(kernel, (4, 3), np.float64, seed=1)
    want = _rule_of(kernel)(g, ans, x)[0]
    for out in (
        np.zeros((4, 3), np.float32),  # another dtype
        np.zeros((3, 4)),  # another shape
        np.zeros((4, 6))[:, ::2],  # a strided view: written, still right
    ):
        kept = out.copy()
        got = _call(kernel, g, ans, x, out=out)
        np.testing.assert_array_equal(got, want)
        if got is not out:
            np.testing.assert_array_equal(out, kept)
    # a buffer sharing memory with g: g must not be overwritten
    gg = g.copy()
    got = _call(kernel, gg, ans, x, out=gg)
    assert got is not gg
    np.testing.assert_array_equal(gg, g)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kernel", fused.KERNELS, ids=lambda k: k.__name__)
def test_numbers_broadcasting_and_mixed_dtypes_take_the_written_out_path(kernel):
    rule = _rule_of(kernel)
    g, ans, x = _operands(kernel, (3, 4), np.float32, seed=2)
    cases = [
        (2.5, ans, x),  # a Python number as g
        (np.float64(2.5), ans, x),  # a NumPy scalar: float64 result
        (g[:1], ans, x),  # g broadcast along rows
        (g.astype(np.float64), ans, x),  # mixed dtypes: float64 result
        (g[0, 0], ans[0, 0], x[0, 0]),  # 0-d values
        (float(g[0, 0]), float(ans[0, 0]), float(x[0, 0])),  # Python floats
        (g.astype(np.float16), ans.astype(np.float16), x.astype(np.float16)),
    ]
    for gi, ai, xi in cases:
        want = rule(gi, ai, xi)[0]
        got = _call(kernel, gi, ai, xi)
        assert type(got) is type(want)
        assert np.result_type(got) == np.result_type(want)
        np.testing.assert_array_equal(got, want)


def _fd_adjoint(kernel, i, g, a, gg, eps=1e-6):
    """Central differences of <gg, kernel(g, a)> with respect to operand i."""
    ops = [g.copy(), a.copy()]
    out = np.zeros_like(ops[i])
    for k in np.ndindex(out.shape):
        vals = []
        for s in (eps, -eps):
            moved = [o.copy() for o in ops]
            moved[i][k] += s
            vals.append(np.sum(gg * kernel(*moved)))
        out[k] = (vals[0] - vals[1]) / (2 * eps)
    return out


@pytest.mark.parametrize("kernel", fused.KERNELS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("shape", [(5,), (2, 3)], ids=str)
def test_the_kernels_rules_against_central_differences(kernel, shape):
    """Each kernel's adjoint rule (and so its tangent: ``elementwise``)."""
    from s2sad.runtime import tangents

    g, ans, x = _operands(kernel, shape, np.float64, seed=3)
    a = ans if "ans" in inspect.signature(kernel).parameters else x
    gg = np.random.default_rng(4).normal(size=shape)
    k = kernel(g, a)
    cts = registry.lookup(kernel).adjoint(gg, k, g, a)
    for i in (0, 1):
        want = _fd_adjoint(kernel, i, g, a, gg)
        np.testing.assert_allclose(cts[i], want, rtol=1e-6, atol=1e-8)
    assert tangents.lookup(kernel).kind == "elementwise"
