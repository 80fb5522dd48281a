"""Programs in the style of course and tutorial code, written before looking at what s2sad handles.

CS231n (a ``FullyConnectedNet`` with batch norm and dropout, the captioning
losses), Nielsen's network2 ``Network.total_cost``, min-char-rnn as published,
picoGPT's whole ``gpt2``, ML-From-Scratch's logistic regression and MLP
classes, a spring-mass simulation, a Kalman filter and soft k-means.
"""

# ruff: noqa: UP031, RUF059  (written as the published code is: '%d' % i, unused unpacked names)

import numpy as np

from tests.realistic.registry import labels, normal, program
from tests.realistic.transformers import _block_params, ffn, layer_norm, mha

# ---------------------------------------------------------------- CS231n


def affine_forward(x, w, b):
    out = x.reshape(x.shape[0], -1).dot(w) + b
    cache = (x, w, b)
    return out, cache


def relu_forward(x):
    out = np.maximum(0, x)
    return out, x


def batchnorm_forward(x, gamma, beta, bn_param):
    mode = bn_param["mode"]
    eps = bn_param.get("eps", 1e-5)
    momentum = bn_param.get("momentum", 0.9)
    N, D = x.shape
    running_mean = bn_param.get("running_mean", np.zeros(D, dtype=x.dtype))
    running_var = bn_param.get("running_var", np.zeros(D, dtype=x.dtype))
    if mode == "train":
        sample_mean = x.mean(axis=0)
        sample_var = x.var(axis=0)
        x_hat = (x - sample_mean) / np.sqrt(sample_var + eps)
        out = gamma * x_hat + beta
        cache = (x_hat, gamma, sample_var, eps)
        running_mean = momentum * running_mean + (1 - momentum) * sample_mean
        running_var = momentum * running_var + (1 - momentum) * sample_var
    else:
        x_hat = (x - running_mean) / np.sqrt(running_var + eps)
        out = gamma * x_hat + beta
        cache = None
    bn_param["running_mean"] = running_mean
    bn_param["running_var"] = running_var
    return out, cache


def dropout_forward(x, dropout_param):
    p, mode = dropout_param["p"], dropout_param["mode"]
    if "seed" in dropout_param:
        np.random.seed(dropout_param["seed"])
    mask = None
    if mode == "train":
        mask = (np.random.rand(*x.shape) < p) / p
        out = x * mask
    else:
        out = x
    return out, (dropout_param, mask)


def softmax_loss(x, y):
    shifted = x - np.max(x, axis=1, keepdims=True)
    Z = np.sum(np.exp(shifted), axis=1, keepdims=True)
    log_probs = shifted - np.log(Z)
    N = x.shape[0]
    return -np.sum(log_probs[np.arange(N), y]) / N


class FullyConnectedNet:
    def __init__(self, params, hidden_dims, dropout=1, reg=0.0, seed=None):
        self.normalization = "batchnorm"
        self.use_dropout = dropout != 1
        self.reg = reg
        self.num_layers = 1 + len(hidden_dims)
        self.params = params
        self.dropout_param = {}
        if self.use_dropout:
            self.dropout_param = {"mode": "train", "p": dropout}
            if seed is not None:
                self.dropout_param["seed"] = seed
        self.bn_params = [{"mode": "train"} for i in range(self.num_layers - 1)]

    def loss(self, X, y):
        caches = []
        out = X
        for i in range(1, self.num_layers):
            W, b = self.params["W%d" % i], self.params["b%d" % i]
            out, fc_cache = affine_forward(out, W, b)
            gamma, beta = self.params["gamma%d" % i], self.params["beta%d" % i]
            out, bn_cache = batchnorm_forward(out, gamma, beta, self.bn_params[i - 1])
            out, relu_cache = relu_forward(out)
            if self.use_dropout:
                out, do_cache = dropout_forward(out, self.dropout_param)
            caches.append((fc_cache, bn_cache, relu_cache))
        W, b = (
            self.params["W%d" % self.num_layers],
            self.params["b%d" % self.num_layers],
        )
        scores, _ = affine_forward(out, W, b)
        loss = softmax_loss(scores, y)
        for i in range(1, self.num_layers + 1):
            W = self.params["W%d" % i]
            loss += 0.5 * self.reg * np.sum(W * W)
        return loss


def _fc_net(rng):
    dims = [5, 6, 4, 3]
    params = {}
    for i in range(1, len(dims)):
        params["W%d" % i] = normal(rng, dims[i - 1], dims[i], scale=0.5)
        params["b%d" % i] = normal(rng, dims[i], scale=0.1)
        if i < len(dims) - 1:
            params["gamma%d" % i] = 1.0 + normal(rng, dims[i], scale=0.1)
            params["beta%d" % i] = normal(rng, dims[i], scale=0.1)
    return params, normal(rng, 8, 5), labels(rng, 8, 3)


@program(
    _fc_net,
    refused="UnsupportedSyntaxError",
    why="batchnorm_forward stores the running mean and variance into the bn_param "
    "dict it is given (bn_param['running_mean'] = ...): a callee's in-place change of "
    "an argument is refused. (Until session 7 an AliasingError came first, a false "
    "one: 'loss += 0.5 * reg * np.sum(W * W)' in the inlined method, loss a number "
    "that the aliasing pass took for an array sharing the parameters' memory.)",
)
def cs231n_fully_connected_net_loss(params, X, y):
    model = FullyConnectedNet(params, [6, 4], dropout=0.7, reg=0.05, seed=123)
    return model.loss(X, y)


def word_embedding_forward(x, W):
    out = W[x, :]
    return out, (x, W)


