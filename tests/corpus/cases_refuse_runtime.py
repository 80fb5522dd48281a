"""Corpus: what s2sad refuses only where it runs (an unsupported statement in a
branch the inputs do not take), and context managers that change no value."""

import contextlib
import warnings

import numpy as np

from tests.corpus.registry import case, const, mat, vec


@case(vec(4), const("fast"))
def try_in_branch_not_taken(x, mode):
    if mode == "fast":
        y = np.sum(np.sin(x) ** 2)
    else:
        try:
            y = np.sum(x)
        except ValueError:
            y = 0.0
    return y * 2.0


def _clip_loss(x, strict):
    if strict:
        assert {1, 2}  # a set literal: refused if this line runs
        y = x
    else:
        y = np.tanh(x)
    return np.sum(y**2)


@case(mat(3, 2))
def refusal_in_callee_branch(x):
    total = 0.0
    for i in range(2):
        total = total + _clip_loss(x * (i + 1), False)
    return total


@case(vec(3, positive=True))
def errstate_around_log(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(x) * x
    return np.sum(y)


@case(mat(3, 3))
def catch_warnings_in_loop(x):
    h = x
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            h = np.tanh(h @ x)
    return np.sum(h**2)


@case(vec(3))
def nested_neutral_contexts(x):
    with np.printoptions(precision=3), contextlib.nullcontext():
        with np.errstate(over="ignore"):
            y = np.exp(x) * x
    return np.sum(y)
