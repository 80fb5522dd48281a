"""More programs not designed for s2sad: ML-From-Scratch classes, a spring-mass
system, a Kalman filter's log-likelihood and soft k-means."""

# ruff: noqa: RUF059  (written as the published code is: unused unpacked names)

import math

import numpy as np
from scipy.special import softmax

from tests.realistic.registry import labels, normal, program

# ---------------------------------------------------------------- ML-From-Scratch


class Sigmoid:
    def __call__(self, x):
        return 1 / (1 + np.exp(-x))

    def gradient(self, x):
        return self.__call__(x) * (1 - self.__call__(x))


class Softmax:
    def __call__(self, x):
        e_x = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return e_x / np.sum(e_x, axis=-1, keepdims=True)


class CrossEntropy:
    def loss(self, y, p):
        p = np.clip(p, 1e-15, 1 - 1e-15)
        return -y * np.log(p) - (1 - y) * np.log(1 - p)


class LogisticRegression:
    def __init__(self, learning_rate=0.1):
        self.param = None
        self.learning_rate = learning_rate
        self.sigmoid = Sigmoid()

    def predict_proba(self, X):
        return self.sigmoid(X.dot(self.param))


def _logreg(rng):
    X = normal(rng, 12, 3)
    return normal(rng, 3, scale=0.3), X, (rng.random(12) > 0.5).astype(float)


@program(_logreg)
def ml_from_scratch_logistic_regression(param, X, y):
    model = LogisticRegression()
    model.param = param
    return np.mean(CrossEntropy().loss(y, model.predict_proba(X)))


class MultilayerPerceptron:
    def __init__(self, n_hidden):
        self.n_hidden = n_hidden
        self.hidden_activation = Sigmoid()
        self.output_activation = Softmax()
        self.loss = CrossEntropy()

    def _forward(self, X):
        hidden_input = X.dot(self.W) + self.w0
        hidden_output = self.hidden_activation(hidden_input)
        output_layer_input = hidden_output.dot(self.V) + self.v0
        return self.output_activation(output_layer_input)


def _mlp(rng):
    y = np.eye(3)[labels(rng, 10, 3)]
    return (
        normal(rng, 4, 5, scale=0.5),
        np.zeros((1, 5)),
        normal(rng, 5, 3, scale=0.5),
        np.zeros((1, 3)),
        normal(rng, 10, 4),
        y,
    )


@program(_mlp, argnums=(0, 1, 2, 3))
def ml_from_scratch_mlp_loss(W, w0, V, v0, X, y):
    model = MultilayerPerceptron(n_hidden=5)
    model.W, model.w0, model.V, model.v0 = W, w0, V, v0
    y_pred = model._forward(X)
    return np.mean(model.loss.loss(y, y_pred))


# ---------------------------------------------------------------- spring-mass


def _springs(rng):
    pos = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.1], [1.0, 1.0]])
    springs = [(0, 1, 1.0), (1, 2, 1.0), (1, 3, 1.0), (0, 3, 1.4), (2, 3, 1.4)]
    return (
        np.log(np.array([8.0, 6.0, 7.0, 5.0, 9.0])),
        normal(rng, 4, 2, scale=0.2),
        pos,
        springs,
        np.array([2.5, 0.5]),
    )


@program(_springs, argnums=(0, 1))
def spring_mass_system(log_k, vel, pos, springs, target, dt=0.02, steps=30):
    k = np.exp(log_k)
    for _ in range(steps):
        forces = np.zeros_like(pos)
        for s, (i, j, rest) in enumerate(springs):
            d = pos[j] - pos[i]
            length = np.linalg.norm(d)
            f = k[s] * (length - rest) * d / length
            forces[i] += f
            forces[j] -= f
        forces[:, 1] -= 0.5  # gravity
        vel = 0.99 * (vel + dt * forces)
        pos = pos + dt * vel
    return np.sum((pos[2] - target) ** 2)


# ---------------------------------------------------------------- Kalman filter


def _kalman(rng):
    T = 12
    xs = np.cumsum(normal(rng, T, 2, scale=0.3), axis=0)
    ys = xs @ np.array([[1.0], [0.5]]) + normal(rng, T, 1, scale=0.2)
    return np.array([-1.0, -2.0]), np.array([[0.9, 0.1], [0.0, 0.95]]), ys


@program(_kalman, argnums=(0, 1))
def kalman_filter_log_likelihood(log_noise, A, ys):
    Q = np.exp(log_noise[0]) * np.eye(2)
    R = np.exp(log_noise[1]) * np.eye(1)
    C = np.array([[1.0, 0.5]])
    m = np.zeros(2)
    P = np.eye(2)
    loglik = 0.0
    for y in ys:
        m = A @ m
        P = A @ P @ A.T + Q
        v = y - C @ m
        S = C @ P @ C.T + R
        K = P @ C.T @ np.linalg.inv(S)
        m = m + K @ v
        P = P - K @ S @ K.T
        sign, logdet = np.linalg.slogdet(2 * math.pi * S)
        loglik -= 0.5 * (logdet + v @ np.linalg.solve(S, v))
    return -loglik


# ---------------------------------------------------------------- soft k-means


def _kmeans(rng):
    X = np.concatenate([normal(rng, 6, 2) + 2, normal(rng, 6, 2) - 2])
    return normal(rng, 3, 2), X


@program(_kmeans)
def soft_kmeans_loss(centers, X, beta=2.0):
    dists = np.sum((X[:, np.newaxis, :] - centers[np.newaxis, :, :]) ** 2, axis=-1)
    resp = softmax(-beta * dists, axis=1)
    return np.sum(resp * dists) / X.shape[0]


@program(_kmeans)
def soft_kmeans_free_energy(centers, X, beta=2.0):
    dists = np.linalg.norm(X[:, None, :] - centers[None, :, :], axis=2) ** 2
    m = np.min(dists, axis=1, keepdims=True)
    return (
        -np.mean(np.log(np.sum(np.exp(-beta * (dists - m)), axis=1)) - beta * m[:, 0])
        / beta
    )
