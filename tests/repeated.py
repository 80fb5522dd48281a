"""What the integration tests share: central differences that give every
evaluation fresh copies of the arguments (the programs under test may change
them in place), and a gradient called several times against them (a
workspace's buffers are reused from the second call on)."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.runtime import workspace


def numeric_grad(f, args, k, h=1e-6):
    """Central-difference gradient of ``f(*args)`` w.r.t. ``args[k]`` in float64,
    each evaluation on fresh copies of the arguments."""
    a = np.array(args[k], dtype=float)
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        vals = []
        for s in (h, -h):
            b = a.copy()
            b[i] += s
            vals.append(f(*[b if j == k else np.array(x) for j, x in enumerate(args)]))
        g[i] = (vals[0] - vals[1]) / (2 * h)
    return g


def check_repeated_calls(f, args, argnums=None, calls=3, value_rtol=1e-10):
    """``value_and_grad(f)`` called ``calls`` times on fresh copies of ``args``:
    each value equal to f's, each gradient to central differences. Returns the
    gradient function (its ``.source`` for the caller's checks)."""
    nums = tuple(range(len(args))) if argnums is None else tuple(argnums)
    vg = s2sad.value_and_grad(f, argnums=nums)
    want_value = f(*[np.array(a) for a in args])
    want = [numeric_grad(f, args, k) for k in nums]
    for _ in range(calls):
        value, grads = vg(*[np.array(a) for a in args])
        np.testing.assert_allclose(value, want_value, rtol=value_rtol)
        for g, w in zip(grads, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)
    return vg


@pytest.fixture
def buffer_everything(tmp_path, monkeypatch):
    """A private cache, and workspaces for arrays of any size (so the buffered
    code runs on a test's small shapes). Import it with ``autouse`` wrappers or
    request it by name."""
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)


def seeded_rand(seed: int):
    """``rand(*shape, scale=0.5)``: normal draws from a generator of its own."""
    rng = np.random.default_rng(seed)

    def rand(*shape, scale=0.5):
        return rng.standard_normal(shape) * scale

    return rand


def close_all(got, want, rtol=1e-5, atol=1e-7):
    """Each array of ``got`` close to the one at its place in ``want``."""
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
