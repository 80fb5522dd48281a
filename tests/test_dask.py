"""Gradients over Dask data with NumPy parameters, on a 2-worker LocalCluster.

Each gradient is compared with the NumPy result on the same rows (the NumPy
path's gradients are checked against finite differences elsewhere; the GP's
is checked here too).  A counter around every ``dask.compute`` fails a test
when a call computes more than once, or when what it brings to the driver is
larger than the gradients (a pull of the data, Dask's NumPy fallback included).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

dask = pytest.importorskip("dask", reason="dask is not installed (extra 'dask')")
distributed = pytest.importorskip(
    "dask.distributed", reason="dask.distributed is not installed (extra 'dask')"
)
da = pytest.importorskip("dask.array", reason="dask.array is not installed")

import s2sad
from s2sad.errors import ForeignArrayError, NonDifferentiableArgumentError
from s2sad.runtime import backend
from tests.fixtures import dask_models as models


def _chunked(a, parts=2):
    a = np.asarray(a)
    return da.from_array(a, chunks=(a.shape[0] // parts,) + a.shape[1:])


def _params(name, rng):
    n = rng.normal
    return {
        "mlp": (n(size=(6, 5)), n(size=5), n(size=(5, 1)), n(size=1)),
        "logreg": (n(size=6), 0.3),
        "rnn": (n(size=(3, 5)), n(size=(5, 5)), n(size=5), n(size=(5, 4)), n(size=4)),
        "gp": (np.float64(0.2), np.float64(-1.0)),
        "exp_sum": (n(size=6),),
        "filled": (n(size=6),),
    }[name.replace("rnn_zeros", "rnn")]


def _data(name, rng, rows):
    X = rng.normal(size=(rows, 6))
    if name.startswith("rnn"):
        return X, rng.integers(0, 4, rows)
    if name == "logreg":
        return X, (rng.normal(size=rows) > 0).astype(float)
    return X, rng.normal(size=rows)


@pytest.mark.parametrize("rows", [12, 40])
@pytest.mark.parametrize(
    "name", ["mlp", "logreg", "rnn", "gp", "rnn_zeros", "exp_sum", "filled"]
)
def test_dask_rows_match_numpy(client, computes, name, rows):
    rng = np.random.default_rng(rows)
    params = _params(name, rng)
    X, y = _data(name, rng, rows)
    f = s2sad.value_and_grad(getattr(models, name), argnums=tuple(range(len(params))))
    want_value, want = f(*params, X, y)
    computes.calls = 0
    value, got = f(*params, _chunked(X), _chunked(y))
    assert computes.calls == 1  # value and every gradient in one compute
    assert computes.largest <= max(np.size(p) for p in params)  # no data pulled
    assert value == pytest.approx(want_value, rel=1e-12)
    for g, w, p in zip(got, want, params):
        assert type(g) is type(p)
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_gp_numpy_gradient_matches_finite_differences():
    """The anchor of the GP comparison: its NumPy gradient is right."""
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(10, 6)), rng.normal(size=10)
    p = np.array([0.2, -1.0])
    g = s2sad.grad(models.gp, argnums=(0, 1))(p[0], p[1], X, y)
    eps = 1e-6
    for i in range(2):
        up, down = p.copy(), p.copy()
        up[i] += eps
        down[i] -= eps
        fd = (models.gp(*up, X, y) - models.gp(*down, X, y)) / (2 * eps)
        assert g[i] == pytest.approx(fd, rel=1e-6)


def test_gp_forward_uses_numpys_lower_cholesky(client, computes):
    """Dask's cholesky returns the upper factor; inside s2sad it means NumPy's."""
    rng = np.random.default_rng(5)
    X, y = rng.normal(size=(12, 6)), rng.normal(size=12)
    f = s2sad.value_and_grad(models.gp, argnums=(0, 1))
    want, _ = f(0.2, -1.0, X, y)
    value, _ = f(0.2, -1.0, _chunked(X), _chunked(y))
    assert value == pytest.approx(want, rel=1e-12)
    assert value == pytest.approx(models.gp(0.2, -1.0, X, y), rel=1e-12)


def test_lazy_gradients_compute_nothing(client, computes):
    rng = np.random.default_rng(7)
    params = _params("mlp", rng)
    X, y = _data("mlp", rng, 40)
    f = s2sad.grad(models.mlp, argnums=(0, 1, 2, 3))
    want = f(*params, X, y)
    with s2sad.lazy_gradients():
        got = f(*params, _chunked(X), _chunked(y))
    assert computes.calls == 0
    assert all(isinstance(g, da.Array) for g in got)
    for g, w in zip(dask.compute(*got), want):
        np.testing.assert_allclose(g, w, rtol=1e-10)


def test_gradient_of_a_dask_argument_stays_lazy(client, computes):
    rng = np.random.default_rng(8)
    w, b = _params("logreg", rng)
    X, y = _data("logreg", rng, 40)
    f = s2sad.grad(models.logreg, argnums=(0, 2))
    want_w, want_X = f(w, b, X, y)
    got_w, got_X = f(w, b, _chunked(X), _chunked(y))
    assert computes.calls == 1 and computes.largest <= w.size
    assert isinstance(got_w, np.ndarray) and isinstance(got_X, da.Array)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-10)
    np.testing.assert_allclose(got_X.compute(), want_X, rtol=1e-10)


def test_pull_to_the_driver_is_refused_naming_the_line(client):
    rng = np.random.default_rng(9)
    X, y = rng.normal(size=(12, 6)), rng.integers(0, 6, 12)
    w = rng.normal(size=6)
    f = s2sad.grad(models.picked)
    want = f(w, X, y)
    with pytest.raises(ForeignArrayError) as info:
        f(w, _chunked(X), _chunked(y))
    message = str(info.value)
    assert "take_along_axis" in message and "dask_models.py" in message
    assert "allow_driver_pulls" in message
    with s2sad.allow_driver_pulls(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        got = f(w, _chunked(X), _chunked(y))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_numpy_path_is_not_guarded():
    """Outside a call over Dask arrays, Dask behaves as Dask (upper factor)."""
    a = np.array([[4.0, 2.0], [2.0, 3.0]])
    upper = np.linalg.cholesky(da.from_array(a)).compute()
    np.testing.assert_allclose(upper, np.linalg.cholesky(a).T)


def test_integer_dask_argument_is_refused(client):
    X = _chunked(np.ones((4, 6), dtype=np.int64))
    with pytest.raises(NonDifferentiableArgumentError, match="Dask array of dtype"):
        s2sad.grad(models.logreg, argnums=2)(np.ones(6), 0.0, X, _chunked(np.ones(4)))


def _graph_bytes(name, rows):
    """Pickled size of the lazy gradient graph over generated (not embedded) rows."""
    import pickle

    rng = da.random.default_rng(0)
    X = rng.normal(size=(rows, 6), chunks=(rows // 2, 6))
    if name.startswith("rnn"):
        y = rng.integers(0, 4, size=rows, chunks=rows // 2)
    else:
        y = rng.normal(size=rows, chunks=rows // 2)
    params = _params(name, np.random.default_rng(1))
    f = s2sad.grad(getattr(models, name), argnums=tuple(range(len(params))))
    with s2sad.lazy_gradients():
        grads = f(*params, X, y)
    graph = {}
    for g in grads:
        if isinstance(g, da.Array):
            graph.update(dict(g.__dask_graph__()))
    return len(pickle.dumps(graph))


@pytest.mark.parametrize("name", ["mlp", "logreg", "rnn"])
def test_graph_does_not_grow_with_rows(name):
    """No data-sized NumPy array is made on the driver and shipped in the graph
    (a NumPy cotangent of 4000 rows would add at least 32 kB)."""
    small, large = _graph_bytes(name, 400), _graph_bytes(name, 4000)
    assert large < small + 2000, (small, large)


@pytest.mark.parametrize("transform", ["jvp", "hvp", "vjp", "hessian"])
def test_forward_and_higher_transforms_refuse_dask_data(transform):
    """Only grad / value_and_grad run guarded; the others refuse, not guess."""
    X, y = _chunked(np.ones((4, 6))), _chunked(np.ones(4))
    w, b = np.ones(6), 0.5
    f = models.logreg
    refused = (NonDifferentiableArgumentError, ForeignArrayError)
    with pytest.raises(refused, match="Dask array"):
        if transform == "jvp":
            s2sad.jvp(f)(w, b, X, y, np.ones(6))
        elif transform == "hvp":
            s2sad.hvp(f)(w, b, X, y, np.ones(6))
        elif transform == "vjp":
            s2sad.vjp(f, w, b, X, y)[1](1.0)
        else:
            s2sad.hessian(f)(w, b, X, y)


def test_dask_data_in_a_closure_is_refused(client):
    """Data reached through a closure bypasses the argument check: the hooks
    still refuse it where it meets gradient code (here Dask's upper cholesky
    would otherwise give a silently wrong GP likelihood)."""
    rng = np.random.default_rng(11)
    X, y = _chunked(rng.normal(size=(12, 6))), _chunked(rng.normal(size=12))
    f = s2sad.grad(lambda ell: models.gp(ell, -1.0, X, y))
    with pytest.raises(ForeignArrayError, match="outside the Dask guard"):
        f(0.2)


def test_dict_params_float32_and_aux(client, computes):
    """Pytree parameters keep their dtypes; the value and aux come back computed
    in the same single compute."""
    rng = np.random.default_rng(12)
    X, y = rng.normal(size=(20, 3)), rng.normal(size=20)
    p = {"W": rng.normal(size=(3, 2)).astype(np.float32), "b": rng.normal(size=2)}
    f = s2sad.value_and_grad(models.with_aux, has_aux=True)
    (want, want_aux), want_g = f(p, X, y)
    (value, aux), g = f(p, _chunked(X), _chunked(y))
    assert computes.calls == 1
    assert value == pytest.approx(want, rel=1e-12)
    assert aux["mae"] == pytest.approx(want_aux["mae"], rel=1e-12)
    for k, param in p.items():
        assert g[k].dtype == param.dtype
        np.testing.assert_allclose(g[k], want_g[k], rtol=1e-6 if k == "W" else 1e-12)


MATMUL_SHAPES = [
    ((5, 4), (4, 3)),
    ((4,), (4, 3)),
    ((5, 4), (4,)),
    ((2, 5, 4), (4, 3)),
    ((5, 4), (2, 4, 3)),
    ((2, 1, 5, 4), (3, 4, 2)),
]


@pytest.mark.parametrize(("xs", "ys"), MATMUL_SHAPES)
def test_matmul_cotangents_in_dask_match_finite_differences(xs, ys):
    """The Dask matmul rule (1-d operands, broadcast batches) against central
    differences of <g, x @ y>, run as in a call (inside the guard), computed on
    the synchronous scheduler."""
    from s2sad.runtime.contractions import d_matmul

    rng = np.random.default_rng(len(xs) * 10 + len(ys))
    x, y = rng.normal(size=xs), rng.normal(size=ys)
    g = rng.normal(size=np.matmul(x, y).shape)
    with dask.config.set(scheduler="synchronous"), backend.guard("dask"):
        gx, gy = d_matmul(da.from_array(g), None, da.from_array(x), y)
    gx, gy = dask.compute(gx, gy, scheduler="synchronous")
    for arg, got in ((0, gx), (1, gy)):
        want = np.zeros_like((x, y)[arg])
        for i in np.ndindex(want.shape):
            up, down = [x.copy(), y.copy()], [x.copy(), y.copy()]
            up[arg][i] += 1e-6
            down[arg][i] -= 1e-6
            want[i] = np.sum(g * (up[0] @ up[1])) - np.sum(g * (down[0] @ down[1]))
            want[i] /= 2e-6
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    ("shape", "offset", "axis1", "axis2"),
    [
        ((4, 4), 0, 0, 1),
        ((4, 6), 1, 0, 1),
        ((6, 4), -2, 0, 1),
        ((3, 4, 5), 0, 1, 2),
        ((4, 3, 5), 1, 0, 2),
        ((5, 3, 4), -1, 2, 0),
    ],
)
def test_diagonal_cotangent_in_dask_matches_numpy(shape, offset, axis1, axis2):
    """The Dask form of np.diagonal's cotangent equals the NumPy rule's, exactly."""
    from s2sad.runtime.shapes import _place_diagonal

    a = np.zeros(shape)
    g = np.random.default_rng(1).normal(size=np.diagonal(a, offset, axis1, axis2).shape)
    want = _place_diagonal(g, shape, offset, axis1, axis2)
    with backend.guard("dask"):  # as in a call: Dask's hooks on
        got = _place_diagonal(da.from_array(g), shape, offset, axis1, axis2)
    got = got.compute(scheduler="synchronous")
    np.testing.assert_array_equal(got, want)


def test_runtime_functions_on_dask_outside_gradients_stay_dask(client):
    """After a gradient call installed the hooks, the user's own evaluation of a
    model over Dask rows (runtime functions included) is not refused."""
    rng = np.random.default_rng(13)
    params = _params("rnn", rng)
    X, y = _data("rnn", rng, 12)
    s2sad.grad(models.rnn)(*params, _chunked(X), _chunked(y))  # hooks on
    value = models.rnn(*params, _chunked(X), _chunked(y)).compute()
    assert value == pytest.approx(models.rnn(*params, X, y), rel=1e-12)


@pytest.mark.parametrize("name", ["rnn_zeros", "filled", "gp"])
def test_data_sized_creations_are_made_in_dask(client, computes, monkeypatch, name):
    """np.zeros((X.shape[0], h)), np.ones, np.full, np.eye(X.shape[0]) in the
    loss: made in Dask, chunked like the rows (never on the driver); a
    parameter-sized np.zeros stays NumPy."""
    made = []
    for fn in ("zeros", "ones", "full", "eye"):
        real = getattr(da, fn)

        def spy(shape, *args, _real=real, **kwargs):
            made.append(shape)
            return _real(shape, *args, **kwargs)

        monkeypatch.setattr(da, fn, spy)
    rng = np.random.default_rng(13)
    params = _params(name, rng)
    X, y = _data(name, rng, 16)
    f = s2sad.grad(getattr(models, name), argnums=tuple(range(len(params))))
    want = f(*params, X, y)
    assert made == []  # the NumPy path: NumPy's own creations
    computes.calls = 0
    got = f(*params, _chunked(X, 4), _chunked(y, 4))
    assert computes.calls == 1 and computes.largest <= max(map(np.size, params))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    sizes = [s if isinstance(s, int) else s[0] for s in made]
    assert made and set(sizes) == {16}, made  # rows only: w's zeros stayed NumPy


def test_data_sized_creation_keeps_the_graph_small(client):
    """The RNN with a zero state: the lazy graph does not grow with the rows."""
    small, large = _graph_bytes("rnn_zeros", 400), _graph_bytes("rnn_zeros", 4000)
    assert large < small + 2000, (small, large)


def test_float_pull_in_the_users_code_names_the_users_line(client):
    import inspect

    lines, first = inspect.getsourcelines(models.pulled_max)
    line = first + next(i for i, text in enumerate(lines) if "float(" in text)
    w, X = np.ones(6) * 0.1, _chunked(np.ones((8, 6)))
    with pytest.raises(ForeignArrayError) as info:
        s2sad.grad(models.pulled_max)(w, X, _chunked(np.ones(8)))
    message = str(info.value)
    assert "__float__" in message and "emitted code" not in message
    assert f"forward pass of {models.__file__}:{line}: s = float(np.max(z))" in message
    assert message.count(f"{models.__file__}:{line}") == 1


def test_rnn_over_time_steps_runs_the_loop_as_written(client, computes):
    """``for t in range(T): h = np.tanh(xs[:, t, :] @ Wx + h @ Wh)`` from a zero
    state over Dask rows: NumPy's gradients, one compute, nothing pulled; NumPy's
    code hoists and peels the loop, the Dask call's code runs it as written."""
    from tests.backends.test_loops import rnn

    rng = np.random.default_rng(14)
    Wx, Wh = rng.normal(size=(3, 4)) * 0.4, rng.normal(size=(4, 4)) * 0.4
    xs = rng.normal(size=(12, 5, 3))
    f = s2sad.grad(rnn, argnums=(0, 1))
    want = f(Wx, Wh, xs)
    assert "stepwise_matmul" in f.source and "matmul_zeros" in f.source
    computes.calls = 0
    got = f(Wx, Wh, da.from_array(xs, chunks=(4, 5, 3)))
    assert "stepwise_matmul" not in f.source and "matmul_zeros" not in f.source
    assert computes.calls == 1 and computes.largest <= Wh.size
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
