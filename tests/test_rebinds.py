"""``v6 = v4; v6 *= 0.5`` where ``v4`` is a NumPy scalar the compiler cannot
prove one (an element of the tuple a user function returns): front/rebinds.py.

Before: refused at compile time (AliasingError, a fuzzer false refusal, seed
8300 program 74): an in-place change of an array both names hold would reach
``v4``.  A number is immutable, so ``*=`` rebinds ``v6`` and nothing is shared;
the emitted code now checks that when it runs (``check_rebinds``) and raises
the same located refusal for an array."""

import numpy as np
import pytest

import s2sad
from s2sad.errors import AliasingError


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def pair(b, e):
    return (
        (b * np.linspace(0.1, -0.4, b.shape[0]))[0] if np.mean(e) > -0.8 else -e
    ), 0.69


def fuzzed(x, w):
    v4, v5 = pair(np.linspace(1.45, -0.1, x.shape[0]) ** 2 * w[0], np.tanh(np.mean(x)))
    v6 = v4
    v6 *= 0.5
    return 1.35 * v4 + 0.4 * np.sum(v5) + 0.62 * np.sum(x) + v6 * np.sum(x * w)


def in_loop(x, w):
    acc = 0.0
    for i in range(3):
        v4, v5 = pair(x * w[i], np.mean(x) * i)
        v6 = v4
        v6 += np.sum(x)
        acc = acc + v4 * v6 + v5
    return acc


def as_given(b, e):
    return b * 2.0, e


def zero_d(x, w):
    """np.where gives a 0-d array; times 2.0 a NumPy scalar."""
    v4, v5 = as_given(np.where(np.sum(x) > 0, np.sum(x * w), 1.0), 1.5)
    v6 = v4
    v6 -= np.sum(w)
    return v4 * v5 + v6


def reduction(x, w):
    v4 = np.sum(x * w)
    v6 = v4
    v6 *= 0.5
    return v6 + v4 * np.sum(x**2)


def numeric(f, args, k, h=1e-6):
    a = args[k]
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[i] = h
        plus = [a + e if j == k else v for j, v in enumerate(args)]
        minus = [a - e if j == k else v for j, v in enumerate(args)]
        g[i] = (f(*plus) - f(*minus)) / (2 * h)
    return g


@pytest.mark.parametrize("f", [fuzzed, in_loop, zero_d, reduction])
@pytest.mark.parametrize("n", [3, 5])
def test_both_modes_against_central_differences(f, n):
    rng = np.random.default_rng(n)
    x, w = rng.standard_normal(n), rng.standard_normal(n)
    vg = s2sad.value_and_grad(f, argnums=(0, 1))
    for _ in range(2):
        value, grads = vg(x, w)
        assert value == pytest.approx(f(x, w), rel=1e-12)
        for k, g in enumerate(grads):
            np.testing.assert_allclose(g, numeric(f, [x, w], k), rtol=1e-6, atol=1e-9)
    tx, tw = rng.standard_normal(n), rng.standard_normal(n)
    value, tangent = s2sad.jvp(f, argnums=(0, 1))(x, w, (tx, tw))
    want = (f(x + 1e-6 * tx, w + 1e-6 * tw) - f(x - 1e-6 * tx, w - 1e-6 * tw)) / 2e-6
    assert tangent == pytest.approx(want, rel=1e-6, abs=1e-9)


def array_first(x, w):
    v4, v5 = as_given(x * w, np.mean(x))
    v6 = v4
    v6 *= 0.5  # changes v4 too: Python reads the halved array below
    return np.sum(v4) + v5


@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_an_array_is_still_refused_where_it_is_read(mode):
    x, w = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.2, -0.3])
    with pytest.raises(AliasingError) as err:
        if mode == "grad":
            s2sad.grad(array_first)(x, w)
        else:
            s2sad.jvp(array_first)(x, w, np.ones(3))
    text = str(err.value)
    assert "test_rebinds.py" in text and "return np.sum(v4) + v5" in text
    assert "'v4' shares memory" in text and "was a ndarray when it ran" in text


def array_not_read_again(x):
    v4 = x * 2.0
    v6 = v4
    v6 *= 0.5
    return np.sum(v6 * x)


def test_no_check_where_nothing_reads_the_shared_array():
    x = np.array([0.5, -1.0, 2.0])
    vg = s2sad.value_and_grad(array_not_read_again)
    np.testing.assert_allclose(vg(x)[1], numeric(array_not_read_again, [x], 0))
    assert "check_rebinds" not in vg.compile(x).source
    assert "check_rebinds" in s2sad.value_and_grad(fuzzed).compile(x, x).source
