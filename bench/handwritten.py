"""Hand-written NumPy value-and-gradient for every problem in bench/problems.py.

This is the baseline every other column is divided by, so it is written the way a
careful person would write it by hand: forward intermediates kept only where the
backward pass needs them, in-place updates where they are natural (``out=``,
``+=``), the softmax/sigmoid cross-entropy gradients simplified on paper, and
matrix products batched where the math allows (the RNN's input projections and
the CNN's three taps are each one product).

Each function has the signature of its loss and returns ``(value, grads)`` where
``grads`` is a tuple in the order of the problem's ``argnums``.  They are checked
against central finite differences in float64 by ``python bench/run.py --check``.
"""

from __future__ import annotations

import math

import numpy as np


def sincos(x: float) -> tuple[float, tuple[float]]:
    a = math.sin(x)
    u = a * x
    b = math.cos(u)
    v = x * b
    value = math.sin(b) * a + math.cos(v)
    da = math.cos(x)
    db = -math.sin(u) * (da * x + a)
    dv = b + x * db
    return value, (math.cos(b) * db * a + math.sin(b) * da - math.sin(v) * dv,)


def loop(x: float) -> tuple[float, tuple[float]]:
    states = [x]
    for _ in range(100):
        states.append(0.9 * math.sin(states[-1]) + 0.1 * x)
    g, gx = 1.0, 0.0
    for s in reversed(states[:-1]):
        gx += 0.1 * g
        g *= 0.9 * math.cos(s)
    return states[-1], (gx + g,)


def logsumexp(x: np.ndarray) -> tuple[float, tuple[np.ndarray]]:
    m = x.max()
    e = np.exp(x - m)
    s = e.sum()
    e /= s
    return m + math.log(s), (e,)


def logreg(w, b, X, y) -> tuple[float, tuple]:
    z = X @ w
    z += b
    p = np.exp(-z, out=z)
    p += 1.0
    np.reciprocal(p, out=p)
    value = -np.mean(y * np.log(p) + (1.0 - y) * np.log1p(-p))
    r = p
    r -= y
    r /= len(y)
    return value, (X.T @ r, r.sum())


def _softmax_xent(z: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean softmax cross-entropy and its gradient wrt the logits ``z`` (reused)."""
    n = z.shape[0]
    rows = np.arange(n)
    z -= z.max(axis=1, keepdims=True)
    z_true = z[rows, y]
    np.exp(z, out=z)
    s = z.sum(axis=1, keepdims=True)
    value = np.mean(np.log(s[:, 0]) - z_true)
    z /= s
    z[rows, y] -= 1.0
    z /= n
    return float(value), z


def mlp2(W1, b1, W2, b2, x, y) -> tuple[float, tuple]:
    h = x @ W1
    h += b1
    np.tanh(h, out=h)
    z = h @ W2
    z += b2
    value, gz = _softmax_xent(z, y)
    gW2 = h.T @ gz
    gh = gz @ W2.T
    h *= h
    np.subtract(1.0, h, out=h)
    gh *= h
    return value, (x.T @ gh, gh.sum(axis=0), gW2, gz.sum(axis=0))


def mlp_big(W1, b1, W2, b2, x, y) -> tuple[float, tuple]:
    h = x @ W1
    h += b1
    np.maximum(h, 0.0, out=h)
    z = h @ W2
    z += b2
    value, gz = _softmax_xent(z, y)
    gW2 = h.T @ gz
    gh = gz @ W2.T
    gh *= h > 0.0
    return value, (x.T @ gh, gh.sum(axis=0), gW2, gz.sum(axis=0))


def rnn_mnist(Wx, Wh, bh, Wo, bo, x, y) -> tuple[float, tuple]:
    n, steps, hidden = x.shape[0], 4, Wh.shape[0]
    # Time-major copy of the chunks, so each step's rows are contiguous and all
    # input projections (and later their weight gradient) are one product.
    xs = x.reshape(n, steps, 196).transpose(1, 0, 2).reshape(steps * n, 196)
    pre = (xs @ Wx).reshape(steps, n, hidden)
    pre += bh
    hs = [np.zeros((n, hidden), dtype=x.dtype)]
    for t in range(steps):
        a = pre[t]
        a += hs[-1] @ Wh
        hs.append(np.tanh(a, out=a))  # hs[t + 1] is pre[t], overwritten in place
    z = hs[-1] @ Wo
    z += bo
    value, gz = _softmax_xent(z, y)
    gWo, gbo = hs[-1].T @ gz, gz.sum(axis=0)
    gWh = np.zeros_like(Wh)
    gh = gz @ Wo.T
    for t in reversed(range(steps)):
        ga = pre[t]  # h_{t+1} becomes the gradient of its pre-activation
        np.multiply(ga, ga, out=ga)
        np.subtract(1.0, ga, out=ga)
        ga *= gh
        if t > 0:  # h_0 is zero
            gWh += hs[t].T @ ga
        gh = ga @ Wh.T
    gpre = pre.reshape(steps * n, hidden)
    return value, (xs.T @ gpre, gWh, gpre.sum(axis=0), gWo, gbo)


def cnn_imdb(E, K, c, w, b, ids, y) -> tuple[float, tuple]:
    n, T = ids.shape
    taps, D, F = K.shape
    L = T - taps + 1
    x = E[ids]
    cols = np.concatenate([x[:, k : k + L, :] for k in range(taps)], axis=2)
    Kf = K.reshape(taps * D, F)
    h = cols @ Kf  # (n, L, F)
    h += c
    np.maximum(h, 0.0, out=h)
    hr = h.reshape(n, L // 8, 8, F)
    arg = hr.argmax(axis=2)[:, :, None, :]
    pooled = np.take_along_axis(hr, arg, axis=2).reshape(n, -1)
    z = pooled @ w
    z += b
    p = np.exp(-z)
    p += 1.0
    np.reciprocal(p, out=p)
    value = -np.mean(y * np.log(p) + (1.0 - y) * np.log1p(-p))
    gz = p
    gz -= y
    gz /= n
    gw, gb = pooled.T @ gz, gz.sum(keepdims=True)
    gpooled = np.outer(gz, w)
    gpooled *= pooled > 0.0  # ReLU mask, needed only where the max was taken
    gh = np.zeros_like(hr)
    np.put_along_axis(gh, arg, gpooled.reshape(n, L // 8, 1, F), axis=2)
    gh = gh.reshape(n, L, F)
    gK = (cols.reshape(-1, taps * D).T @ gh.reshape(-1, F)).reshape(taps, D, F)
    gc = gh.sum(axis=(0, 1))
    gcols = gh @ Kf.T
    gx = np.zeros_like(x)
    for k in range(taps):
        gx[:, k : k + L, :] += gcols[:, :, k * D : (k + 1) * D]
    return float(value), (_embedding_grad(E, ids, gx), gK, gc, gw, gb)


def _embedding_grad(E: np.ndarray, ids: np.ndarray, gx: np.ndarray) -> np.ndarray:
    """Scatter-add of the looked-up rows' gradients into a table shaped like E.

    ``np.add.at`` on the flattened table with flattened (row, column) positions:
    NumPy's 1-d fast path makes this several times faster than the row-wise
    ``np.add.at(gE, ids, gx)`` (measured 1.5 ms vs 8 ms at 64x130x50).
    """
    D = E.shape[1]
    pos = (ids.reshape(-1, 1) * D + np.arange(D)).ravel()
    gE = np.zeros_like(E)
    np.add.at(gE.reshape(-1), pos, gx.reshape(-1))
    return gE
