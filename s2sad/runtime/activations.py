"""The dense layer and the activations of the neural-network kernels, with their rules.

``dense``, ``relu``, ``sigmoid``, ``softmax`` and ``log_softmax`` are re-exported
by :mod:`s2sad.runtime.nn`, where users reach them (``nn.relu``) beside the
convolution, pooling, embedding and loss kernels.  Like those, each is an
ordinary NumPy function that also works without s2sad.  The kernels are defined
here rather than in ``nn`` because importing any rule module loads all of them:
this module imports nothing of ``nn`` (``nn`` imports it), so no load order can
meet a half-initialized ``nn`` whose kernels do not exist yet.

Conventions (as in :mod:`s2sad.runtime.nn`):

* ``dense(x, W, b)`` is ``x @ W + b`` with x ``(..., in)``, W ``(in, out)``.
* ``relu``'s gradient at exactly 0 is 0.
* ``softmax`` and ``log_softmax`` take an ``axis`` (default -1, the last) and
  never overflow: they work on max-shifted values.
* Rules never modify ``g`` or the primal arguments; cotangents have the dtype of
  the primal whenever ``g`` has it (float32 in, float32 out).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from s2sad.runtime.registry import adjoint
from s2sad.runtime.tangents import broadcast_like, elementwise, linear, tangent

# -- dense layer ----------------------------------------------------------------


def dense(x: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """``x @ W + b`` for x of shape ``(..., in)``, W ``(in, out)``, b ``(out,)``."""
    y = np.matmul(x, W)
    if b is not None:
        y += b  # y is fresh: add in place
    return y


def _leading_axes(a: np.ndarray) -> list[int]:
    return list(range(np.ndim(a) - 1))


@adjoint(dense)
def d_dense(g, ans, x, W, b=None):
    return (
        g @ W.T,
        np.tensordot(x, g, axes=(_leading_axes(x), _leading_axes(g))),
        None if b is None else g.sum(axis=tuple(_leading_axes(g))),
    )


# -- activations ------------------------------------------------------------------


def relu(x: np.ndarray) -> np.ndarray:
    """``max(x, 0)`` elementwise."""
    return np.maximum(x, 0)


@adjoint(relu)
def d_relu(g, ans, x):
    return (g * (ans > 0),)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` without overflow: exp is only taken of ``-|x|``."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0, e) / (1.0 + e)


@adjoint(sigmoid)
def d_sigmoid(g, ans, x):
    return (g * (ans * (1.0 - ans)),)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``exp(x) / sum(exp(x))`` along axis, shifted by the max so it cannot overflow."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


@adjoint(softmax)
def d_softmax(g, ans, x, axis=-1):
    return (ans * (g - np.sum(g * ans, axis=axis, keepdims=True)),)


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``x - logsumexp(x)`` along axis, computed from max-shifted values."""
    z = x - np.max(x, axis=axis, keepdims=True)
    z -= np.log(np.sum(np.exp(z), axis=axis, keepdims=True))
    return z


def log_softmax_as_written(x: np.ndarray, axis: Any = -1, out: Any = None) -> Any:
    """``x - np.log(np.sum(np.exp(x), axis=axis, keepdims=True))``, the same
    operations in the same order (no max shift of its own, so the values are the
    ones the four statements give): what the ``fuse`` pass writes for them.
    ``out``: a buffer for the result (x's shape and float dtype), used when it
    fits; ``exp(x)`` goes there first (else into a new array, which then holds
    the result), so only the sums are allocated besides."""
    if type(x) is np.ndarray and x.dtype.kind == "f" and x.ndim:
        if (
            type(out) is np.ndarray
            and out.shape == x.shape
            and out.dtype == x.dtype
            and out.flags.writeable
            and not np.may_share_memory(out, x)
        ):
            e = np.exp(x, out=out)
        else:
            e = np.exp(x)  # a new array of x's shape and dtype: the result goes there
        # np.sum's own reduction, without its wrapper: the same bits
        s = np.add.reduce(e, axis=axis, keepdims=True)
        return np.subtract(x, np.log(s, out=s), out=e)
    s = np.sum(np.exp(x), axis=axis, keepdims=True)
    return np.subtract(x, np.log(s, out=s))


