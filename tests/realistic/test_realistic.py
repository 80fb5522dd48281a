"""Realistic programs, written the way published NumPy code is, checked against
central finite differences (float64) along random directions.

A program that is refused today must be refused with an ``s2sad.errors``
exception that names this file and a line; if it starts to differentiate, its
``refused=`` mark must go (the test fails until it does, so the count in the
README, checked below, stays true).
"""

from __future__ import annotations

import builtins
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import errors
from tests.realistic import (  # noqa: F401  (each module registers its programs)
    applied,
    classic,
    layers,
    nets,
    probabilistic,
    published,
    published_courses,
    published_more,
    simulations,
    transformers,
)
from tests.realistic.registry import PROGRAMS

README = Path(__file__).resolve().parents[2] / "README.md"


def _leaves(tree):
    if dataclasses.is_dataclass(tree):
        yield from _leaves([getattr(tree, f.name) for f in dataclasses.fields(tree)])
    elif isinstance(tree, dict):
        for k in sorted(tree):
            yield from _leaves(tree[k])
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            yield from _leaves(v)
    else:
        yield tree


def _map(tree, fn):
    if dataclasses.is_dataclass(tree):
        done = {
            f.name: _map(getattr(tree, f.name), fn) for f in dataclasses.fields(tree)
        }
        return dataclasses.replace(tree, **done)
    if isinstance(tree, dict):  # the leaves in _leaves' (sorted) order
        done = {k: _map(tree[k], fn) for k in sorted(tree)}
        return {k: done[k] for k in tree}
    if isinstance(tree, tuple):
        return tuple(_map(v, fn) for v in tree)
    if isinstance(tree, list):
        return [_map(v, fn) for v in tree]
    return fn(tree)


def _axpy(a, x, y):
    """``y + a * x`` over matching pytrees (leaves are floats or float arrays)."""
    xs = iter(list(_leaves(x)))
    return _map(y, lambda leaf: leaf + a * next(xs))


def _dot(x, y):
    return float(
        sum(
            np.sum(np.asarray(a) * np.asarray(b))
            for a, b in zip(_leaves(x), _leaves(y))
        )
    )


def _direction(tree, rng):
    return _map(
        tree,
        lambda leaf: (
            rng.normal(size=np.shape(leaf)) if np.ndim(leaf) else float(rng.normal())
        ),
    )


def _directional_fd(fn, args, nums, dirs, eps=1e-6):
    def shifted(sign):
        moved = list(args)
        for i, d in zip(nums, dirs):
            moved[i] = _axpy(sign * eps, d, args[i])
        return float(fn(*moved))

    return (shifted(1) - shifted(-1)) / (2 * eps)


def _nums(p):
    return p.argnums if isinstance(p.argnums, tuple) else (p.argnums,)


@pytest.mark.parametrize(
    "prog", [p for p in PROGRAMS if not p.refused], ids=lambda p: p.name
)
def test_gradient_matches_finite_differences(prog):
    nums = _nums(prog)
    for seed in (0, 1):
        value, grads = s2sad.value_and_grad(prog.fn, argnums=prog.argnums)(
            *prog.args(seed)
        )
        np.testing.assert_allclose(value, prog.fn(*prog.args(seed)), rtol=1e-10)
        grads = grads if isinstance(prog.argnums, tuple) else (grads,)
        rng = np.random.default_rng(100 + seed)
        for _ in range(2):
            args = prog.args(seed)
            dirs = [_direction(args[i], rng) for i in nums]
            want = _directional_fd(prog.fn, prog.args(seed), nums, dirs)
            got = sum(_dot(g, d) for g, d in zip(grads, dirs))
            assert got == pytest.approx(want, rel=1e-5, abs=1e-7), prog.name


@pytest.mark.parametrize(
    "prog", [p for p in PROGRAMS if not p.refused], ids=lambda p: p.name
)
def test_forward_mode_matches_finite_differences(prog):
    """``s2sad.jvp`` along a random direction in every differentiated argument."""
    nums = _nums(prog)
    args = prog.args(0)
    dirs = [_direction(args[i], np.random.default_rng(7)) for i in nums]
    tangents = tuple(dirs) if isinstance(prog.argnums, tuple) else dirs[0]
    value, got = s2sad.jvp(prog.fn, argnums=prog.argnums)(*prog.args(0), tangents)
    np.testing.assert_allclose(value, prog.fn(*prog.args(0)), rtol=1e-10)
    want = _directional_fd(prog.fn, prog.args(0), nums, dirs)
    assert float(got) == pytest.approx(want, rel=1e-5, abs=1e-7), prog.name


@pytest.mark.parametrize(
    "prog", [p for p in PROGRAMS if p.refused], ids=lambda p: p.name
)
def test_refusal_is_clear_and_located(prog):
    expected = getattr(errors, prog.refused, None) or getattr(builtins, prog.refused)
    with pytest.raises(expected) as info:
        s2sad.grad(prog.fn, argnums=prog.argnums)(*prog.args(0))
    text = "\n".join([str(info.value), *getattr(info.value, "__notes__", [])])
    assert type(info.value).__name__ == prog.refused, text
    assert re.search(r"\.py:\d+", text), text
    if not isinstance(info.value, errors.S2SADError):
        # located, but raised while the gradient runs, not an s2sad.errors refusal
        pytest.xfail(f"known defect: {prog.refused} instead of an s2sad.errors refusal")


def test_readme_count_is_current():
    ok = sum(1 for p in PROGRAMS if not p.refused)
    text = README.read_text()
    match = re.search(r"(\d+) of (\d+) realistic programs", text)
    assert match, "README: no 'N of M realistic programs' line"
    assert (int(match[1]), int(match[2])) == (
        ok,
        len(PROGRAMS),
    ), f"README says {match[1]} of {match[2]}; the suite has {ok} of {len(PROGRAMS)}"


def test_suite_is_large():
    assert len(PROGRAMS) >= 60
