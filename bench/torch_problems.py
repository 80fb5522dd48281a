"""The benchmark problems spelled in PyTorch, the way a PyTorch user writes them.

Where PyTorch has a fused idiom a user would reach for (``F.cross_entropy``,
``F.binary_cross_entropy_with_logits``, ``torch.logsumexp``, ``F.embedding``,
``F.conv1d``, ``F.max_pool1d``) it is used: the column measures PyTorch as it is
used, not a transliteration of the NumPy code.  The CNN keeps PyTorch's native
layouts (conv weight ``(filters, embed, width)``, channel-major flatten); the
parameters are converted from the NumPy layout once, outside the timing, and the
gradients converted back for the comparison with the hand-written ones.

Imported only by the runner, after the thread settings are applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class TorchSpec:
    """How to run one problem in PyTorch.

    ``to_torch(args)`` converts NumPy arguments (parameters into the PyTorch
    layout); ``grads_to_numpy(grads)`` maps gradients back to the NumPy layout.
    """

    loss: Callable
    to_torch: Callable[[tuple], list]
    grads_to_numpy: Callable[[list], list]


def _tensor(a) -> torch.Tensor:
    if isinstance(a, float):
        return torch.tensor(a, dtype=torch.float64)
    if np.issubdtype(a.dtype, np.integer):
        return torch.from_numpy(a.astype(np.int64))
    return torch.from_numpy(a.copy())


def _plain(args: tuple) -> list:
    return [_tensor(a) for a in args]


def _numpy(grads: list) -> list:
    return [g.detach().numpy() for g in grads]


def sincos(x):
    a = torch.sin(x)
    b = torch.cos(a * x)
    return torch.sin(b) * a + torch.cos(x * b)


def loop(x):
    s = x
    for i in range(100):
        s = 0.9 * torch.sin(s) + 0.1 * x
    return s


def logsumexp(x):
    return torch.logsumexp(x, dim=0)


def logreg(w, b, X, y):
    return F.binary_cross_entropy_with_logits(X @ w + b, y)


def mlp2(W1, b1, W2, b2, x, y):
    h = torch.tanh(x @ W1 + b1)
    return F.cross_entropy(h @ W2 + b2, y)


def mlp_big(W1, b1, W2, b2, x, y):
    h = torch.relu(x @ W1 + b1)
    return F.cross_entropy(h @ W2 + b2, y)


def rnn_mnist(Wx, Wh, bh, Wo, bo, x, y):
    xs = x.reshape(x.shape[0], 4, 196)
    h = torch.zeros(x.shape[0], Wh.shape[0], dtype=x.dtype)
    for t in range(4):
        h = torch.tanh(xs[:, t, :] @ Wx + h @ Wh + bh)
    return F.cross_entropy(h @ Wo + bo, y)


def cnn_imdb(E, K, c, w, b, ids, y):
    x = F.embedding(ids, E).transpose(1, 2)  # (n, embed, T)
    h = F.max_pool1d(torch.relu(F.conv1d(x, K, c)), 8)  # (n, filters, L/8)
    return F.binary_cross_entropy_with_logits(h.flatten(1) @ w + b, y)


def _cnn_to_torch(args: tuple) -> list:
    E, K, c, w, b, ids, y = args
    filters = K.shape[2]
    K_t = np.ascontiguousarray(K.transpose(2, 1, 0))  # (filters, embed, width)
    w_t = np.ascontiguousarray(w.reshape(-1, filters).T).reshape(-1)
    return _plain((E, K_t, c, w_t, b, ids, y))


def _cnn_grads_to_numpy(grads: list) -> list:
    gE, gK, gc, gw, gb = _numpy(grads)
    filters = gK.shape[0]
    return [gE, gK.transpose(2, 1, 0), gc, gw.reshape(filters, -1).T.reshape(-1), gb]


SPECS: dict[str, TorchSpec] = {
    "sincos": TorchSpec(sincos, _plain, _numpy),
    "loop": TorchSpec(loop, _plain, _numpy),
    "logsumexp": TorchSpec(logsumexp, _plain, _numpy),
    "logreg": TorchSpec(logreg, _plain, _numpy),
    "mlp2": TorchSpec(mlp2, _plain, _numpy),
    "mlp_big": TorchSpec(mlp_big, _plain, _numpy),
    "rnn_mnist": TorchSpec(rnn_mnist, _plain, _numpy),
    "cnn_imdb": TorchSpec(cnn_imdb, _cnn_to_torch, _cnn_grads_to_numpy),
}
