"""Programs in the style of autograd's examples, written before looking at what s2sad handles.

LSTM language model, a convnet with its own convolution, a smoke/fluid
simulation advected with ``np.roll``, a neural ODE integrated by RK4, a mixture
density network, a Bayesian neural net fitted by black-box variational
inference and a Gaussian process whose kernel comes from pairwise distances.
"""

import numpy as np
from scipy.special import logsumexp
from scipy.stats import multivariate_normal as mvn
from scipy.stats import norm

from tests.realistic.registry import labels, normal, program

# ---------------------------------------------------------------- LSTM LM


def _sigmoid(x):
    return 0.5 * (np.tanh(x) + 1.0)


def concat_and_multiply(weights, *args):
    cat_state = np.hstack(args + (np.ones((args[0].shape[0], 1)),))
    return np.dot(cat_state, weights)


def _lstm_params(rng):
    vocab, hidden = 5, 4
    rows = vocab + hidden + 1
    params = {
        "init cells": normal(rng, 1, hidden, scale=0.1),
        "init hiddens": normal(rng, 1, hidden, scale=0.1),
        "change": normal(rng, rows, hidden, scale=0.3),
        "forget": normal(rng, rows, hidden, scale=0.3),
        "ingate": normal(rng, rows, hidden, scale=0.3),
        "outgate": normal(rng, rows, hidden, scale=0.3),
        "predict": normal(rng, hidden + 1, vocab, scale=0.3),
    }
    ids = labels(rng, 6 * 3, vocab).reshape(6, 3)
    return params, np.eye(vocab)[ids]


def lstm_predict(params, inputs):
    def update_lstm(input, hiddens, cells):
        change = np.tanh(concat_and_multiply(params["change"], input, hiddens))
        forget = _sigmoid(concat_and_multiply(params["forget"], input, hiddens))
        ingate = _sigmoid(concat_and_multiply(params["ingate"], input, hiddens))
        outgate = _sigmoid(concat_and_multiply(params["outgate"], input, hiddens))
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
    for input in inputs:
        hiddens, cells = update_lstm(input, hiddens, cells)
        output.append(hiddens_to_output_probs(hiddens))
    return output


@program(_lstm_params)  # args + (np.ones(...),): front/concat.py
def autograd_lstm_log_likelihood(params, inputs):
    # autograd/examples/lstm.py: predict the next character of each sequence
    logprobs = lstm_predict(params, inputs)
    loglik = 0.0
    num_time_steps, num_examples, _ = inputs.shape
    for t in range(num_time_steps):
        loglik += np.sum(logprobs[t] * inputs[t])
    return -loglik / (num_time_steps * num_examples)


# ---------------------------------------------------------------- convnet


def _conv_data(rng):
    return (
        normal(rng, 3, 2, 3, 3, scale=0.3),
        normal(rng, 3, scale=0.1),
        normal(rng, 3 * 4 * 4, 2, scale=0.2),
        normal(rng, 4, 2, 6, 6),
        labels(rng, 4, 2),
    )


def conv2d_valid(images, filters):
    # all k x k windows at once, then one contraction with the filters
    windows = np.lib.stride_tricks.sliding_window_view(
        images, filters.shape[2:], (2, 3)
    )
    return np.einsum("bchwij,fcij->bfhw", windows, filters)


@program(_conv_data, argnums=(0, 1, 2))
def convnet_einsum_windows(filters, conv_bias, W_out, images, y):
    h = np.maximum(0.0, conv2d_valid(images, filters) + conv_bias[None, :, None, None])
    h = h.reshape(h.shape[0], -1)
    logits = h @ W_out
    logp = logits - logsumexp(logits, axis=1, keepdims=True)
    return -np.mean(logp[np.arange(len(y)), y])


def conv2d_loops(images, filters):
    kh, kw = filters.shape[2:]
    out_h = images.shape[2] - kh + 1
    out_w = images.shape[3] - kw + 1
    out = 0.0
    for i in range(kh):
        for j in range(kw):
            patch = images[:, :, i : i + out_h, j : j + out_w]
            out = out + np.einsum("bchw,fc->bfhw", patch, filters[:, :, i, j])
    return out


