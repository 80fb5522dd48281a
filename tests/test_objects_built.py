"""Objects built inside the differentiated function (front/instances.py) and
attributes read back in the same call (front/attributes.py): forward mode and
second order on the corpus cases, what the object holds afterwards, the guard
on the inlined class, and the located refusals."""

import numpy as np
import pytest

import s2sad
from s2sad import errors
from tests.corpus import cases_objects_built as cb
from tests.corpus.fd import assert_close_tree, numerical_grad
from tests.corpus.registry import CASES

BUILT = [c for c in CASES if c.fn.__module__ == cb.__name__]


@pytest.mark.parametrize("case", BUILT, ids=lambda c: c.fn.__name__)
def test_forward_mode_matches_finite_differences(case):
    args = case.args(0)
    v = np.random.default_rng(1).normal(size=np.shape(args[0]))
    _, t_out = s2sad.jvp(case.fn)(*args, v)
    want = np.sum(numerical_grad(case.fn, case.args(0), 0) * v)
    assert_close_tree(t_out, want, where="jvp")


@pytest.mark.parametrize("case", BUILT, ids=lambda c: c.fn.__name__)
def test_hessian_vector_product_matches_finite_differences(case):
    args = case.args(0)
    v = np.random.default_rng(2).normal(size=np.shape(args[0]))
    hv = s2sad.hvp(case.fn)(*args, v)
    eps = 1e-5
    g = s2sad.grad(case.fn)
    plus = g(args[0] + eps * v, *args[1:])
    minus = g(args[0] - eps * v, *args[1:])
    assert_close_tree(hv, (plus - minus) / (2 * eps), rtol=1e-4, atol=1e-6, where="hvp")


def test_the_object_holds_what_the_call_wrote():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2, 4, 3))
    rnn = cb._rnn()
    s2sad.grad(cb.item_assignment_into_an_attribute)(X, rnn)
    want = cb._rnn()
    want.forward_pass(X)
    np.testing.assert_allclose(rnn.states, want.states, rtol=1e-13)
    layer = cb.Cache(rng.normal(size=(3, 2)))
    x = rng.normal(size=(4, 3))
    s2sad.grad(cb.attribute_written_then_read)(x, layer)
    np.testing.assert_allclose(layer.cache, x @ layer.W, rtol=1e-13)
    np.testing.assert_allclose(layer.relu, np.maximum(x @ layer.W, 0), rtol=1e-13)
    cell = cb.StatefulCell(3)
    Wh, xs = rng.normal(size=(3, 3)), rng.normal(size=(4, 3))
    s2sad.grad(cb.weights_set_on_an_argument_then_stepped)(Wh, xs, cell)
    want = cb.StatefulCell(3)
    cb.weights_set_on_an_argument_then_stepped(Wh, xs, want)
    np.testing.assert_allclose(cell.Wh, want.Wh, rtol=1e-13)
    np.testing.assert_allclose(cell.h, want.h, rtol=1e-13)
    acc = cb.Counter()
    s2sad.grad(cb.running_total_on_an_argument)(np.arange(4.0), acc)
    assert acc.total == pytest.approx(14.0)


class _Doubled(cb.Linear):
    def forward(self, x):
        return 2.0 * super().forward(x)


def test_the_inlined_class_is_guarded(monkeypatch):
    rng = np.random.default_rng(6)
    W, X = rng.normal(size=(4, 3)), rng.normal(size=(5, 4))
    g = s2sad.grad(cb.linear_built_inside)
    before = g(W, X)
    monkeypatch.setattr(cb, "Linear", _Doubled)
    after = g(W, X)  # compiled again for the class the global names now
    assert_close_tree(after, 4.0 * before)
    assert_close_tree(after, numerical_grad(cb.linear_built_inside, [W, X], 0))


class _Prop:
    def __init__(self, W):
        self._W = W

    @property
    def W(self):
        return self._W

    @W.setter
    def W(self, v):
        self._W = v


class _Leaky:
    def __init__(self, W):
        self.W = W

    def forward(self, x):
        return _apply(self, x)


