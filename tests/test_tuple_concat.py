"""Tuples and lists concatenated with ``+`` (front/concat.py): autograd's
``examples/rnn.py``/``lstm.py`` ``np.hstack(args + (ones,))`` on a callee's
``*args``, and a local tuple plus a literal, unpacked or concatenated.

Before: the generic ``+`` adjoint treated the sequences as arrays and the
gradient was refused when it ran ("cotangent of length 3 for a sequence of
length 2")."""

import numpy as np
import pytest

import s2sad
from tests.repeated import numeric_grad as numeric


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


# --- autograd examples/lstm.py (rnn.py's concat_and_multiply), as published ---
def sigmoid(x):
    return 0.5 * (np.tanh(x) + 1.0)


def logsumexp(X, axis, keepdims):
    m = np.max(X, axis=axis, keepdims=True)
    return m + np.log(np.sum(np.exp(X - m), axis=axis, keepdims=keepdims))


def concat_and_multiply(weights, *args):
    cat_state = np.hstack(args + (np.ones((args[0].shape[0], 1)),))
    return np.dot(cat_state, weights)


def lstm_predict(params, inputs):
    def update_lstm(input, hiddens, cells):
        change = np.tanh(concat_and_multiply(params["change"], input, hiddens))
        forget = sigmoid(concat_and_multiply(params["forget"], input, hiddens))
        ingate = sigmoid(concat_and_multiply(params["ingate"], input, hiddens))
        outgate = sigmoid(concat_and_multiply(params["outgate"], input, hiddens))
        cells = cells * forget + ingate * change
        hiddens = outgate * np.tanh(cells)
        return hiddens, cells

    def hiddens_to_output_probs(hiddens):
        output = concat_and_multiply(params["predict"], hiddens)
        return output - logsumexp(output, axis=1, keepdims=True)

    num_sequences = inputs.shape[1]
    hiddens = np.repeat(params["init hiddens"], num_sequences, axis=0)
    cells = np.repeat(params["init cells"], num_sequences, axis=0)

    output = [hiddens_to_output_probs(hiddens)]
    for input in inputs:  # Iterate over time steps.
        hiddens, cells = update_lstm(input, hiddens, cells)
        output.append(hiddens_to_output_probs(hiddens))
    return output


def lstm_log_likelihood(params, inputs, targets):
    logprobs = lstm_predict(params, inputs)
    loglik = 0.0
    num_time_steps, num_examples, _ = inputs.shape
    for t in range(num_time_steps):
        loglik += np.sum(logprobs[t] * targets[t])
    return loglik / (num_time_steps * num_examples)


def init_params(input_size, state_size, output_size, rng, scale=0.5):
    def rp(*shape):
        return rng.standard_normal(shape) * scale

    return {
        "init cells": rp(1, state_size),
        "init hiddens": rp(1, state_size),
        "change": rp(input_size + state_size + 1, state_size),
        "forget": rp(input_size + state_size + 1, state_size),
        "ingate": rp(input_size + state_size + 1, state_size),
        "outgate": rp(input_size + state_size + 1, state_size),
        "predict": rp(state_size + 1, output_size),
    }


@pytest.mark.parametrize("T,B,V,S", [(3, 2, 4, 5), (1, 1, 2, 3)])
def test_autograd_lstm_against_central_differences(T, B, V, S):
    rng = np.random.default_rng(T * 100 + S)
    params = init_params(V, S, V, rng)
    inputs = rng.standard_normal((T, B, V))
    targets = rng.standard_normal((T, B, V))
    f = lstm_log_likelihood
    vg = s2sad.value_and_grad(f)
    for _ in range(2):
        value, g = vg(params, inputs, targets)
        assert value == pytest.approx(f(params, inputs, targets), rel=1e-12)
        for key, a in params.items():

            def at(v, key=key):
                return f({**params, key: v}, inputs, targets)

            np.testing.assert_allclose(
                g[key], numeric(at, [a], 0), rtol=1e-6, atol=1e-9
            )


# --- the forms one by one ---
def one_and_two(W, x, h):
    """The same callee with one and with two arrays in *args."""
    return np.sum(np.tanh(concat_and_multiply(W, x, h))) + np.sum(
        concat_and_multiply(W[: x.shape[1] + 1], np.sin(x)) ** 2
    )


def concatenate_ones(weights, *args):
    ones = np.ones((args[0].shape[0], 1))
    return np.dot(np.concatenate(args + (ones,), axis=1), weights)


def with_axis(W, x, h):
    return np.sum(concatenate_ones(W, x, h) ** 2)


