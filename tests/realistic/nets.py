"""Neural-network losses in the style of CS231n, autograd's examples, Nielsen and min-char-rnn."""

import numpy as np

from tests.realistic.registry import labels, normal, program


def _two_layer_data(rng):
    params = {
        "W1": normal(rng, 6, 8, scale=0.3),
        "b1": np.zeros(8),
        "W2": normal(rng, 8, 4, scale=0.3),
        "b2": np.zeros(4),
    }
    return params, normal(rng, 5, 6), labels(rng, 5, 4), 0.05


@program(_two_layer_data)
def two_layer_net_loss(params, X, y, reg):
    # CS231n assignment 1, TwoLayerNet.loss
    W1, b1 = params["W1"], params["b1"]
    W2, b2 = params["W2"], params["b2"]
    N, D = X.shape
    hidden = np.maximum(0, X.dot(W1) + b1)
    scores = hidden.dot(W2) + b2
    scores = scores - np.max(scores, axis=1, keepdims=True)
    exp_scores = np.exp(scores)
    probs = exp_scores / np.sum(exp_scores, axis=1, keepdims=True)
    correct_logprobs = -np.log(probs[np.arange(N), y])
    data_loss = np.sum(correct_logprobs) / N
    reg_loss = 0.5 * reg * (np.sum(W1 * W1) + np.sum(W2 * W2))
    return data_loss + reg_loss


def _layers(rng):
    sizes = [4, 7, 5, 3]
    params = [
        (normal(rng, m, n, scale=0.4), normal(rng, n, scale=0.1))
        for m, n in zip(sizes[:-1], sizes[1:])
    ]
    return params, normal(rng, 6, 4), np.eye(3)[labels(rng, 6, 3)]


def _logsumexp(x):
    m = np.max(x, axis=1, keepdims=True)
    return m + np.log(np.sum(np.exp(x - m), axis=1, keepdims=True))


def neural_net_predict(params, inputs):
    # autograd/examples/neural_net.py
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = np.tanh(outputs)
    return outputs - _logsumexp(outputs)


@program(_layers)
def autograd_neural_net_log_posterior(params, inputs, targets):
    log_prior = -0.1 * sum(np.sum(W**2) + np.sum(b**2) for W, b in params)
    log_lik = np.sum(neural_net_predict(params, inputs) * targets)
    return -(log_prior + log_lik)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _nielsen(rng):
    weights = [normal(rng, 5, 4, scale=0.5), normal(rng, 2, 5, scale=0.5)]
    biases = [normal(rng, 5, 1), normal(rng, 2, 1)]
    return weights, biases, normal(rng, 4, 1), np.array([[0.0], [1.0]]), 0.1, 10


@program(_nielsen, argnums=(0, 1))
def nielsen_cross_entropy_cost(weights, biases, x, y, lmbda, n):
    # Nielsen, network2.py: feedforward + CrossEntropyCost + L2
    a = x
    for b, w in zip(biases, weights):
        a = sigmoid(np.dot(w, a) + b)
    cost = np.sum(np.nan_to_num(-y * np.log(a) - (1 - y) * np.log(1 - a)))
    cost += 0.5 * (lmbda / n) * sum(np.linalg.norm(w) ** 2 for w in weights)
    return cost


def _rnn_char(rng):
    vocab, hidden = 5, 6
    params = {
        "Wxh": normal(rng, hidden, vocab, scale=0.1),
        "Whh": normal(rng, hidden, hidden, scale=0.1),
        "Why": normal(rng, vocab, hidden, scale=0.1),
        "bh": np.zeros((hidden, 1)),
        "by": np.zeros((vocab, 1)),
    }
    inputs = [0, 3, 1, 4]
    targets = [3, 1, 4, 2]
    return params, inputs, targets, normal(rng, hidden, 1, scale=0.1)


@program(_rnn_char)
def min_char_rnn_loss(params, inputs, targets, hprev):
    # Karpathy's min-char-rnn lossFun, forward pass
    xs, hs, ys, ps = {}, {}, {}, {}
    hs[-1] = np.copy(hprev)
    loss = 0
    vocab_size = params["Wxh"].shape[1]
    for t in range(len(inputs)):
        x = np.zeros((vocab_size, 1))
        x[inputs[t]] = 1
        xs[t] = x
        hs[t] = np.tanh(
            np.dot(params["Wxh"], xs[t])
            + np.dot(params["Whh"], hs[t - 1])
            + params["bh"]
        )
        ys[t] = np.dot(params["Why"], hs[t]) + params["by"]
        ps[t] = np.exp(ys[t]) / np.sum(np.exp(ys[t]))
        loss += -np.log(ps[t][targets[t], 0])
    return loss


def _svm(rng):
    return normal(rng, 6, 4, scale=0.1), normal(rng, 7, 6), labels(rng, 7, 4), 0.1


