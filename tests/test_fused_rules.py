"""Rules written as their fused kernels in array code (runtime/fused.py): the
emitted call, gradients against central differences (broadcasting, loops,
callees, workspaces called 3 times), second order, and what stays as written
(scalar code, the tape)."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.runtime import fused, nn
from tests.repeated import buffer_everything, check_repeated_calls, seeded_rand
from tests.transforms.dumps import after

__all__ = ["buffer_everything"]


def layer_tanh(W, b, x):
    return np.sum(np.tanh(x @ W + b) ** 2)


def layer_tan(W, b, x):
    return np.sum(np.tan(0.3 * (x @ W + b)) * x[:, :1])


def layer_sigmoid(W, b, x):
    return np.sum(nn.sigmoid(x @ W + b) * x[:, :1])


def layer_reciprocal(W, b, x):
    return np.sum(np.reciprocal(2.0 + np.sin(x @ W + b)))


def layer_arctan(W, b, x):
    return np.sum(np.arctan(x @ W + b) ** 2)


def layer_arctanh(W, b, x):
    return np.sum(np.arctanh(0.5 * np.sin(x @ W + b)) ** 2)


def layer_sin(W, b, x):
    return np.sum(np.sin(x @ W + b) * x[:, :1])


def layer_cos_sqrt(W, b, x):
    return np.sum(np.cos(x @ W + b) + np.sqrt(1.5 + np.sin(x @ W)))


def layer_arcsinh(W, b, x):
    return np.sum(np.arcsinh(2.0 * (x @ W + b)) ** 2)


LAYERS = {
    layer_sin: "sin_grad",
    layer_cos_sqrt: "sqrt_grad",
    layer_arcsinh: "arcsinh_grad",
    layer_tanh: "tanh_grad",
    layer_tan: "tan_grad",
    layer_sigmoid: "sigmoid_grad",
    layer_reciprocal: "reciprocal_grad",
    layer_arctan: "arctan_grad",
    layer_arctanh: "arctanh_grad",
}


def cell(h, W, x):
    return np.tanh(h @ W + x)


def rnn(Wh, Wx, b, xs):
    h = np.zeros((xs.shape[0], Wh.shape[0]))
    for t in range(xs.shape[1]):
        h = cell(h, Wh, xs[:, t, :] @ Wx + b)
        h = h + 0.5 * nn.sigmoid(h)
    return np.sum(h * h)


def rnn_inline(Wh, Wx, b, xs):
    h = np.zeros((xs.shape[0], Wh.shape[0]))
    for t in range(3):
        h = np.tanh(xs[:, t, :] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def loop_two_kernels(W, x):
    h = x
    for t in range(3):
        z = h @ W + 0.1 * t
        h = np.sin(z) * np.tanh(z)  # two kernels' cotangents summed into g_z
    return np.sum(h)


def scalar_tanh(x):
    y = x
    for i in range(3):
        y = np.tanh(y) * 0.9 + 0.1 * x
    return y


def _layer_args(seed, n=4):
    rand = seeded_rand(seed)
    return rand(3, 5), rand(5), rand(n, 3)


def _rnn_args(seed):
    rand = seeded_rand(seed)
    return rand(4, 4), rand(3, 4), rand(4), rand(5, 3, 3)


@pytest.mark.parametrize("fn", list(LAYERS), ids=lambda f: f.__name__)
@pytest.mark.parametrize("buffered", [False, True])
def test_layers_call_their_kernel_and_are_right(fn, buffered, request):
    if buffered:
        request.getfixturevalue("buffer_everything")
    for seed, n in ((0, 4), (1, 1)):
        vg = check_repeated_calls(fn, _layer_args(seed, n))
        assert f"{LAYERS[fn]}(" in vg.source
        if buffered:
            assert f"{LAYERS[fn]}(g_" in vg.source and "out=ws" in vg.source


@pytest.mark.parametrize("buffered", [False, True])
def test_loops_and_callees(buffered, request):
    if buffered:
        request.getfixturevalue("buffer_everything")
    for fn in (rnn, rnn_inline):
        for seed in (2, 3):
            vg = check_repeated_calls(fn, _rnn_args(seed))
        assert "tanh_grad(" in vg.source
    rand = seeded_rand(9)
    for shape in ((4, 3), (1, 3)):
        vg = check_repeated_calls(loop_two_kernels, (rand(3, 3), rand(*shape)))
    assert "sin_grad(" in vg.source and "tanh_grad(" in vg.source


def test_float32_gradient_matches_the_written_out_rule(monkeypatch, tmp_path):
    """The kernel's bits are the expression's: the float32 gradients agree exactly."""
    rand = seeded_rand(4)
    args = [a.astype(np.float32) for a in (rand(4, 4), rand(3, 4), rand(4))]
    args.append(rand(6, 3, 3).astype(np.float32))
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "a"))
    got = s2sad.grad(rnn_inline, argnums=(0, 1, 2))(*args)
    monkeypatch.setattr(fused, "FUSED", {})
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "b"))
    vg = s2sad.value_and_grad(rnn_inline, argnums=(0, 1, 2))
    want = vg(*args)[1]
    assert "tanh_grad" not in vg.source
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == np.float32
        np.testing.assert_array_equal(g, w)


def test_the_tape_keeps_what_it_kept(monkeypatch):
    """The kernel reads what the rule's expression reads: the same saves."""
    fused_text = after("reverse", rnn_inline, argnums=(0, 1, 2, 3))
    monkeypatch.setattr(fused, "FUSED", {})
    plain_text = after("reverse", rnn_inline, argnums=(0, 1, 2, 3))
    assert "tanh_grad" in fused_text and "tanh_grad" not in plain_text

    def saves(text):
        return [ln.strip() for ln in text.splitlines() if "tape.append" in ln]

    assert saves(fused_text) == saves(plain_text) and saves(fused_text)