def chained(x, *rest):
    a, b, c, d = (x,) + rest + (2.0 * x,)
    return np.sum(a * b + c * d)


def chained_call(x, h):
    return chained(x, h, np.tanh(h))


def unpacked(x, h):
    t = (x, h)
    a, b, c = t + (2.0,)
    return np.sum(a * b * c)


def local_tuples(x, h):
    args = (x, np.tanh(h))
    both = args + (x * 2,) + args
    return np.sum(np.concatenate(both, axis=0) ** 2)


def local_lists(x, h):
    xs = [x, h]
    return np.sum(np.stack(xs + [x * h], axis=0) ** 3)


CASES = [
    (one_and_two, lambda r: [r(6, 5), r(4, 3), r(4, 2)]),
    (with_axis, lambda r: [r(6, 5), r(4, 3), r(4, 2)]),
    (chained_call, lambda r: [r(3, 2), r(3, 2)]),
    (chained_call, lambda r: [r(4), r(1)]),  # broadcasting inside the callee
    (unpacked, lambda r: [r(2, 3), r(3)]),
    (local_tuples, lambda r: [r(2, 3), r(2, 3)]),
    (local_lists, lambda r: [r(5), r(5)]),
]


@pytest.mark.parametrize("f,make", CASES)
def test_reverse_against_central_differences(f, make):
    rng = np.random.default_rng(0)
    args = make(lambda *s: rng.standard_normal(s))
    nums = tuple(range(len(args)))
    value, grads = s2sad.value_and_grad(f, argnums=nums)(*args)
    assert value == pytest.approx(f(*args), rel=1e-12)
    for k, g in enumerate(grads):
        np.testing.assert_allclose(g, numeric(f, args, k), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("f,make", CASES)
def test_forward_against_central_differences(f, make):
    rng = np.random.default_rng(1)
    args = make(lambda *s: rng.standard_normal(s))
    t = [rng.standard_normal(np.shape(a)) for a in args]
    nums = tuple(range(len(args)))
    value, tangent = s2sad.jvp(f, argnums=nums)(*args, t)
    plus = [a + 1e-6 * d for a, d in zip(args, t)]
    minus = [a - 1e-6 * d for a, d in zip(args, t)]
    assert value == pytest.approx(f(*args), rel=1e-12)
    assert tangent == pytest.approx((f(*plus) - f(*minus)) / 2e-6, rel=1e-6)


def array_plus_tuple(x):
    """An array plus a tuple is NumPy's broadcasting addition: left as it is."""
    return np.sum((x + (1.0, 2.0)) ** 2)


def list_plus_tuple(x, *rest):
    return np.sum(np.stack([x] + rest))  # Python raises TypeError


def test_other_operands_keep_python_meaning():
    x = np.array([[0.5, -1.0], [2.0, 0.3]])
    np.testing.assert_allclose(
        s2sad.grad(array_plus_tuple)(x), numeric(array_plus_tuple, [x], 0), rtol=1e-7
    )
    with pytest.raises(TypeError, match="can only concatenate list"):
        list_plus_tuple(x, x)
    with pytest.raises(TypeError, match="can only concatenate list"):
        s2sad.grad(lambda x: list_plus_tuple(x, x))(x)


def grown_through_an_alias(x):
    xs = [1.0, 2.0]
    ys = xs
    ys.append(3.0)  # xs has three items now
    return np.sum(x) * sum(xs + [1.0])


def grown_through_an_alias_starred(x):
    xs = [1.0, 2.0]
    ys = xs
    ys.append(3.0)
    return np.sum(x) * sum([*xs, 1.0])


def slice_assigned(x):
    xs = [x, 2.0 * x]
    xs[1:] = [3.0 * x, 4.0 * x]
    return np.sum(np.stack(xs + [x]) ** 2)


@pytest.mark.parametrize(
    "f", [grown_through_an_alias, grown_through_an_alias_starred, slice_assigned]
)
def test_a_list_whose_length_may_change_is_not_spelled_out(f):
    """Before (front/starred.py, and for '+' front/concat.py): the length of
    the display was taken as written, a silent wrong value and gradient."""
    x = np.array([1.0, 2.0])
    try:
        value, g = s2sad.value_and_grad(f)(x)
    except s2sad.errors.S2SADError:
        return  # refused: fine, never wrong
    assert value == pytest.approx(f(x), rel=1e-12)
    np.testing.assert_allclose(g, numeric(f, [x], 0), rtol=1e-6, atol=1e-9)