@program(_conv_data, argnums=(0, 1, 2))
def convnet_shifted_einsum(filters, conv_bias, W_out, images, y):
    h = np.tanh(conv2d_loops(images, filters) + conv_bias[None, :, None, None])
    logits = h.reshape(h.shape[0], -1) @ W_out
    logp = logits - logsumexp(logits, axis=1, keepdims=True)
    return -np.mean(logp[np.arange(len(y)), y])


# ---------------------------------------------------------------- fluid


def project(vx, vy, iters=8):
    # make the velocity field divergence-free (Jacobi on a periodic grid)
    h = 1.0 / vx.shape[0]
    div = (
        -0.5
        * h
        * (
            np.roll(vx, -1, axis=0)
            - np.roll(vx, 1, axis=0)
            + np.roll(vy, -1, axis=1)
            - np.roll(vy, 1, axis=1)
        )
    )
    p = np.zeros(vx.shape)
    for _ in range(iters):
        p = (
            div
            + np.roll(p, 1, axis=0)
            + np.roll(p, -1, axis=0)
            + np.roll(p, 1, axis=1)
            + np.roll(p, -1, axis=1)
        ) / 4.0
    vx = vx - 0.5 * (np.roll(p, -1, axis=0) - np.roll(p, 1, axis=0)) / h
    vy = vy - 0.5 * (np.roll(p, -1, axis=1) - np.roll(p, 1, axis=1)) / h
    return vx, vy


def advect(f, vx, vy):
    # semi-Lagrangian: look back along the velocity, interpolate bilinearly
    rows, cols = f.shape
    cell_ys, cell_xs = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    center_xs = (cell_xs - vx).ravel()
    center_ys = (cell_ys - vy).ravel()
    left_ix = np.floor(center_xs).astype(int)
    top_ix = np.floor(center_ys).astype(int)
    rw = center_xs - left_ix
    bw = center_ys - top_ix
    left_ix = np.mod(left_ix, cols)
    right_ix = np.mod(left_ix + 1, cols)
    top_ix = np.mod(top_ix, rows)
    bot_ix = np.mod(top_ix + 1, rows)
    flat = (1 - rw) * ((1 - bw) * f[top_ix, left_ix] + bw * f[bot_ix, left_ix]) + rw * (
        (1 - bw) * f[top_ix, right_ix] + bw * f[bot_ix, right_ix]
    )
    return np.reshape(flat, (rows, cols))


def _fluid(rng):
    n = 8
    smoke = np.zeros((n, n))
    smoke[2:5, 2:5] = 1.0
    target = np.roll(smoke, 2, axis=1)
    return normal(rng, n, n, scale=0.3), normal(rng, n, n, scale=0.3), smoke, target


@program(_fluid, argnums=(0, 1))
def fluid_simulation_smoke_target(vx, vy, smoke, target, steps=4):
    # autograd/examples/fluidsim: optimise the initial velocity
    for _ in range(steps):
        vx, vy = project(vx, vy)
        vx = advect(vx, vx, vy)
        vy = advect(vy, vx, vy)
        smoke = advect(smoke, vx, vy)
    return np.mean((smoke - target) ** 2)


# ---------------------------------------------------------------- neural ODE


def mlp_dynamics(z, t, params):
    (W1, b1), (W2, b2) = params
    h = np.tanh(np.dot(z, W1) + b1 + t)
    return np.dot(h, W2) + b2


def odeint_rk4(func, y0, t, params):
    ys = [y0]
    y = y0
    for i in range(len(t) - 1):
        h = t[i + 1] - t[i]
        k1 = func(y, t[i], params)
        k2 = func(y + 0.5 * h * k1, t[i] + 0.5 * h, params)
        k3 = func(y + 0.5 * h * k2, t[i] + 0.5 * h, params)
        k4 = func(y + h * k3, t[i] + h, params)
        y = y + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        ys.append(y)
    return np.stack(ys)


def _node(rng):
    params = [
        (normal(rng, 2, 6, scale=0.5), normal(rng, 6, scale=0.1)),
        (normal(rng, 6, 2, scale=0.5), normal(rng, 2, scale=0.1)),
    ]
    t = np.linspace(0.0, 1.0, 9)
    target = np.stack([np.cos(t), np.sin(t)], axis=1)
    return params, np.array([1.0, 0.0]), t, target


@program(_node)
def neural_ode_rk4_trajectory(params, y0, t, target):
    pred = odeint_rk4(mlp_dynamics, y0, t, params)
    return np.mean(np.abs(pred - target) ** 2)


