"""Session 6 (issue 16) integration: the cache key and ``grad``'s fast path across
argument types, and the bugs the session's fuzzing and adversarial programs found
(each test says which), checked against central finite differences in float64.
"""

import numpy as np
import pytest

import s2sad


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


# -- the cache key and grad's fast path --------------------------------------------


def tanh_dot(x, w):
    return np.sum(np.tanh(np.multiply(x, w)) * w) + np.sum(x) * 0.5


def test_one_gradient_called_with_floats_float32_lists_and_tuples():
    """The same ``grad`` object called with a float, a NumPy float32, a float32
    array, a list and a tuple (and back): each call's gradient is right, in the
    argument's own type and dtype (the cache key and the fast path tell them apart)."""
    w = np.array([0.3, -0.7, 1.1])
    gr = s2sad.grad(tanh_dot, argnums=(0, 1))
    calls = [
        (0.4, w),
        (np.float32(0.4), w),
        (0.4, w.astype(np.float32)),
        (0.4, [0.3, -0.7, 1.1]),
        (0.4, (0.3, -0.7, 1.1)),
        (np.array(0.4), w),
        (0.4, w),
    ]
    x64 = 0.4
    want_x = float(np.sum(w * w * (1 - np.tanh(x64 * w) ** 2)) + 0.5)
    want_w = np.tanh(x64 * w) + x64 * w * (1 - np.tanh(x64 * w) ** 2)
    for x, ws in calls + calls:
        gx, gw = gr(x, ws)
        tol = (
            1e-6
            if np.result_type(x, *np.asarray(ws).ravel()[:1]) == np.float64
            else 1e-3
        )
        if isinstance(ws, np.ndarray) and ws.dtype == np.float32:
            tol = 1e-3
        np.testing.assert_allclose(float(gx), want_x, rtol=tol)
        np.testing.assert_allclose(np.asarray(gw, dtype=float), want_w, rtol=tol)
        assert type(gw) is type(ws)
        if isinstance(ws, np.ndarray):
            assert gw.dtype == ws.dtype


MODULE = """
import numpy as np


def f(x, w):
    return np.sum(np.tanh(x * w) * w)
"""


class _SinNumPy:
    """``np`` with ``tanh`` standing for ``sin``."""

    def __getattr__(self, name):
        return np.sin if name == "tanh" else getattr(np, name)