def _apply(layer, x):
    return x @ layer.W


def passes_a_sub_object_out(W, x):
    b = cb.Block(W)
    return np.sum(_apply(b.inner, x))


def method_passes_self_out(W, x):
    return np.sum(_Leaky(W).forward(x))


def sets_a_property(W, x):
    p = _Prop(W)
    p.W = W * 2
    return np.sum(x @ p.W)


def reads_a_property(W, x):
    p = _Prop(W)
    return np.sum(np.sin(x @ p.W))


def method_in_an_if_expression(W, x, flag=True):
    lin = cb.Linear(W)
    return np.sum(lin.forward(x)) if flag else 0.0


def returns_the_object(W):
    lin = cb.Linear(W)
    return lin


@pytest.mark.parametrize(
    "fn, what",
    [
        (passes_a_sub_object_out, "'b.inner' is used as a value"),
        (method_passes_self_out, "'self' built here is used as a value"),
        (sets_a_property, "the property 'W' is set"),
        (method_in_an_if_expression, "inside and/or, if-else"),
        (returns_the_object, "constructors"),
    ],
)
def test_an_object_that_escapes_is_refused_where_it_does(fn, what):
    W, x = np.ones((3, 3)), np.ones((2, 3))
    args = (W,) if fn is returns_the_object else (W, x)
    with pytest.raises(
        (errors.UnsupportedSyntaxError, errors.MissingRuleError)
    ) as info:
        s2sad.grad(fn)(*args)
    text = str(info.value)
    assert what in text and ("test_objects_built.py" in text or "cases_objects" in text)


def test_a_property_read_is_inlined():
    rng = np.random.default_rng(7)
    W, x = rng.normal(size=(3, 3)), rng.normal(size=(2, 3))
    got = s2sad.grad(reads_a_property)(W, x)
    assert_close_tree(got, numerical_grad(reads_a_property, [W, x], 0))


class _Cfg:
    def __init__(self, k):
        self.k = k


def _scale_by(cfg, x):
    return cfg.k * x


def config_object_passed_on(x):
    cfg = _Cfg(2.0)
    return np.sum(_scale_by(cfg, x) ** 2)


def test_an_object_passed_on_is_left_to_python():
    x = np.array([1.0, -2.0, 0.5])
    assert_close_tree(s2sad.grad(config_object_passed_on)(x), 8.0 * x)


class _Recorder:
    def __init__(self):
        self.states = np.zeros((3, 4))
        self.acc = np.zeros(3)

    def step(self, x):
        self.states[:, 1] = x
        self.acc += x
        return np.sum(x * x) + np.sum(self.states * self.acc[:, None])


def _set_and_step(W, x, rec):
    rec.W = W
    return rec.step(x @ W)


def test_items_written_into_an_attribute_change_the_array_in_place():
    """As in Python: whoever holds the object's array sees the new items (the
    reverse sweep puts old items back into a copy, never into that array)."""
    x = np.array([1.0, 2.0, 3.0])
    rec = _Recorder()
    states, acc = rec.states, rec.acc
    got = s2sad.grad(rec.step)(x)
    assert_close_tree(got, numerical_grad(lambda v: _Recorder().step(v), [x], 0))
    assert rec.states is states and rec.acc is acc
    np.testing.assert_array_equal(states[:, 1], x)
    np.testing.assert_array_equal(acc, x)
    W = np.random.default_rng(9).normal(size=(3, 3))
    rec = _Recorder()
    states, acc = rec.states, rec.acc
    got = s2sad.grad(_set_and_step)(W, x, rec)
    want = numerical_grad(lambda w: _set_and_step(w, x, _Recorder()), [W], 0)
    assert_close_tree(got, want)
    assert rec.states is states and rec.acc is acc
    np.testing.assert_array_equal(rec.W, W)
    np.testing.assert_allclose(states[:, 1], x @ W, rtol=1e-13)
    np.testing.assert_allclose(acc, x @ W, rtol=1e-13)
