"""A class edited and reloaded (a re-run notebook cell, ``importlib.reload``)
compiles again: the gradient is never the one of its old methods.

The cache key held the sources of the functions a loss reaches, but not of the
methods of a class it builds (``Layer(W).out(x)``) nor of the classes of the
objects it is given; the old module was loaded from the cache, passed the
entry's checks (the name now held the new class), and gave the old gradient.
"""

import importlib
import sys
import textwrap

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad

SOURCE = """
import numpy as np
from dataclasses import dataclass


class Layer:
    def __init__(self, W):
        self.W = W

    def out(self, x):
        return np.tanh(x @ self.W)


def built_inside(W, x):
    return np.sum(Layer(W).out(x) ** 2)


@dataclass
class Params:
    W: np.ndarray

    @property
    def act(self):
        return np.tanh(self.W)


def given(p, x):
    return np.sum((x @ p.act) ** 2)


class Holder:
    def __init__(self, W):
        self.W = W

    def out(self, x):
        return np.tanh(x @ self.W)


def held(W, obj, x):
    obj.W = W
    return np.sum(obj.out(x) ** 2)
"""


@pytest.fixture
def module(tmp_path, monkeypatch):
    name = f"edited_{tmp_path.name.replace('-', '_')}"
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(SOURCE))
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module(name)
    yield mod, path
    sys.modules.pop(name, None)


def _edit(mod, path):
    """The methods' tanh becomes 3 sin, as an edited cell would, and reload."""
    path.write_text(path.read_text().replace("np.tanh(", "3.0 * np.sin("))
    importlib.invalidate_caches()
    return importlib.reload(mod)


def _args(mod, rng):
    W, x = rng.normal(size=(3, 2)), rng.normal(size=(4, 3))
    return W, x


def _check_all(mod, grads, W, x):
    g_built, g_given, g_held = grads
    want = numerical_grad(mod.built_inside, (W, x), 0)
    np.testing.assert_allclose(g_built(W, x), want, rtol=1e-6, atol=1e-9)
    want = numerical_grad(lambda W_: mod.given(mod.Params(W_), x), (W,), 0)
    np.testing.assert_allclose(g_given(mod.Params(W), x).W, want, rtol=1e-6, atol=1e-9)
    want = numerical_grad(lambda W_: mod.held(W_, mod.Holder(W), x), (W,), 0)
    np.testing.assert_allclose(g_held(W, mod.Holder(W), x), want, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("same_objects", [True, False], ids=["same grad", "new grad"])
def test_edited_class_compiles_again(module, same_objects):
    mod, path = module
    W, x = _args(mod, np.random.default_rng(0))
    grads = [s2sad.grad(mod.built_inside), s2sad.grad(mod.given), s2sad.grad(mod.held)]
    _check_all(mod, grads, W, x)
    mod = _edit(mod, path)
    if not same_objects:
        grads = [
            s2sad.grad(mod.built_inside),
            s2sad.grad(mod.given),
            s2sad.grad(mod.held),
        ]
    _check_all(mod, grads, W, x)


def test_edited_class_in_forward_mode(module):
    mod, path = module
    W, x = _args(mod, np.random.default_rng(1))
    V = np.random.default_rng(2).normal(size=W.shape)
    jvp = s2sad.jvp(mod.given)

    def want():
        g = numerical_grad(lambda W_: mod.given(mod.Params(W_), x), (W,), 0)
        return np.sum(g * V)

    assert jvp(mod.Params(W), x, mod.Params(V))[1] == pytest.approx(want(), rel=1e-6)
    mod = _edit(mod, path)
    assert jvp(mod.Params(W), x, mod.Params(V))[1] == pytest.approx(want(), rel=1e-6)


def test_unchanged_classes_keep_one_cache_key(module):
    """The key holds the classes' sources, not their identities: the same
    class from another import (another process) finds the cached module."""
    from s2sad import cache
    from s2sad.binding import argument_classes

    mod, _ = module
    p = mod.Params(np.ones((3, 2)))
    classes = argument_classes([p, np.ones(3)])
    assert classes == (mod.Params,)
    first = cache.key_for(mod.given, (0,), "o", "sig", classes)
    assert cache.key_for(mod.given, (0,), "o", "sig", classes) == first
    assert cache.key_for(mod.given, (0,), "o", "sig", ()) != first