def test_fast_path_after_np_is_rebound(tmp_path, monkeypatch):
    """A module's ``np`` rebound between calls of one gradient (which had taken
    the fast path): the next call differentiates the new ``np``'s function."""
    import importlib

    (tmp_path / "s6_rebound.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("s6_rebound")
    w = np.array([0.3, -0.7, 1.1])
    for x in (0.4, 0.4):
        gr = s2sad.grad(mod.f, argnums=(0, 1))
        np.testing.assert_allclose(
            gr(x, w)[1], np.tanh(x * w) + x * w / np.cosh(x * w) ** 2
        )
        gr(x, w)  # the fast path from here on
        monkeypatch.setattr(mod, "np", _SinNumPy())
        np.testing.assert_allclose(gr(x, w)[1], np.sin(x * w) + x * w * np.cos(x * w))
        monkeypatch.setattr(mod, "np", np)
        np.testing.assert_allclose(
            gr(x, w)[1], np.tanh(x * w) + x * w / np.cosh(x * w) ** 2
        )


# -- found by the second-order sweep (seed 6005, program 78, all new forms) --------


def mean_of_a_numpy_scalar(x, s):
    s1 = np.log(s * s + 1.0)  # a NumPy float: the methods pass writes s1.mean()
    return np.sum(x * np.mean(s1)) + np.max(s1) * np.sum(s1)


def method_of_a_numpy_scalar(x, s):
    s1 = np.log(s * s + 1.0)
    return np.sum(x * s1.mean()) + s1.sum()


def attribute_of_a_numpy_scalar(x, s):
    s1 = np.log(s * s + 1.0)
    return np.sum(x * s1.T) + s1.reshape(1)[0]


@pytest.mark.parametrize(
    "f",
    [mean_of_a_numpy_scalar, method_of_a_numpy_scalar, attribute_of_a_numpy_scalar],
)
def test_forward_mode_of_a_method_of_a_numpy_scalar(f):
    """``s1 = np.log(s * s + 1.0)`` of a Python float ``s`` is a NumPy float, whose
    tangent is a Python float: forward mode called ``t_s1.mean()`` on it
    (AttributeError), in ``s2sad.jvp`` and in the derivative of the emitted
    gradient (where the methods pass had written ``s1.mean()``); ``t_s1.T`` the
    same.  The tangent now takes the receiver's type first
    (``tangents.method_receiver``)."""
    x = np.array([0.3, -0.2, 0.5])
    s2sad.check_grads(f, (x, 0.7), order=2, modes=("rev", "fwd"))
    value, tangent = s2sad.jvp(f, (x, 0.7), (np.ones(3), 1.0))
    h = 1e-6
    want = (f(x + h, 0.7 + h) - f(x - h, 0.7 - h)) / (2 * h)
    np.testing.assert_allclose(tangent, want, rtol=1e-6)
    assert value == f(x, 0.7)


# -- found while checking the cache key on dicts: ``for k in d`` ---------------------


def loop_over_dict_argument(x, d):
    s = 0.0
    for k in d:  # the keys: 0 and 1 (s2sad read d[0], d[1], the values)
        s = s + x[k] * 2.0
    return s


def loop_over_local_dict(x, w):
    d = {0: x[1] * w, 2: x[0]}
    s = 0.0
    for k in d:  # noqa: PLC0206 - the pattern under test
        s = s + d[k] * x[k]
    return s


def loop_over_nested_dict(x, p):
    s = 0.0
    for name in p["layers"]:
        s = s + np.sum(x * p["layers"][name])
    return s


def test_loop_over_a_dict_iterates_its_keys():
    """``for k in d`` over a dict (an argument, a path in one, or a local dict
    display) iterates the keys, as Python does; s2sad indexed ``d[0], d[1]...``:
    a silent wrong value and gradient for ``{0: 1, 1: 1}``, a TypeError or a
    KeyError for other dicts (present before session 6)."""
    x = np.array([1.0, 2.0, 3.0])
    value, g = s2sad.value_and_grad(loop_over_dict_argument, argnums=0)(x, {0: 1, 1: 1})
    assert value == loop_over_dict_argument(x, {0: 1, 1: 1}) == 6.0
    np.testing.assert_array_equal(g, [2.0, 2.0, 0.0])
    s2sad.check_grads(loop_over_local_dict, (x, 0.7), order=2, modes=("rev", "fwd"))
    a, b = np.array([0.3, 0.4]), np.array([1.0, -0.5])
    p = {"layers": {"a": np.array([1.0, 1.0]), "b": b}}
    s2sad.check_grads(loop_over_nested_dict, (a, p), order=2, modes=("rev", "fwd"))
    value, (ga, gp) = s2sad.value_and_grad(loop_over_nested_dict, argnums=(0, 1))(a, p)
    assert value == loop_over_nested_dict(a, p)
    np.testing.assert_allclose(ga, [2.0, 0.5])
    np.testing.assert_allclose(gp["layers"]["b"], a)


def _tuple_concat(x):
    parts = (x, x * 2.0)
    more = parts + (x * 3.0,)
    return np.sum(more[0] * more[2])


def _list_repeat(x):
    parts = [x * 2.0]
    more = parts * 2
    return np.sum(more[0] * more[1])


def _tuple_concat_argument(x, parts):
    more = parts + (x * 3.0,)  # parts: a tuple only the call tells
    return np.sum(more[0] * more[2])


def test_sequences_joined_with_plus_or_star_are_refused_with_a_hint():
    from s2sad.errors import UnsupportedOperationError

    x = np.arange(3.0)
    cases = [(_list_repeat, (x,)), (_tuple_concat_argument, (x, (x, x * 2.0)))]
    for fn, args in cases:
        with pytest.raises(UnsupportedOperationError) as info:
            s2sad.grad(fn)(*args)
        message = str(info.value)
        assert "('+')" in message and "('*')" in message
        assert "list.append" in message
    # a local tuple display plus a literal is spelled out (front/concat.py)
    np.testing.assert_allclose(s2sad.grad(_tuple_concat)(x), 6.0 * x)
