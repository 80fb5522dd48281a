"""runtime/steps.py: stepwise_matmul (hoist's products) and matmul_zeros (peel's)."""

import numpy as np
import pytest

from s2sad.runtime.steps import matmul_zeros, stepwise_matmul
from s2sad.testing import check_rule

rng = np.random.default_rng(0)

# (x shape, w shape, axis): a matrix w (one product), a vector, a stack of matrices
CASES = [
    ((5, 4, 3), (3, 2), 1),
    ((4, 5, 3), (3, 2), 0),
    ((2, 3, 4, 3), (3, 2), 2),
    ((4, 3), (3, 2), 0),
    ((5, 4, 3), (3,), 1),
    ((5, 4, 3), (2, 3, 2), 1),
    ((4, 3), (3,), 0),
]


def _step(x, w, axis, t):
    return x[(slice(None),) * axis + (t,)] @ w


@pytest.mark.parametrize("xs,ws,axis", CASES)
@pytest.mark.parametrize("steps", [range(4), range(1, 3), range(-2, 0), range(0)])
def test_each_step_is_the_per_step_product(xs, ws, axis, steps):
    x, w = rng.normal(size=xs), rng.normal(size=ws)
    out = stepwise_matmul(x, w, axis, steps)
    for t in steps:
        got = out[(slice(None),) * axis + (t,)]
        np.testing.assert_allclose(got, _step(x, w, axis, t), rtol=1e-12, atol=1e-14)


def test_out_buffer_is_used_when_it_fits():
    x, w = rng.normal(size=(5, 4, 3)), rng.normal(size=(3, 2))
    buf = np.empty((5, 4, 2))
    assert stepwise_matmul(x, w, 1, range(4), out=buf) is buf
    np.testing.assert_allclose(buf, x @ w, rtol=1e-12)
    wrong = np.empty((4, 5, 2))  # a stale buffer of another shape is ignored
    res = stepwise_matmul(x, w, 1, range(4), out=wrong)
    assert res is not wrong
    np.testing.assert_allclose(res, x @ w, rtol=1e-12)


@pytest.mark.parametrize("xs,ws,axis", CASES)
def test_rules_against_finite_differences(xs, ws, axis):
    x, w = rng.normal(size=xs), rng.normal(size=ws)
    n = xs[axis]
    check_rule(stepwise_matmul, x, w, axis, range(n), argnums=(0, 1))
    check_rule(stepwise_matmul, x, w, axis, range(1, n), argnums=(0, 1))


def test_matmul_zeros():
    a, b = np.zeros((3, 4), np.float32), rng.normal(size=(4, 2)).astype(np.float32)
    z = matmul_zeros(a, b)
    assert z.shape == (3, 2) and z.dtype == np.float32 and not z.any()
    buf = np.ones((3, 2), np.float32)
    assert matmul_zeros(a, b, out=buf) is buf and not buf.any()
    b[0, 0] = np.inf  # 0 * inf is nan: the product as written
    with np.errstate(invalid="ignore"):
        np.testing.assert_equal(matmul_zeros(a, b), a @ b)
    v, c = np.zeros(4), np.ones((4, 2))  # a vector times a matrix: as written
    np.testing.assert_equal(matmul_zeros(v, c), v @ c)
