"""s2sad.data_parallel: block gradients over Dask rows, one tree reduction, one
compute; refused unless the loss is a sum or mean over rows.

Results are compared with s2sad.value_and_grad on the same rows in NumPy
(whose gradients are checked against finite differences elsewhere; logistic
regression is checked against them here too), on a 2-worker LocalCluster.
"""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is not installed (extra 'dask')")

import s2sad
from s2sad.errors import NonDifferentiableArgumentError, NotRowwiseError
from tests.fixtures import parallel_models as models


def _rows(a, chunks):
    a = np.asarray(a)
    return da.from_array(a, chunks=(chunks,) + a.shape[1:])


def _check(loss, params, X, y, chunks, reduce="mean", **kw):
    n = len(params)
    argnums = tuple(range(n))
    want_value, want = s2sad.value_and_grad(loss, argnums=argnums)(*params, X, y)
    f = s2sad.data_parallel(loss, (n, n + 1), reduce, argnums, **kw)
    value, got = f(*params, _rows(X, chunks), _rows(y, chunks))
    assert value == pytest.approx(want_value, rel=1e-10)
    for g, w, p in zip(got, want, params):
        assert type(g) is type(p) and np.shape(g) == np.shape(p)
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-13)
    return got


@pytest.mark.parametrize("chunks", [(10, 10), (7, 13, 3, 9, 4), (36,)])
def test_logistic_regression_matches_numpy(client, computes, chunks):
    rng = np.random.default_rng(len(chunks))
    X, y = rng.normal(size=(sum(chunks), 4)), (rng.normal(size=sum(chunks)) > 0) * 1.0
    params = (rng.normal(size=4), 0.3)
    computes.calls = 0
    _check(models.logreg, params, X, y, chunks)
    assert computes.calls == 1
    assert computes.largest <= 4  # parameter-sized results only


def test_logistic_regression_against_finite_differences(client):
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(30, 3)), (rng.normal(size=30) > 0) * 1.0
    w = rng.normal(size=3)
    f = s2sad.data_parallel(models.logreg, (2, 3), argnums=0, with_value=False)
    g = f(w, 0.3, _rows(X, 8), _rows(y, 8))
    for i in range(3):
        e = np.eye(3)[i] * 1e-6
        fd = (models.logreg(w + e, 0.3, X, y) - models.logreg(w - e, 0.3, X, y)) / 2e-6
        assert g[i] == pytest.approx(fd, rel=1e-6)


@pytest.mark.parametrize("loss", ["mlp", "relu_net"])
def test_mlp_matches_numpy(client, computes, loss):
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(50, 6)), rng.normal(size=50)
    params = (rng.normal(size=(6, 5)), rng.normal(size=5), rng.normal(size=(5, 1)))
    params += (rng.normal(size=1),)
    _check(getattr(models, loss), params, X, y, (20, 20, 10))
    assert computes.calls == 1


@pytest.mark.parametrize("loss", ["cross_entropy", "cross_entropy_written_out"])
def test_softmax_cross_entropy_matches_numpy(client, loss):
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(45, 4)), rng.integers(0, 3, 45)
    params = (rng.normal(size=(4, 3)), rng.normal(size=3))
    _check(getattr(models, loss), params, X, y, (15, 20, 10))


@pytest.mark.parametrize(
    ("loss", "reduce"),
    [("squared_error_sum", "sum"), ("squared_error_over_n", "mean")],
)
def test_sums_callees_and_row_counts(client, loss, reduce):
    """A sum over rows through a helper function, and a sum divided by the rows."""
    rng = np.random.default_rng(4)
    X, y = rng.normal(size=(33, 3)), rng.normal(size=33)
    _check(getattr(models, loss), (rng.normal(size=3),), X, y, (11, 16, 6), reduce)


@pytest.mark.parametrize(
    ("loss", "reduce"), [("methods_and_axes", "mean"), ("loop_over_columns", "sum")]
)
def test_methods_axes_and_loops_over_columns(client, loss, reduce):
    rng = np.random.default_rng(9)
    X, y = rng.normal(size=(31, 3)), rng.normal(size=31)
    _check(getattr(models, loss), (rng.normal(size=3),), X, y, (10, 10, 11), reduce)


def test_rnn_with_a_time_loop_and_cross_entropy(client, computes):
    """tests/fixtures/dask_models.py's RNN: a loop over time steps (columns)."""
    from tests.fixtures import dask_models

    rng = np.random.default_rng(10)
    X, y = rng.normal(size=(26, 6)), rng.integers(0, 4, 26)
    n = rng.normal
    params = (n(size=(3, 5)), n(size=(5, 5)), n(size=5), n(size=(5, 4)), n(size=4))
    _check(dask_models.rnn, params, X, y, (13, 13))
    assert computes.calls == 1


def test_dict_parameters_and_a_grad_only_call(client, computes):
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(24, 3)), rng.normal(size=(24, 2))
    p = {"W": rng.normal(size=(3, 2)), "b": rng.normal(size=2)}
    want = s2sad.grad(models.dict_params)(p, X, Y)
    f = s2sad.data_parallel(models.dict_params, (1, 2), with_value=False)
    got = f(p, _rows(X, 10), da.from_array(Y, chunks=(8, 1)))  # rechunked to X's
    assert computes.calls == 1
    for k in p:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-10)


