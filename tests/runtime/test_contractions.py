"""matmul, dot, tensordot, einsum and friends against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import contractions
from s2sad.testing import check_rule

RNG = np.random.default_rng(11)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
    ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
    ((4,), (2, 4, 5)), ((2, 3, 4), (4,)),
]  # fmt: skip


@pytest.mark.parametrize("sx,sy", MATMUL_SHAPES, ids=str)
def test_matmul(sx, sy):
    check_rule(np.matmul, rand(*sx), rand(*sy))


VECTOR_SHAPES = [
    ((3, 4), (4,)), ((4,), (4, 5)), ((4,), (4,)), ((2, 3, 4), (4,)), ((4,), (2, 4, 5)),
    ((1, 3, 4), (4,)), ((4,), (3, 4, 1)),
]  # fmt: skip


@pytest.mark.parametrize("sx,sy", VECTOR_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matmul_vector_operands_match_the_matrix_form(sx, sy, dtype):
    """A 1-d operand takes outer products and matrix-vector products; they agree
    with the general (matrix-shaped) path, for the full and the partial rules."""
    x, y = rand(*sx).astype(dtype), rand(*sy).astype(dtype)
    g = np.asarray(rand(*np.shape(x @ y))).astype(dtype)
    want = contractions._matmul_general(g, x, y)
    got = contractions.d_matmul(g, None, x, y)
    alone = (
        contractions.d_matmul_lhs(g, None, x, y)[0],
        contractions.d_matmul_rhs(g, None, x, y)[0],
    )
    for i, w in enumerate(want):
        for c in (got[i], alone[i]):
            assert c.shape == w.shape and c.dtype == dtype
            np.testing.assert_allclose(
                c, w, rtol=1e-5 if dtype == np.float32 else 1e-12
            )


@pytest.mark.parametrize("sx,sy", VECTOR_SHAPES, ids=str)
def test_matmul_vector_operands_finite_differences(sx, sy):
    check_rule(np.matmul, rand(*sx), rand(*sy))
    if len(sx) <= 2 and len(sy) <= 2:
        check_rule(np.dot, rand(*sx), rand(*sy))


def test_matmul_vector_with_strided_operands():
    """Views (a transposed matrix, a strided vector) take the vector path too."""
    x, y = rand(4, 3).T, rand(8)[::2]
    check_rule(np.matmul, x, y)
    check_rule(np.matmul, y, rand(4, 6)[:, ::2])


def test_matmul_float32_and_mixed_dtypes():
    check_rule(np.matmul, rand(3, 4).astype(np.float32), rand(4, 5).astype(np.float32))
    check_rule(np.matmul, rand(3, 4).astype(np.float32), rand(4, 5))
    check_rule(np.matmul, rand(4).astype(np.float32), rand(2, 4, 5).astype(np.float32))


DOT_SHAPES = [
    ((), ()), ((), (3, 4)), ((3, 4), ()), ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)),
    ((3, 4), (4, 5)), ((2, 3, 4), (4,)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (6, 4, 5)),
    ((4,), (2, 4, 5)),
]  # fmt: skip


@pytest.mark.parametrize("sa,sb", DOT_SHAPES, ids=str)
def test_dot(sa, sb):
    check_rule(np.dot, rand(*sa), rand(*sb))


def test_dot_method_and_python_floats():
    check_rule("dot", rand(3, 4), rand(4))
    check_rule(np.dot, 1.5, rand(3))
    check_rule(np.dot, rand(3, 4).astype(np.float32), rand(4, 2).astype(np.float32))


@pytest.mark.parametrize(
    "sa,sb",
    [((), (3,)), ((4,), (4,)), ((3, 4), (4,)), ((2, 3, 4), (5, 4)), ((3,), (2, 3))],
    ids=str,
)
def test_inner(sa, sb):
    check_rule(np.inner, rand(*sa), rand(*sb))


def test_outer_vdot_kron():
    check_rule(np.outer, rand(3), rand(4))
    check_rule(np.outer, rand(2, 3), rand(4))
    check_rule(np.vdot, rand(2, 3), rand(3, 2))
    check_rule(np.kron, rand(2, 3), rand(4, 2))
    check_rule(np.kron, rand(3), rand(2, 2))
    check_rule(np.kron, rand(2, 2, 2), rand(3))
    check_rule(np.kron, rand(2, 3).astype(np.float32), rand(2).astype(np.float32))


@pytest.mark.parametrize(
    "sa,sb,axes",
    [((3, 4), (4, 5), 1), ((2, 3, 4), (3, 4, 5), 2), ((3, 4), (5, 6), 0),
     ((2, 3, 4), (4, 2, 5), ([0, 2], [1, 0])), ((3, 4), (4, 3), ((0, 1), (1, 0))),
     ((3, 4), (5, 3), (0, 1)), ((3, 4), (5, 4), (-1, -1))],
    ids=str,
)  # fmt: skip
def test_tensordot(sa, sb, axes):
    check_rule(np.tensordot, rand(*sa), rand(*sb), axes)
    check_rule(np.tensordot, rand(*sa), rand(*sb), kwargs={"axes": axes})


EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]), ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("ij->ji", [(3, 4)]),
    ("ba", [(3, 4)]), ("i,i->", [(4,), (4,)]), ("i,j->ij", [(3,), (4,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk", [(1, 3, 4), (2, 4, 5)]), ("i...,i->...", [(3, 2, 2), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), ("iij,j->i", [(3, 3, 2), (2,)]),
    ("ij,kl->", [(2, 3), (4, 5)]), ("ij,ij->ij", [(1, 3), (4, 3)]),
    ("i,i,i->i", [(3,), (3,), (3,)]), ("...", [(2, 3)]), ("i...->...", [(3, 2)]),
]  # fmt: skip


@pytest.mark.parametrize("spec,shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum(spec, shapes):
    check_rule(np.einsum, spec, *[rand(*s) for s in shapes])


def test_einsum_sublist_form_and_float32():
    a, b = rand(3, 4), rand(4, 5)
    check_rule(np.einsum, a, [0, 1], b, [1, 2], [0, 2])
    check_rule(np.einsum, a, [0, 1], b, [1, 2])
    check_rule(np.einsum, rand(2, 3, 4), [Ellipsis, 1], rand(4), [1], [Ellipsis])
    check_rule(np.einsum, "ij,j->i", a.astype(np.float32), rand(4).astype(np.float32))
    check_rule(np.einsum, "ij,jk->ik", a, b, kwargs={"optimize": True})


@pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")
def test_cross():
    check_rule(np.cross, rand(3), rand(3))
    check_rule(np.cross, rand(5, 3), rand(3))
    check_rule(np.cross, rand(3, 5), rand(3, 5), kwargs={"axis": 0})
    check_rule(np.cross, rand(4, 2), rand(4, 2))


def test_array_api_spellings():
    check_rule(np.linalg.matmul, rand(2, 3, 4), rand(4, 2))
    check_rule(np.linalg.outer, rand(3), rand(4))
    check_rule(np.linalg.tensordot, rand(3, 4), rand(4, 5), kwargs={"axes": 1})
    check_rule(np.linalg.cross, rand(4, 3), rand(4, 3))
    for fn in (np.vecdot, np.linalg.vecdot):
        check_rule(fn, rand(3, 4), rand(4))
        check_rule(fn, rand(3, 4), rand(2, 1, 4))
        check_rule(fn, rand(3, 4), rand(3, 1), kwargs={"axis": 0})
    if hasattr(np, "matvec"):
        check_rule(np.matvec, rand(3, 4), rand(4))
        check_rule(np.matvec, rand(2, 3, 4), rand(5, 1, 4))
        check_rule(np.vecmat, rand(3), rand(3, 4))
        check_rule(np.vecmat, rand(2, 1, 3), rand(5, 3, 4))


def test_every_rule_is_tested(family_coverage):
    tested = {np.matmul, np.dot, np.inner, np.outer, np.vdot, np.kron, np.tensordot,
              np.einsum, np.cross, np.linalg.matmul, np.linalg.outer, np.linalg.cross,
              np.linalg.tensordot, np.vecdot, np.linalg.vecdot}  # fmt: skip
    if hasattr(np, "matvec"):
        tested |= {np.matvec, np.vecmat}
    family_coverage("contractions", tested)
    assert contractions.einsum_grads is not None
