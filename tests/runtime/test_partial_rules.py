"""Partial rules (one cotangent only) must agree with the full rule they shortcut."""

import numpy as np
import pytest

from s2sad.runtime import registry
from s2sad.runtime.support import unbroadcast

SHAPES = {
    np.matmul: [
        ((3, 4), (4, 2)),
        ((4,), (4, 2)),
        ((3, 4), (4,)),
        ((2, 3, 4), (4, 5)),
        ((4,), (4,)),
        ((4,), (2, 4, 5)),
        ((2, 3, 4), (4,)),
    ],
}


@pytest.mark.parametrize("primal", list(SHAPES), ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_partial_rules_match_full_rule(primal, dtype):
    rng = np.random.default_rng(0)
    full = registry.lookup(primal).adjoint
    for shapes in SHAPES[primal]:
        args = [rng.normal(size=s).astype(dtype) for s in shapes]
        ans = primal(*args)
        g = rng.normal(size=np.shape(ans)).astype(dtype)
        expected = full(g, ans, *args)
        if registry.lookup(primal).broadcasts:  # the compiler sums these
            expected = [unbroadcast(e, a) for e, a in zip(expected, args)]
        for i in range(len(args)):
            partial = registry.lookup_partial(primal, i)
            assert partial is not None
            (got,) = partial.adjoint(g, ans, *args)
            assert got.shape == args[i].shape and got.dtype == dtype
            np.testing.assert_allclose(got, expected[i], rtol=1e-5)
