"""Mutation: what the caller's objects hold after a gradient call, and the forms
that stay refused (their messages name the user's line)."""

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError
from s2sad.testing import numerical_grad
from tests.corpus import cases_mutation  # noqa: F401
from tests.corpus.registry import CASES


class Recorder:
    def __init__(self):
        self.states = np.zeros((3, 4))

    def step(self, x):
        self.states[:, 1] = x
        return np.sum(x * x)


def attribute_item(layer, x):
    return layer.step(x) + layer.step(x)  # once is fine: tests/test_entry_reads.py


def test_item_assignment_into_an_attribute_by_a_method_run_twice_is_refused():
    with pytest.raises(UnsupportedSyntaxError) as e:
        s2sad.grad(attribute_item, argnums=1)(Recorder(), np.ones(3))
    msg = str(e.value)
    assert f"test_mutation.py:{Recorder.step.__code__.co_firstlineno + 1}:" in msg
    assert "item assignment into the attribute 'self.states'" in msg
    assert "self.states = states" in msg


# ------------------------------------------------ what the caller's objects hold

CHANGING = [
    c
    for c in CASES
    if c.fn.__name__
    in (
        "batchnorm_running_mean",
        "config_read_after_write",
        "cache_list_in_loop",
        "alias_of_config_item",
        "view_of_buffer_row",
        "differentiated_arg_changed",
        "arg_changed_in_loop_broadcast",
        "arg_changed_then_early_return",
        "two_args_one_changed",
        "undifferentiated_array_changed",
    )
]


def _assert_same_tree(got, want, where):
    if isinstance(want, dict):
        assert set(got) == set(want), where
        for k in want:
            _assert_same_tree(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same_tree(g, w, f"{where}[{i}]")
    elif isinstance(want, np.ndarray):
        np.testing.assert_allclose(got, want, rtol=1e-13, err_msg=where)
    else:
        assert got == want, where


def _plain(case, seed):
    """The arguments as the plain Python function leaves them."""
    args = case.args(seed)
    case.fn(*args)
    return args


def test_the_changing_cases_are_found():
    assert len(CHANGING) == 10


@pytest.mark.parametrize("case", CHANGING, ids=lambda c: c.name)
def test_caller_sees_the_changes_after_a_gradient_call(case):
    for seed in (0, 1):
        args = case.args(seed)
        assert not _same(args, _plain(case, seed))  # the function does change them
        s2sad.value_and_grad(case.fn, argnums=case.argnums)(*args)
        _assert_same_tree(args, _plain(case, seed), case.name)


@pytest.mark.parametrize("case", CHANGING, ids=lambda c: c.name)
def test_caller_sees_the_changes_after_buffered_calls(case, monkeypatch):
    from s2sad.runtime import workspace

    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    dfn = s2sad.value_and_grad(case.fn, argnums=case.argnums)
    kept = []
    for seed in (0, 1, 0, 1):  # plain, recording, then buffered calls
        args = case.args(seed)
        dfn(*args)
        kept.append((args, seed))
    for args, seed in kept:  # no workspace buffer ends up in the caller's objects
        _assert_same_tree(args, _plain(case, seed), case.name)


@pytest.mark.parametrize("case", CHANGING, ids=lambda c: c.name)
def test_caller_sees_the_changes_after_a_jvp(case):
    nums = case.argnums if isinstance(case.argnums, tuple) else (case.argnums,)
    args = case.args(0)
    ts = tuple(np.ones_like(args[i]) for i in nums)
    s2sad.jvp(case.fn, argnums=nums)(*args, ts)
    _assert_same_tree(args, _plain(case, 0), case.name)


def _same(a, b):
    try:
        _assert_same_tree(a, b, "")
        return True
    except AssertionError:
        return False


def differentiated_item(x, W):
    x[0] = 2.0 * x[1]
    return np.sum(W @ x)


def appends_to_argument(x, log):
    log.append(np.sum(x))
    return np.sum(x * x)


def test_item_assignment_into_a_callee_parameter_given_a_new_array():
    def outer(x, W):  # x * 1.0: nobody else sees the change (front/inplace.py)
        return differentiated_item(x * 1.0, W)

    x, W = np.array([0.3, -0.7, 1.1]), np.arange(6.0).reshape(2, 3)
    got = s2sad.grad(outer, argnums=(0, 1))(x, W)
    want = numerical_grad(outer, [x, W], (0, 1))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-6)


def test_item_assignment_into_a_differentiated_argument_is_refused_in_a_callee():
    def outer(x, W):  # the caller's x would change: refused
        return differentiated_item(x, W) + np.sum(x)

    with pytest.raises(
        UnsupportedSyntaxError, match="in-place change of the argument 'x'"
    ):
        s2sad.grad(outer)(np.ones(3), np.ones((2, 3)))


def test_a_method_changing_an_argument_not_differentiated_stays_refused():
    with pytest.raises(UnsupportedSyntaxError) as e:
        s2sad.grad(appends_to_argument)(np.ones(3), [])
    assert "in-place change of the argument 'log'" in str(e.value)
    assert "test_mutation.py:" in str(e.value)


def changed_then_rebound(x):
    x[0] = 1.0
    x = x * 2.0
    return np.sum(x * x)


def test_an_argument_changed_in_place_then_rebound_stays_refused():
    with pytest.raises(UnsupportedSyntaxError) as e:
        s2sad.grad(changed_then_rebound)(np.ones(3))
    line = changed_then_rebound.__code__.co_firstlineno + 1
    assert f"test_mutation.py:{line}:" in str(e.value)
    assert "in-place change of the argument 'x'" in str(e.value)


def test_the_gradient_is_with_respect_to_the_value_on_entry():
    from tests.corpus.cases_mutation import differentiated_arg_changed

    x = np.array([1.0, 2.0, 3.0, 4.0])
    value, g = s2sad.value_and_grad(differentiated_arg_changed)(x)
    # f = 9 * (4 x1^2 + x1^2 + x2^2 + x3^2) in the entry values
    assert value == 9 * (4 * 4 + 4 + 9 + 16)
    np.testing.assert_array_equal(g, [0.0, 180.0, 54.0, 72.0])
    np.testing.assert_array_equal(x, [12.0, 6.0, 9.0, 12.0])  # as Python leaves it


def _write_through_alias(p, x):
    buf = p["buf"]
    buf[0] = np.sum(x)
    return np.sum(x * x)


def calls_a_writer(x, p):
    return _write_through_alias(p, x)


def test_a_write_through_an_alias_in_a_callee_is_refused_not_undone():
    # before: the gradient was right but the caller's p["buf"] kept its old item
    # (the backward sweep put it back), unlike Python, which leaves [3, 0]
    p = {"buf": np.zeros(2)}
    with pytest.raises(UnsupportedSyntaxError) as e:
        s2sad.grad(calls_a_writer)(np.array([1.0, 2.0]), p)
    msg = str(e.value)
    line = _write_through_alias.__code__.co_firstlineno + 2
    assert f"test_mutation.py:{line}:" in msg
    assert "may share memory with an argument" in msg and "buf.copy()" in msg
    assert np.array_equal(p["buf"], np.zeros(2))
