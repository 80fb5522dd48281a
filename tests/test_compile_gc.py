"""The cyclic garbage collector is paused while a function compiles, and only
then: its full collections walked every live AST node over and over (a fifth
of a 1,000-statement compile) and found next to nothing (``pipeline.py``)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.errors import S2SADError
from s2sad.testing import numerical_grad


def model(x, w):
    h = np.tanh(x * w)
    return np.sum(h * h + np.sin(x))


def refused(x):
    return np.sum(x) if x.flags.writeable else eval("x")  # eval: refused


def _enabled_during(fn, argnums=(0,)):
    seen = []
    pipeline.compile_function(
        fn, argnums, dump_after="normalize", dump=lambda _: seen.append(gc.isenabled())
    )
    return seen


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_while_compiling_and_on_again_after(collector_on):
    assert _enabled_during(model, (0, 1)) == [False]
    assert gc.isenabled()


def test_on_again_after_a_compile_that_raises(collector_on):
    with pytest.raises(S2SADError):
        pipeline.compile_function(refused, (0,))
    assert gc.isenabled()


def test_a_caller_that_paused_it_finds_it_paused_after(collector_on):
    gc.disable()
    assert _enabled_during(model, (0, 1)) == [False]
    assert not gc.isenabled()


def test_the_gradient_compiled_with_it_paused(collector_on, tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    for shape in [(3,), (2, 4)]:
        x = np.linspace(-0.7, 0.9, int(np.prod(shape))).reshape(shape)
        w = np.linspace(0.3, -0.4, int(np.prod(shape))).reshape(shape)
        value, grads = s2sad.value_and_grad(model, argnums=(0, 1))(x, w)
        assert value == pytest.approx(model(x, w))
        for got, want in zip(grads, numerical_grad(model, (x, w), argnums=(0, 1))):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    assert gc.isenabled()
