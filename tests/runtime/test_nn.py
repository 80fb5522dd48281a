"""Kernels and rules of s2sad.runtime.nn against loops and finite differences.

The rules of the dense layer and the activations are tested in test_activations.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import nn
from s2sad.runtime.registry import lookup
from s2sad.runtime.sparse import RowSparse

RNG = np.random.default_rng(20240611)


def dense_of(ct):
    return ct.to_dense() if isinstance(ct, RowSparse) else np.asarray(ct)


def check_fd(kernel, args, wrt, kwargs=None, eps=1e-6, rtol=1e-6, trials=2):
    """Compare <u, J v> (central differences) with <J^T u, v> (the registered rule)."""
    kwargs = kwargs or {}
    rule = lookup(kernel).adjoint
    for _ in range(trials):
        ans = kernel(*args, **kwargs)
        u = RNG.standard_normal(np.shape(ans))
        cts = rule(u, ans, *args, **kwargs)
        for i in wrt:
            v = RNG.standard_normal(np.shape(args[i]))
            plus, minus = list(args), list(args)
            plus[i] = args[i] + eps * v
            minus[i] = args[i] - eps * v
            jv = (kernel(*plus, **kwargs) - kernel(*minus, **kwargs)) / (2 * eps)
            ct = dense_of(cts[i])
            assert ct.shape == np.shape(args[i])
            lhs, rhs = np.sum(u * jv), np.sum(ct * v)
            assert lhs == pytest.approx(rhs, rel=rtol, abs=1e-9), (kernel.__name__, i)


def randn(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


# -- conv1d ---------------------------------------------------------------------


def conv1d_loop(x, w, b=None):
    batch, _, length = x.shape
    filters, _, width = w.shape
    out = np.zeros((batch, filters, length - width + 1))
    for t in range(out.shape[2]):
        out[:, :, t] = np.einsum("bck,fck->bf", x[:, :, t : t + width], w)
    return out if b is None else out + b[:, None]


CONV_SHAPES = [(2, 3, 7, 4, 3), (1, 1, 5, 1, 1), (3, 2, 4, 5, 4), (4, 5, 9, 2, 2)]


@pytest.mark.parametrize("batch,chans,length,filters,width", CONV_SHAPES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_conv1d_matches_loop(batch, chans, length, filters, width, channels_last):
    x = randn(batch, chans, length)
    if channels_last:
        x = np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)
    w, b = randn(filters, chans, width), randn(filters)
    out = nn.conv1d(x, w, b)
    np.testing.assert_allclose(out, conv1d_loop(x, w, b), rtol=1e-12, atol=1e-12)
    assert out.flags.c_contiguous
    np.testing.assert_allclose(nn.conv1d(x, w), conv1d_loop(x, w), atol=1e-12)


@pytest.mark.parametrize("batch,chans,length,filters,width", CONV_SHAPES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_conv1d_rule(batch, chans, length, filters, width, channels_last):
    x = randn(batch, chans, length)
    if channels_last:
        x = np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)
    w, b = randn(filters, chans, width), randn(filters)
    check_fd(nn.conv1d, [x, w, b], wrt=[0, 1, 2])
    check_fd(nn.conv1d, [x, w], wrt=[0, 1])


def test_conv1d_float32():
    x, w, b = randn(2, 3, 8, dtype=np.float32), randn(4, 3, 3, dtype=np.float32), None
    out = nn.conv1d(x, w, randn(4, dtype=np.float32))
    assert out.dtype == np.float32
    g = np.ones_like(out)
    for xx in (x, np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)):
        gx, gw, gb = nn.d_conv1d(g, out, xx, w, b)
        assert (gx.dtype, gw.dtype, gb) == (np.float32, np.float32, None)
        assert gx.shape == x.shape and gw.shape == w.shape
    gb = nn.d_conv1d(g, out, x, w, np.zeros(4, np.float32))[2]
    assert gb.dtype == np.float32 and gb.shape == (4,)


@pytest.mark.parametrize(
    "xshape,wshape",
    [((2, 3, 5), (4, 2, 3)), ((3, 5), (4, 3, 2)), ((1, 2, 2), (1, 2, 3))],
)
def test_conv1d_rejects_bad_shapes(xshape, wshape):
    with pytest.raises(ValueError):
        nn.conv1d(np.zeros(xshape), np.zeros(wshape))


# -- maxpool1d ------------------------------------------------------------------


def test_maxpool1d_values_and_remainder():
    x = np.array([[1.0, 5.0, 2.0, 7.0, 0.0, -1.0, 9.0]])
    np.testing.assert_array_equal(nn.maxpool1d(x, 2), [[5.0, 7.0, 0.0]])
    np.testing.assert_array_equal(nn.maxpool1d(x, 3), [[5.0, 7.0]])
    np.testing.assert_array_equal(nn.maxpool1d(x[0], 7), [9.0])


def test_maxpool1d_gradient_goes_to_first_max_on_ties():
    x = np.array([3.0, 3.0, 1.0, 2.0, 4.0, 4.0, 4.0])
    g = np.array([10.0, 20.0])
    gx = nn.d_maxpool1d(g, nn.maxpool1d(x, 3), x, 3)[0]
    np.testing.assert_array_equal(gx, [10.0, 0, 0, 0, 20.0, 0, 0])
    big = np.zeros((2, 41))  # k > 16 takes the reduction path
    big[0, [5, 9]] = 1.0
    g = np.array([[2.0, 4.0], [3.0, 5.0]])
    gbig = nn.d_maxpool1d(g, nn.maxpool1d(big, 20), big, 20)[0]
    expected = np.zeros((2, 41))
    expected[0, [5, 20]] = 2.0, 4.0
    expected[1, [0, 20]] = 3.0, 5.0
    np.testing.assert_array_equal(gbig, expected)


@pytest.mark.parametrize("k", [3, 20])
def test_maxpool1d_paths_agree_with_reshape(k):
    x = randn(4, 2, 45)
    n = 45 // k
    expected = x[..., : n * k].reshape(4, 2, n, k).max(-1)
    np.testing.assert_array_equal(nn.maxpool1d(x, k), expected)


@pytest.mark.parametrize(
    "shape,k",
    [((7,), 2), ((3, 8), 4), ((2, 3, 10), 3), ((2, 2, 6), 1), ((2, 3, 41), 20)],
)
def test_maxpool1d_rule(shape, k):
    check_fd(nn.maxpool1d, [randn(*shape), k], wrt=[0])


def test_maxpool1d_float32_and_errors():
    x = randn(2, 3, 16, dtype=np.float32)
    out = nn.maxpool1d(x, 8)
    assert out.dtype == np.float32 and out.shape == (2, 3, 2)
    gx = nn.d_maxpool1d(np.ones_like(out), out, x, 8)[0]
    assert gx.dtype == np.float32 and gx.shape == x.shape and gx.sum() == 12
    for k in (0, 17, 2.5):
        with pytest.raises(ValueError):
            nn.maxpool1d(x, k)


# -- embedding ------------------------------------------------------------------


def test_embedding_forward_and_sparse_accumulation():
    table = randn(10, 4)
    ids = np.array([[3, 1, 3], [7, 3, -1]])
    out = nn.embedding(table, ids)
    np.testing.assert_array_equal(out, table[ids])
    g = randn(2, 3, 4)
    ct = nn.d_embedding(g, out, table, ids)[0]
    assert isinstance(ct, RowSparse) and ct.shape == table.shape
    np.testing.assert_array_equal(ct.rows, [1, 3, 7, 9])  # unique, sorted, -1 -> 9
    expected = np.zeros_like(table)
    np.add.at(expected, ids % 10, g)
    np.testing.assert_allclose(ct.to_dense(), expected, rtol=1e-15)


@pytest.mark.parametrize("ids_shape", [(5,), (3, 4), (2, 2, 3)])
def test_embedding_rule(ids_shape):
    table = randn(6, 3)
    ids = RNG.integers(0, 6, ids_shape)
    check_fd(nn.embedding, [table, ids], wrt=[0])


def test_embedding_rule_stays_small_and_float32():
    table = randn(100_000, 8, dtype=np.float32)
    ids = np.array([5, 99_999, 5, 0])
    out = nn.embedding(table, ids)
    ct = nn.d_embedding(np.ones_like(out), out, table, ids)[0]
    assert ct.values.shape == (3, 8) and ct.dtype == np.float32
    np.testing.assert_array_equal(ct.values[:, 0], [1, 2, 1])
    ct64 = nn.d_embedding(np.ones(out.shape), out, table, ids)[0]
    assert ct64.dtype == np.float32  # cast to the table's dtype


# -- losses ---------------------------------------------------------------------


def test_softmax_cross_entropy_value_and_stability():
    logits, labels = randn(5, 4), RNG.integers(0, 4, 5)
    naive = -np.mean(
        np.log(np.exp(logits) / np.exp(logits).sum(1, keepdims=True))[
            np.arange(5), labels
        ]
    )
    assert nn.softmax_cross_entropy(logits, labels) == pytest.approx(naive, rel=1e-12)
    big = np.array([[1000.0, 0.0, -1000.0], [3000.0, 3001.0, 2999.0]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss = nn.softmax_cross_entropy(big, np.array([1, 0]))
        ct = nn.d_softmax_cross_entropy(1.0, loss, big, np.array([1, 0]))[0]
    expected = (1000.0 + (1.0 + np.log(1 + np.exp(-1) + np.exp(-2)))) / 2
    assert loss == pytest.approx(expected, rel=1e-12)
    assert np.all(np.isfinite(ct))


@pytest.mark.parametrize("shape", [(4,), (6, 3), (2, 3, 5)])
def test_softmax_cross_entropy_rule(shape):
    labels = RNG.integers(0, shape[-1], shape[:-1])
    check_fd(nn.softmax_cross_entropy, [randn(*shape), labels], wrt=[0])


def test_softmax_cross_entropy_float32_and_errors():
    logits = randn(5, 3, dtype=np.float32)
    labels = np.array([0, 2, 1, 1, 0])
    loss = nn.softmax_cross_entropy(logits, labels)
    assert loss.dtype == np.float32
    for g in (1.0, np.float64(1.0), np.float32(1.0)):
        assert (
            nn.d_softmax_cross_entropy(g, loss, logits, labels)[0].dtype == np.float32
        )
    with pytest.raises(ValueError):
        nn.softmax_cross_entropy(logits, labels[:4])
    with pytest.raises(ValueError):
        nn.softmax_cross_entropy(logits, labels.astype(float))


def _take_along_value(logits, labels):
    """softmax_cross_entropy as take_along_axis and np.mean compute it."""
    z = logits - logits.max(axis=-1, keepdims=True)
    log_norm = np.log(np.exp(z).sum(axis=-1))
    picked = np.take_along_axis(z, labels[..., None], axis=-1)[..., 0]
    return np.mean(log_norm - picked)


def _put_along_grad(g, logits, labels):
    """Its cotangent as softmax and put_along_axis compute it."""
    from s2sad.runtime.activations import softmax

    p = softmax(logits)
    picked = np.take_along_axis(p, labels[..., None], -1) - 1
    np.put_along_axis(p, labels[..., None], picked, -1)
    p *= np.asarray(g, dtype=p.dtype) / max(labels.size, 1)
    return p


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return (
        a.dtype == b.dtype
        and np.array_equal(a, b)
        and np.array_equal(np.signbit(a), np.signbit(b))
    )


@pytest.mark.parametrize("rows", [1, 7, 100])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.longdouble])
@pytest.mark.parametrize("label_dtype", [np.int64, np.int32, np.uint8])
def test_softmax_cross_entropy_rows_take_the_same_values(rows, dtype, label_dtype):
    # a matrix of logits and one label per row: one fancy index and the mean
    # without np.mean's wrappers, the same bits as take_along_axis and np.mean
    logits = (5 * randn(rows, 6)).astype(dtype)
    low = 0 if label_dtype is np.uint8 else -6  # negative labels count from the end
    labels = RNG.integers(low, 6, rows).astype(label_dtype)
    value = nn.softmax_cross_entropy(logits, labels)
    want = _take_along_value(logits, labels)
    assert type(value) is type(want) and _same_bits(value, want)
    for g in (1.0, dtype(0.7)):
        ct = nn.d_softmax_cross_entropy(g, value, logits, labels)[0]
        assert _same_bits(ct, _put_along_grad(g, logits, labels))
        into = (np.empty_like(logits),)
        ct = nn.d_softmax_cross_entropy(g, value, logits, labels, into=into)[0]
        assert ct is into[0] and _same_bits(ct, _put_along_grad(g, logits, labels))
    # other layouts go the general way: a stack of rows, a label list
    stack = randn(2, rows, 6)
    stacked = RNG.integers(0, 6, (2, rows))
    assert _same_bits(
        nn.softmax_cross_entropy(stack, stacked), _take_along_value(stack, stacked)
    )
    assert _same_bits(nn.softmax_cross_entropy(logits, labels.tolist()), value)


def test_bce_with_logits_value_and_stability():
    x, t = randn(6), RNG.random(6)
    p = 1 / (1 + np.exp(-x))
    naive = -np.mean(t * np.log(p) + (1 - t) * np.log(1 - p))
    assert nn.binary_cross_entropy_with_logits(x, t) == pytest.approx(naive, rel=1e-12)
    big, tb = np.array([1000.0, -1000.0, 1000.0]), np.array([0.0, 0.0, 1.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss = nn.binary_cross_entropy_with_logits(big, tb)
        ct = nn.d_binary_cross_entropy_with_logits(1.0, loss, big, tb)
    assert loss == pytest.approx(1000.0 / 3, rel=1e-12)
    np.testing.assert_allclose(ct[0], [1 / 3, 0, 0])


@pytest.mark.parametrize("shape", [(), (5,), (3, 4)])
def test_bce_with_logits_rule(shape):
    x, t = randn(*shape), RNG.random(shape)
    check_fd(nn.binary_cross_entropy_with_logits, [x, t], wrt=[0, 1])


def test_bce_with_logits_float32_and_errors():
    x, t = randn(8, dtype=np.float32), RNG.random(8).astype(np.float32)
    loss = nn.binary_cross_entropy_with_logits(x, t)
    gx, gt = nn.d_binary_cross_entropy_with_logits(np.float64(1.0), loss, x, t)
    assert (loss.dtype, gx.dtype, gt.dtype) == (np.float32,) * 3
    with pytest.raises(ValueError):
        nn.binary_cross_entropy_with_logits(x[:, None], t)


def test_one_hot_and_registry():
    np.testing.assert_array_equal(nn.one_hot([2, 0], 3), [[0, 0, 1], [1, 0, 0]])
    assert not lookup(nn.one_hot).differentiable
    for name in nn.__all__:
        if name != "one_hot":
            assert lookup(getattr(nn, name)).differentiable, name


def _check_rule_cases():
    r = np.random.default_rng(5)
    return [
        (nn.conv1d, (r.standard_normal((2, 3, 7)), r.standard_normal((4, 3, 3))), {}),
        (nn.maxpool1d, (r.standard_normal((2, 3, 10)), 3), {}),
        (nn.embedding, (r.standard_normal((6, 3)), np.array([[1, 1], [5, 0]])), {}),
        (
            nn.softmax_cross_entropy,
            (r.standard_normal((5, 4)), r.integers(0, 4, 5)),
            {},
        ),
        (nn.binary_cross_entropy_with_logits, (r.standard_normal(5), r.random(5)), {}),
    ]


@pytest.mark.parametrize("kernel,args,kwargs", _check_rule_cases())
def test_rules_pass_check_rule(kernel, args, kwargs):
    """The shared checker (FD values, float32 structure and dtypes, no mutation)."""
    from s2sad.testing import check_rule

    check_rule(kernel, *args, kwargs=kwargs)