@program(_svm)
def svm_loss_vectorized(W, X, y, reg):
    # CS231n linear_svm.svm_loss_vectorized
    num_train = X.shape[0]
    scores = X.dot(W)
    correct = scores[np.arange(num_train), y]
    margins = np.maximum(0, scores - correct[:, np.newaxis] + 1.0)
    margins[np.arange(num_train), y] = 0
    loss = np.sum(margins) / num_train
    loss += reg * np.sum(W * W)
    return loss


@program(_svm)
def softmax_loss_naive(W, X, y, reg):
    # CS231n softmax.softmax_loss_naive: explicit loops
    loss = 0.0
    num_train = X.shape[0]
    num_classes = W.shape[1]
    for i in range(num_train):
        scores = X[i].dot(W)
        scores -= np.max(scores)
        total = 0.0
        for j in range(num_classes):
            total += np.exp(scores[j])
        loss += -scores[y[i]] + np.log(total)
    loss /= num_train
    loss += reg * np.sum(W * W)
    return loss


def _rnn_seq(rng):
    N, T, D, H = 2, 4, 3, 5
    return (
        normal(rng, D, H, scale=0.3),
        normal(rng, H, H, scale=0.3),
        normal(rng, H),
        normal(rng, N, T, D),
        normal(rng, N, H),
    )


@program(_rnn_seq, argnums=(0, 1, 2))
def cs231n_rnn_forward(Wx, Wh, b, x, h0):
    # CS231n rnn_layers.rnn_forward, summed as a loss
    N, T, D = x.shape
    H = h0.shape[1]
    h = np.zeros((N, T, H))
    prev_h = h0
    for t in range(T):
        next_h = np.tanh(prev_h.dot(Wh) + x[:, t, :].dot(Wx) + b)
        h[:, t, :] = next_h
        prev_h = next_h
    return np.sum(h**2)


@program(_rnn_seq, argnums=(0, 1, 2))
def rnn_forward_reading_row_views(Wx, Wh, b, x, h0):
    # the same recurrence reading the previous step back as the view h[:, t - 1, :]
    N, T, D = x.shape
    H = h0.shape[1]
    h = np.zeros((N, T, H))
    h[:, 0, :] = np.tanh(h0.dot(Wh) + x[:, 0, :].dot(Wx) + b)
    for t in range(1, T):
        h[:, t, :] = np.tanh(h[:, t - 1, :].dot(Wh) + x[:, t, :].dot(Wx) + b)
    return np.sum(h**2)


def _lstm(rng):
    N, T, D, H = 2, 3, 3, 4
    return (
        normal(rng, D, 4 * H, scale=0.3),
        normal(rng, H, 4 * H, scale=0.3),
        normal(rng, 4 * H, scale=0.1),
        normal(rng, N, T, D),
        normal(rng, N, H),
    )


def lstm_step_forward(x, prev_h, prev_c, Wx, Wh, b):
    # CS231n rnn_layers.lstm_step_forward
    H = prev_h.shape[1]
    a = x.dot(Wx) + prev_h.dot(Wh) + b
    i = sigmoid(a[:, :H])
    f = sigmoid(a[:, H : 2 * H])
    o = sigmoid(a[:, 2 * H : 3 * H])
    g = np.tanh(a[:, 3 * H :])
    next_c = f * prev_c + i * g
    next_h = o * np.tanh(next_c)
    return next_h, next_c


@program(_lstm, argnums=(0, 1, 2))
def cs231n_lstm_forward(Wx, Wh, b, x, h0):
    N, T, D = x.shape
    H = h0.shape[1]
    h = np.zeros((N, T, H))
    prev_h, prev_c = h0, np.zeros_like(h0)
    for t in range(T):
        prev_h, prev_c = lstm_step_forward(x[:, t, :], prev_h, prev_c, Wx, Wh, b)
        h[:, t, :] = prev_h
    return np.sum(h * np.arange(H))


def _gru(rng):
    D, H = 3, 4
    params = {k: normal(rng, D + H, H, scale=0.3) for k in ("Wz", "Wr", "Wh")}
    return params, normal(rng, 5, D), normal(rng, H)


@program(_gru)
def gru_sequence_loss(params, xs, h):
    for x in xs:
        xh = np.concatenate([x, h])
        z = sigmoid(xh @ params["Wz"])
        r = sigmoid(xh @ params["Wr"])
        h_tilde = np.tanh(np.concatenate([x, r * h]) @ params["Wh"])
        h = (1 - z) * h + z * h_tilde
    return np.sum(h**2)


def _bn(rng):
    return normal(rng, 8, 5) * 2 + 1, 1.0 + normal(rng, 5, scale=0.1), normal(rng, 5)


@program(_bn, argnums=(0, 1, 2))
def batchnorm_train_forward(x, gamma, beta):
    # CS231n layers.batchnorm_forward, training mode, without the running averages
    eps = 1e-5
    sample_mean = np.mean(x, axis=0)
    sample_var = np.var(x, axis=0)
    x_hat = (x - sample_mean) / np.sqrt(sample_var + eps)
    out = gamma * x_hat + beta
    return np.sum(out**3) / x.shape[0]


