"""Globals are read when the gradient runs, as Python reads them; what the compiler
specialised on is checked by a guard in the emitted code (issue 13, "never a wrong
gradient").  The model's globals live in tests/fixtures/calltime_model.py."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.errors import GlobalsChangedError
from s2sad.options import Options
from s2sad.testing import numerical_grad
from tests.fixtures import calltime_model as model

X = np.array([1.0, 2.0, 3.0])


def fd(fn, *args):
    return numerical_grad(fn, args)


# ---------------------------------------------------------------- data: read at call time


def test_a_rebound_scalar_global_is_read_when_the_gradient_runs(monkeypatch):
    g = s2sad.grad(model.scaled_sum)
    np.testing.assert_allclose(g(X), [2.0, 4.0, 6.0])
    monkeypatch.setattr(model, "SCALE", 20.0)
    np.testing.assert_allclose(g(X), [20.0, 40.0, 60.0])
    assert "calltime_model.SCALE" in g.source  # read through the module, visibly


def test_a_callee_reads_the_rebound_global_too(monkeypatch):
    g = s2sad.grad(model.calls_helper)
    np.testing.assert_allclose(g(X), [2.0, 4.0, 6.0])
    monkeypatch.setattr(model, "SCALE", 20.0)
    np.testing.assert_allclose(g(X), [20.0, 40.0, 60.0])


def test_rebound_arrays_like_weights_or_minibatches_are_read_when_it_runs(monkeypatch):
    g = s2sad.grad(model.uses_w)
    np.testing.assert_allclose(g(X), 2 * model.W * X)
    monkeypatch.setattr(model, "W", model.W * 10 - 1)
    np.testing.assert_allclose(g(X), 2 * model.W * X)
    np.testing.assert_allclose(g(X), fd(model.uses_w, X), rtol=1e-6)


def test_a_new_gradient_object_after_rebinding_is_right_too(monkeypatch):
    s2sad.grad(model.scaled_sum)(X)  # fills the on-disk cache
    monkeypatch.setattr(model, "SCALE", 5.0)
    np.testing.assert_allclose(s2sad.grad(model.scaled_sum)(X), 5.0 * X)


def test_a_rebound_closure_variable_is_read_when_it_runs():
    closed, rebind = model.make_closure(2.0)
    g = s2sad.grad(closed)
    np.testing.assert_allclose(g(X), 2.0 * X)
    rebind(7.0)
    np.testing.assert_allclose(g(X), 7.0 * X)
    assert "scale_cell.cell_contents" in g.source


# ---------------------------------------------------------------- specialised: guarded


def test_a_rebound_callee_is_compiled_again(monkeypatch):
    g = s2sad.grad(model.calls_helper)
    np.testing.assert_allclose(g(X), 2.0 * X)
    assert "calltime_model.helper is not helper" in g.source  # the guard, in plain view
    monkeypatch.setattr(model, "helper", model.other_helper)
    np.testing.assert_allclose(g(X), 3.0 * X)
    np.testing.assert_allclose(g(X), fd(model.calls_helper, X), rtol=1e-6)
    monkeypatch.undo()
    np.testing.assert_allclose(g(X), 2.0 * X)  # and back again


def test_jvp_and_hvp_compile_again_for_a_rebound_callee(monkeypatch):
    # calls_helper(x) = sum(helper(x) * x) / 2: helper = SCALE * x gives SCALE * x
    # as gradient and SCALE * v as Hessian-vector product; other_helper gives 3.
    f_jvp = s2sad.jvp(model.calls_helper)
    f_hvp = s2sad.hvp(model.calls_helper)
    jjvp = s2sad.jvp(s2sad.jvp(model.calls_helper))
    v = np.array([1.0, -2.0, 0.5])
    assert f_jvp(X, v)[1] == pytest.approx(2.0 * X @ v)
    np.testing.assert_allclose(f_hvp(X, v), 2.0 * v)
    assert jjvp(X, v, v)[1][1] == pytest.approx(2.0 * v @ v)
    monkeypatch.setattr(model, "helper", model.other_helper)
    assert f_jvp(X, v)[1] == pytest.approx(3.0 * X @ v)
    np.testing.assert_allclose(f_hvp(X, v), 3.0 * v)
    assert jjvp(X, v, v)[1][1] == pytest.approx(3.0 * v @ v)
    monkeypatch.undo()
    assert f_jvp(X, v)[1] == pytest.approx(2.0 * X @ v)  # and back again
    np.testing.assert_allclose(f_hvp(X, v), 2.0 * v)


class _NotNumpy:
    """A stand-in for another array module: its exp is not NumPy's."""

    @staticmethod
    def exp(x):
        return 2.0 * x


