"""Argument unpacking, callees with *args/**kwargs, and what is refused only where
it runs: refusals (located, with a hint), run-time checks of specialisations,
and the emitted code (the gradients are checked in tests/corpus)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.errors import UnsupportedSyntaxError
from tests.corpus import cases_refuse_runtime as rr
from tests.corpus import cases_unpacking as cu
from tests.corpus.fd import assert_close_tree, numerical_grad

RNG = np.random.default_rng(5)


def _line_of(fn, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


# ---------------------------------------------------------------- refused where it runs


@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_a_refused_statement_raises_when_its_branch_runs(transform):
    x = RNG.normal(size=4)
    with pytest.raises(UnsupportedSyntaxError) as info:
        if transform == "grad":
            s2sad.grad(rr.try_in_branch_not_taken)(x, "slow")
        else:
            s2sad.jvp(rr.try_in_branch_not_taken)(x, "slow", np.ones(4))
    (problem,) = info.value.problems
    assert problem.filename == rr.__file__
    assert problem.line == _line_of(rr.try_in_branch_not_taken, "try:")
    assert "'try' statement" in problem.message
    assert problem.hint.startswith("move error handling outside")


def test_the_emitted_code_raises_at_the_refused_statement():
    source, _ = pipeline.compile_function(rr.try_in_branch_not_taken, (0,))
    assert "raise refused(" in source
    assert "from s2sad.runtime.support import" in source


def test_a_refusal_in_a_callee_branch_raises_when_that_branch_runs():
    def strict(x):
        return rr._clip_loss(x, True)

    with pytest.raises(UnsupportedSyntaxError) as info:
        s2sad.grad(strict)(RNG.normal(size=(3, 2)))
    assert info.value.problems[0].line == _line_of(rr._clip_loss, "assert {1, 2}")
    assert "set literal" in info.value.problems[0].message


def _with_as(x):
    with np.errstate(divide="ignore") as state:
        y = np.log(x) * len(str(state))
    return np.sum(y)


def _with_open(x):
    with open(__file__) as f:
        n = len(f.read())
    return np.sum(x) * n


@pytest.mark.parametrize("fn", [_with_as, _with_open])
def test_other_context_managers_stay_refused_where_they_are(fn):
    with pytest.raises(UnsupportedSyntaxError) as info:
        s2sad.grad(fn)(np.ones(3) + 1.0)
    (problem,) = info.value.problems
    assert problem.line == _line_of(fn, "with ")
    assert "'with' statement" in problem.message
    assert "np.errstate" in problem.hint


def test_a_neutral_context_is_entered_and_left_in_the_forward_computation():
    before = list(warnings.filters)
    x = RNG.normal(size=(3, 3)) * 0.3
    s2sad.grad(rr.catch_warnings_in_loop)(x)
    assert warnings.filters == before  # catch_warnings restored the filters
    source, _ = pipeline.compile_function(rr.catch_warnings_in_loop, (0,))
    assert "context_0.__enter__()" in source
    assert "context_0.__exit__(None, None, None)" in source


# ---------------------------------------------------------------- unpacking


def _star_local_into_fixed(x, w):
    parts = [x]
    parts.append(w)  # a length s2sad cannot know when it compiles
    return np.sum(cu.layer_norm(*parts, 1.0))


def _star_differentiated_into_numpy(x):
    parts = [x]
    parts.append(x * 2.0)
    return np.sum(np.maximum(*parts))


def _entry_with_star_args(*xs):
    return np.sum(xs[0])


def test_a_star_of_unknown_length_into_named_parameters_is_refused():
    with pytest.raises(UnsupportedSyntaxError) as info:
        s2sad.grad(_star_local_into_fixed)(np.ones(3), np.ones(3))
    (problem,) = info.value.problems
    assert problem.line == _line_of(_star_local_into_fixed, "*parts")
    assert "star-argument of unknown length" in problem.message
    assert "*args" in problem.hint


@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_a_differentiated_value_unpacked_into_numpy_is_refused(transform):
    with pytest.raises(UnsupportedSyntaxError) as info:
        if transform == "grad":
            s2sad.grad(_star_differentiated_into_numpy)(np.ones(3))
        else:
            s2sad.jvp(_star_differentiated_into_numpy)(np.ones(3), np.ones(3))
    (problem,) = info.value.problems
    assert problem.line == _line_of(_star_differentiated_into_numpy, "*parts")
    assert "unpacked with '*' or '**'" in problem.message


def test_the_differentiated_function_may_not_take_star_args():
    with pytest.raises(UnsupportedSyntaxError) as info:
        s2sad.grad(_entry_with_star_args)(np.ones(3))
    assert "'*args' parameter" in info.value.problems[0].message
    assert "may take *args" in info.value.problems[0].hint


def _check(fn, args, argnums=0):
    grads = s2sad.grad(fn, argnums=argnums)(*args)
    assert_close_tree(grads, numerical_grad(fn, args, argnums), where=fn.__name__)


def test_a_specialised_length_is_checked_and_compiled_again():
    dfn = s2sad.grad(cu.zip_star_pairs)
    for n in (2, 3, 2):
        pairs = [[RNG.normal(size=(3, 2)), RNG.normal(size=(3, 2))] for _ in range(n)]
        assert_close_tree(
            dfn(pairs), numerical_grad(cu.zip_star_pairs, [pairs], 0), where=str(n)
        )
    assert "len(pairs) differs from the call" in dfn.source


def test_a_specialised_length_is_checked_in_forward_mode_too():
    dfn = s2sad.jvp(cu.zip_star_pairs)
    for n in (2, 3):
        pairs = [[RNG.normal(size=(3, 2)), RNG.normal(size=(3, 2))] for _ in range(n)]
        _, got = dfn(pairs, pairs)
        want = np.sum(
            [
                np.sum(
                    numerical_grad(cu.zip_star_pairs, [pairs], 0)[i][j] * pairs[i][j]
                )
                for i in range(n)
                for j in range(2)
            ]
        )
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_unpacked_dicts_into_numpy_pass_as_they_are():
    x = RNG.normal(size=(3, 4))
    for opts in ({"axis": 0, "keepdims": True}, {"axis": 1}):
        _check(cu.dict_param_into_numpy, [x, opts])


def test_keys_a_callee_does_not_take_are_refused_as_python_does():
    x = RNG.normal(size=(3, 4))
    params = {"g": np.ones(4), "b": np.zeros(4), "scale": 2.0}
    with pytest.raises(TypeError):
        cu.dict_param_unpacked(x, params)
    block = cu._PARAMS(RNG)
    block["ln_1"]["scale"] = 2.0
    with pytest.raises(TypeError, match="reads only g, b, eps"):
        s2sad.grad(cu.picogpt_style_blocks)(x, [block])


def test_a_callee_with_star_args_not_differentiated_is_called_as_written():
    def f(x, y):
        return cu.total_energy(*[x], scale=2.0) + cu.total_energy(y, y)

    x, y = RNG.normal(size=3), RNG.normal(size=3)
    _check(f, [x, y])
    source, _ = pipeline.compile_function(f, (0,))
    assert (
        "total_energy(y, y, scale=1.0)" in source.replace("\n", " ").replace("  ", "")
        or "total_energy(*" in source
    )


def test_differentiated_values_passed_by_keyword_to_the_entry():
    x, w = RNG.normal(size=3), RNG.normal(size=3)
    got = s2sad.grad(cu.keyword_differentiated, argnums=(0, 1))(x, w=w)
    want = s2sad.grad(cu.keyword_differentiated, argnums=(0, 1))(x, w)
    assert_close_tree(got, want)


def _zip_star_of_another_length(x):
    parts = [np.split(p, 2) for p in np.split(x, 4)]  # four lists, three names
    return np.sum(np.stack([a * b * c for a, b, c in zip(*parts)]))


@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_zip_star_over_a_local_list_checks_the_length_its_loop_target_gives(
    transform,
):
    x = np.arange(8.0)
    with pytest.raises(ValueError):  # what Python raises: too many values to unpack
        _zip_star_of_another_length(x)
    line = _line_of(_zip_star_of_another_length, "zip(*parts)")
    with pytest.raises(ValueError, match=rf"test_unpacking.py:{line}: zip\(\*parts\)"):
        if transform == "grad":
            s2sad.grad(_zip_star_of_another_length)(x)
        else:
            s2sad.jvp(_zip_star_of_another_length, (x,), (np.ones(8),))


def _forward_kwargs(x, **kw):
    return _takes_kwargs(x, **kw)


def _takes_kwargs(x, **kw):
    return x * kw["scale"]


def _forwarding_entry(x, opts):
    return np.sum(_forward_kwargs(x, **opts))


def test_kwargs_forwarded_whole_refuse_a_key_naming_a_parameter_as_python_does():
    x = np.arange(3.0)
    good = s2sad.grad(_forwarding_entry)(x, {"scale": 2.0})
    np.testing.assert_allclose(good, [2.0, 2.0, 2.0])
    with pytest.raises(TypeError):
        _forwarding_entry(x, {"scale": 2.0, "x": 1.0})
    with pytest.raises(TypeError, match="multiple values"):
        s2sad.grad(_forwarding_entry)(x, {"scale": 2.0, "x": 1.0})
