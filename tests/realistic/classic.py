"""Classic objectives, layers written as classes, and losses from ML-From-Scratch-style code."""

from dataclasses import dataclass

import numpy as np

from tests.realistic.registry import labels, normal, program


def _x(rng):
    return (normal(rng, 6, scale=0.8),)


@program(_x)
def rastrigin(individual):
    # DEAP benchmarks.rastrigin
    return 10 * len(individual) + sum(
        gene * gene - 10 * np.cos(2 * np.pi * gene) for gene in individual
    )


@program(_x)
def ackley(individual):
    # DEAP benchmarks.ackley
    N = len(individual)
    return (
        20
        - 20 * np.exp(-0.2 * np.sqrt(1.0 / N * sum(x**2 for x in individual)))
        + np.e
        - np.exp(1.0 / N * sum(np.cos(2 * np.pi * x) for x in individual))
    )


@program(_x)
def rosenbrock_vectorized(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@program(_x)
def styblinski_tang(x):
    return 0.5 * np.sum(x**4 - 16 * x**2 + 5 * x)


def _mf(rng):
    mask = (rng.random((6, 5)) > 0.4).astype(float)
    return (
        normal(rng, 6, 2, scale=0.5),
        normal(rng, 5, 2, scale=0.5),
        normal(rng, 6, 5),
        mask,
    )


@program(_mf, argnums=(0, 1))
def matrix_factorization_masked(U, V, R, mask, lam=0.1):
    pred = U @ V.T
    err = mask * (R - pred)
    return 0.5 * np.sum(err**2) + 0.5 * lam * (np.sum(U**2) + np.sum(V**2))


def _ridge(rng):
    return 0.5, normal(rng, 12, 3), normal(rng, 12), normal(rng, 5, 3), normal(rng, 5)


@program(_ridge)
def ridge_validation_error(lam, X, y, X_val, y_val):
    # hyperparameter gradient through the closed-form solution
    A = X.T @ X + lam * np.eye(X.shape[1])
    w = np.linalg.solve(A, X.T @ y)
    return np.mean((X_val @ w - y_val) ** 2)


def _pca(rng):
    Q, _ = np.linalg.qr(normal(rng, 5, 2))
    return Q, normal(rng, 9, 5)


@program(_pca)
def pca_reconstruction_loss(W, X):
    Xc = X - X.mean(axis=0)
    Z = Xc @ W
    return np.sum((Xc - Z @ W.T) ** 2) / X.shape[0]


def _tsne(rng):
    return normal(rng, 6, 2), rng.dirichlet(np.ones(30)).reshape(6, 5)


@program(_tsne)
def tsne_kl_divergence(Y, P_rows):
    n = Y.shape[0]
    sum_Y = np.sum(np.square(Y), 1)
    num = 1.0 / (1.0 + (-2.0 * Y @ Y.T + sum_Y).T + sum_Y)
    num = num * (1.0 - np.eye(n))
    Q = num / np.sum(num)
    P = np.zeros((n, n))
    for i in range(n):
        others = [j for j in range(n) if j != i]
        P[i, others] = P_rows[i]
    P = (P + P.T) / np.sum(P + P.T)
    return np.sum(P * np.log((P + 1e-12) / (Q + 1e-12)))


def _krr(rng):
    return np.array([0.0, -2.0]), normal(rng, 10, 2), normal(rng, 10)


@program(_krr)
def kernel_ridge_loo_error(log_params, X, y):
    gamma, lam = np.exp(log_params[0]), np.exp(log_params[1])
    sq = np.sum(X**2, 1)[:, None] + np.sum(X**2, 1)[None, :] - 2 * X @ X.T
    K = np.exp(-gamma * sq)
    H = K @ np.linalg.inv(K + lam * np.eye(len(y)))
    resid = (y - H @ y) / (1 - np.diag(H))
    return np.mean(resid**2)


def _sinkhorn(rng):
    return normal(rng, 4, 2), normal(rng, 5, 2)


@program(_sinkhorn, argnums=(0, 1))
def sinkhorn_distance(x, y, eps=0.5, iters=30):
    C = np.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=2)
    K = np.exp(-C / eps)
    a = np.ones(len(x)) / len(x)
    b = np.ones(len(y)) / len(y)
    u = np.ones_like(a)
    for _ in range(iters):
        v = b / (K.T @ u)
        u = a / (K @ v)
    P = u[:, None] * K * v[None, :]
    return np.sum(P * C)


