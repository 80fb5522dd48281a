"""np.select, np.delete, np.resize, np.quantile and np.percentile in programs:
gradients, jvps and Hessian-vector products against central differences, with
workspaces called three times.  Before, each was refused (MissingRuleError)."""

import numpy as np
import pytest

import s2sad
from tests.repeated import buffer_everything, check_repeated_calls  # noqa: F401


@pytest.fixture(autouse=True)
def _buffers(buffer_everything):  # noqa: F811
    pass


def piecewise_activation(x, w):
    z = x * w
    y = np.select([z > 0.5, z < -0.5], [z * z, -z], default=0.25 * z)
    return np.sum(y * y)


def drop_a_feature(X, w):
    kept = np.delete(X, 1, axis=1)
    return np.sum(np.tanh(kept @ w) ** 2)


def tiled_weights(x, w):
    return np.sum(x * np.resize(w, x.shape) ** 2)


def clipped_loss(r):
    # a robust loss: residuals clipped at their 90th percentile
    cap = np.percentile(np.abs(r), 90.0)
    return np.sum(np.minimum(r * r, cap * cap)) + np.quantile(r, 0.3)


def per_row_quantiles(X):
    q = np.quantile(X, 0.65, axis=1, keepdims=True)
    return np.sum((X - q) ** 2)


RNG = np.random.default_rng(11)


def _r(*shape):
    return RNG.standard_normal(shape)


@pytest.mark.parametrize("n", [3, 7])
def test_programs_against_central_differences(n):
    cases = [
        (piecewise_activation, (_r(n, 4) * 2.0, _r(4))),  # w broadcasts
        (drop_a_feature, (_r(n, 5), _r(4))),
        (tiled_weights, (_r(n, 3), _r(5))),
        (clipped_loss, (_r(4 * n),)),
        (per_row_quantiles, (_r(n, 6),)),
    ]
    for f, args in cases:
        check_repeated_calls(f, args)
        s2sad.check_grads(f, args, modes=("rev", "fwd"))


def test_second_order():
    x = _r(6)
    v = _r(6)
    for f, args in ((clipped_loss, (x,)), (per_row_quantiles, (x.reshape(2, 3),))):
        hv = s2sad.hvp(f)(*args, v.reshape(args[0].shape))
        h = 1e-5
        g = s2sad.grad(f)
        fd = (
            g(args[0] + h * v.reshape(args[0].shape))
            - g(args[0] - h * v.reshape(args[0].shape))
        ) / (2 * h)
        np.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- sequences


def smoothed_signal(x, k):
    # a moving average and a matched filter, as in signal-processing code
    y = np.convolve(x, k / np.sum(k), mode="same")
    return np.sum(np.correlate(y, x[:3], mode="valid") ** 2)


def fitted_polynomial(p, t):
    return np.sum((np.polyval(p, t) - np.sin(t)) ** 2)


def energy(y, x):
    # the trapezoid integral of y^2 over a grid that is itself differentiated
    return np.trapezoid(y**2, x) + np.trapezoid(np.tanh(y), dx=0.1)


def test_sequence_programs_against_central_differences():
    check_repeated_calls(smoothed_signal, (_r(9), np.abs(_r(3)) + 0.5))
    check_repeated_calls(fitted_polynomial, (_r(4), np.linspace(-1.0, 1.0, 7)))
    check_repeated_calls(energy, (_r(6), np.cumsum(np.abs(_r(6))) + 0.1))
    s2sad.check_grads(
        smoothed_signal, (_r(7), np.abs(_r(2)) + 0.5), modes=("rev", "fwd")
    )
    s2sad.check_grads(energy, (_r(5), np.cumsum(np.abs(_r(5)))), modes=("rev", "fwd"))
    hv = s2sad.hvp(fitted_polynomial, argnums=0)
    p, t, v = _r(4), np.linspace(-1.0, 1.0, 7), _r(4)
    g = s2sad.grad(fitted_polynomial, argnums=0)
    fd = (g(p + 1e-5 * v, t) - g(p - 1e-5 * v, t)) / 2e-5
    np.testing.assert_allclose(hv(p, t, v), fd, rtol=1e-5, atol=1e-8)


def _hvp_against_differences(f, args, k):
    rng = np.random.default_rng(5)
    v = rng.standard_normal(np.shape(args[k]))
    hv = s2sad.hvp(f, argnums=k)(*args, v)
    g = s2sad.grad(f, argnums=k)

    def at(s):
        moved = list(args)
        moved[k] = args[k] + s * v
        return g(*moved)

    np.testing.assert_allclose(hv, (at(1e-5) - at(-1e-5)) / 2e-5, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    "f, args, k",
    [
        (energy, (np.linspace(-0.5, 0.8, 6), np.cumsum(np.linspace(0.2, 0.7, 6))), 0),
        (energy, (np.linspace(-0.5, 0.8, 6), np.cumsum(np.linspace(0.2, 0.7, 6))), 1),
        (
            fitted_polynomial,
            (np.array([0.3, -0.2, 0.5, 0.1]), np.linspace(-1, 1, 5)),
            1,
        ),
        (smoothed_signal, (np.linspace(-1.0, 1.3, 8), np.array([0.5, 1.0, 0.7])), 0),
        (smoothed_signal, (np.linspace(-1.0, 1.3, 8), np.array([0.5, 1.0, 0.7])), 1),
    ],
)
def test_second_order_of_the_sequence_rules(f, args, k):
    _hvp_against_differences(f, args, k)