@adjoint(log_softmax, log_softmax_as_written)
def d_log_softmax(g, ans, x, axis=-1, out=None, *, into=None):
    """``g - softmax * sum(g)``; softmax is ``exp(ans)``, one pass, no tape.
    ``into``: a buffer for the cotangent (see ``s2sad.runtime.contractions``)."""
    buf = into[0] if into else None
    if (
        type(buf) is np.ndarray
        and type(ans) is np.ndarray
        and type(g) is np.ndarray
        and buf.shape == ans.shape == g.shape
        and buf.dtype == ans.dtype
        and buf.flags.c_contiguous
        and buf.flags.writeable
    ):
        e = np.exp(ans, out=buf)
    else:
        e = np.exp(ans)
    if type(g) is np.ndarray:  # np.sum's reduction, without its wrapper
        e *= np.add.reduce(g, axis=axis, keepdims=True)
    else:
        e *= np.sum(g, axis=axis, keepdims=True)
    if type(g) is np.ndarray and g.shape == e.shape and g.dtype == e.dtype:
        return (np.subtract(g, e, out=e),)
    return (g - e,)


# ================================================================ tangents
# Forward mode (see s2sad.runtime.tangents): how each primal above pushes a
# tangent forward, then the tangents of this module's adjoint rules and helpers,
# which emitted gradient code calls (forward-over-reverse: Hessian-vector products).

elementwise(relu, sigmoid)


@tangent(softmax)
def jvp_softmax(t, ans, x, axis=-1):
    return ans * (t - np.sum(t * ans, axis=axis, keepdims=True))


@tangent(log_softmax, log_softmax_as_written)
def jvp_log_softmax(t, ans, x, axis=-1):
    return t - np.sum(t * np.exp(ans), axis=axis, keepdims=True)


@tangent(dense)
def jvp_dense_x(t, ans, x, W, b=None):
    return t @ W


@tangent(dense, argnum=1)
def jvp_dense_w(t, ans, x, W, b=None):
    return x @ t


@tangent(dense, argnum=2)
def jvp_dense_b(t, ans, x, W, b=None):
    return broadcast_like(t, ans)


# adjoint rules that read their other arguments only for masks
linear(d_relu, container=True)


def _mT(a: np.ndarray) -> np.ndarray:
    """Matrix transpose of the last two axes."""
    return np.swapaxes(a, -1, -2)


@tangent(d_log_softmax, container=True)
def jvp_d_log_softmax_g(t, ans, g, out, x, axis=-1):
    return d_log_softmax(t, out, x, axis)


@tangent(d_log_softmax, argnum=1, container=True)
def jvp_d_log_softmax_out(t, ans, g, out, x, axis=-1):
    return (-np.exp(out) * t * np.sum(g, axis=axis, keepdims=True),)


@tangent(d_softmax, container=True)
def jvp_d_softmax_g(t, ans, g, out, x, axis=-1):
    return d_softmax(t, out, x, axis)


@tangent(d_softmax, argnum=1, container=True)
def jvp_d_softmax_out(t, ans, g, out, x, axis=-1):
    """out (g - <g, out>) moves by t (g - <g, out>) - out <g, t>."""
    inner = np.sum(g * out, axis=axis, keepdims=True)
    return (t * (g - inner) - out * np.sum(g * t, axis=axis, keepdims=True),)


@tangent(d_dense, container=True)
def jvp_d_dense_g(t, ans, g, out, x, W, b=None):
    return d_dense(t, out, x, W, b)


@tangent(d_dense, argnum=2, container=True)
def jvp_d_dense_x(t, ans, g, out, x, W, b=None):
    return (None, d_dense(g, out, t, W, b)[1], None)


@tangent(d_dense, argnum=3, container=True)
def jvp_d_dense_w(t, ans, g, out, x, W, b=None):
    return (g @ _mT(t), None, None)
