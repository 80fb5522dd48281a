"""Neural-network kernels and their adjoint rules.

Users call these from plain NumPy loss functions; s2sad differentiates the loss
and uses the rules below for the kernels.  Every kernel is an ordinary function
that also works without s2sad.  The dense layer and the activations (``dense``,
``relu``, ``sigmoid``, ``softmax``, ``log_softmax``) are defined with their
rules in :mod:`s2sad.runtime.activations` and re-exported here, so that every
kernel is reached as ``nn.<name>``.

Layouts and conventions
-----------------------
* ``conv1d(x, w, b)``: ``x`` is ``(batch, in_channels, length)`` (channels first,
  as PyTorch ``Conv1d``), ``w`` is ``(filters, in_channels, width)``, ``b`` is
  ``(filters,)``; the result is ``(batch, filters, length - width + 1)``, a *valid*
  cross-correlation (no padding, stride 1, no kernel flip); the result is a fresh
  C-contiguous array.  Internally x is read channels-last, as a
  ``(batch * length, channels)`` matrix: ``embedding(...).transpose(0, 2, 1)`` is
  that already (no copy), a channels-first array costs one transposing copy.
  Forward: one matrix product ``(width * filters, channels) @ (channels,
  batch * length)`` applies every tap at every position, then ``width`` shifted
  slices are summed (col2im on the output side).  Backward: g delayed by each
  tap, ``(width * filters, batch * length)``, times the taps (x cotangent) and
  times x (w cotangent): two products.  Intermediates are ``width * filters``
  wide rather than im2col's ``width * channels``, the cheaper side when
  filters <= channels (8 vs 50 in the IMDB CNN); the flops are the same.
* ``maxpool1d(x, k)`` pools non-overlapping windows of ``k`` over the last axis;
  ``length % k`` trailing elements are dropped (PyTorch ``MaxPool1d(k)``).  On
  ties the gradient goes to the *first* maximal element of each window only.
* ``embedding(table, ids)`` is ``table[ids]``; its rule returns a
  :class:`~s2sad.runtime.sparse.RowSparse` cotangent holding only touched rows.
* Losses return the *mean* over all examples, as a scalar of the logits' dtype.
  ``softmax_cross_entropy`` takes integer class ids ``labels`` with
  ``logits.shape == labels.shape + (classes,)``;
  ``binary_cross_entropy_with_logits`` takes float targets of the logits' shape.
* Rules never modify ``g`` or the primal arguments; cotangents have the dtype of
  the primal whenever ``g`` has it (float32 in, float32 out).
* ``d_softmax_cross_entropy`` and ``d_maxpool1d`` accept ``into=(buffer,)`` for
  the first cotangent (protocol: :mod:`s2sad.runtime.contractions`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from s2sad.runtime import backend, crossentropy
from s2sad.runtime.activations import dense, log_softmax, relu, sigmoid, softmax
from s2sad.runtime.reductions import into_buffer
from s2sad.runtime.registry import adjoint, nondifferentiable
from s2sad.runtime.sparse import RowSparse, coalesce
from s2sad.runtime.tangents import broadcast_like, linear, scalar, tangent

__all__ = [
    "binary_cross_entropy_with_logits",
    "conv1d",
    "dense",
    "embedding",
    "log_softmax",
    "maxpool1d",
    "one_hot",
    "relu",
    "sigmoid",
    "softmax",
    "softmax_cross_entropy",
]


# -- conv1d ---------------------------------------------------------------------


def _check_conv(x: np.ndarray, w: np.ndarray) -> None:
    if x.ndim != 3 or w.ndim != 3 or x.shape[1] != w.shape[1]:
        raise ValueError(
            f"conv1d needs x (batch, channels, length) and w (filters, channels, "
            f"width) with equal channels; got x {x.shape} and w {w.shape}"
        )
    if w.shape[2] > x.shape[2]:
        raise ValueError(f"conv1d width {w.shape[2]} exceeds length {x.shape[2]}")


def _positions(x: np.ndarray) -> np.ndarray:
    """``x`` (B, C, L) as the ``(B * L, C)`` matrix of positions by channels.

    A view when x is channels-last in memory (a transposed embedding output),
    otherwise one transposing copy.
    """
    return x.transpose(0, 2, 1).reshape(-1, x.shape[1])


def _taps(w: np.ndarray) -> np.ndarray:
    """``w`` (F, C, K) as the ``(K * F, C)`` matrix; row (k, f) is tap k of filter f."""
    return w.transpose(2, 0, 1).reshape(-1, w.shape[1])


def conv1d(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Valid 1-D cross-correlation: ``(B, C, L), (F, C, K), (F,) -> (B, F, L-K+1)``."""
    x, w = np.asarray(x), np.asarray(w)
    _check_conv(x, w)
    (batch, _, length), (filters, _, width) = x.shape, w.shape
    out_len = length - width + 1
    # every tap of every filter at every position, in one matrix product
    taps = (_taps(w) @ _positions(x).T).reshape(width, filters, batch, length)
    y = taps[0, :, :, :out_len]  # a view; taps is private, so accumulate in place
    for k in range(1, width):  # output t sums tap k applied at position t + k
        y += taps[k, :, :, k : k + out_len]
    if b is not None:
        y += np.asarray(b)[:, None, None]
    return np.ascontiguousarray(y.transpose(1, 0, 2))


