"""d_reshape's fast path: a C-contiguous g of x's dtype comes back as a view."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import shapes

RNG = np.random.default_rng(16)


@pytest.mark.parametrize(
    "gshape,args,kwargs",
    [
        ((64, 16, 8, 8), (64, 16, 8, 8), {}),
        ((64, 128), (64, -1), {}),
        ((6, 4), ((6, 4),), {}),
        ((6, 4), ((6, 4), "F"), {}),
        ((6, 4), (6, 4), {"order": "F"}),
        ((6, 4), (6, 4), {"order": "C"}),
    ],
    ids=str,
)
@pytest.mark.parametrize("layout", ["c", "transposed", "f32 into f64"])
def test_same_values_as_the_general_path(gshape, args, kwargs, layout):
    x = RNG.standard_normal((gshape[0], int(np.prod(gshape[1:]))))
    g = RNG.standard_normal(gshape)
    if layout == "transposed":
        g = np.ascontiguousarray(g.T).T
    if layout == "f32 into f64":
        x = x.astype(np.float32)
    want = np.reshape(
        g, x.shape, order=kwargs.get("order", "F" if "F" in args else "C")
    )
    for into in [None, (np.full(x.shape, np.nan, x.dtype),)]:
        (got,) = shapes.d_reshape(g, None, x, *args, into=into, **kwargs)
        assert got.shape == x.shape and got.dtype == x.dtype
        np.testing.assert_array_equal(got, want.astype(x.dtype))
        if layout == "c" and not kwargs and "F" not in args:
            assert got.base is g  # a view, no buffer
