"""Second derivatives: forward mode over the emitted gradient modules.

Checked two ways: against central differences of the first derivative (which
s2sad computes in reverse mode), and against closed forms.
"""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.errors import MissingRuleError, NonScalarOutputError
from s2sad.higher import grad_of_gradient
from tests import forward_cases as fc
from tests.corpus import (  # noqa: F401
    cases_basic,
    cases_calls,
    cases_combo,
    cases_comprehensions,
    cases_data,
    cases_generators,
    cases_local_forms,
    cases_loops,
    cases_mutation,
    cases_refuse_runtime,
    cases_runtime_callees,
    cases_unpacking,
)
from tests.corpus.registry import CASES
from tests.test_forward import assert_tree_close, directional, random_like

RNG = np.random.default_rng(11)

#: corpus functions whose gradient module exercises each construct forward mode must
#: handle: tapes in loops, branches, early exits, calls (forward/backward pairs),
#: recursion, closures, containers, item assignment, while, append and pop
SECOND_ORDER_CASES = {
    "add_mul", "rebind_many", "tuple_unpack", "augassign", "matmul_op", "pow_ops",
    "python_floats", "division", "if_positive", "if_elif_else", "early_return_both",
    "chained_compare", "bool_or", "ternary_in_loop", "math_module", "float_builtin",
    "max_routes_to_constant", "rnn_loop", "nested_loops", "nested_break", "for_break",
    "for_continue", "while_loop", "while_break_continue", "while_with_return",
    "return_inside_loop", "loop_list_append", "loop_item_assign", "loop_slice_assign",
    "slice_assign_in_loop_with_read", "for_over_rows", "for_zip", "for_enumerate",
    "dict_items_loop", "dict_built_in_loop", "call_simple", "call_two_outputs",
    "call_keyword", "call_default", "call_in_loop", "call_early_return", "recursion",
    "recursion_with_branch", "closure_reads_local", "lambda_in_loop",
    "nested_def_in_loop", "global_object_method", "argument_object_method",
    "dict_params", "list_params", "nested_pytree", "list_append_sum",
    "list_index_after_append", "python_float_of_array", "mutation_in_callee",
    "list_returned_from_callee", "empty_list_then_stack", "math_in_loop",
    "rnn_with_cell_fn", "logistic_regression", "mlp_two_layers", "logsumexp_stable",
    "index_repeated_accumulates", "reductions_axis", "where_abs", "methods_max_min",
    "rosenbrock_deap", "nested_listcomp", "comp_over_zip", "comp_inside_loop",
    "star_args_callee_in_loop", "star_param_into_star_callee", "zip_star_pairs",
    "picogpt_style_blocks", "kwargs_callee_gets_extras", "dict_param_into_numpy",
    "non_literal_default_in_loop", "try_in_branch_not_taken",
    "refusal_in_callee_branch", "catch_warnings_in_loop",
    "gen_layers_in_for", "gen_yield_from", "gen_with_early_return",
    "ode_function_argument", "ode_two_dynamics", "callable_default",
    "activation_argument", "sum_map_partial", "reduce_lambda",
    "min_char_rnn_onehot", "nested_augassign_in_loop", "nested_item_three_deep",
    "batchnorm_running_mean", "cache_list_in_loop", "differentiated_arg_changed",
    "arg_changed_in_loop_broadcast", "arg_changed_then_early_return",
    "zip_star_local_heads", "zip_star_heads_in_loop", "zip_star_for_statement",
    "star_literal_list_into_numpy", "star_split_into_numpy",
    "zip_star_literal_in_callee_in_loop", "lambda_to_callee", "local_def_to_callee",
    "lambda_to_callee_in_loop", "lambda_dynamics_to_odeint",
    "lambda_by_keyword_in_callee", "vectorize_object_in_variable",
    "vectorize_lambda_object_in_loop", "vectorize_two_arguments_broadcast",
    "vectorize_object_in_callee", "config_get_with_defaults", "local_dict_methods",
    "local_list_extend_in_loop", "dict_get_in_callee", "kwargs_forwarded_two_levels",
    "keyword_only_defaults_from_globals", "reduce_over_map_of_partial_lambda",
}  # fmt: skip
SELECTED = [c for c in CASES if c.fn.__name__ in SECOND_ORDER_CASES]


def test_the_selection_names_existing_corpus_functions():
    assert len(SELECTED) == len(SECOND_ORDER_CASES)