def temporal_affine_forward(x, w, b):
    N, T, D = x.shape
    M = b.shape[0]
    out = x.reshape(N * T, D).dot(w).reshape(N, T, M) + b
    return out, (x, w, b, out)


def temporal_softmax_loss(x, y, mask):
    N, T, V = x.shape
    x_flat = x.reshape(N * T, V)
    y_flat = y.reshape(N * T)
    mask_flat = mask.reshape(N * T)
    probs = np.exp(x_flat - np.max(x_flat, axis=1, keepdims=True))
    probs /= np.sum(probs, axis=1, keepdims=True)
    loss = -np.sum(mask_flat * np.log(probs[np.arange(N * T), y_flat])) / N
    return loss


def _captions(rng):
    vocab, D, V = 7, 4, 7
    captions = labels(rng, 3 * 5, vocab).reshape(3, 5)
    captions[0, 3:] = 0  # <NULL> padding
    return normal(rng, vocab, D), normal(rng, D, V, scale=0.4), np.zeros(V), captions


@program(_captions, argnums=(0, 1, 2))
def cs231n_captioning_temporal_loss(W_embed, W_vocab, b_vocab, captions):
    captions_in = captions[:, :-1]
    captions_out = captions[:, 1:]
    mask = captions_out != 0
    x, _ = word_embedding_forward(captions_in, W_embed)
    h = np.tanh(np.cumsum(x, axis=1))
    scores, _ = temporal_affine_forward(h, W_vocab, b_vocab)
    return temporal_softmax_loss(scores, captions_out, mask)


# ---------------------------------------------------------------- Nielsen


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


class CrossEntropyCost:
    @staticmethod
    def fn(a, y):
        return np.sum(np.nan_to_num(-y * np.log(a) - (1 - y) * np.log(1 - a)))


class Network:
    def __init__(self, weights, biases, cost=CrossEntropyCost):
        self.num_layers = len(weights) + 1
        self.weights = weights
        self.biases = biases
        self.cost = cost

    def feedforward(self, a):
        for b, w in zip(self.biases, self.weights):
            a = sigmoid(np.dot(w, a) + b)
        return a

    def total_cost(self, data, lmbda):
        cost = 0.0
        for x, y in data:
            a = self.feedforward(x)
            cost += self.cost.fn(a, y) / len(data)
        cost += (
            0.5
            * (lmbda / len(data))
            * sum(np.linalg.norm(w) ** 2 for w in self.weights)
        )
        return cost


def _network2(rng):
    weights = [normal(rng, 4, 3, scale=0.6), normal(rng, 2, 4, scale=0.6)]
    biases = [normal(rng, 4, 1), normal(rng, 2, 1)]
    data = [(normal(rng, 3, 1), np.eye(2)[:, [k]]) for k in (0, 1, 1)]
    return weights, biases, data, 0.3


@program(_network2, argnums=(0, 1))  # cost=CrossEntropyCost: front/held_values.py
def nielsen_network2_total_cost(weights, biases, data, lmbda):
    return Network(weights, biases).total_cost(data, lmbda)


# ---------------------------------------------------------------- min-char-rnn


def _char_rnn(rng):
    vocab, hidden = 6, 5
    weights = (
        normal(rng, hidden, vocab, scale=0.1),
        normal(rng, hidden, hidden, scale=0.1),
        normal(rng, vocab, hidden, scale=0.1),
        normal(rng, hidden, 1, scale=0.1),
        normal(rng, vocab, 1, scale=0.1),
    )
    return (*weights, [1, 4, 0, 2, 5], [4, 0, 2, 5, 3], normal(rng, hidden, 1))


@program(_char_rnn, argnums=(0, 1, 2, 3, 4))
def min_char_rnn_loss_as_published(Wxh, Whh, Why, bh, by, inputs, targets, hprev):
    vocab_size = Wxh.shape[1]
    xs, hs, ys, ps = {}, {}, {}, {}
    hs[-1] = np.copy(hprev)
    loss = 0
    for t in range(len(inputs)):
        xs[t] = np.zeros((vocab_size, 1))
        xs[t][inputs[t]] = 1
        hs[t] = np.tanh(np.dot(Wxh, xs[t]) + np.dot(Whh, hs[t - 1]) + bh)
        ys[t] = np.dot(Why, hs[t]) + by
        ps[t] = np.exp(ys[t]) / np.sum(np.exp(ys[t]))
        loss += -np.log(ps[t][targets[t], 0])
    return loss


# ---------------------------------------------------------------- picoGPT


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head):
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)
    x = x + ffn(layer_norm(x, **ln_2), **mlp)
    return x


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head):
    x = wte[inputs] + wpe[range(len(inputs))]
    for block in blocks:
        x = transformer_block(x, **block, n_head=n_head)
    x = layer_norm(x, **ln_f)
    return x @ wte.T


def _gpt2(rng):
    vocab, d, ctx = 9, 8, 6
    params = {
        "wte": normal(rng, vocab, d, scale=0.3),
        "wpe": normal(rng, ctx, d, scale=0.1),
        "blocks": [_block_params(rng, d) for _ in range(2)],
        "ln_f": {"g": np.ones(d), "b": np.zeros(d)},
    }
    tokens = labels(rng, ctx + 1, vocab)
    return params, list(tokens[:-1]), tokens[1:], 2


@program(_gpt2)
def picogpt_gpt2_language_model_loss(params, inputs, targets, n_head):
    logits = gpt2(inputs, **params, n_head=n_head)
    logits = logits - np.max(logits, axis=-1, keepdims=True)
    log_probs = logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))
    return -np.mean(log_probs[np.arange(len(targets)), targets])
