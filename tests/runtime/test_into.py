"""Rules that write cotangents into caller-provided buffers (``into=``).

For each rule and input case: the result with buffers equals the one without;
where the buffer is honoured the returned array *is* the buffer, elsewhere the
buffer is left untouched; and the call allocates far less than a cotangent
(measured with tracemalloc, which sees NumPy's data allocations).
"""

from __future__ import annotations

import operator
import tracemalloc

import numpy as np
import pytest

from s2sad.runtime import contractions, indexing, nn, reductions, shapes

RNG = np.random.default_rng(5)
F32, F64 = np.float32, np.float64
SLACK = 16 * 1024  # Python objects, views and NumPy's small internal buffers
CAST = np.getbufsize() * 8  # a ufunc that casts (bool -> float) buffers this much


def rand(shape: tuple, dtype=F64) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def garbage_like(ct) -> np.ndarray | None:
    """A NaN-filled buffer of ct's shape and dtype (None for non-array cotangents)."""
    if not isinstance(ct, np.ndarray):
        return None
    return np.full(ct.shape, np.nan, dtype=ct.dtype)


def peak_of(call) -> tuple:
    """``call()``'s result and the peak of traced memory above the level before it."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = call()
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def run(rule, g, ans, *args, honoured, exact=True, bound=None, rtol=1e-12, **kw):
    """Check ``rule`` with garbage buffers against the bufferless call.

    ``honoured[i]`` says whether cotangent i must come back in its buffer (the
    others must leave their buffer untouched); ``bound`` caps the bytes the
    buffered call may allocate.  Returns that peak.
    """
    ref = rule(g, ans, *args, **kw)
    bufs = tuple(garbage_like(ct) for ct in ref)
    got, peak = peak_of(lambda: rule(g, ans, *args, into=bufs, **kw))
    assert len(got) == len(ref)
    for i, (r, c, b) in enumerate(zip(ref, got, bufs)):
        if r is None:
            assert c is None
            continue
        assert np.shape(c) == np.shape(r) and np.result_type(c) == np.result_type(r)
        if exact:
            np.testing.assert_array_equal(c, r)
        else:
            np.testing.assert_allclose(c, r, rtol=rtol, atol=rtol * np.abs(r).max())
        if i < len(honoured) and honoured[i]:
            assert c is b, f"cotangent {i} was not written into its buffer"
        elif b is not None:
            assert c is not b and np.isnan(b).all(), f"buffer {i} was touched"
    if bound is not None:
        assert peak <= bound, f"allocated {peak} bytes, bound {bound}"
    return peak


def test_into_entries_none_short_and_misfit_are_ignored():
    x, y = rand((6, 4)), rand((4, 5))
    g = rand((6, 5))
    gx, gy = contractions.d_matmul(g, None, x, y)
    buf = np.full(gy.shape, np.nan)
    out = contractions.d_matmul(g, None, x, y, into=(None, buf))
    assert out[1] is buf and out[0] is not buf
    np.testing.assert_array_equal(out[0], gx)
    np.testing.assert_array_equal(out[1], gy)
    short = np.full(gx.shape, np.nan)
    out = contractions.d_matmul(g, None, x, y, into=(short,))
    assert out[0] is short
    np.testing.assert_array_equal(out[1], gy)
    for misfit in [np.empty((5, 4)), np.empty((6, 4), F32), np.empty((4, 6)).T]:
        out = contractions.d_matmul(g, None, x, y, into=(misfit,))
        assert out[0] is not misfit
        np.testing.assert_array_equal(out[0], gx)
    assert contractions.d_matmul(g, None, x, y, into=())[0] is not None


# ---------------------------------------------------------------- matmul


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize(
    "sx,sy",
    [((64, 256), (256, 128)), ((64, 40), (40,)), ((40,), (40, 32)), ((9,), (9,))],
)
def test_matmul_matrices_and_vectors(sx, sy, dtype):
    x, y = rand(sx, dtype), rand(sy, dtype)
    ans = x @ y
    g = rand(np.shape(ans), dtype)
    # an outer product is a broadcast multiply: NumPy's iterator may allocate its
    # fixed-size buffers (bufsize entries per operand), never a cotangent's size
    bound = SLACK + (2 * np.getbufsize() * x.itemsize if len(sx) != len(sy) else 0)
    run(contractions.d_matmul, g, ans, x, y, honoured=(True, True), bound=bound)
    for rule in [contractions.d_matmul_lhs, contractions.d_matmul_rhs]:
        run(rule, g, ans, x, y, honoured=(True,), bound=bound)


def test_matmul_bufferless_2d_is_the_plain_product():
    x, y, g = rand((5, 3)), rand((3, 4)), rand((5, 4))
    gx, gy = contractions.d_matmul(g, None, x, y)
    np.testing.assert_array_equal(gx, g @ y.T)
    np.testing.assert_array_equal(gy, x.T @ g)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_matmul_batch_times_matrix_contiguous(dtype):
    """(B, L, C) @ (C, F): the weight cotangent is one product, no temporaries."""
    x, w = rand((64, 128, 50), dtype), rand((50, 8), dtype)
    g = rand((64, 128, 8), dtype)
    rtol = 1e-4 if dtype is F32 else 1e-12
    kw = {"exact": False, "rtol": rtol, "bound": SLACK}
    run(contractions.d_matmul, g, None, x, w, honoured=(True, True), **kw)
    run(contractions.d_matmul_rhs, g, None, x, w, honoured=(True,), **kw)
    run(contractions.d_matmul_lhs, g, None, x, w, honoured=(True,), bound=SLACK)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_matmul_strided_slice_times_matrix(dtype):
    """x[:, 0:L, :] @ K[0] of a text CNN: x cannot be flattened without a copy, so
    the weight cotangent sums a batch of small products (batch x weight size)."""
    padded, kernel = rand((64, 130, 50), dtype), rand((3, 50, 8), dtype)
    x, w = padded[:, 1:129, :], kernel[1]
    g = rand((64, 128, 8), dtype)
    batch_of_products = 64 * 50 * 8 * np.dtype(dtype).itemsize
    peak = run(
        contractions.d_matmul,
        g,
        None,
        x,
        w,
        honoured=(True, True),
        bound=batch_of_products + SLACK,
    )
    assert peak < x.nbytes / 8
    run(contractions.d_matmul_lhs, g, None, x, w, honoured=(True,), bound=SLACK)


def test_matmul_matrix_or_vector_times_batch():
    x, y = rand((3, 4)), rand((2, 4, 5))
    run(contractions.d_matmul, rand((2, 3, 5)), None, x, y, honoured=(True, True))
    v = rand((4,))  # the batch folds into one product: rounding may differ
    run(contractions.d_matmul, rand((2, 5)), None, v, y, honoured=(True, True),
        exact=False)  # fmt: skip


def test_matmul_batch_times_vector_and_equal_batches():
    x, v = rand((2, 3, 4)), rand((4,))
    run(contractions.d_matmul, rand((2, 3)), None, x, v, honoured=(True, True),
        exact=False)  # fmt: skip
    y = rand((2, 4, 5))
    run(contractions.d_matmul, rand((2, 3, 5)), None, x, y, honoured=(True, True))


def test_matmul_buffers_ignored_for_broadcast_batches_and_mixed_dtypes():
    x, y = rand((2, 1, 3, 4)), rand((5, 4, 2))
    run(contractions.d_matmul, rand((2, 5, 3, 2)), None, x, y, honoured=(False, False))
    x32, y64 = rand((3, 4), F32), rand((4, 5))
    run(contractions.d_matmul, rand((3, 5)), None, x32, y64, honoured=(False, False))
    x32, y32 = rand((3, 4), F32), rand((4, 5), F32)
    run(contractions.d_matmul, rand((3, 5)), None, x32, y32, honoured=(False, False))


# ---------------------------------------------------------------- reductions


REDUCE_CASES = [
    ((256, 512), 1, False),
    ((256, 512), 1, True),
    ((256, 512), None, False),
    ((256, 512), 0, True),
    ((16, 64, 128), (0, 2), False),
    ((16, 64, 128), -1, True),
]


def reduced_g(x: np.ndarray, fn, axis, keepdims, dtype) -> tuple:
    ans = fn(x, axis=axis, keepdims=keepdims)
    return ans, np.asarray(rand(np.shape(ans)), dtype=dtype)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("shape,axis,keepdims", REDUCE_CASES, ids=str)
def test_mean(shape, axis, keepdims, dtype):
    x = rand(shape, dtype)
    ans, g = reduced_g(x, np.mean, axis, keepdims, dtype)
    kw = {"axis": axis, "keepdims": keepdims, "honoured": (True,), "bound": SLACK}
    run(reductions.d_mean, g, ans, x, **kw)
    run(reductions.d_mean, g.astype(F64), ans, x, **kw)  # cast into x's dtype


def test_mean_with_where_and_scalar_g():
    x = rand((64, 100), F32)
    where = RNG.random((64, 100)) < 0.7
    ans = np.mean(x, axis=1, where=where)
    run(reductions.d_mean, rand((64,), F32), ans, x, axis=1, where=where,
        honoured=(True,), bound=CAST + SLACK)  # fmt: skip
    run(reductions.d_mean, 0.5, np.mean(x), x, honoured=(True,), bound=SLACK)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("shape,axis,keepdims", REDUCE_CASES, ids=str)
@pytest.mark.parametrize("fn", [np.max, np.min])
def test_max_and_min(fn, shape, axis, keepdims, dtype):
    x = rand(shape, dtype)
    ans, g = reduced_g(x, fn, axis, keepdims, dtype)
    x_bytes = x.nbytes
    reduced = np.size(ans) * 8 * 4  # a few reduced-size float64/intp arrays
    run(reductions.d_max, g, ans, x, axis=axis, keepdims=keepdims,
        honoured=(True,), bound=reduced + CAST + SLACK)  # fmt: skip
    assert reduced + CAST + SLACK < x_bytes / 4


def test_max_ties_where_nan_and_integers():
    x = np.round(rand((50, 40)) * 2).astype(F32)  # many ties
    ans = np.max(x, axis=0)
    run(reductions.d_max, rand((40,), F32), ans, x, axis=0, honoured=(True,))
    where = RNG.random(x.shape) < 0.5
    ans = np.max(x, axis=1, where=where, initial=-10)
    run(reductions.d_max, rand((50,)), ans, x, axis=1, where=where, initial=-10,
        honoured=(True,))  # fmt: skip
    xn = x.copy()
    xn[3, 5] = np.nan
    run(reductions.d_max, rand((50,), F32), np.nanmax(xn, axis=1), xn, axis=1,
        honoured=(True,))  # fmt: skip
    xi = np.arange(12).reshape(3, 4)
    run(reductions.d_max, rand((3,)), xi.max(1), xi, axis=1, honoured=(False,))


# ---------------------------------------------------------------- getitem


def getitem(x, idx, dtype=None, honoured=True, bound=SLACK):
    g = np.asarray(x[idx], dtype=dtype or np.asarray(x).dtype)
    return run(indexing.d_getitem, g, None, x, idx, honoured=(honoured,), bound=bound)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_getitem_pick_per_row(dtype):
    logp = rand((512, 10), dtype)
    y = RNG.integers(0, 10, 512)
    getitem(logp, (np.arange(512), y), bound=SLACK + 512 * 8 * 4)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_getitem_basic_indices(dtype):
    x = rand((64, 130, 50), dtype)
    getitem(x, (slice(None), slice(1, 129), slice(None)))
    getitem(x, 0)
    getitem(x, (Ellipsis, 3))
    getitem(x, (slice(None), None, 2, slice(None, None, -2)))
    getitem(x, x > 0, bound=SLACK + x.size)  # a boolean mask: its own index arrays
    getitem(rand((3, 50, 8), dtype), 0)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_getitem_row_gather(dtype):
    """E[ids] with repeated ids: accumulated; the position array is chunked."""
    table = rand((20000, 50), dtype)
    ids = RNG.integers(0, 2000, (64, 130))
    chunk = indexing.CHUNK * (8 + 4)  # positions (intp) and a cast values chunk
    # plus the wrapped row numbers and the buffers of a broadcasting ufunc, and
    # the probe for distinct rows (positions, their rows, one slot a table row)
    probe = 3 * ids.size * 8 + table.shape[0] * 8
    bound = chunk + ids.size * 8 + probe + 2 * CAST + SLACK
    assert bound < table.nbytes / 2
    getitem(table, ids, bound=bound)
    getitem(table, ids, dtype=F64, bound=bound)
    # few repeats: rounds of distinct rows, ROUND_CHUNK entries at a time (the
    # values and their running sums)
    ids = RNG.integers(0, table.shape[0], (64, 130))
    rounds = indexing.ROUND_CHUNK * 8 * 2 + bound
    assert rounds < table.nbytes / 2
    getitem(table, ids, bound=rounds)
    getitem(table, ids, dtype=F64, bound=rounds)
    few = (-ids[0]).tolist()  # a list of negative ids
    getitem(table, few, bound=len(few) * 50 * 8 + 2 * CAST + SLACK)


def test_getitem_other_cases():
    x = rand((6, 5))
    getitem(x, (np.array([0, 2, 2]), np.array([1, 1, 1])))  # repeated pair
    getitem(x, (slice(None), [4, 0, 4]))
    getitem(np.arange(12).reshape(3, 4), 1, dtype=F64)  # int x: float64 cotangent
    out = indexing.d_getitem(1.0, None, [1.0, 2.0], 0, into=(np.empty(2),))
    assert out[0] == [1.0, None]
    out = indexing.d_getitem(1.0, None, {"a": 2.0}, "a", into=(np.empty(()),))
    assert out[0] == {"a": 1.0}


def test_getitem_bufferless_unchanged_by_chunks(monkeypatch):
    table, ids = rand((30, 4)), RNG.integers(0, 30, (9, 7))
    g = rand((9, 7, 4))
    whole = indexing.d_getitem(g, None, table, ids)[0]
    monkeypatch.setattr(indexing, "CHUNK", 8)  # two rows per np.add.at call
    np.testing.assert_array_equal(indexing.d_getitem(g, None, table, ids)[0], whole)
    expected = np.zeros_like(table)
    np.add.at(expected, ids, g)
    np.testing.assert_allclose(whole, expected, rtol=1e-15)
    assert operator.getitem(table, ids).shape == g.shape


# ---------------------------------------------------------------- nn


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("shape", [(256, 10), (8, 5, 7)])
def test_softmax_cross_entropy(shape, dtype):
    logits = rand(shape, dtype)
    labels = RNG.integers(0, shape[-1], shape[:-1])
    ans = nn.softmax_cross_entropy(logits, labels)
    run(nn.d_softmax_cross_entropy, dtype(0.7), ans, logits, labels,
        honoured=(True,), bound=SLACK + logits.size // shape[-1] * 8 * 4)  # fmt: skip


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("k", [8, 3, 20])
def test_maxpool1d(k, dtype):
    x = rand((32, 16, 521), dtype)  # 521 % k trailing entries get zeros
    x[:, :, 1] = x[:, :, 0]  # ties: the first maximum wins
    ans = nn.maxpool1d(x, k)
    g = rand(ans.shape, dtype)
    if k > nn.FEW_OFFSETS:  # argmax over strided windows copies them, as before
        run(nn.d_maxpool1d, g, ans, x, k, honoured=(True,))
        return
    small = 3 * ans.size + 2 * CAST + SLACK  # three window-sized boolean masks
    run(nn.d_maxpool1d, g, ans, x, k, honoured=(True,), bound=small)
    assert small < x.nbytes / 2


# ---------------------------------------------------------------- reshape


def test_reshape_keeps_views_and_fills_buffers_only_for_copies():
    x = rand((6, 20), F32)
    g = rand((120,), F32)
    out = shapes.d_reshape(g, None, x, (120,), into=(np.full((6, 20), np.nan, F32),))
    assert np.shares_memory(out[0], g)  # a view: the buffer is not needed
    run(shapes.d_reshape, rand((30, 4), F32).T, None, x, (6, 20),
        honoured=(True,), bound=SLACK)  # fmt: skip
    run(shapes.d_reshape, rand((4, 30)), None, x, 4, 30, honoured=(True,), bound=SLACK)
    bcast = np.broadcast_to(rand((1, 30), F32), (4, 30))
    run(shapes.d_reshape, bcast, None, x, (4, 30), honoured=(True,), bound=SLACK)
    run(shapes.d_reshape, rand((30, 4), F32).T, None, x, (4, 30), order="F",
        honoured=(False,))  # fmt: skip
