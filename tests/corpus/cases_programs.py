"""Corpus: small realistic programs (likelihoods, simulation, attention, line search)."""

import math

import numpy as np

from tests.corpus.registry import case, const, mat, scal, vec

_RNG = np.random.default_rng(7)
_X = _RNG.normal(size=(6, 2))
_Y = _RNG.normal(size=6)


@case(scal(), scal(), const(_X), const(_Y), argnums=(0, 1))
def gp_negative_log_likelihood(log_ell, log_sf, X, y):
    ell = np.exp(log_ell)
    sf2 = np.exp(2 * log_sf)
    d = X[:, None, :] - X[None, :, :]
    K = sf2 * np.exp(-0.5 * np.sum(d**2, axis=-1) / ell**2)
    K = K + 1e-2 * np.eye(X.shape[0])
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(K, y)
    return (
        0.5 * y @ alpha
        + np.sum(np.log(np.diag(L)))
        + 0.5 * len(y) * math.log(2 * math.pi)
    )


@case(scal(positive=True), vec(3), vec(3), argnums=(0, 1, 2))
def damped_spring_simulation(k, x0, v0):
    x, v = x0, v0
    dt = 0.05
    energy = []
    for step in range(30):
        a = -k * x - 0.1 * v
        v = v + dt * a
        x = x + dt * v
        if step % 10 == 9:
            energy.append(0.5 * np.sum(v * v) + 0.5 * k * np.sum(x * x))
    return sum(energy) / len(energy)


@case(mat(4, 3), mat(5, 4), const(np.array([0, 2, 1, 1, 0])))
def softmax_loss_with_python_loop(W, X, labels):
    logits = X @ W
    logits = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    n = X.shape[0]
    loss = 0.0
    for i in range(n):
        loss -= math.log(p[i, labels[i]]) if p[i, labels[i]] > 0 else 0.0
    return loss / n


@case(vec(3), vec(3), argnums=(0, 1))
def backtracking_line_search(x, d):
    t = 1.0
    f0 = np.sum(x**2)
    while np.sum((x + t * d) ** 2) > f0 and t > 1e-3:
        t = t * 0.5
    return np.sum(np.sin(x + t * d)) + f0


@case(mat(4, 3), mat(5, 3), mat(5, 2), argnums=(0, 1, 2))
def attention_head(Q, K, V):
    s = Q @ K.T / np.sqrt(Q.shape[1])
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    out = w @ V
    return np.sum(out * out)


@case(mat(3, 3), vec(3), vec(3), argnums=(0, 1, 2))
def einsum_bilinear_form(A, x, y):
    return np.einsum("ij,i,j->", A, x, y) + np.einsum("ii", A) * np.linalg.norm(x)
