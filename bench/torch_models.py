"""PyTorch versions of the two example models, for the training comparison.

The architectures are the ones of bench/problems.py (and of the s2sad examples):

* ``RNNMnist``: each 784-pixel image read as 4 chunks of 196, a vanilla tanh RNN
  with 64 hidden units, a dense 64 -> 10 layer, softmax cross-entropy; trained
  with plain SGD, lr 0.015, batch 100.
* ``CNNImdb``: a trainable 10000 x 50 embedding (initialised from GloVe, passed
  in as an array), conv1d with 8 filters of width 3 + ReLU, non-overlapping
  max-pool 8, flatten, dense -> 1, sigmoid binary cross-entropy; trained with
  Adam, batch 64.

Weights use Xavier (Glorot) uniform initialisation and zero biases.  Both models
can export their parameters in the NumPy layout of bench/problems.py
(``numpy_params``) and load them from it (``load_numpy_params``), so a PyTorch
run and an s2sad run can start from identical weights.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

RNN_LR, RNN_BATCH = 0.015, 100
CNN_BATCH = 64


def _xavier(*shape: int) -> nn.Parameter:
    return nn.Parameter(nn.init.xavier_uniform_(torch.empty(*shape)))


def _zeros(*shape: int) -> nn.Parameter:
    return nn.Parameter(torch.zeros(*shape))


class RNNMnist(nn.Module):
    """Vanilla tanh RNN over 4 chunks of 196 pixels, dense 64 -> 10."""

    def __init__(self, chunks: int = 4, hidden: int = 64, classes: int = 10):
        super().__init__()
        self.chunks, self.chunk = chunks, 784 // chunks
        self.Wx = _xavier(self.chunk, hidden)
        self.Wh = _xavier(hidden, hidden)
        self.bh = _zeros(hidden)
        self.Wo = _xavier(hidden, classes)
        self.bo = _zeros(classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (n, classes) of images x (n, 784)."""
        xs = x.reshape(x.shape[0], self.chunks, self.chunk)
        h = x.new_zeros(x.shape[0], self.Wh.shape[0])
        for t in range(self.chunks):
            h = torch.tanh(xs[:, t, :] @ self.Wx + h @ self.Wh + self.bh)
        return h @ self.Wo + self.bo

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self(x), y)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(dim=1)

    def numpy_params(self) -> list[np.ndarray]:
        """(Wx, Wh, bh, Wo, bo): the argument order of problems.rnn_mnist."""
        return [
            p.detach().numpy().copy()
            for p in (self.Wx, self.Wh, self.bh, self.Wo, self.bo)
        ]

    def load_numpy_params(self, params: list[np.ndarray]) -> None:
        with torch.no_grad():
            for p, a in zip((self.Wx, self.Wh, self.bh, self.Wo, self.bo), params):
                p.copy_(torch.from_numpy(np.asarray(a, dtype=np.float32)))


class CNNImdb(nn.Module):
    """Text CNN: embedding, conv1d(8, width 3) + ReLU, max-pool 8, dense -> 1."""

    def __init__(
        self,
        embedding: np.ndarray,
        maxlen: int = 130,
        filters: int = 8,
        width: int = 3,
        pool: int = 8,
    ):
        super().__init__()
        table = torch.from_numpy(np.asarray(embedding, dtype=np.float32).copy())
        self.embed = nn.Embedding.from_pretrained(table, freeze=False)
        self.conv = nn.Conv1d(table.shape[1], filters, width)
        nn.init.xavier_uniform_(self.conv.weight)
        nn.init.zeros_(self.conv.bias)
        self.pool = pool
        self.positions = (maxlen - width + 1) // pool
        self.dense = nn.Linear(filters * self.positions, 1)
        nn.init.xavier_uniform_(self.dense.weight)
        nn.init.zeros_(self.dense.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits (n,) of token-id rows ids (n, maxlen)."""
        x = self.embed(ids).transpose(1, 2)  # (n, embed, T): channels first
        h = F.max_pool1d(torch.relu(self.conv(x)), self.pool)
        return self.dense(h.flatten(1))[:, 0]

    def loss(self, ids: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(self(ids), y)

    def predict(self, ids: torch.Tensor) -> torch.Tensor:
        return (self(ids) > 0).long()

    def numpy_params(self) -> list[np.ndarray]:
        """(E, K, c, w, b) in the layout of problems.cnn_imdb.

        K is (width, embed, filters); w is flattened position-major, as
        ``pooled.reshape(n, -1)`` of a (n, positions, filters) array.
        """
        filters = self.conv.out_channels
        w = self.dense.weight.detach().numpy()[0].reshape(filters, self.positions)
        return [
            self.embed.weight.detach().numpy().copy(),
            self.conv.weight.detach().numpy().transpose(2, 1, 0).copy(),
            self.conv.bias.detach().numpy().copy(),
            w.T.reshape(-1).copy(),
            self.dense.bias.detach().numpy().copy(),
        ]

    def load_numpy_params(self, params: list[np.ndarray]) -> None:
        E, K, c, w, b = (np.asarray(a, dtype=np.float32) for a in params)
        filters = K.shape[2]
        w_t = w.reshape(self.positions, filters).T.reshape(1, -1)
        with torch.no_grad():
            self.embed.weight.copy_(torch.from_numpy(E))
            self.conv.weight.copy_(torch.from_numpy(K.transpose(2, 1, 0).copy()))
            self.conv.bias.copy_(torch.from_numpy(c))
            self.dense.weight.copy_(torch.from_numpy(w_t.copy()))
            self.dense.bias.copy_(torch.from_numpy(b.reshape(1)))


def make_optimizer(name: str, model: nn.Module) -> torch.optim.Optimizer:
    """SGD lr 0.015 for the RNN, Adam (default lr 1e-3) for the CNN."""
    if name == "rnn":
        return torch.optim.SGD(model.parameters(), lr=RNN_LR)
    return torch.optim.Adam(model.parameters())