def test_a_rebound_module_alias_is_compiled_again(monkeypatch):
    g = s2sad.grad(model.via_xp_global)
    np.testing.assert_allclose(g(X), np.exp(X))
    monkeypatch.setattr(model, "xp", _NotNumpy())
    np.testing.assert_allclose(g(X), [2.0, 2.0, 2.0])


def test_the_guard_fails_before_any_work_and_names_the_global(monkeypatch):
    source, bindings = pipeline.compile_function(model.calls_helper, (0,))
    namespace = dict(bindings)
    exec(compile(source, "<emitted>", "exec"), namespace)
    fn = namespace["calls_helper_value_and_grad"]
    monkeypatch.setattr(model, "helper", model.other_helper)
    with pytest.raises(GlobalsChangedError, match="calltime_model.helper"):
        fn(X)


# ---------------------------------------------------------------- standalone modules


def _standalone(fn, tmp_path):
    source, _ = pipeline.compile_function(fn, (0,), Options(standalone=True))
    path = tmp_path / f"{fn.__name__}_grad.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, f"{fn.__name__}_value_and_grad"), source


def test_a_standalone_module_reads_data_globals_when_it_runs(tmp_path, monkeypatch):
    fn, source = _standalone(model.calls_helper, tmp_path)
    assert "import tests.fixtures.calltime_model as calltime_model" in source
    np.testing.assert_allclose(fn(X)[1][0], 2.0 * X)
    monkeypatch.setattr(model, "SCALE", 20.0)
    np.testing.assert_allclose(fn(X)[1][0], 20.0 * X)


def test_a_standalone_module_refuses_a_rebound_callee(tmp_path, monkeypatch):
    fn, _ = _standalone(model.calls_helper, tmp_path)
    monkeypatch.setattr(model, "helper", model.other_helper)
    with pytest.raises(GlobalsChangedError, match="run `s2sad compile` again"):
        fn(X)


# ---------------------------------------------------------------- decorators


@pytest.mark.parametrize("x", [np.array([0.5, 0.25]), np.array([1.0, 0.5])])
def test_a_functools_wraps_decorator_is_differentiated_not_dropped(x):
    for fn in (model.clipped_energy, model.calls_clipped):
        value, grad = s2sad.value_and_grad(fn)(x)
        assert value == fn(x)
        np.testing.assert_allclose(grad, fd(fn, x), atol=1e-7)


def test_a_decorator_without_functools_wraps_is_differentiated():
    x = np.array([1.0, 0.5])
    for fn in (model.tenfold, model.calls_tenfold):
        value, grad = s2sad.value_and_grad(fn)(x)
        assert value == fn(x)
        np.testing.assert_allclose(grad, fd(fn, x), rtol=1e-6)
    np.testing.assert_allclose(s2sad.grad(model.tenfold)(x), 20.0 * x)


def test_a_wrapper_with_star_args_is_refused_where_it_is_written():
    with pytest.raises(s2sad.errors.UnsupportedSyntaxError, match="calltime_model.py"):
        s2sad.grad(model.clipped_star_energy)(np.array([1.0, 0.5]))


def test_the_cache_key_follows_the_wrapper_not_the_wrapped_function():
    from s2sad import cache

    sources = cache.callee_sources(model.clipped_energy)
    assert "np.minimum(fn(x), 1.25)" in sources[0]
    assert any("x[0] + 2.0 * x[1] ** 2" in s for s in sources[1:])


# ---------------------------------------------------------------- NumPy by another name


@pytest.mark.parametrize(
    "fn", [model.via_np_alias, model.via_xp_global, model.via_local_alias]
)
def test_numpy_under_another_name_resolves_to_its_rules(fn):
    np.testing.assert_allclose(s2sad.grad(fn)(X), np.exp(X))
    value, tangent = s2sad.jvp(fn)(X, np.ones(3))
    np.testing.assert_allclose(tangent, np.sum(np.exp(X)))


def test_numpy_passed_as_an_argument_is_refused_where_it_is_called():
    with pytest.raises(s2sad.errors.UnsupportedSyntaxError, match="mod.exp"):
        s2sad.grad(model.via_module_argument)(X, np)
