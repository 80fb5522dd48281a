"""Dict and list methods (front/containers.py): what they write stays, as in
Python, and what cannot be written as items is refused at its line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import s2sad
from s2sad.errors import MissingRuleError, UnsupportedSyntaxError
from tests.corpus.fd import assert_close_tree, numerical_grad

RNG = np.random.default_rng(8)


def batchnorm_train(x, gamma, bn_param):
    # (values read from bn_param before a write and used after it are refused
    # by the aliasing check today: a false positive left to front/aliasing.py)
    eps = bn_param.get("eps", 1e-5)
    mu = x.mean(axis=0)
    out = np.sum(gamma * (x - mu) ** 2 / np.sqrt(x.var(axis=0) + eps))
    momentum = bn_param.setdefault("momentum", 0.9)
    running = bn_param.get("running_mean", np.zeros(x.shape[1]))
    bn_param["running_mean"] = momentum * running + (1 - momentum) * mu
    bn_param.update(steps=bn_param.get("steps", 0) + 1)
    return out


def test_the_config_dict_keeps_what_the_differentiated_call_writes():
    x, gamma = RNG.normal(size=(5, 3)), RNG.normal(size=3)
    mine, theirs = {"mode": "train"}, {"mode": "train"}
    grads = s2sad.grad(batchnorm_train, argnums=(0, 1))(x, gamma, mine)
    batchnorm_train(x, gamma, theirs)
    assert sorted(mine) == sorted(theirs)
    assert mine["momentum"] == 0.9 and mine["steps"] == 1
    np.testing.assert_allclose(mine["running_mean"], theirs["running_mean"])
    for i, g in enumerate(grads):
        want = numerical_grad(batchnorm_train, [x, gamma, {"mode": "train"}], i)
        assert_close_tree(g, want, where=f"d/darg{i}")


def _scaled(x, opts):
    return x * opts.get("scale", 1.0)


def get_on_differentiated_dict_in_callee(w):
    return np.sum(_scaled(w, {"scale": w}))


def _remember(x, cache):
    cache.setdefault("x", x)
    return x * 2.0


def setdefault_on_argument_in_callee(w):
    return np.sum(_remember(w, {}))


def _line(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_differentiated_dict_read_with_get_in_a_callee_is_refused_at_its_line():
    with pytest.raises(MissingRuleError) as info:
        s2sad.grad(get_on_differentiated_dict_in_callee)(np.ones(3))
    (problem,) = info.value.problems
    assert problem.line == _line(_scaled, "opts.get")
    assert "opts['k']" in problem.hint


def test_setdefault_on_an_argument_of_a_callee_is_refused_at_its_line():
    with pytest.raises(UnsupportedSyntaxError) as info:
        s2sad.grad(setdefault_on_argument_in_callee)(np.ones(3))
    problem = info.value.problems[0]
    assert problem.line == _line(_remember, "setdefault")
    assert "cache['k'] = v" in problem.hint
