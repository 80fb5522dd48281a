"""Slice steps the hoist pass turns into one ``stepwise_matmul`` (session 6, issue 16):
exact tilings, offsets, the middle axis, steps walked backwards, overlapping
slices, ranges with a start or a step, negative bounds, a vector weight, and the
input written after the loop.  Each is checked by :func:`s2sad.check_grads`
(reverse, forward, ``order=2``) and, buffered, against central differences over
repeated calls.
"""

import numpy as np
import pytest

import s2sad
from s2sad.runtime import workspace
from tests.repeated import check_repeated_calls


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def exact(x, W):
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(3):
        h = np.tanh(x[:, t * 2 : (t + 1) * 2] @ W + h)
    return np.sum(h * h)


def offset(x, W):
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(3):
        h = np.tanh(x[:, t * 2 + 1 : t * 2 + 3] @ W + h)
    return np.sum(h * h)


def middle_axis(x, W):
    h = 0.0
    for t in range(3):
        h = np.tanh(x[:, t * 2 : (t + 1) * 2, :] @ W + h)
    return np.sum(h * h)


def reversed_steps(x, W):
    h = np.zeros((x.shape[0], W.shape[1]))
    n = 3
    for t in range(n):
        lo = (n - 1 - t) * 2
        h = np.tanh(x[:, lo : lo + 2] @ W + h)
    return np.sum(h * h)


def overlapping(x, W):
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(4):
        h = np.tanh(x[:, t : t + 2] @ W + h)
    return np.sum(h * h)


def range_start(x, W):
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(1, 3):
        h = np.tanh(x[:, t * 2 : (t + 1) * 2] @ W + h)
    return np.sum(h * h)


def range_step(x, W):
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(0, 3, 2):
        h = np.tanh(x[:, t * 2 : (t + 1) * 2] @ W + h)
    return np.sum(h * h)


def negative_bounds(x, W):
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(3):
        h = np.tanh(x[:, -(t + 1) * 2 : 6 - t * 2] @ W + h)
    return np.sum(h * h)


def vector_w(x, w):
    s = 0.0
    for t in range(3):
        s = s + np.sum(np.tanh(x[:, t * 2 : (t + 1) * 2] @ w))
    return s


def row_steps(x, W):
    h = 0.0
    for t in range(3):
        h = np.tanh(x[t * 2 : (t + 1) * 2] @ W + h)
    return np.sum(h * h)


def tile_then_mutate_later(x, W):
    h = np.zeros((x.shape[0], W.shape[1]))
    for t in range(3):
        h = np.tanh(x[:, t * 2 : (t + 1) * 2] @ W + h)
    x[:, 0] = 0.0
    return np.sum(h * h)


RNG = np.random.default_rng(61)
W = RNG.standard_normal((2, 3)) * 0.5
CASES = [
    (exact, (RNG.standard_normal((4, 6)), W)),
    (offset, (RNG.standard_normal((4, 7)), W)),
    (middle_axis, (RNG.standard_normal((2, 6, 3)), RNG.standard_normal((3, 4)))),
    (reversed_steps, (RNG.standard_normal((4, 6)), W)),
    (overlapping, (RNG.standard_normal((4, 5)), W)),
    (range_start, (RNG.standard_normal((4, 6)), W)),
    (range_step, (RNG.standard_normal((4, 6)), W)),
    (negative_bounds, (RNG.standard_normal((4, 6)), W)),
    (vector_w, (RNG.standard_normal((4, 6)), RNG.standard_normal(2))),
    (row_steps, (RNG.standard_normal((6, 2)), W)),
    (tile_then_mutate_later, (RNG.standard_normal((4, 6)), W)),
]
IDS = [c[0].__name__ for c in CASES]


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_reverse_forward_and_second_order(f, args):
    s2sad.check_grads(f, [a.copy() for a in args], order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_buffered_against_finite_differences(f, args, monkeypatch):
    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    vg = check_repeated_calls(f, args, argnums=(0, 1))
    if f is not row_steps:  # a row slice is not a step the pass hoists
        assert "stepwise_matmul(" in vg.source or "stepwise_ahead(" in vg.source
