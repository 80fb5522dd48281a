"""Optimizers that update parameter pytrees in place, and weight initialisers.

``params`` is a nested dict / list / tuple whose leaves are float NumPy arrays;
``grads`` has the same structure (as returned by an s2sad gradient).  A ``None``
gradient, at a leaf or for a whole subtree, counts as zero.  ``step`` writes into
the parameter arrays themselves, so references to them (and to the pytree) stay
valid, and keeps one state slot per leaf in traversal order (dict keys are
followed in ``params``' order and looked up by name in ``grads``).  State and
scratch buffers are allocated on the first step; later dense steps allocate
nothing.  The tree must keep the same leaves (shapes) from step to step.

Update rules (``t`` counts steps from 1):

* ``SGD``:       ``p -= lr * g``
* ``Momentum``:  ``v = momentum * v + g;  p -= lr * v``  (PyTorch's form, v starts at 0)
* ``Adam``:      ``m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
  p -= lr * m_hat / (sqrt(v_hat) + eps)`` with ``m_hat = m / (1-b1^t)``,
  ``v_hat = v / (1-b2^t)``, evaluated as
  ``p -= (lr sqrt(1-b2^t) / (1-b1^t)) * m / (sqrt(v) + eps sqrt(1-b2^t))``
  (the same number, one pass fewer).

Row-sparse gradients (:class:`~s2sad.runtime.sparse.RowSparse`, from embeddings)
are never densified: SGD updates only the touched rows; Momentum and Adam do
exactly the dense update (their state decays on every row, the gradient is added
on the touched rows), so results equal those for ``grad.to_dense()``, at the
cost of a pass over the whole table; ``Adam(lazy_sparse=True)`` instead updates
only the touched rows (a different algorithm, PyTorch's ``SparseAdam``).  Sparse
steps allocate temporaries the size of the touched rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from s2sad.runtime.sparse import RowSparse

__all__ = [
    "SGD",
    "Adam",
    "Momentum",
    "he_normal",
    "he_uniform",
    "leaves",
    "xavier_normal",
    "xavier_uniform",
]


def leaves(params: Any, grads: Any) -> Iterator[tuple[np.ndarray, Any]]:
    """Pairs ``(parameter array, its gradient or None)`` in a fixed traversal order."""
    if isinstance(params, dict):
        for key, value in params.items():
            yield from leaves(value, None if grads is None else grads.get(key))
    elif isinstance(params, (list, tuple)):
        if grads is not None and len(grads) != len(params):
            raise ValueError(f"{len(grads)} gradients for {len(params)} parameters")
        for i, value in enumerate(params):
            yield from leaves(value, None if grads is None else grads[i])
    elif isinstance(params, np.ndarray) and params.dtype.kind == "f":
        yield params, grads
    else:
        raise TypeError(
            "parameters must be float NumPy arrays (updated in place) in nested "
            f"dicts/lists/tuples; got {type(params).__name__}"
        )


def _pairs(params: Any, grads: Any, out: list) -> list:
    """:func:`leaves` into the list ``out`` (the same order and errors, without a
    generator per subtree: the optimizers' per-step walk)."""
    t = type(params)
    if t is np.ndarray and params.dtype.kind == "f":
        out.append((params, grads))
    elif t is dict or isinstance(params, dict):
        for key, value in params.items():
            g = None if grads is None else grads.get(key)
            if type(value) is np.ndarray and value.dtype.kind == "f":
                out.append((value, g))
            else:
                _pairs(value, g, out)
    elif isinstance(params, (list, tuple)):
        if grads is not None and len(grads) != len(params):
            raise ValueError(f"{len(grads)} gradients for {len(params)} parameters")
        for i, value in enumerate(params):
            _pairs(value, None if grads is None else grads[i], out)
    else:  # an ndarray subclass, or leaves' TypeError
        out.extend(leaves(params, grads))
    return out


class _Optimizer:
    """Walks the pytree and keeps per-leaf state; subclasses define ``_update``."""

    def __init__(self, lr: float) -> None:
        self.lr = float(lr)  # Python floats keep float32 math in float32
        self.t = 0
        self._state: list[tuple[np.ndarray, ...]] | None = None

    def _new_state(self, p: np.ndarray) -> tuple[np.ndarray, ...]:
        return (np.empty_like(p),)  # one scratch buffer

    def step(self, params: Any, grads: Any) -> None:
        """Apply one update to every parameter array in ``params``, in place."""
        pairs, states = self._checked(params, grads)
        update = self._update
        for (p, g), state in zip(pairs, states):
            update(p, g, *state)

    def _checked(self, params: Any, grads: Any) -> tuple[list, list]:
        """(pairs, their states) of this step, counted; a changed tree raises
        before any parameter changes."""
        pairs = _pairs(params, grads, [])
        states = self._state
        if states is None:
            states = self._state = [self._new_state(p) for p, _ in pairs]
        if len(pairs) != len(states):
            raise ValueError("the parameter tree changed since the first step")
        for (p, _), state in zip(pairs, states):
            if p.shape != state[0].shape:
                raise ValueError("the parameter tree changed since the first step")
        self.t += 1
        return pairs, states

    def _update(self, p: np.ndarray, g: Any, *state: np.ndarray) -> None:
        raise NotImplementedError


class SGD(_Optimizer):
    """Plain gradient descent: ``p -= lr * g``."""

    def step(self, params: Any, grads: Any) -> None:
        pairs, states = self._checked(params, grads)
        lr = self.lr
        for (p, g), (scratch,) in zip(pairs, states):
            if type(g) is np.ndarray:  # dense: _update's two ufuncs, inline
                np.multiply(g, lr, out=scratch)
                np.subtract(p, scratch, out=p)
            else:
                self._update(p, g, scratch)

    def _update(self, p: np.ndarray, g: Any, scratch: np.ndarray) -> None:
        if type(g) is not np.ndarray:
            if g is None:
                return
            if isinstance(g, RowSparse):
                p[g.rows] -= self.lr * g.values
                return
        np.multiply(g, self.lr, out=scratch)
        p -= scratch


class Momentum(_Optimizer):
    """Heavy-ball momentum: ``v = momentum * v + g; p -= lr * v``."""

    def __init__(self, lr: float, momentum: float = 0.9) -> None:
        super().__init__(lr)
        self.momentum = float(momentum)

    def _new_state(self, p: np.ndarray) -> tuple[np.ndarray, ...]:
        return (np.zeros_like(p), np.empty_like(p))  # velocity, scratch

    def _update(
        self, p: np.ndarray, g: Any, vel: np.ndarray, scratch: np.ndarray
    ) -> None:
        vel *= self.momentum
        _add_grad(vel, g, 1.0, scratch)
        np.multiply(vel, self.lr, out=scratch)
        p -= scratch


class Adam(_Optimizer):
    """Adam (Kingma & Ba) with bias correction; see the module docstring for the form.

    ``lazy_sparse=True`` changes the algorithm for row-sparse gradients to the
    "lazy" variant (PyTorch's ``SparseAdam``): only touched rows update their
    moments and parameters, so a step costs the touched rows, not the table.
    Dense gradients are unaffected.
    """

    def __init__(
        self,
        lr: float = 1e-3,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-8,
        lazy_sparse: bool = False,
    ) -> None:
        super().__init__(lr)
        self.b1, self.b2, self.eps = float(b1), float(b2), float(eps)
        self.lazy_sparse = lazy_sparse

    def _new_state(self, p: np.ndarray) -> tuple[np.ndarray, ...]:
        return (np.zeros_like(p), np.zeros_like(p), np.empty_like(p))  # m, v, scratch

    def _corrections(self) -> tuple[float, float]:
        """(step size, eps) of the bias-corrected update, as Python floats."""
        root_c2 = math.sqrt(1.0 - self.b2**self.t)
        return self.lr * root_c2 / (1.0 - self.b1**self.t), self.eps * root_c2

    def _update(
        self, p: np.ndarray, g: Any, m: np.ndarray, v: np.ndarray, scratch: np.ndarray
    ) -> None:
        if self.lazy_sparse and isinstance(g, RowSparse):
            return self._update_rows(p, g, m, v)
        m *= self.b1
        _add_grad(m, g, 1.0 - self.b1, scratch)
        v *= self.b2
        _add_grad_squared(v, g, 1.0 - self.b2, scratch)
        step_size, eps = self._corrections()
        np.sqrt(v, out=scratch)
        scratch += eps
        np.divide(m, scratch, out=scratch)
        scratch *= step_size
        p -= scratch

    def _update_rows(
        self, p: np.ndarray, g: RowSparse, m: np.ndarray, v: np.ndarray
    ) -> None:
        rows, values = g.rows, g.values
        m_rows = m[rows] * self.b1 + (1.0 - self.b1) * values
        v_rows = v[rows] * self.b2 + (1.0 - self.b2) * np.square(values)
        m[rows], v[rows] = m_rows, v_rows
        step_size, eps = self._corrections()
        p[rows] -= step_size * m_rows / (np.sqrt(v_rows) + eps)


def _add_grad(acc: np.ndarray, g: Any, scale: float, scratch: np.ndarray) -> None:
    """``acc += scale * g`` for dense, row-sparse or None ``g``, without allocating."""
    if g is None:
        return
    if isinstance(g, RowSparse):
        acc[g.rows] += scale * g.values
    elif scale == 1.0:
        acc += g
    else:
        np.multiply(g, scale, out=scratch)
        acc += scratch


def _add_grad_squared(
    acc: np.ndarray, g: Any, scale: float, scratch: np.ndarray
) -> None:
    """``acc += scale * g * g`` for dense, row-sparse or None ``g``."""
    if g is None:
        return
    if isinstance(g, RowSparse):
        acc[g.rows] += scale * np.square(g.values)
        return
    np.multiply(g, g, out=scratch)
    scratch *= scale
    acc += scratch


# -- initialisers ---------------------------------------------------------------
# fan_in / fan_out: inputs and outputs per unit (for conv1d weights (F, C, K):
# fan_in = C * K, fan_out = F * K).  shape defaults to (fan_in, fan_out), the
# layout of ``nn.dense``'s W.


def _in_dtype(draw: Any, shape: Any, dtype: Any) -> np.ndarray:
    """Draw directly in float32/float64 (no copy); other float types via float64."""
    dtype = np.dtype(dtype)
    if dtype in (np.float32, np.float64):
        return draw(shape, dtype=dtype.type)
    return draw(shape).astype(dtype)


def _uniform(
    rng: np.random.Generator, limit: float, shape: Any, dtype: Any
) -> np.ndarray:
    out = _in_dtype(rng.random, shape, dtype)  # [0, 1)
    out *= 2 * limit
    out -= limit
    return out


def _normal(rng: np.random.Generator, std: float, shape: Any, dtype: Any) -> np.ndarray:
    out = _in_dtype(rng.standard_normal, shape, dtype)
    out *= std
    return out


def xavier_uniform(
    rng: np.random.Generator,
    fan_in: int,
    fan_out: int,
    shape: tuple | None = None,
    dtype: Any = np.float32,
) -> np.ndarray:
    """Glorot uniform: U(-a, a), ``a = sqrt(6 / (fan_in + fan_out))``."""
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return _uniform(rng, limit, shape or (fan_in, fan_out), dtype)


def xavier_normal(
    rng: np.random.Generator,
    fan_in: int,
    fan_out: int,
    shape: tuple | None = None,
    dtype: Any = np.float32,
) -> np.ndarray:
    """Glorot normal: N(0, 2 / (fan_in + fan_out))."""
    std = np.sqrt(2.0 / (fan_in + fan_out))
    return _normal(rng, std, shape or (fan_in, fan_out), dtype)


def he_uniform(
    rng: np.random.Generator,
    fan_in: int,
    fan_out: int,
    shape: tuple | None = None,
    dtype: Any = np.float32,
) -> np.ndarray:
    """He/Kaiming uniform for ReLU layers: U(-a, a), ``a = sqrt(6 / fan_in)``."""
    limit = np.sqrt(6.0 / fan_in)
    return _uniform(rng, limit, shape or (fan_in, fan_out), dtype)


def he_normal(
    rng: np.random.Generator,
    fan_in: int,
    fan_out: int,
    shape: tuple | None = None,
    dtype: Any = np.float32,
) -> np.ndarray:
    """He/Kaiming normal for ReLU layers: N(0, 2 / fan_in)."""
    std = np.sqrt(2.0 / fan_in)
    return _normal(rng, std, shape or (fan_in, fan_out), dtype)
