"""Rules for reshaping, joining, splitting and copying entries around."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import shapes
from s2sad.runtime.registry import lookup, lookup_attribute
from s2sad.testing import check_nondifferentiable, check_rule

RNG = np.random.default_rng(3)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


TESTED: set = set()


def check(fn, *args, **kw):
    TESTED.add(fn)
    check_rule(fn, *args, **kw)


# ---------------------------------------------------------------- reshaping


def test_reshape_function_and_method_forms():
    x = rand(2, 3, 4)
    check(np.reshape, x, (6, 4))
    check(np.reshape, x, -1)
    check(np.reshape, x, (4, 6), "F")
    check(np.reshape, x, (4, 6), kwargs={"order": "F"})
    check_rule("reshape", x, 6, 4)
    check_rule("reshape", x, (6, 4))
    check_rule("reshape", x, 24, kwargs={"order": "F"})
    check(np.reshape, rand(6).astype(np.float32), (2, 3))


def test_transpose_function_and_method_forms():
    x = rand(2, 3, 4)
    check(np.transpose, x)
    check(np.transpose, x, (1, 2, 0))
    check(np.transpose, x, kwargs={"axes": (2, 0, 1)})
    check_rule("transpose", x)
    check_rule("transpose", x, 2, 0, 1)
    check_rule("transpose", x, (1, 2, 0))
    check_rule("transpose", x, [1, 2, 0])
    check_rule("transpose", x, None)
    assert lookup_attribute("T") is np.transpose
    assert lookup_attribute("mT") is np.matrix_transpose
    check(np.matrix_transpose, x)


def test_ravel_flatten_squeeze_expand():
    x = rand(2, 1, 3)
    check(np.ravel, x)
    check(np.ravel, x, "F")
    check_rule("ravel", x)
    check_rule("flatten", x, "F")
    check(np.squeeze, x)
    check(np.squeeze, x, 1)
    check_rule("squeeze", x, kwargs={"axis": 1})
    check(np.expand_dims, x, (0, -1))
    check(np.swapaxes, x, 0, 2)
    check_rule("swapaxes", x, -1, 0)
    check(np.moveaxis, rand(2, 3, 4), (0, 1), (2, 0))


def test_atleast_nd():
    for fn in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
        check(fn, 1.5)
        check(fn, rand(3))
        check(fn, rand(2, 3))
        check(fn, rand(3), rand(2, 3), 2.0)


def test_broadcasting():
    check(np.broadcast_to, rand(3, 1), (2, 3, 4))
    check(np.broadcast_to, 2.0, (3,))
    check(np.broadcast_to, rand(4).astype(np.float32), (3, 4))
    check(np.broadcast_arrays, rand(3, 1), rand(4), 1.5)


def test_every_rule_is_tested(family_coverage):
    family_coverage("shapes", TESTED | set(getattr(shapes, "NONDIFFERENTIABLE", ())))
