"""Forward mode (``s2sad.jvp``) on torch, array-api-strict (both devices) and
CuPy: each primitive of the allow-list, a loop and relu give NumPy's value and
tangent in float64.  NumPy's own jvp is checked first against a central finite
difference along the tangent, so the libraries meet a checked reference."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.errors import NonDifferentiableArgumentError
from tests.backends.libraries import convert
from tests.backends.test_loops import relu_loss, rnn
from tests.backends.test_primitives import PRIMITIVES, cross_entropy, rng_args


def _cases():
    for name, (fn, cases, positive) in PRIMITIVES.items():
        for i, shapes_ in enumerate(cases):
            yield pytest.param(fn, shapes_, positive, id=f"{name}-{i}")


def _tangents(args, seed=1):
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(size=np.shape(a)) for a in args)


def _directional(fn, args, ts, eps=1e-6):
    plus = fn(*[a + eps * t for a, t in zip(args, ts)], *args[len(ts) :])
    minus = fn(*[a - eps * t for a, t in zip(args, ts)], *args[len(ts) :])
    return (plus - minus) / (2 * eps)


def check_jvp(lib, fn, args, argnums, ts, rtol=1e-12):
    """NumPy's jvp against finite differences, then ``lib``'s against NumPy's."""
    value, tangent = s2sad.jvp(fn, argnums=argnums)(*args, ts)
    fd = _directional(fn, args, ts)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-7)
    got_value, got = s2sad.jvp(fn, argnums=argnums)(
        *convert(args, lib), convert(ts, lib)
    )
    assert isinstance(got, lib.array_type), type(got)
    np.testing.assert_allclose(lib.back(got_value), value, rtol=rtol, atol=1e-14)
    np.testing.assert_allclose(lib.back(got), tangent, rtol=rtol, atol=1e-13)


@pytest.mark.parametrize("fn, shapes_, positive", list(_cases()))
def test_primitive_jvp_matches_numpy(lib, fn, shapes_, positive):
    args = rng_args(shapes_, positive)
    check_jvp(lib, fn, args, (0, 1), _tangents(args))


@pytest.mark.parametrize("shape", [(4, 3, 2, 3), (2, 2, 3, 1)])
def test_rnn_loop_jvp_matches_numpy(lib, shape):
    rows, steps_, d, h = shape
    rng = np.random.default_rng(2)
    args = [rng.normal(size=(d, h)), rng.normal(size=(h, h)) * 0.5]
    args.append(rng.normal(size=(rows, steps_, d)))
    check_jvp(lib, rnn, args, (0, 1), _tangents(args[:2]), rtol=1e-11)


@pytest.mark.parametrize("bshape", [(4,), (5, 4)])
def test_relu_jvp_matches_numpy(lib, bshape):
    rng = np.random.default_rng(3)
    args = [rng.normal(size=(3, 4)), rng.normal(size=bshape), rng.normal(size=(5, 3))]
    check_jvp(lib, relu_loss, args, (0, 1), _tangents(args[:2]))


def test_cross_entropy_jvp_matches_numpy(lib):
    rng = np.random.default_rng(4)
    args = [rng.normal(size=(4, 5)), rng.normal(size=(6, 4)), rng.integers(0, 5, 6)]
    check_jvp(lib, cross_entropy, args, (0,), _tangents(args[:1]))


def test_vector_output_and_zero_tangent(lib):
    """A vector output's tangent comes back in the library, shaped like it; a
    None tangent is zero."""

    def f(x, y):
        return np.tanh(x) * y

    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(2, 3)), rng.normal(size=3)
    want = s2sad.jvp(f, argnums=(0, 1))(x, y, (np.ones((2, 3)), None))
    got = s2sad.jvp(f, argnums=(0, 1))(
        lib.to(x), lib.to(y), (lib.to(np.ones((2, 3))), None)
    )
    np.testing.assert_allclose(lib.back(got[1]), want[1], rtol=1e-14)
    np.testing.assert_allclose(want[1], (1 - np.tanh(x) ** 2) * y, rtol=1e-14)


def test_numpy_tangent_for_a_library_argument_is_refused(lib):
    with pytest.raises(NonDifferentiableArgumentError, match="one library"):
        s2sad.jvp(np.sum)(lib.to(np.ones(3)), np.ones(3))