@pytest.mark.parametrize("case", SELECTED, ids=lambda c: c.name)
def test_hessian_vector_product_of_corpus_function(case):
    nums = case.argnums if isinstance(case.argnums, tuple) else (case.argnums,)
    args = case.args(0)
    v = tuple(random_like(args[i]) for i in nums)
    hv = s2sad.hvp(case.fn, argnums=nums)(*case.args(0), v)
    gradient = s2sad.grad(case.fn, argnums=nums)
    want = directional(gradient, case.args(0), nums, v, h=1e-5)
    assert_tree_close(hv, want, case.name, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- closed forms


def test_quadratic_form_has_the_symmetric_part_as_hessian():
    A = RNG.normal(size=(4, 4))
    x = RNG.normal(size=4)
    np.testing.assert_allclose(
        s2sad.hessian(fc.quadratic)(x, A), 0.5 * (A + A.T), atol=1e-12
    )
    v = RNG.normal(size=4)
    np.testing.assert_allclose(s2sad.hvp(fc.quadratic)(x, A, v), 0.5 * (A + A.T) @ v)


def test_logsumexp_hessian_is_diag_p_minus_p_p():
    x = RNG.normal(size=5)
    p = np.exp(x - np.max(x))
    p /= p.sum()
    np.testing.assert_allclose(
        s2sad.hessian(fc.lse)(x), np.diag(p) - np.outer(p, p), atol=1e-12
    )


def test_rosenbrock_hessian_closed_form():
    x = RNG.normal(size=4)
    n = x.size
    want = np.zeros((n, n))
    for i in range(n - 1):
        want[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        want[i + 1, i + 1] += 200
        want[i, i + 1] = want[i + 1, i] = -400 * x[i]
    np.testing.assert_allclose(s2sad.hessian(fc.rosenbrock)(x), want, rtol=1e-12)


def test_hessian_blocks_for_several_arguments():
    a, x = 0.7, RNG.normal(size=3)
    (h_aa, h_ax), (h_xa, h_xx) = s2sad.hessian(fc.cube_times, argnums=(0, 1))(a, x)
    np.testing.assert_allclose(h_aa, 6 * a * np.sum(x * x))
    np.testing.assert_allclose(h_ax, 6 * a * a * x)
    np.testing.assert_allclose(h_xa, 6 * a * a * x)
    np.testing.assert_allclose(h_xx, 2 * a**3 * np.eye(3))
    assert isinstance(h_aa, float) and h_ax.shape == (3,) and h_xx.shape == (3, 3)


def test_moments_hessian_against_differences_of_the_gradient():
    x = RNG.normal(size=4)
    H = s2sad.hessian(fc.moments)(x)
    g = s2sad.grad(fc.moments)
    for k in range(4):
        e = np.eye(4)[k]
        np.testing.assert_allclose(
            H[:, k], (g(x + 1e-5 * e) - g(x - 1e-5 * e)) / 2e-5, rtol=1e-5, atol=1e-7
        )
    np.testing.assert_allclose(H, H.T, atol=1e-10)


def test_hvp_of_a_network_loss_with_nn_rules():
    params = {
        "W1": RNG.normal(size=(4, 5)),
        "b1": RNG.normal(size=5),
        "W2": RNG.normal(size=(5, 3)),
    }
    x, labels = RNG.normal(size=(6, 4)), np.array([0, 1, 2, 2, 1, 0])
    v = random_like(params)
    hv = s2sad.hvp(fc.mlp_loss)(params, x, labels, v)
    want = directional(s2sad.grad(fc.mlp_loss), [params, x, labels], (0,), (v,), h=1e-5)
    assert_tree_close(hv, want, rtol=1e-4, atol=1e-6)
    W1, W2 = RNG.normal(size=(4, 5)), RNG.normal(size=(5, 3))
    vs = (random_like(W1), random_like(W2))
    hv = s2sad.hvp(fc.smooth_mlp_loss, argnums=(0, 1))(W1, W2, x, labels, vs)
    want = directional(
        s2sad.grad(fc.smooth_mlp_loss, argnums=(0, 1)),
        [W1, W2, x, labels],
        (0, 1),
        vs,
        h=1e-5,
    )
    assert_tree_close(hv, want, rtol=1e-4, atol=1e-6)


def test_hvp_source_is_a_forward_module_of_the_gradient_module():
    f_hvp = s2sad.hvp(fc.tanh_layer)
    f_hvp(RNG.normal(size=3), RNG.normal(size=(3, 4)), np.ones(3))
    assert "def tanh_layer_value_and_grad_jvp(" in f_hvp.source
    assert "# tangent of: g_x = " in f_hvp.source  # the gradient's own lines


# ---------------------------------------------------------------- grad of grad


def test_grad_of_grad_of_scalar_functions():
    d2 = grad_of_gradient(s2sad.grad(cases_basic.python_floats))
    a, b = 0.3, -1.2
    # f = c * c with c = a b + 2 a - b / 3: d2f/da2 = 2 (b + 2)^2
    np.testing.assert_allclose(d2(a, b), 2 * (b + 2) ** 2)
    d2_cube = grad_of_gradient(s2sad.grad(fc.cube_times), argnums=0, with_value=True)
    x = RNG.normal(size=3)
    first, second = d2_cube(0.5, x)
    np.testing.assert_allclose(first, 3 * 0.25 * np.sum(x * x))
    np.testing.assert_allclose(second, 6 * 0.5 * np.sum(x * x))


def test_grad_of_grad_with_respect_to_another_argument():
    x = RNG.normal(size=3)
    mixed = grad_of_gradient(s2sad.grad(fc.cube_times, argnums=0), argnums=1)
    np.testing.assert_allclose(mixed(0.5, x), 6 * 0.25 * x)


def test_grad_of_grad_refuses_non_scalar_inner_gradients():
    x = RNG.normal(size=3)
    with pytest.raises(NonScalarOutputError):
        grad_of_gradient(s2sad.grad(fc.cube_times, argnums=1))(0.5, x)
    with pytest.raises(NonScalarOutputError):
        grad_of_gradient(s2sad.value_and_grad(fc.cube_times))
    with pytest.raises(TypeError):
        grad_of_gradient(fc.cube_times)


def test_public_grad_of_grad():
    """``s2sad.grad(s2sad.grad(f))`` is routed to grad_of_gradient."""
    outer = s2sad.grad(s2sad.grad(fc.cube_times))
    np.testing.assert_allclose(outer(0.5, np.ones(3)), 6 * 0.5 * 3)
    both = s2sad.value_and_grad(s2sad.grad(fc.cube_times))
    np.testing.assert_allclose(both(0.5, np.ones(3)), (3 * 0.25 * 3, 6 * 0.5 * 3))


# ---------------------------------------------------------------- jacobian


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_jacobian_modes_agree_with_differences(mode):
    x, A = RNG.normal(size=3), RNG.normal(size=(4, 3))
    J = s2sad.jacobian(fc.vector_out, mode=mode)(x, A)
    want = np.stack(
        [directional(fc.vector_out, [x, A], (0,), (e,)) for e in np.eye(3)], axis=-1
    )
    assert J.shape == (4, 3)
    np.testing.assert_allclose(J, want, rtol=1e-6, atol=1e-8)


def test_jacobian_mode_follows_the_shapes():
    wide = s2sad.jacobian(fc.vector_out)  # 3 inputs, 4 outputs: forward
    wide(RNG.normal(size=3), RNG.normal(size=(4, 3)))
    assert wide.last_mode == "forward"
    tall = s2sad.jacobian(fc.vector_out, argnums=1)  # 12 inputs, 4 outputs: reverse
    A = RNG.normal(size=(4, 3))
    x = RNG.normal(size=3)
    J = tall(x, A)
    assert tall.last_mode == "reverse" and J.shape == (4, 4, 3)
    forward_J = s2sad.jacobian(fc.vector_out, argnums=1, mode="forward")(x, A)
    np.testing.assert_allclose(J, forward_J, atol=1e-12)


def test_jacobian_of_several_arguments_and_scalar_output():
    x, A = RNG.normal(size=3), RNG.normal(size=(3, 3))
    J_x, J_A = s2sad.jacobian(fc.quadratic, argnums=(0, 1))(x, A)
    np.testing.assert_allclose(J_x, 0.5 * (A + A.T) @ x)
    np.testing.assert_allclose(J_A, 0.5 * np.outer(x, x))
    # pytrees (issue 15): JAX's layout, the same by forward and reverse mode
    params, x = {"W": RNG.normal(size=(2, 2)), "b": RNG.normal(size=2)}, np.ones(2)
    fwd = s2sad.jacobian(fc.with_dict, mode="forward")(params, x)
    rev = s2sad.jacobian(fc.with_dict, mode="reverse")(params, x)
    assert fwd["h"]["W"].shape == (2, 2, 2) and fwd["s"]["b"].shape == (2,)
    for out in ("h", "s"):
        for leaf in ("W", "b"):
            np.testing.assert_allclose(fwd[out][leaf], rev[out][leaf], atol=1e-12)
    h = np.tanh(params["W"] @ x + params["b"])
    np.testing.assert_allclose(fwd["h"]["b"], np.diag(1 - h * h), atol=1e-12)


# ---------------------------------------------------------------- adjoint rules without
# a tangent rule: their own source is differentiated


def test_second_order_through_adjoint_rules_differentiated_from_source():
    x = np.array([1.3, 0.7, 1.1, 0.9])
    v = RNG.normal(size=4)
    for f in (fc.det_of, fc.norm_of, fc.cumprod_of):
        hv = s2sad.hvp(f)(x, v)
        want = directional(s2sad.grad(f), [x], (0,), (v,), h=1e-5)
        np.testing.assert_allclose(hv, want, rtol=1e-5, atol=1e-7)


def test_an_adjoint_rule_that_cannot_be_differentiated_is_named(monkeypatch):
    from s2sad.runtime import registry

    registry.ensure_loaded()
    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))
    monkeypatch.setattr(registry, "_USER_ENTRIES", list(registry._USER_ENTRIES))
    monkeypatch.setattr(registry, "_FINGERPRINT", [])

    @s2sad.adjoint(fc.squared)
    def d_squared(g, ans, x):  # no tangent rule; a user's rule is not differentiated
        return (2.0 * g * x,)

    with pytest.raises(MissingRuleError) as info:
        s2sad.hvp(fc.squared_of)(np.ones(3), np.ones(3))
    message = str(info.value)
    assert "no forward (tangent) rule for tests.forward_cases.squared" in message
    assert "register one: @s2sad.runtime.tangents.tangent" in message


