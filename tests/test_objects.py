"""Objects beyond reverse mode: forward mode and second order on the corpus's
layer objects, Python's semantics of attribute writes, the cache key of
sub-objects, and the refusal of gradients that would flow through attributes."""

import numpy as np
import pytest

import s2sad
from s2sad import errors
from tests.corpus import cases_objects as co
from tests.corpus.fd import assert_close_tree, numerical_grad

CASES = [
    (co.dense_caches_input, (4, 3), co._dense(3, 2)),
    (
        co.model_of_sub_layers,
        (5, 3),
        co.TwoLayer(co._dense(3, 4), co.Sigmoid(), co._dense(4, 2)),
    ),
    (co.callable_made_inline, (2, 3), None),
    (
        co.model_in_a_loop,
        (5, 3),
        co.TwoLayer(co._dense(3, 4), co.TanH(), co._dense(4, 3)),
    ),
]


def _args(shape, obj, seed=0):
    X = np.random.default_rng(seed).normal(size=shape)
    return (X,) if obj is None else (X, obj)


@pytest.mark.parametrize(
    "fn, shape, obj", CASES, ids=lambda v: getattr(v, "__name__", "")
)
def test_forward_mode_matches_finite_differences(fn, shape, obj):
    args = _args(shape, obj)
    v = np.random.default_rng(1).normal(size=shape)
    _, t_out = s2sad.jvp(fn)(*args, v)
    want = np.sum(numerical_grad(fn, list(args), 0) * v)
    assert_close_tree(t_out, want, where="jvp")


@pytest.mark.parametrize(
    "fn, shape, obj", CASES, ids=lambda v: getattr(v, "__name__", "")
)
def test_hessian_vector_product_matches_finite_differences(fn, shape, obj):
    args = _args(shape, obj)
    v = np.random.default_rng(2).normal(size=shape)
    hv = s2sad.hvp(fn)(*args, v)
    eps = 1e-5
    g = s2sad.grad(fn)
    plus = g(args[0] + eps * v, *args[1:])
    minus = g(args[0] - eps * v, *args[1:])
    assert_close_tree(hv, (plus - minus) / (2 * eps), rtol=1e-4, atol=1e-6, where="hvp")


def test_what_the_call_writes_on_the_object_is_there_afterwards():
    model = co.TwoLayer(co._dense(3, 4), co.Sigmoid(), co._dense(4, 2))
    X = np.random.default_rng(3).normal(size=(5, 3))
    s2sad.grad(co.model_of_sub_layers)(X, model)
    s2sad.grad(co.model_of_sub_layers)(X + 1.0, model)
    assert model.n_calls == 2
    np.testing.assert_array_equal(model.l1.layer_input, X + 1.0)
    assert model.l2.layer_input.shape == (5, 4)
    layer = co.Activation(co.SIGMOID)
    s2sad.grad(co.write_constant_on_object)(np.ones(3), layer)
    assert layer.note == 2.0


def test_a_different_sub_layer_class_compiles_again():
    X = np.random.default_rng(4).normal(size=(5, 3))
    f = s2sad.grad(co.model_of_sub_layers)
    for act in (co.Sigmoid(), co.TanH()):
        model = co.TwoLayer(co._dense(3, 4), act, co._dense(4, 2))
        want = numerical_grad(co.model_of_sub_layers, [X, model], 0)
        assert_close_tree(f(X, model), want)


def set_then_call(W, X, layer):
    layer.W = W
    return np.sum(layer.forward_pass(X) ** 2)


def set_then_read(W, layer):
    layer.scale = W * 2.0
    return np.sum(layer.scale)


