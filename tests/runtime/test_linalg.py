"""numpy.linalg rules against finite differences (which see the triangle read)."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import linalg
from s2sad.testing import check_rule

RNG = np.random.default_rng(17)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


def well_conditioned(*shape: int) -> np.ndarray:
    n = shape[-1]
    return rand(*shape) + 3.0 * np.eye(n)


def spd(*shape: int) -> np.ndarray:
    m = rand(*shape)
    return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])


def nonsymmetric_spd(*shape: int) -> np.ndarray:
    """Positive definite in each triangle but not symmetric: shows which one is read."""
    return spd(*shape) + np.triu(rand(*shape), 1)


BATCHES = [(3,), (2, 3), (2, 2, 4)]


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)], ids=str)
@pytest.mark.parametrize("fn", [np.linalg.inv, np.linalg.det, np.linalg.slogdet])
def test_inverse_and_determinants(fn, shape):
    check_rule(fn, well_conditioned(*shape))
    check_rule(fn, well_conditioned(*shape).astype(np.float32), rtol=1e-6)


def test_det_of_negative_determinant_and_slogdet_sign_only():
    a = well_conditioned(3, 3)
    a[0] *= -1
    check_rule(np.linalg.det, a)
    assert linalg.d_slogdet([1.0, None], np.linalg.slogdet(a), a) == (None,)


@pytest.mark.parametrize(
    "sa,sb", [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 1)), ((2, 3, 3), (3,)),
              ((2, 3, 3), (3, 4)), ((3, 3), (2, 3, 2))],
    ids=str,
)  # fmt: skip
def test_solve(sa, sb):
    check_rule(np.linalg.solve, well_conditioned(*sa), rand(*sb))


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)], ids=str)
def test_cholesky_reads_one_triangle(shape):
    a = nonsymmetric_spd(*shape)
    check_rule(np.linalg.cholesky, a)
    check_rule(np.linalg.cholesky, np.swapaxes(a, -1, -2), kwargs={"upper": True})
    (ct,) = linalg.d_cholesky(np.ones(shape), np.linalg.cholesky(a), a)
    assert np.all(np.triu(ct, 1) == 0)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)], ids=str)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_values_and_vectors(shape, uplo):
    a = spd(*shape) + np.triu(rand(*shape), 1) * 0.5  # distinct eigenvalues
    check_rule(np.linalg.eigh, a, uplo)
    check_rule(np.linalg.eigvalsh, a, kwargs={"UPLO": uplo})


def test_eigh_eigenvalues_only_and_float32():
    a = spd(3, 3)
    w, v = np.linalg.eigh(a)
    (ct,) = linalg.d_eigh([np.ones(3), None], (w, v), a)
    # sum of eigenvalues is the trace: its gradient is the identity
    assert np.allclose(ct, np.eye(3))
    check_rule(np.linalg.eigvalsh, a.astype(np.float32), rtol=1e-5)


def test_singular_values():
    check_rule(np.linalg.svd, rand(4, 3), kwargs={"compute_uv": False})
    check_rule(np.linalg.svdvals, rand(2, 3, 5))
    a = rand(3, 3)
    u, s, vh = np.linalg.svd(a)
    (ct,) = linalg.d_svd([None, np.ones(3), None], (u, s, vh), a)
    assert np.allclose(ct, u @ vh)
    with pytest.raises(NotImplementedError):
        linalg.d_svd([np.ones((3, 3)), None, None], (u, s, vh), a)


@pytest.mark.parametrize("n", [0, 1, 2, 3, -2])
def test_matrix_power(n):
    check_rule(np.linalg.matrix_power, well_conditioned(3, 3) / 3.0, n)
    check_rule(np.linalg.matrix_power, well_conditioned(2, 3, 3) / 3.0, n)


def test_multi_dot():
    check_rule(np.linalg.multi_dot, [rand(2, 3), rand(3, 4), rand(4, 2)])
    check_rule(np.linalg.multi_dot, [rand(3), rand(3, 4), rand(4, 2), rand(2)])
    check_rule(np.linalg.multi_dot, [rand(3), rand(3, 4), rand(4)])


def test_every_rule_is_tested(family_coverage):
    tested = {np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.solve,
              np.linalg.cholesky, np.linalg.eigh, np.linalg.eigvalsh, np.linalg.svd,
              np.linalg.svdvals, np.linalg.matrix_power, np.linalg.multi_dot}  # fmt: skip
    family_coverage("linalg", tested)