def _triplet(rng):
    return (
        normal(rng, 5, 4, scale=0.5),
        normal(rng, 3, 5),
        normal(rng, 3, 5),
        normal(rng, 3, 5),
    )


@program(_triplet)
def cosine_triplet_loss(W, anchor, positive, negative, margin=0.2):
    def embed(v):
        e = v @ W
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    a, p, n = embed(anchor), embed(positive), embed(negative)
    pos = np.sum(a * p, axis=1)
    neg = np.sum(a * n, axis=1)
    return np.mean(np.log1p(np.exp(neg - pos + margin)))


def _gumbel(rng):
    return normal(rng, 4, 3), rng.gumbel(size=(4, 3)), np.array([0.5, -1.0, 2.0])


@program(_gumbel)
def gumbel_softmax_expectation(logits, gumbel_noise, values, tau=0.7):
    y = (logits + gumbel_noise) / tau
    y = np.exp(y - y.max(axis=1, keepdims=True))
    y = y / y.sum(axis=1, keepdims=True)
    return np.sum(y @ values)


class Dense:
    """ML-From-Scratch style layer that keeps its input for the backward pass."""

    def __init__(self, W, b):
        self.W = W
        self.b = b

    def forward_pass(self, X):
        self.layer_input = X
        return X @ self.W + self.b


class Sigmoid:
    def __call__(self, x):
        return 1 / (1 + np.exp(-x))


def _dense(rng):
    return normal(rng, 4, 3, scale=0.5), normal(rng, 3), normal(rng, 6, 4)


@program(_dense, argnums=(0, 1))
def ml_from_scratch_dense_layer(W, b, X):
    layer = Dense(W, b)
    return np.sum(Sigmoid()(layer.forward_pass(X)) ** 2)


class Linear:
    def __init__(self, W):
        self.W = W

    def forward(self, x):
        return np.tanh(x @ self.W)


@program(_dense, argnums=(0, 1))
def layer_object_method(W, b, X):
    layer = Linear(W)
    return np.sum(layer.forward(X) + b)


def _logreg_ce(rng):
    return normal(rng, 5, 3, scale=0.3), normal(rng, 8, 5), labels(rng, 8, 3)


def softmax_rows(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


@program(_logreg_ce)
def label_smoothing_cross_entropy(W, X, y, smoothing=0.1):
    n_classes = W.shape[1]
    targets = np.full((len(y), n_classes), smoothing / (n_classes - 1))
    targets[np.arange(len(y)), y] = 1.0 - smoothing
    probs = softmax_rows(X @ W)
    return -np.mean(np.sum(targets * np.log(probs), axis=1))


def _huber(rng):
    return normal(rng, 3), normal(rng, 15, 3), normal(rng, 15) * 3


@program(_huber)
def huber_regression(w, X, y, delta=1.0):
    r = X @ w - y
    quad = np.minimum(np.abs(r), delta)
    lin = np.abs(r) - quad
    return np.mean(0.5 * quad**2 + delta * lin)


@program(_huber)
def elastic_net_smooth(w, X, y, alpha=0.1, l1_ratio=0.5):
    resid = y - X @ w
    l1 = np.sum(np.sqrt(w**2 + 1e-8))
    l2 = np.dot(w, w)
    return 0.5 * np.mean(resid**2) + alpha * (l1_ratio * l1 + 0.5 * (1 - l1_ratio) * l2)


@dataclass
class DenseLayer:
    """A layer holding its weights, passed in whole: the gradient is a DenseLayer."""

    W: np.ndarray
    b: np.ndarray

    def forward(self, X):
        return np.tanh(X @ self.W + self.b)


def _layer_obj(rng):
    return DenseLayer(normal(rng, 4, 3, scale=0.5), normal(rng, 3)), normal(rng, 6, 4)


@program(_layer_obj)
def dataclass_layer_passed_in(layer, X):
    return np.sum(layer.forward(X) ** 2)
