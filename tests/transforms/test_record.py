"""The recording variant of an emitted module (s2sad.transforms.buffers.record)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from s2sad.runtime.workspace import NO_WORKSPACE, Pool, Recorder
from s2sad.transforms.buffers.record import recorder, recording_variant

SOURCE = textwrap.dedent("""\
    def helper(x, ws=NO_WORKSPACE):
        return np.multiply(x, 2.0, out=ws["twice"])


    def f_value_and_grad(x, ws=NO_WORKSPACE):
        y = np.add(x, 1.0, out=ws["y"])
        for _ in range(2):
            y = np.tanh(y, out=ws.take("t"))
        z = helper(y, ws=ws.enter("helper", (y,)))
        parts = pair(z, into=(ws["q"], None))
        return float(np.sum(parts[1])), z
    """)


def pair(x, into=(None, None)):
    """A rule-like helper that writes its results into ``into`` buffers."""
    return np.floor(x, out=into[0]), np.negative(x, out=into[1])


def _module() -> dict:
    namespace = {"np": np, "NO_WORKSPACE": NO_WORKSPACE, "pair": pair}
    exec(compile(SOURCE, "<emitted>", "exec"), namespace)
    return namespace


def test_every_site_is_noted_and_callees_record_too():
    fn = _module()["f_value_and_grad"]
    rec = Recorder()
    x = np.linspace(0.0, 1.0, 5)
    value, _ = recording_variant(fn, SOURCE)(x, ws=rec)
    assert value == fn(x)[0]
    # (an into= entry that is no site is noted under "", which no code reads)
    assert set(rec.specs) - {""} == {"y", "t", "q"}
    assert rec.specs["y"] == ((5,), np.dtype(float)) and "t" in rec.looped
    (child,) = rec.children.values()
    assert set(child.specs) == {"twice"}


def test_the_recorder_parses_nothing_until_called():
    fn = _module()["f_value_and_grad"]
    build = recorder(fn, "def (:")
    with pytest.raises(SyntaxError):
        build()
    with pytest.raises(LookupError):
        recorder(fn, "def other(): pass")()


def test_the_pool_records_with_the_variant_it_is_given():
    fn = _module()["f_value_and_grad"]
    built = []

    def build():
        built.append(1)
        return recording_variant(fn, SOURCE)

    pool = Pool(fn, build)
    x = np.linspace(0.0, 1.0, 5)
    for _ in range(4):
        (value, _), _ = pool.call(("key",), [x], None)
        assert value == fn(x)[0]
    assert built == [1] and "y" in pool.layouts[("key",)].fixed