@program(_bn, argnums=(0, 1, 2))
def layernorm_forward(x, gamma, beta):
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    out = gamma[: x.shape[1]] * (x - mu) / np.sqrt(var + 1e-5) + beta[: x.shape[1]]
    return np.sum(np.sin(out))


def _conv(rng):
    return normal(rng, 2, 1, 5, 5), normal(rng, 3, 1, 3, 3, scale=0.3), normal(rng, 3)


@program(_conv, argnums=(0, 1, 2))
def conv_forward_naive(x, w, b):
    # CS231n layers.conv_forward_naive, stride 1, no padding
    N, C, H, W = x.shape
    F, _, HH, WW = w.shape
    H_out = H - HH + 1
    W_out = W - WW + 1
    out = np.zeros((N, F, H_out, W_out))
    for n in range(N):
        for f in range(F):
            for i in range(H_out):
                for j in range(W_out):
                    window = x[n, :, i : i + HH, j : j + WW]
                    out[n, f, i, j] = np.sum(window * w[f]) + b[f]
    return np.sum(np.tanh(out))


def _pool(rng):
    return (normal(rng, 2, 2, 4, 4),)


@program(_pool)
def max_pool_forward_naive(x):
    N, C, H, W = x.shape
    out = np.zeros((N, C, H // 2, W // 2))
    for i in range(H // 2):
        for j in range(W // 2):
            window = x[:, :, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2]
            out[:, :, i, j] = np.max(window.reshape(N, C, -1), axis=2)
    return np.sum(out * out)


def _ae(rng):
    params = {
        "W_enc": normal(rng, 6, 3, scale=0.4),
        "W_dec": normal(rng, 3, 6, scale=0.4),
    }
    return params, normal(rng, 10, 6)


@program(_ae)
def autoencoder_reconstruction(params, X):
    code = np.tanh(X @ params["W_enc"])
    recon = code @ params["W_dec"]
    return 0.5 * np.mean(np.sum((recon - X) ** 2, axis=1))


def _vae(rng):
    params = {
        "enc_W": normal(rng, 5, 4, scale=0.3),
        "dec_W": normal(rng, 2, 5, scale=0.3),
    }
    return params, normal(rng, 6, 5), normal(rng, 6, 2)


@program(_vae)
def vae_elbo_fixed_noise(params, x, eps):
    # autograd/examples/variational_autoencoder.py, one sample with fixed noise
    h = np.tanh(x @ params["enc_W"])
    mean, log_std = h[:, :2], h[:, 2:]
    z = mean + np.exp(log_std) * eps
    logits = z @ params["dec_W"]
    log_lik = np.sum(x * logits - np.logaddexp(0.0, logits))
    kl = 0.5 * np.sum(np.exp(2 * log_std) + mean**2 - 1.0 - 2 * log_std)
    return -(log_lik - kl) / x.shape[0]


def _gan(rng):
    gen = [normal(rng, 3, 5, scale=0.3), normal(rng, 5, 2, scale=0.3)]
    disc = [normal(rng, 2, 4, scale=0.3), normal(rng, 4, 1, scale=0.3)]
    return gen, disc, normal(rng, 7, 3)


def leaky_relu(x):
    return np.where(x > 0, x, 0.01 * x)


def mlp(weights, x):
    for W in weights[:-1]:
        x = leaky_relu(x @ W)
    return x @ weights[-1]


@program(_gan, argnums=(0, 1))
def gan_generator_loss(gen_params, disc_params, noise):
    # autograd/examples/generative_adversarial_net.py: non-saturating generator loss
    fake = mlp(gen_params, noise)
    logits = mlp(disc_params, fake)
    return -np.mean(logits - np.logaddexp(0.0, logits))


def _emb(rng):
    return (
        normal(rng, 10, 4, scale=0.5),
        normal(rng, 4),
        labels(rng, 12, 10).reshape(3, 4),
        np.array([1.0, 0.0, 1.0]),
    )


@program(_emb, argnums=(0, 1))
def embedding_bag_logistic(table, w, token_ids, y):
    pooled = table[token_ids].mean(axis=1)
    logits = pooled @ w
    return np.mean(np.logaddexp(0.0, logits) - y * logits)


def _focal(rng):
    return normal(rng, 8, 3), labels(rng, 8, 3)


@program(_focal)
def focal_loss(logits, y, gamma=2.0):
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    pt = p[np.arange(len(y)), y]
    return -np.mean((1 - pt) ** gamma * np.log(pt))


def _dropout(rng):
    return normal(rng, 5, 4, scale=0.5), normal(rng, 6, 5), rng.random((6, 4)) > 0.3


@program(_dropout)
def dropout_layer_fixed_mask(W, X, mask, p=0.3):
    h = np.maximum(X @ W, 0.0)
    h = h * mask / (1 - p)
    return np.sum(h**2)
