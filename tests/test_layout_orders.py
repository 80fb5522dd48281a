"""reshape/ravel with order='A' or 'K': the order follows the array's layout
('A': Fortran order for a Fortran-ordered array; 'K': memory order).

The gradient read the cotangent back in C order for 'A' (silently wrong for
``x.T.reshape(-1, order='A')``) and crashed for 'K' (np.reshape takes no 'K');
the tangent of an argument laid out otherwise than its tangent was read in the
tangent's layout.  Both now read in x's order (runtime/shapes.py memory_order);
'K' of an array in neither C nor Fortran order is refused.
"""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad


def a_of_transpose(x):
    w = np.arange(1.0, x.size + 1)
    return np.sum(x.T.reshape(x.size, order="A") * w) + np.sum(
        np.cos(x.T.ravel("A")) * w
    )


def k_of_transpose(x):
    w = np.arange(1.0, x.size + 1)
    return np.sum(np.ravel(x.T, "K") * w) + np.sum(np.ravel(x, order="K") ** 2 * w)


def a_of_argument(x):
    # x itself may be Fortran-ordered: its tangent (C-ordered) is read in x's order
    return np.sum(np.sin(x.reshape(-1, order="A")) * np.arange(1.0, x.size + 1))


@pytest.mark.parametrize("f", [a_of_transpose, k_of_transpose, a_of_argument])
@pytest.mark.parametrize("shape", [(2, 3), (3, 4), (2, 3, 2)])
@pytest.mark.parametrize("fortran", [False, True])
def test_layout_orders(f, shape, fortran):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape)
    if fortran:
        x = np.asfortranarray(x)
    v = rng.standard_normal(shape)  # C-ordered
    expected = numerical_grad(f, [x])
    np.testing.assert_allclose(s2sad.grad(f)(x), expected, rtol=1e-6, atol=1e-8)
    _, tangent = s2sad.jvp(f)(x, v)
    np.testing.assert_allclose(tangent, np.sum(expected * v), rtol=1e-6)


def k_of_strided(x):
    return np.sum(np.ravel(x[:, ::2].T[::-1], "K") ** 2)


@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_k_of_other_layouts_refused(mode):
    x = np.ones((3, 4))
    with pytest.raises(NotImplementedError, match="order='K'") as info:
        if mode == "grad":
            s2sad.grad(k_of_strided)(x)
        else:
            s2sad.jvp(k_of_strided)(x, x)
    assert "test_layout_orders.py" in "".join(info.value.__notes__)
