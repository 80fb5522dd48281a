"""Forward mode: every corpus function, the emitted code, the API and its errors.

Every JVP is checked against a central difference along the same tangent:
(f(x + h t) - f(x - h t)) / 2h in float64.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import higher as forward
from s2sad import jacobians
from s2sad import pipeline
from s2sad.errors import (
    MissingRuleError,
    NonDifferentiableArgumentError,
    UnsupportedSyntaxError,
)
from s2sad.transforms.forward import assembly as forward_transform
from tests import forward_cases as fc
from tests.corpus import (  # noqa: F401
    cases_basic,
    cases_builtins,
    cases_calls,
    cases_combo,
    cases_comprehensions,
    cases_data,
    cases_generators,
    cases_local_forms,
    cases_loops,
    cases_mutation,
    cases_objects,
    cases_refuse_runtime,
    cases_runtime_callees,
    cases_unpacking,
)
from tests.corpus.registry import CASES

RNG = np.random.default_rng(3)
H = 1e-6


def random_like(x):
    if isinstance(x, dict):
        return {k: random_like(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(random_like(v) for v in x)
    if isinstance(x, np.ndarray):
        return RNG.normal(size=x.shape)
    return float(RNG.normal())


def axpy(x, h, t):
    if isinstance(x, dict):
        return {k: axpy(x[k], h, t[k]) for k in x}
    if isinstance(x, (list, tuple)):
        return type(x)(axpy(a, h, b) for a, b in zip(x, t))
    return x + h * t


def directional(f, args, nums, ts, h=H):
    """Central difference of f along tangents ``ts`` placed on arguments ``nums``."""
    plus, minus = list(copy.deepcopy(args)), list(copy.deepcopy(args))
    for i, t in zip(nums, ts):
        plus[i], minus[i] = axpy(args[i], h, t), axpy(args[i], -h, t)
    return difference(f(*plus), f(*minus), h)


def difference(a, b, h):
    if isinstance(a, dict):
        return {k: difference(a[k], b[k], h) for k in a}
    if isinstance(a, (list, tuple)):
        return type(a)(difference(x, y, h) for x, y in zip(a, b))
    return (np.asarray(a, dtype=float) - np.asarray(b, dtype=float)) / (2 * h)


def assert_tree_close(got, want, where="", rtol=1e-5, atol=1e-6):
    if isinstance(want, dict):
        assert set(got) == set(want), where
        for k in want:
            assert_tree_close(got[k], want[k], f"{where}[{k!r}]", rtol, atol)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for k, (g, w) in enumerate(zip(got, want)):
            assert_tree_close(g, w, f"{where}[{k}]", rtol, atol)
    else:
        assert np.shape(got) == np.shape(
            want
        ), f"{where}: {np.shape(got)} vs {np.shape(want)}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)


# ---------------------------------------------------------------- every syntax feature


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_corpus_function_in_forward_mode(case):
    nums = case.argnums if isinstance(case.argnums, tuple) else (case.argnums,)
    args = case.args(0)
    ts = tuple(random_like(args[i]) for i in nums)
    value, tangent = s2sad.jvp(case.fn, argnums=nums)(*case.args(0), ts)
    np.testing.assert_allclose(value, case.fn(*case.args(0)), rtol=1e-12)
    want = directional(case.fn, case.args(0), nums, ts)
    assert_tree_close(tangent, want, case.name)


# ---------------------------------------------------------------- the emitted code


def test_emitted_code_reads_like_the_source():
    f_jvp = s2sad.jvp(fc.tanh_layer)
    x, W = RNG.normal(size=3), RNG.normal(size=(3, 4))
    f_jvp(x, W, np.ones(3))
    body = f_jvp.source.split("def tanh_layer_jvp", 1)[1]
    assert body.splitlines()[1:4] == [
        "    # compiled for these globals: a rebound one makes s2sad compile again",
        "    if forward_cases.np is not np:",
        '        globals_changed("forward_cases.np")',
    ]
    assert body.splitlines()[4:] == [
        "    # tangent of: h = np.tanh(x @ W)",
        "    matmul = x @ W",
        "    t_matmul = t_x @ W",
        "    h = np.tanh(matmul)",
        "    t_h = t_matmul * (1.0 - h * h)",
        "    # tangent of: return np.sum(h * h)",
        "    mul = h * h",
        "    t_mul = t_h * h + t_h * h",
        "    out = np.sum(mul)",
        "    t_out = np.sum(t_mul)",
        "    return (out, finish(t_out, out))",
    ]
    assert "from s2sad.runtime.tangents import finish" in f_jvp.source
    assert f_jvp.path.endswith(".py")


def test_loop_carried_tangent_starts_as_none_and_is_filled_once_needed():
    source, _ = pipeline.compile_function(cases_loops.rnn_loop, (1,), mode="forward")
    assert "t_h = None" in source  # h0 has no tangent: the first iteration's is zero
    assert "t_h = or_zeros(t_h, h)" in source
    assert "t_W @ h + W @ t_h" in source


def test_emitted_module_is_deterministic_and_standalone():
    options = forward_transform.ForwardOptions(standalone=True)
    first, _ = pipeline.compile_function(fc.with_dict, (0,), options, mode="forward")
    second, _ = pipeline.compile_function(fc.with_dict, (0,), options, mode="forward")
    assert first == second
    assert "Names bound by s2sad" not in first  # everything is imported
    namespace: dict = {}
    exec(compile(first, "<jvp>", "exec"), namespace)  # noqa: S102 (our own output)
    params = {"W": RNG.normal(size=(2, 3)), "b": RNG.normal(size=2)}
    x = RNG.normal(size=3)
    t = random_like(params)
    _, tangent = namespace["with_dict_jvp"](params, x, t)
    assert_tree_close(tangent, directional(fc.with_dict, [params, x], (0,), (t,)))


# ---------------------------------------------------------------- API


def test_argnums_tuple_pytrees_and_output_structure():
    params = {"W": RNG.normal(size=(2, 3)), "b": RNG.normal(size=2)}
    x = RNG.normal(size=3)
    ts = (random_like(params), random_like(x))
    _, tangent = s2sad.jvp(fc.with_dict, argnums=(0, 1))(params, x, ts)
    assert set(tangent) == {"h", "s"}
    assert_tree_close(tangent, directional(fc.with_dict, [params, x], (0, 1), ts))


def test_bare_decorator_and_vector_output():
    f_jvp = s2sad.jvp(fc.vector_out)
    x, A = RNG.normal(size=3), RNG.normal(size=(4, 3))
    t = RNG.normal(size=3)
    _, tangent = f_jvp(x, A, t)
    assert tangent.shape == (4,)
    assert_tree_close(tangent, directional(fc.vector_out, [x, A], (0,), (t,)))
    decorated = s2sad.jvp(argnums=1)(fc.vector_out)
    tA = RNG.normal(size=(4, 3))
    assert_tree_close(
        decorated(x, A, tA)[1], directional(fc.vector_out, [x, A], (1,), (tA,))
    )


def test_float32_stays_float32_and_none_tangent_is_zero():
    x = RNG.normal(size=3).astype(np.float32)
    W = RNG.normal(size=(3, 4)).astype(np.float32)
    _, tangent = s2sad.jvp(fc.tanh_layer)(x, W, np.ones(3, np.float32))
    assert np.asarray(tangent).dtype == np.float32
    assert s2sad.jvp(fc.tanh_layer)(x, W, None)[1] == 0


def test_bad_tangents_and_arguments_are_refused():
    x, W = RNG.normal(size=3), RNG.normal(size=(3, 4))
    with pytest.raises(ValueError, match="shape"):
        s2sad.jvp(fc.tanh_layer)(x, W, np.ones(4))
    with pytest.raises(ValueError, match="tuple of 2"):
        s2sad.jvp(fc.tanh_layer, argnums=(0, 1))(x, W, np.ones(3))
    with pytest.raises(NonDifferentiableArgumentError):
        s2sad.jvp(cases_basic.add_mul)(np.arange(3), x, np.ones(3))
    with pytest.raises(TypeError, match="keyword"):
        s2sad.jvp(1)


def test_second_call_reuses_the_compiled_module(monkeypatch):
    f_jvp = s2sad.jvp(fc.moments)
    x = RNG.normal(size=5)
    f_jvp(x, np.ones(5))

    def refuse(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(pipeline, "compile_function", refuse)
    f_jvp(x, np.ones(5))  # in-process entry
    s2sad.jvp(fc.moments)(x, np.ones(5))  # a new object: the on-disk cache


# ---------------------------------------------------------------- mutation and containers


def test_item_assignment_into_a_fresh_copy_leaves_the_argument_tangent_alone():
    x = RNG.normal(size=3)
    t = RNG.normal(size=3)
    t_before = t.copy()
    _, tangent = s2sad.jvp(fc.fresh_copy_then_mutate)(x, t)
    np.testing.assert_array_equal(t, t_before)
    assert_tree_close(tangent, directional(fc.fresh_copy_then_mutate, [x], (0,), (t,)))


def test_pop_and_lists_with_constant_entries():
    x, c = RNG.normal(size=3), RNG.normal(size=2)
    for f, args in [(fc.stack_with_pops, [x]), (fc.holey_list, [x, c])]:
        t = RNG.normal(size=3)
        assert_tree_close(s2sad.jvp(f)(*args, t)[1], directional(f, args, (0,), (t,)))


def test_recursion_gets_a_jvp_twin():
    x = RNG.normal(size=3)
    t = RNG.normal(size=3)
    f_jvp = s2sad.jvp(fc.uses_recursion)
    assert_tree_close(f_jvp(x, t)[1], directional(fc.uses_recursion, [x], (0,), (t,)))
    assert "def recursive_power_jvp(" in f_jvp.source


# ---------------------------------------------------------------- errors


def test_in_place_change_of_an_argument_works_on_a_copy():
    x = np.array([3.0, 2.0, 5.0])
    value, tangent = s2sad.jvp(fc.mutates_argument)(x, np.ones(3))
    assert value == 8.0 and tangent == 2.0  # x[0] no longer counts
    np.testing.assert_array_equal(x, [1.0, 2.0, 5.0])  # as Python leaves it


def test_in_place_change_of_a_new_array_in_a_callee_works_on_a_copy():
    def outer(x):  # x * 1.0: nobody else sees the change
        return fc.mutates_argument(x * 1.0)

    value, tangent = s2sad.jvp(outer)(np.array([3.0, 2.0, 5.0]), np.ones(3))
    assert value == 8.0 and tangent == 2.0


def test_in_place_change_of_an_argument_in_a_callee_is_refused():
    def outer(x):  # the caller's x would change
        return fc.mutates_argument(x) + np.sum(x)

    with pytest.raises(
        UnsupportedSyntaxError, match="in-place change of the argument 'x'"
    ):
        s2sad.jvp(outer)(np.ones(3), np.ones(3))


def test_active_keyword_argument_is_refused_with_location():
    with pytest.raises(UnsupportedSyntaxError) as info:
        s2sad.jvp(fc.keyword_active)(np.ones(3), np.ones(3))
    assert "passed as keyword argument 'min'" in str(info.value)
    assert info.value.filename.endswith("forward_cases.py")


def test_untracked_in_place_method_is_refused():
    with pytest.raises(MissingRuleError, match=r"'\.extend\(\)'"):
        s2sad.jvp(fc.extend_list)(np.ones(3), np.ones(3))


def test_function_without_source_or_rule_names_the_missing_rule():
    with pytest.raises(MissingRuleError) as info:
        s2sad.jvp(fc.calls_opaque)(np.ones(3), np.ones(3))
    message = str(info.value)
    assert "forward_cases.py" in message and "OPAQUE(x)" in message


# ---------------------------------------------------------------- forward over forward


def test_jvp_of_a_jvp_is_a_second_directional_derivative():
    """d/ds [J(x + s u) v] = the second derivative along u and v (forward over forward)."""
    x, W = RNG.normal(size=3), RNG.normal(size=(3, 4))
    u, v = RNG.normal(size=3), RNG.normal(size=3)
    inner = s2sad.jvp(fc.tanh_layer)
    outer = s2sad.jvp(inner)
    (_, first), (d_value, second) = outer(x, W, v, u)
    np.testing.assert_allclose(first, inner(x, W, v)[1])
    np.testing.assert_allclose(d_value, inner(x, W, u)[1])
    want = (inner(x + 1e-5 * u, W, v)[1] - inner(x - 1e-5 * u, W, v)[1]) / 2e-5
    np.testing.assert_allclose(second, want, rtol=1e-6)
    assert "def tanh_layer_jvp_jvp(" in outer.source


def test_the_public_names_are_exported():
    assert {"jvp", "hvp", "hessian", "jacobian"} <= set(s2sad.__all__)
    assert s2sad.jvp is forward.jvp and s2sad.hessian is jacobians.hessian


def test_readme_forward_excerpt_is_current():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Forward mode and higher order", 1)[1]
    excerpt = section.split("verbatim for `tanh_layer`", 1)[1]
    code = excerpt.split("```python", 1)[1].split("```", 1)[0]
    f_jvp = s2sad.jvp(fc.tanh_layer)
    f_jvp(np.ones(3), np.ones((3, 4)), np.ones(3))
    emitted = f_jvp.source.splitlines()
    for line in code.strip().splitlines():
        assert line in emitted, line


def test_a_user_tangent_rule_is_used_and_checkable():
    from s2sad.runtime import tangents

    @tangents.tangent(fc.SQUARE)
    def jvp_square(t, ans, x):
        return 2.0 * x * t

    x, t = RNG.normal(size=4), RNG.normal(size=4)
    np.testing.assert_allclose(tangents.pushforward(fc.SQUARE, 0, t, x), 2 * x * t)
    f_jvp = s2sad.jvp(fc.square_all)
    _, tangent = f_jvp(x, t)
    np.testing.assert_allclose(tangent, np.sum(3 * x * x * t))
    assert "t_x * (2.0 * x)" not in f_jvp.source and "2.0 * x * t_x" in f_jvp.source