def test_an_attribute_set_on_an_argument_then_read_by_its_method_carries_it():
    rng = np.random.default_rng(8)
    W, X, layer = rng.normal(size=(3, 2)), rng.normal(size=(4, 3)), co._dense(3, 2)
    got = s2sad.grad(set_then_call)(W, X, layer)
    assert_close_tree(got, numerical_grad(set_then_call, [W, X, layer], 0))
    np.testing.assert_array_equal(layer.W, W)  # what Python leaves there
    np.testing.assert_array_equal(layer.layer_input, X)
    _, t = s2sad.jvp(set_then_call)(W, X, layer, np.ones_like(W))
    want = np.sum(numerical_grad(set_then_call, [W, X, layer], 0))
    assert_close_tree(t, want, where="jvp")


def test_an_attribute_set_then_read_in_the_same_call_carries_the_gradient():
    layer = co._dense(3, 2)
    W = np.random.default_rng(3).normal(size=3)
    got = s2sad.grad(set_then_read)(W, layer)
    assert_close_tree(got, numerical_grad(set_then_read, [W, layer], 0))
    np.testing.assert_array_equal(layer.scale, W * 2.0)  # Python's semantics


def test_a_different_layer_list_compiles_again():
    X = np.random.default_rng(5).normal(size=(4, 3))
    f = s2sad.grad(co.layer_list_argument)
    for layers in (
        [co._dense(3, 3), co.Activation(co.TanH()), co._dense(3, 3)],
        [co._dense(3, 3), co.ReLU(), co._dense(3, 3), co.Activation(co.Sigmoid())],
    ):
        want = numerical_grad(co.layer_list_argument, [X, layers], 0)
        assert_close_tree(f(X, layers), want)


def test_the_unrolled_loop_checks_the_classes_it_was_compiled_for():
    from s2sad import pipeline

    layers = [co._dense(3, 3), co.ReLU()]
    X = np.ones((2, 3))
    source, bindings = pipeline.compile_function(
        co.layer_list_argument, (0,), example_args=(X, layers)
    )
    namespace = dict(bindings)
    exec(compile(source, "<objects>", "exec"), namespace)  # noqa: S102 (our own output)
    run = namespace["layer_list_argument_value_and_grad"]
    run(X, layers)
    with pytest.raises(errors.GlobalsChangedError, match="compiled for"):
        run(X, [co._dense(3, 3), co.Activation(co.TanH())])
    with pytest.raises(errors.GlobalsChangedError):
        run(X, layers + [co.ReLU()])


class _Scaler:
    def __init__(self):
        self.w = 1.0

    def apply(self, x):
        return self.w * x


SCALER = _Scaler()


def set_on_a_global_then_read_in_a_callee(w, x):
    SCALER.w = w
    return np.sum(SCALER.apply(x))


def set_on_a_fresh_object_then_call_it(w, x):
    s = _Scaler()
    s.w = w
    return np.sum(s.apply(x))


def test_an_object_read_where_s2sad_cannot_see_is_refused():
    with pytest.raises(errors.UnsupportedSyntaxError, match="attribute"):
        s2sad.grad(set_on_a_global_then_read_in_a_callee)(2.0, np.ones(3))


def test_a_fresh_object_set_then_called_carries_the_gradient():
    x = np.array([0.5, -1.0, 2.0])
    got = s2sad.grad(set_on_a_fresh_object_then_call_it)(2.0, x)
    assert got == pytest.approx(np.sum(x))


def calls_a_layer_made_here(x):
    layer = co.Activation(co.TanH())
    return np.sum(layer.forward_pass(x))


def test_a_layer_made_inside_the_function_is_taken_apart():
    x = np.random.default_rng(4).normal(size=3)
    got = s2sad.grad(calls_a_layer_made_here)(x)
    assert_close_tree(got, numerical_grad(calls_a_layer_made_here, [x], 0))


def test_a_bound_method_of_a_model_of_layers_is_the_differentiated_function():
    model = co._mlp()
    rng = np.random.default_rng(6)
    X, y = rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    got = s2sad.grad(model.loss)(X, y)
    np.testing.assert_array_equal(model.layers[0].layer_input, X)  # written by it
    assert_close_tree(got, numerical_grad(model.loss, [X, y], 0))
