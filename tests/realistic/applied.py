"""Applied programs: filtering, finance, reinforcement learning, word vectors,
population dynamics and clustering, written the way their textbook and blog
versions are (a Kalman filter's loop over observations, Black-Scholes with
``scipy.stats.norm``, REINFORCE's discounted returns, word2vec's negative
sampling, a GRU cell, a Gumbel-softmax relaxation, Lotka-Volterra fitted by
Euler steps with keyword parameters, soft k-means)."""

import numpy as np
from scipy.special import log_softmax, logsumexp
from scipy.stats import norm

from tests.realistic.registry import labels, normal, program


def _kalman(rng):
    ys = np.cumsum(rng.normal(size=(12, 1)) * 0.3, axis=0)
    return np.array([0.9, -1.0, -0.5]), ys


@program(_kalman)
def kalman_negative_log_likelihood(params, ys):
    # a local-linear-trend model; its transition's damping and both noise
    # levels are fitted by maximum likelihood
    a, log_q, log_r = params[0], params[1], params[2]
    F = np.array([[1.0, 1.0], [0.0, a]])
    H = np.array([[1.0, 0.0]])
    Q = np.exp(log_q) * np.eye(2)
    R = np.exp(log_r) * np.eye(1)
    x = np.zeros(2)
    P = np.eye(2)
    ll = 0.0
    for y in ys:
        x = F @ x
        P = F @ P @ F.T + Q
        S = H @ P @ H.T + R
        K = P @ H.T @ np.linalg.inv(S)
        r = y - H @ x
        ll += -0.5 * (
            np.log(2 * np.pi) + np.log(np.linalg.det(S)) + r @ np.linalg.solve(S, r)
        )
        x = x + K @ r
        P = (np.eye(2) - K @ H) @ P
    return -ll


def _options(rng):
    S = 100.0 + rng.normal(size=5) * 5.0
    K = np.array([90.0, 95.0, 100.0, 105.0, 110.0])
    return S, K, 0.5, 0.01, 0.2 + 0.02 * rng.random(5)


@program(_options, argnums=(0, 2, 3, 4))
def black_scholes_book_value(S, K, T, r, sigma):
    # delta, theta, rho and vega of a book of calls are this value's gradient
    d1 = (np.log(S / K) + (r + 0.5 * sigma**2) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)
    return np.sum(S * norm.cdf(d1) - K * np.exp(-r * T) * norm.cdf(d2))


def discounted_returns(rewards, gamma):
    out = np.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def _episode(rng):
    return (
        normal(rng, 4, 3, scale=0.5),
        normal(rng, 20, 4),
        labels(rng, 20, 3),
        rng.random(20),
    )


@program(_episode)
def reinforce_surrogate(W, states, actions, rewards):
    returns = discounted_returns(rewards, 0.99)
    returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    logp = log_softmax(states @ W, axis=1)
    return -np.sum(logp[np.arange(len(actions)), actions] * returns)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _skipgram(rng):
    return (
        normal(rng, 30, 8, scale=0.3),
        normal(rng, 30, 8, scale=0.3),
        labels(rng, 16, 30),
        labels(rng, 16, 30),
        rng.integers(0, 30, size=(16, 5)),
    )


@program(_skipgram, argnums=(0, 1))
def word2vec_negative_sampling(W_in, W_out, centers, contexts, negatives):
    v = W_in[centers]
    u = W_out[contexts]
    un = W_out[negatives]
    pos = np.sum(v * u, axis=1)
    neg = np.einsum("bkd,bd->bk", un, v)
    return -np.mean(np.log(sigmoid(pos)) + np.sum(np.log(sigmoid(-neg)), axis=1))


def _gru(rng):
    D, H = 3, 4
    params = {
        k: normal(rng, *shape, scale=0.4)
        for k, shape in (
            ("Wz", (D, H)),
            ("Uz", (H, H)),
            ("Wr", (D, H)),
            ("Ur", (H, H)),
            ("Wh", (D, H)),
            ("Uh", (H, H)),
        )
    }
    return params, normal(rng, 6, 2, D), normal(rng, 2, H)


@program(_gru)
def gru_last_state_loss(params, xs, target):
    Wz, Uz, Wr, Ur, Wh, Uh = (params[k] for k in ("Wz", "Uz", "Wr", "Ur", "Wh", "Uh"))
    h = np.zeros((xs.shape[1], Uz.shape[0]))
    for x in xs:
        z = sigmoid(x @ Wz + h @ Uz)
        r = sigmoid(x @ Wr + h @ Ur)
        hh = np.tanh(x @ Wh + (r * h) @ Uh)
        h = (1 - z) * h + z * hh
    return 0.5 * np.sum((h - target) ** 2)


def _gumbel(rng):
    gumbel = -np.log(-np.log(rng.random((5, 4))))
    return normal(rng, 5, 4), gumbel, 0.7, np.eye(4)[labels(rng, 5, 4)]


@program(_gumbel, argnums=(0, 2))
def gumbel_softmax_relaxation(logits, g, tau, target):
    y = (logits + g) / tau
    y = np.exp(y - y.max(axis=-1, keepdims=True))
    y /= y.sum(axis=-1, keepdims=True)
    return np.sum((y - target) ** 2)


def lotka_volterra(state, alpha, beta, delta, gamma):
    x, y = state
    return np.array([alpha * x - beta * x * y, delta * x * y - gamma * y])


def _populations(rng):
    obs = np.array([[1.0, 0.5], [1.1, 0.45], [1.15, 0.43], [1.2, 0.42]])
    return np.array([1.0, 0.6, 0.4, 0.5]) + 0.05 * rng.random(4), obs


@program(_populations)
def lotka_volterra_fit(theta, obs, dt=0.01):
    # dict(...) as the published code writes it (a keyword call s2sad reads)
    a, b, d, g = theta[0], theta[1], theta[2], theta[3]
    kw = dict(alpha=a, beta=b, delta=d, gamma=g)  # noqa: C408
    state = obs[0].copy()
    loss = 0.0
    for k in range(1, len(obs)):
        for _ in range(10):
            state = state + dt * lotka_volterra(state, **kw)
        loss += np.sum((state - obs[k]) ** 2)
    return loss


def _clusters(rng):
    return normal(rng, 3, 2), normal(rng, 25, 2), 0.5


@program(_clusters, argnums=(0, 2))
def soft_kmeans_energy(C, X, temperature):
    d2 = ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1)
    return -temperature * np.sum(logsumexp(-d2 / temperature, axis=1))