def test_scalar_code_keeps_the_expression():
    from bench import problems

    vg = s2sad.value_and_grad(problems.loop)
    vg(0.3)
    assert "sin_grad" not in vg.source
    vg = s2sad.value_and_grad(scalar_tanh)
    _, g = vg(0.7)
    assert "tanh_grad" not in vg.source
    eps = 1e-6
    want = (scalar_tanh(0.7 + eps) - scalar_tanh(0.7 - eps)) / (2 * eps)
    np.testing.assert_allclose(g, want, rtol=1e-7)


def test_unoptimized_code_keeps_the_expression():
    from s2sad.options import Options

    text = after("emit", layer_tanh, options=Options(optimize=False))
    assert "tanh_grad" not in text and "1.0 - " in text


@pytest.mark.parametrize("fn", [rnn, rnn_inline, layer_sigmoid, layer_arctanh])
def test_hessian_vector_products(fn):
    """Forward over reverse differentiates the kernels' calls (their tangents)."""
    args = _rnn_args(5) if fn in (rnn, rnn_inline) else _layer_args(5)
    v = seeded_rand(6)(*args[0].shape)
    hv = s2sad.hvp(fn, argnums=0)(*args, v)
    eps = 1e-5
    grad = s2sad.grad(fn, argnums=0)
    plus = grad(args[0] + eps * v, *args[1:])
    minus = grad(args[0] - eps * v, *args[1:])
    np.testing.assert_allclose(hv, (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-7)


def test_jvp_through_a_tanh_layer():
    args = _layer_args(7)
    t = seeded_rand(8)(*args[0].shape)
    _, jv = s2sad.jvp(layer_tanh, argnums=0)(*args, t)
    eps = 1e-6
    want = (
        layer_tanh(args[0] + eps * t, *args[1:])
        - layer_tanh(args[0] - eps * t, *args[1:])
    ) / (2 * eps)
    np.testing.assert_allclose(jv, want, rtol=1e-6)