def _shifted_grads(g: np.ndarray, width: int) -> np.ndarray:
    """``(K * F, B * L)`` matrix whose row (k, f) is ``g[:, f]`` delayed by k steps.

    Entry ((k, f), (b, s)) is ``g[b, f, s - k]`` (zero outside the output): the
    cotangent that tap k of filter f sends to input position s.
    """
    batch, filters, out_len = g.shape
    shifted = np.zeros((width, filters, batch, out_len + width - 1), dtype=g.dtype)
    g_fbt = g.transpose(1, 0, 2)
    for k in range(width):
        shifted[k, :, :, k : k + out_len] = g_fbt
    return shifted.reshape(width * filters, -1)


def conv1d_backward(
    g: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
) -> tuple:
    """Cotangents ``(x, w, b)`` of ``conv1d(x, w, b)``: two matrix products.

    The x cotangent is returned channels-last in memory (a transposed view),
    which is what a transposed embedding output wants back.
    """
    x, w = np.asarray(x), np.asarray(w)
    (batch, chans, length), (filters, _, width) = x.shape, w.shape
    shifted = _shifted_grads(np.asarray(g), width)
    gx = (shifted.T @ _taps(w)).reshape(batch, length, chans).transpose(0, 2, 1)
    gw = (shifted @ _positions(x)).reshape(width, filters, chans).transpose(1, 2, 0)
    gb = None if b is None else g.sum(axis=(0, 2))
    return gx, np.ascontiguousarray(gw), gb


@adjoint(conv1d)
def d_conv1d(g, ans, x, w, b=None):
    return conv1d_backward(g, x, w, b)


# -- maxpool1d ------------------------------------------------------------------


FEW_OFFSETS = 16  # up to this window size, loop over offsets; beyond, reduce windows


def _check_pool(x: np.ndarray, k: int) -> int:
    if int(k) != k or k < 1 or x.ndim < 1 or x.shape[-1] < k:
        raise ValueError(f"maxpool1d needs 1 <= k <= length; got k={k}, x {x.shape}")
    return int(k)


