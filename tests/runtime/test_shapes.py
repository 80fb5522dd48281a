"""Rules for reshaping, transposing, reordering and building arrays."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import shapes
from s2sad.runtime.registry import lookup, lookup_attribute
from s2sad.testing import check_nondifferentiable, check_rule

RNG = np.random.default_rng(3)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


# ---------------------------------------------------------------- reshaping


def test_reshape_function_and_method_forms():
    x = rand(2, 3, 4)
    check_rule(np.reshape, x, (6, 4))
    check_rule(np.reshape, x, -1)
    check_rule(np.reshape, x, (4, 6), "F")
    check_rule(np.reshape, x, (4, 6), kwargs={"order": "F"})
    check_rule("reshape", x, 6, 4)
    check_rule("reshape", x, (6, 4))
    check_rule("reshape", x, 24, kwargs={"order": "F"})
    check_rule(np.reshape, rand(6).astype(np.float32), (2, 3))


def test_transpose_function_and_method_forms():
    x = rand(2, 3, 4)
    check_rule(np.transpose, x)
    check_rule(np.transpose, x, (1, 2, 0))
    check_rule(np.transpose, x, kwargs={"axes": (2, 0, 1)})
    check_rule("transpose", x)
    check_rule("transpose", x, 2, 0, 1)
    check_rule("transpose", x, (1, 2, 0))
    check_rule("transpose", x, [1, 2, 0])
    check_rule("transpose", x, None)
    assert lookup_attribute("T") is np.transpose
    assert lookup_attribute("mT") is np.matrix_transpose
    check_rule(np.matrix_transpose, x)


def test_ravel_flatten_squeeze_expand():
    x = rand(2, 1, 3)
    check_rule(np.ravel, x)
    check_rule(np.ravel, x, "F")
    check_rule("ravel", x)
    check_rule("flatten", x, "F")
    check_rule(np.squeeze, x)
    check_rule(np.squeeze, x, 1)
    check_rule("squeeze", x, kwargs={"axis": 1})
    check_rule(np.expand_dims, x, (0, -1))
    check_rule(np.swapaxes, x, 0, 2)
    check_rule("swapaxes", x, -1, 0)
    check_rule(np.moveaxis, rand(2, 3, 4), (0, 1), (2, 0))


def test_atleast_nd():
    for fn in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
        check_rule(fn, 1.5)
        check_rule(fn, rand(3))
        check_rule(fn, rand(2, 3))
        check_rule(fn, rand(3), rand(2, 3), 2.0)


def test_broadcasting():
    check_rule(np.broadcast_to, rand(3, 1), (2, 3, 4))
    check_rule(np.broadcast_to, 2.0, (3,))
    check_rule(np.broadcast_to, rand(4).astype(np.float32), (3, 4))
    check_rule(np.broadcast_arrays, rand(3, 1), rand(4), 1.5)


# ---------------------------------------------------------------- reordering


def test_flips_rolls_rotations():
    x = rand(3, 4, 2)
    check_rule(np.flip, x)
    check_rule(np.flip, x, 1)
    check_rule(np.flip, x, (0, 2))
    check_rule(np.fliplr, x)
    check_rule(np.flipud, x)
    check_rule(np.roll, x, 2)
    check_rule(np.roll, x, -1, 1)
    check_rule(np.roll, x, (1, 3), (0, 1))
    check_rule(np.rot90, x)
    check_rule(np.rot90, x, 3, (1, 2))
    check_rule(np.rot90, x, kwargs={"k": 2})


# ---------------------------------------------------------------- triangles and diagonals


def test_triangles_and_diagonals():
    sq, wide = rand(4, 4), rand(3, 5)
    for fn in (np.triu, np.tril):
        check_rule(fn, sq)
        check_rule(fn, wide, 1)
        check_rule(fn, rand(2, 3, 3), kwargs={"k": -1})
    check_rule(np.diag, rand(4))
    check_rule(np.diag, rand(3), -1)
    check_rule(np.diag, wide)
    check_rule(np.diag, wide, 2)
    check_rule(np.diag, sq, -2)
    check_rule(np.diagonal, wide)
    check_rule(np.diagonal, rand(2, 3, 4), 1, 1, 2)
    check_rule(
        np.diagonal, rand(2, 3, 4), kwargs={"offset": -1, "axis1": 2, "axis2": 0}
    )
    check_rule("diagonal", wide, 1)
    check_rule(np.trace, sq)
    check_rule(np.trace, wide, 1)
    check_rule(np.trace, rand(2, 3, 4), -1, 1, 2)
    check_rule("trace", wide, -1)
    check_rule(np.trace, rand(3, 3).astype(np.float32))
    check_rule(np.linalg.diagonal, rand(2, 3, 4))
    check_rule(np.linalg.diagonal, rand(3, 4), kwargs={"offset": -1})
    check_rule(np.linalg.trace, rand(2, 3, 4), kwargs={"offset": 1})
    check_rule(np.linalg.matrix_transpose, rand(2, 3, 4))


# ---------------------------------------------------------------- building arrays


def test_array_constructors_of_lists():
    a, b = rand(3), rand(3)
    for fn in (np.array, np.asarray, np.asanyarray, np.ascontiguousarray,
               np.asfortranarray, np.asarray_chkfinite, np.copy):  # fmt: skip
        check_rule(fn, [a, b])
        check_rule(fn, rand(2, 3))
    check_rule(np.array, [[1.5, 2.0], [a[0], 3.0]])
    check_rule(
        np.array, [a.astype(np.float32), b.astype(np.float32)], kwargs={"dtype": float}
    )
    check_rule(np.array, rand(3), kwargs={"ndmin": 3})
    check_rule(np.asarray, 1.5)
    check_rule("copy", rand(2, 3))
    check_rule(np.float64, 1.5)
    check_rule(np.float64, np.float32(2.5))
    for fn in (np.float32, np.float16):  # rounding defeats finite differences
        (ct,) = shapes.d_array(np.float32(2.0), fn(1.5), 1.5)
        assert ct == 2.0
    check_rule(np.astype, rand(2, 3).astype(np.float32), np.float64)
    check_rule("astype", rand(2, 3).astype(np.float32), "float64")
    (ct,) = shapes.d_astype(np.ones(2, np.float32), None, np.zeros(2), np.float32)
    assert ct.dtype == np.float64 and np.array_equal(ct, [1.0, 1.0])
    assert shapes.d_astype(np.ones(2), None, np.arange(2), float) == (None,)


def test_filled_and_spaced_constructors():
    check_rule(np.full, (2, 3), 1.5)
    check_rule(np.full, (2, 3), rand(3))
    check_rule(np.full_like, rand(2, 3), 0.5)
    check_rule(np.arange, 0.5, 4.0)
    check_rule(np.arange, 0.5, 4.0, 0.8)
    check_rule(np.linspace, 0.5, 2.5, 7)
    check_rule(np.linspace, 0.5, 2.5, 7, False)
    check_rule(np.linspace, rand(3), rand(3), 4)
    check_rule(np.linspace, rand(3), 2.0, 5, kwargs={"axis": 1})
    check_rule(np.meshgrid, rand(3), rand(4))
    check_rule(np.meshgrid, rand(3), rand(4), rand(2), kwargs={"indexing": "ij"})
    check_rule(np.meshgrid, rand(3), rand(2, 2), kwargs={"sparse": True})


NONDIFF_ARGS = {
    np.zeros: ((2, 3),),
    np.ones: ((2,),),
    np.empty: (3,),
    np.eye: (3,),
    np.identity: (2,),
    np.tri: (3,),
    np.indices: ((2, 3),),
    np.diag_indices: (3,),
    np.tril_indices: (3,),
    np.triu_indices: (3,),
    np.unravel_index: (5, (2, 3)),
    np.ravel_multi_index: (([1], [2]), (2, 3)),
    np.result_type: (np.float32, 1.0),
    np.promote_types: ("f4", "f8"),
    np.can_cast: (np.float32, np.float64),
    np.random.seed: (0,),
    np.random.rand: (3,),
    np.random.randn: (3,),
    np.random.random: (3,),
    np.random.random_sample: (3,),
    np.random.randint: (5,),
    np.random.choice: (5,),
    np.random.permutation: (4,),
    np.random.shuffle: (np.arange(4),),
    np.random.default_rng: (0,),
    np.random.binomial: (3, 0.5),
    np.random.poisson: (2.0,),
    np.random.multivariate_normal: (np.zeros(2), np.eye(2)),
}


@pytest.mark.parametrize("fn", shapes.NONDIFFERENTIABLE, ids=lambda f: f.__name__)
def test_zero_gradient_functions(fn):
    args = NONDIFF_ARGS.get(fn, (rand(2, 3),))
    if getattr(np.random, fn.__name__, None) is fn or fn in (np.empty, np.empty_like):
        assert not lookup(fn).differentiable  # random draws move: only declared
        return
    check_nondifferentiable(fn, *args)


TESTED_HERE = {
    np.reshape, np.transpose, np.matrix_transpose, np.ravel, np.squeeze, np.expand_dims,
    np.swapaxes, np.moveaxis, np.atleast_1d, np.atleast_2d, np.atleast_3d,
    np.broadcast_to, np.broadcast_arrays, np.flip, np.fliplr, np.flipud, np.roll,
    np.rot90, np.triu, np.tril, np.diag, np.diagonal,
    np.trace, np.array, np.asarray, np.asanyarray, np.ascontiguousarray,
    np.asfortranarray, np.asarray_chkfinite, np.copy, np.float64, np.float32,
    np.float16, np.astype, np.linalg.diagonal, np.linalg.trace,
    np.linalg.matrix_transpose, np.full, np.full_like, np.arange, np.linspace, np.meshgrid,
}  # fmt: skip


def test_every_rule_is_tested(family_coverage):
    family_coverage("shapes", TESTED_HERE | set(shapes.NONDIFFERENTIABLE))