# ---------------------------------------------------------------- the example models


@pytest.fixture
def examples(monkeypatch):
    """The example scripts' modules (examples/ on sys.path for this test only)."""
    import importlib
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "examples"))
    return {
        n: importlib.import_module(n) for n in ("mlp_mnist", "rnn_mnist", "cnn_imdb")
    }


def test_hvp_of_the_example_models(examples):
    """Embedding, conv1d, maxpool1d, relu, the RNN loop and both losses, in float64."""
    rng = np.random.default_rng(5)
    mlp, rnn, cnn = examples["mlp_mnist"], examples["rnn_mnist"], examples["cnn_imdb"]
    labels = rng.integers(0, 10, size=3)
    table = rng.normal(size=(30, 50))
    cases = [
        (mlp.loss_tanh, mlp.init_params(rng, "tanh"), rng.normal(size=(3, 784)), labels),
        (mlp.loss_relu, mlp.init_params(rng, "relu"), rng.normal(size=(3, 784)), labels),
        (rnn.loss, rnn.init_params(rng), rng.normal(size=(2, 784)), labels[:2]),
        (cnn.loss, cnn.init_params(rng, table, 20), rng.integers(0, 30, size=(4, 20)),
         rng.integers(0, 2, size=4).astype(float)),
    ]  # fmt: skip
    for loss, params, x, y in cases:
        params = {k: np.asarray(p, dtype=np.float64) for k, p in params.items()}
        v = random_like(params)
        hv = s2sad.hvp(loss)(params, x, y, v)
        want = directional(s2sad.grad(loss), [params, x, y], (0,), (v,), h=1e-5)
        assert_tree_close(hv, want, loss.__qualname__, rtol=1e-4, atol=1e-6)


def _normalized(x):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5)


def _cubed_normalized(x):
    return np.sum(_normalized(x) ** 3)


def test_hvp_through_a_callee_whose_rule_name_is_also_a_temporary():
    # the forward pass of ln_backward named a temporary d_var_1, the name the
    # module had bound the rule d_var to: UnboundLocalError before the fix
    x = np.random.default_rng(0).normal(size=(2, 4))
    v = np.random.default_rng(1).normal(size=(2, 4))
    hv = s2sad.hvp(_cubed_normalized)(x, v)
    want = directional(s2sad.grad(_cubed_normalized), [x], (0,), (v,), h=1e-5)
    assert_tree_close(hv, want, "hvp", rtol=1e-5, atol=1e-6)