def _offset(x: np.ndarray, j: int, k: int) -> np.ndarray:
    """Element j of every window: a strided view ``(..., L // k)``."""
    return x[..., j : (x.shape[-1] // k) * k : k]


def _pool_windows(x: np.ndarray, k: int, writeable: bool = False) -> np.ndarray:
    """``(..., L // k, k)`` view of x's non-overlapping windows (remainder dropped).

    The windows never overlap, so a ``writeable`` view is safe to write through.
    """
    n = x.shape[-1] // k
    windows = sliding_window_view(x[..., : n * k], k, axis=-1, writeable=writeable)
    return windows[..., ::k, :]


def maxpool1d(x: np.ndarray, k: int) -> np.ndarray:
    """Max of each non-overlapping window of k along the last axis: ``(..., L // k)``.

    Small windows take an elementwise maximum over the k offsets (k whole-array
    ufunc calls beat a reduction over many tiny windows); large ones reduce.
    """
    x = np.asarray(x)
    k = _check_pool(x, k)
    if k > FEW_OFFSETS:
        return _pool_windows(x, k).max(axis=-1)
    out = _offset(x, 0, k).copy()
    for j in range(1, k):
        np.maximum(out, _offset(x, j, k), out=out)
    return out


def maxpool1d_grad(
    g: np.ndarray,
    x: np.ndarray,
    k: int,
    ans: np.ndarray,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Route each window's cotangent to its first maximal element; zeros elsewhere.

    ``out`` (x's shape, dtype ``result_type(g, x)``) receives the result if given.
    """
    x = np.asarray(x)
    k = _check_pool(x, k)
    if out is None:
        gx = np.zeros(x.shape, dtype=np.result_type(g, x))
    else:
        gx = out
        gx.fill(0)
    if k > FEW_OFFSETS:
        first = _pool_windows(x, k).argmax(axis=-1)  # the first max on ties
        windows = _pool_windows(gx, k, writeable=True)
        np.put_along_axis(windows, first[..., None], np.asarray(g)[..., None], axis=-1)
        return gx
    free = np.ones(np.shape(ans), dtype=bool)  # windows whose max is not found yet
    for j in range(k):
        hit = _offset(x, j, k) == ans
        hit &= free
        free &= ~hit
        np.multiply(g, hit, out=_offset(gx, j, k))
    return gx


@adjoint(maxpool1d)
def d_maxpool1d(g, ans, x, k, *, into=None):
    """The x cotangent (into ``into[0]`` when it fits), None for the window size."""
    buf = None
    if into is not None and isinstance(x, np.ndarray):
        buf = into_buffer(into, 0, x.shape, np.result_type(g, x))
    return (maxpool1d_grad(g, x, k, ans, buf), None)


# -- embedding ------------------------------------------------------------------


def embedding(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Rows of ``table`` picked by int array ``ids``: shape ``ids.shape + (dim,)``."""
    return np.take(table, ids, axis=0)


def embedding_grad(g: np.ndarray, table: np.ndarray, ids: np.ndarray) -> RowSparse:
    """Cotangent of ``table``: repeated ids accumulated, only touched rows stored."""
    return coalesce(np.asarray(ids), np.asarray(g, dtype=table.dtype), table.shape)


@adjoint(embedding)
def d_embedding(g, ans, table, ids):
    return (embedding_grad(g, table, ids), None)


def one_hot(labels: np.ndarray, classes: int, dtype: type = np.float32) -> np.ndarray:
    """``labels.shape + (classes,)`` array, 1 at each label (not differentiable)."""
    labels = np.asarray(labels)
    return (labels[..., None] == np.arange(classes)).astype(dtype)


nondifferentiable(one_hot)


# -- losses ---------------------------------------------------------------------


def _check_labels(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.dtype.kind not in "iu" or logits.shape[:-1] != labels.shape:
        raise ValueError(
            "softmax_cross_entropy needs integer labels with logits.shape == "
            f"labels.shape + (classes,); got logits {logits.shape}, "
            f"labels {labels.shape} of {labels.dtype}"
        )
    return labels


def _rows_of_labels(logits: Any, labels: Any) -> bool:
    """A non-empty float NumPy matrix of logits and one integer label per row:
    ``take_along_axis``/``put_along_axis`` over the last axis are one fancy
    index with ``arange`` rows (the same entries, no row twice)."""
    return (
        type(logits) is np.ndarray
        and type(labels) is np.ndarray
        and logits.ndim == 2
        and labels.ndim == 1
        and logits.dtype.kind == "f"
        and labels.dtype.kind in "iu"
        and labels.shape[0] == logits.shape[0]
        and logits.size > 0
    )


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.floating:
    """Mean over examples of ``-log softmax(logits)[label]``."""
    if _rows_of_labels(logits, labels) and logits.dtype.itemsize >= 4:
        # a batch of rows (the common case): the same operations as below,
        # without the wrappers of take_along_axis and mean; the exponentials
        # are kept for the rule (runtime/crossentropy.py)
        return crossentropy.value(logits, labels)
    if backend.is_foreign(logits) or backend.is_foreign(labels):
        return _foreign_cross_entropy(logits, labels)
    logits = np.asarray(logits)
    labels = _check_labels(logits, labels)
    z = logits - logits.max(axis=-1, keepdims=True)
    log_norm = np.log(np.exp(z).sum(axis=-1))
    picked = np.take_along_axis(z, labels[..., None], axis=-1)[..., 0]
    return np.mean(log_norm - picked)


def softmax_cross_entropy_grad(
    g: float,
    logits: np.ndarray,
    labels: np.ndarray,
    out: np.ndarray | None = None,
    ans: Any = None,
) -> np.ndarray:
    """``(softmax(logits) - one_hot(labels)) * g / examples`` (built in ``out`` if given).

    ``out`` must have the shape and dtype of ``softmax(logits)``; ``ans``, the
    value ``softmax_cross_entropy(logits, labels)`` returned, lets a batch of
    rows reuse that call's exponentials (``runtime/crossentropy.py``).
    """
    if _rows_of_labels(logits, labels):  # one label per row: one fancy index
        return crossentropy.gradient(g, ans, logits, labels, out)
    if backend.is_foreign(logits) or backend.is_foreign(labels):
        # Dask lacks put_along_axis (its fallback writes into a computed copy):
        # subtract a one-hot mask instead, lazily
        p = softmax(logits)
        p = p - backend.one_hot(labels, p.shape[-1], p.dtype)
        return p * (g / max(labels.size, 1))
    labels = np.asarray(labels)
    if _rows_of_labels(logits, labels):  # labels given as a list
        return crossentropy.gradient(g, None, logits, labels, out)
    p = softmax(logits) if out is None else _softmax_into(logits, out)
    np.put_along_axis(
        p, labels[..., None], np.take_along_axis(p, labels[..., None], -1) - 1, -1
    )
    p *= np.asarray(g, dtype=p.dtype) / max(labels.size, 1)
    return p


def _foreign_cross_entropy(logits: Any, labels: Any) -> Any:
    """:func:`softmax_cross_entropy` for Dask arrays: the label's entry is picked
    by a one-hot mask (Dask has no ``take_along_axis``)."""
    if labels.dtype.kind not in "iu" or logits.shape[:-1] != labels.shape:
        raise ValueError(
            "softmax_cross_entropy needs integer labels with logits.shape == "
            f"labels.shape + (classes,); got logits {logits.shape}, "
            f"labels {labels.shape} of {labels.dtype}"
        )
    z = logits - logits.max(axis=-1, keepdims=True)
    log_norm = np.log(np.exp(z).sum(axis=-1))
    picked = (z * backend.one_hot(labels, z.shape[-1], z.dtype)).sum(axis=-1)
    return np.mean(log_norm - picked)


def _softmax_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """:func:`softmax` over the last axis computed in ``out`` (the same operations)."""
    np.subtract(x, np.max(x, axis=-1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=-1, keepdims=True)
    return out


@adjoint(softmax_cross_entropy)
def d_softmax_cross_entropy(g, ans, logits, labels, *, into=None):
    """The logits' cotangent (into ``into[0]`` for float logits), None for labels."""
    buf = None
    if into is not None and isinstance(logits, np.ndarray) and logits.dtype.kind == "f":
        buf = into_buffer(into, 0, logits.shape, logits.dtype)
    return (softmax_cross_entropy_grad(g, logits, labels, buf, ans), None)


def _check_targets(logits: np.ndarray, targets: np.ndarray) -> None:
    if np.shape(logits) != np.shape(targets):
        raise ValueError(
            "binary_cross_entropy_with_logits needs targets of the logits' shape "
            f"(no broadcasting); got {np.shape(logits)} and {np.shape(targets)}"
        )


def binary_cross_entropy_with_logits(
    logits: np.ndarray, targets: np.ndarray
) -> np.floating:
    """Mean of ``-t log sigmoid(x) - (1 - t) log(1 - sigmoid(x))``, never overflowing.

    Uses ``max(x, 0) - x t + log1p(exp(-|x|))``, exact for any finite x.
    """
    logits = np.asarray(logits)
    _check_targets(logits, targets)
    terms = np.maximum(logits, 0) - logits * targets
    terms += np.log1p(np.exp(-np.abs(logits)))
    return np.mean(terms)


@adjoint(binary_cross_entropy_with_logits)
def d_binary_cross_entropy_with_logits(g, ans, logits, targets):
    return (
        (sigmoid(logits) - targets) * (np.asarray(g, logits.dtype) / np.size(logits)),
        logits * (np.asarray(-g, np.result_type(targets, 1.0)) / np.size(logits)),
    )


# ================================================================ tangents
# Forward mode (see s2sad.runtime.tangents): how each primal above pushes a
# tangent forward, then the tangents of this module's adjoint rules and helpers,
# which emitted gradient code calls (forward-over-reverse: Hessian-vector products).

linear(embedding)
scalar(softmax_cross_entropy, binary_cross_entropy_with_logits)


@tangent(conv1d)
def jvp_conv1d_x(t, ans, x, w, b=None):
    return conv1d(t, w)


@tangent(conv1d, argnum=1)
def jvp_conv1d_w(t, ans, x, w, b=None):
    return conv1d(x, t)


@tangent(conv1d, argnum=2)
def jvp_conv1d_b(t, ans, x, w, b=None):
    return broadcast_like(np.asarray(t)[:, None], ans)


@tangent(maxpool1d)
def jvp_maxpool1d(t, ans, x, k):
    """t at the first maximal element of each window."""
    share = maxpool1d_grad(np.ones_like(ans), x, k, ans)
    n = np.shape(ans)[-1]
    picked = (share * t)[..., : n * k]
    return picked.reshape(*np.shape(ans), k).sum(axis=-1)


# adjoint rules that read their other arguments only for masks or indices
linear(d_maxpool1d, d_embedding, container=True)


@tangent(d_softmax_cross_entropy, container=True)
def jvp_d_softmax_cross_entropy_g(t, ans, g, out, logits, labels):
    return d_softmax_cross_entropy(t, out, logits, labels)


@tangent(d_softmax_cross_entropy, argnum=2, container=True)
def jvp_d_softmax_cross_entropy_logits(t, ans, g, out, logits, labels):
    """(softmax - onehot) g / n moves by g / n * softmax * (t - <softmax, t>)."""
    p = softmax(logits)
    moved = p * (t - np.sum(p * t, axis=-1, keepdims=True))
    return (moved * (np.asarray(g, p.dtype) / max(np.size(labels), 1)), None)


@tangent(d_binary_cross_entropy_with_logits, container=True)
def jvp_d_bce_g(t, ans, g, out, logits, targets):
    return d_binary_cross_entropy_with_logits(t, out, logits, targets)


@tangent(d_binary_cross_entropy_with_logits, argnum=2, container=True)
def jvp_d_bce_logits(t, ans, g, out, logits, targets):
    s = sigmoid(logits)
    scale = np.asarray(g, np.asarray(logits).dtype) / np.size(logits)
    return (t * s * (1.0 - s) * scale, t * (np.asarray(-g) / np.size(logits)))


@tangent(d_binary_cross_entropy_with_logits, argnum=3, container=True)
def jvp_d_bce_targets(t, ans, g, out, logits, targets):
    return (-t * (np.asarray(g, np.asarray(logits).dtype) / np.size(logits)), None)


@tangent(d_conv1d, container=True)
def jvp_d_conv1d_g(t, ans, g, out, x, w, b=None):
    return d_conv1d(t, out, x, w, b)


@tangent(d_conv1d, argnum=2, container=True)
def jvp_d_conv1d_x(t, ans, g, out, x, w, b=None):
    return (None, conv1d_backward(g, t, w, None)[1], None)


@tangent(d_conv1d, argnum=3, container=True)
def jvp_d_conv1d_w(t, ans, g, out, x, w, b=None):
    return (conv1d_backward(g, x, t, None)[0], None, None)