# ---------------------------------------------------------------- MDN


def _mdn(rng):
    params = [
        (normal(rng, 1, 8, scale=0.8), normal(rng, 8, scale=0.3)),
        (normal(rng, 8, 9, scale=0.3), normal(rng, 9, scale=0.1)),
    ]
    x = np.linspace(-1, 1, 12)[:, None]
    return params, x, np.sin(3 * x[:, 0]) + 0.1 * normal(rng, 12)


def mdn_unpack(outputs):
    K = outputs.shape[1] // 3
    logits, means, log_stds = outputs[:, :K], outputs[:, K : 2 * K], outputs[:, 2 * K :]
    log_weights = logits - logsumexp(logits, axis=1, keepdims=True)
    return log_weights, means, log_stds


@program(_mdn)
def mixture_density_network_nll(params, inputs, targets):
    h = inputs
    for W, b in params[:-1]:
        h = np.tanh(np.dot(h, W) + b)
    W, b = params[-1]
    log_weights, means, log_stds = mdn_unpack(np.dot(h, W) + b)
    log_probs = log_weights + norm.logpdf(targets[:, None], means, np.exp(log_stds))
    return -np.mean(logsumexp(log_probs, axis=1))


# ---------------------------------------------------------------- BBVI


def _bnn_shapes():
    return [(1, 6), (6, 1)]


def unpack_layers(weights, shapes):
    num_weight_sets = weights.shape[0]
    for m, n in shapes:
        yield weights[:, : m * n].reshape((num_weight_sets, m, n)), weights[
            :, m * n : m * n + n
        ].reshape((num_weight_sets, 1, n))
        weights = weights[:, (m + 1) * n :]


def bnn_predictions(weights, inputs, shapes):
    inputs = np.expand_dims(inputs, 0)
    for W, b in unpack_layers(weights, shapes):
        outputs = np.einsum("mnd,mdo->mno", inputs, W) + b
        inputs = np.tanh(outputs)
    return outputs


def _bbvi(rng):
    d = sum((m + 1) * n for m, n in _bnn_shapes())
    var_params = np.concatenate([normal(rng, d, scale=0.3), -2.0 * np.ones(d)])
    x = np.linspace(-2, 2, 10)[:, None]
    return var_params, normal(rng, 3, d), x, np.cos(x[:, 0])


@program(_bbvi)
def bayesian_neural_net_bbvi_elbo(var_params, eps, inputs, targets, noise_var=0.1):
    # autograd/examples/bayesian_neural_net.py + black_box_svi.py, noise given
    D = var_params.shape[0] // 2
    mean, log_std = var_params[:D], var_params[D:]
    samples = eps * np.exp(log_std) + mean
    log_prior = -0.5 * np.sum(samples**2, axis=1)
    preds = bnn_predictions(samples, inputs, _bnn_shapes())[:, :, 0]
    log_lik = -np.sum((preds - targets) ** 2, axis=1) / noise_var
    entropy = 0.5 * D * (1.0 + np.log(2 * np.pi)) + np.sum(log_std)
    return -(np.mean(log_prior + log_lik) + entropy)


# ---------------------------------------------------------------- GP


def rbf_covariance(kernel_params, x, xp):
    output_scale = np.exp(kernel_params[0])
    lengthscales = np.exp(kernel_params[1:])
    diffs = np.expand_dims(x / lengthscales, 1) - np.expand_dims(xp / lengthscales, 0)
    return output_scale * np.exp(-0.5 * np.sum(diffs**2, axis=2))


def _gp(rng):
    X = normal(rng, 9, 2)
    return np.array([0.1, -0.3, 0.2, 0.0, 0.05]), X, np.sin(X[:, 0]) + X[:, 1]


@program(_gp)
def gaussian_process_mvn_logpdf(params, X, y):
    # autograd/examples/gaussian_process.py: mean, noise and kernel in one vector
    mean, noise_scale = params[0], np.exp(params[1]) + 0.0001
    cov_params = params[2:]
    cov_y_y = rbf_covariance(cov_params, X, X) + noise_scale * np.eye(len(y))
    prior_mean = mean * np.ones(len(y))
    return -mvn.logpdf(y, prior_mean, cov_y_y)