def test_empty_blocks_are_skipped_and_unknown_sizes_refused(client):
    rng = np.random.default_rng(8)
    X, y = rng.normal(size=(20, 3)), rng.normal(size=20)
    w = rng.normal(size=3)
    want = s2sad.grad(models.squared_error_over_n)(w, X, y)
    Xd = da.from_array(X, chunks=((8, 0, 12), (3,)))
    yd = da.from_array(y, chunks=((8, 0, 12),))
    f = s2sad.data_parallel(models.squared_error_over_n, (1, 2), with_value=False)
    np.testing.assert_allclose(f(w, Xd, yd), want, rtol=1e-10)
    Xu, yu = Xd[Xd[:, 0] > -np.inf], yd[Xd[:, 0] > -np.inf]  # nan block sizes
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        f(w, Xu, yu)


def test_graph_is_one_tree_reduction():
    rng = np.random.default_rng(6)
    X, y = _rows(rng.normal(size=(50, 3)), 10), _rows(rng.normal(size=50), 10)
    f = s2sad.data_parallel(models.logreg, (2, 3))
    graph = dict(f.graph(np.zeros(3), 0.0, X, y).__dask_graph__())
    blocks = [k for k in graph if str(k).startswith("_block_gradient")]
    adds = [k for k in graph if str(k).startswith("_add")]
    assert len(blocks) == 5 and len(adds) == 4


def _graph_bytes(rows):
    import pickle

    rng = da.random.default_rng(0)
    X = rng.normal(size=(rows, 3), chunks=(rows // 2, 3))
    y = rng.normal(size=rows, chunks=rows // 2)
    f = s2sad.data_parallel(models.logreg, (2, 3), argnums=(0, 1))
    return len(pickle.dumps(dict(f.graph(np.ones(3), 0.5, X, y).__dask_graph__())))


def test_graph_does_not_grow_with_rows():
    """Nothing data-sized is made here and shipped in the graph."""
    small, large = _graph_bytes(400), _graph_bytes(4000)
    assert large < small + 200, (small, large)


REFUSED = [
    ("gram", "mean", "G = X.T @ X"),
    ("max_over_rows", "mean", "scale = np.max(np.abs(X), axis=0)"),
    ("sorted_rows", "mean", "s = np.sort(X @ w - y)"),
    ("cumulative", "mean", "c = np.cumsum(X @ w - y, axis=0)"),
    ("standardized", "mean", "Xs = (X - X.mean(0)) / X.std(0)"),
    ("shifted", "mean", "r = X[1:] @ w - y[:-1]"),
    ("outer_broadcast", "mean", "return np.mean((z - y) ** 2)"),
    ("mean_squared", "mean", "return np.mean(X @ w - y) ** 2"),
    ("sum_plus_penalty", "sum", "return np.sum((X @ w - y) ** 2) + np.sum(w**2)"),
    ("row_loop", "sum", "for i in range(len(X)):"),
    ("squared_error_sum", "mean", "return 0.5 * np.sum(r**2)"),
    ("logreg", "sum", "return np.mean(np.logaddexp(0.0, z) - y * z)"),
]


@pytest.mark.parametrize(("loss", "reduce", "line"), REFUSED)
def test_losses_that_mix_rows_are_refused_at_their_line(loss, reduce, line):
    rng = np.random.default_rng(7)
    X, y = _rows(rng.normal(size=(12, 3)), 4), _rows(rng.normal(size=12), 4)
    fn = getattr(models, loss)
    args = (np.ones(3), 0.1, X, y) if loss == "logreg" else (np.ones(3), X, y)
    n = len(args) - 2
    f = s2sad.data_parallel(fn, (n, n + 1), reduce)
    with pytest.raises(NotRowwiseError) as info:
        f(*args)
    problem = info.value.problems[0]
    assert problem.filename.endswith("parallel_models.py")
    assert problem.source_line.strip().startswith(line), str(info.value)
    assert "s2sad.grad" in str(info.value)


def test_mean_and_sum_mismatch_names_the_right_reduce():
    X, y = _rows(np.ones((8, 3)), 4), _rows(np.ones(8), 4)
    with pytest.raises(NotRowwiseError, match="reduce='sum'"):
        s2sad.data_parallel(models.squared_error_sum, (1, 2))(np.ones(3), X, y)


def test_bad_arguments_are_refused():
    X, y = np.ones((8, 3)), np.ones(8)
    f = s2sad.data_parallel(models.squared_error_sum, (1, 2), "sum")
    with pytest.raises(NonDifferentiableArgumentError, match="must be a Dask array"):
        f(np.ones(3), X, y)
    with pytest.raises(ValueError, match="batch arguments"):
        s2sad.data_parallel(models.squared_error_sum, (1, 2), "sum", argnums=1)
    with pytest.raises(ValueError, match="rows"):
        f(np.ones(3), _rows(X, 4), _rows(np.ones(6), 3))
    with pytest.raises(ValueError, match="reduce"):
        s2sad.data_parallel(models.squared_error_sum, (1, 2), "max")
    with pytest.raises(ValueError, match="batch_argnums"):  # data left as NumPy
        s2sad.data_parallel(models.squared_error_sum, 1, "sum")(
            np.ones(3), _rows(X, 4), y
        )
