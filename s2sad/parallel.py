"""``s2sad.data_parallel``: a loss's NumPy gradient on each row block of Dask data,
the blocks combined in one tree reduction and one ``dask.compute``.

The pattern of JAX's ``shard_map`` + ``psum``, PyTorch's DDP or dask-glm: each
worker runs the compiled NumPy gradient (buffered, fast) on its own rows, and
only parameter-sized results travel.  It is right only for a loss that is a sum
(or mean) over rows, which :mod:`s2sad.rowwise` shows from the source first.

Dask is imported here, lazily; the compiler and the rules never see it.
"""

from __future__ import annotations

import hashlib
import inspect
import linecache
import math
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from s2sad.errors import NonDifferentiableArgumentError, NotRowwiseError

REDUCTIONS = ("mean", "sum")


def data_parallel(
    loss: Callable,
    batch_argnums: int | Sequence[int],
    reduce: str = "mean",
    argnums: int | Sequence[int] = 0,
    *,
    with_value: bool = True,
) -> Callable:
    """The gradient of ``loss`` computed block by block over Dask rows.

    The returned function takes ``loss``'s arguments; those at ``batch_argnums``
    are Dask arrays with the same rows (axis 0), the others NumPy values.  It
    returns ``(value, gradients)`` as NumPy values (``with_value=False``: the
    gradients only), with the gradients shaped as in ``s2sad.value_and_grad(loss,
    argnums)``.  ``reduce="mean"`` weighs each block by its share of the rows,
    ``"sum"`` adds them.  Refused (:class:`~s2sad.errors.NotRowwiseError`) unless
    the source shows ``loss`` is that reduction over rows.
    """
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be 'mean' or 'sum', not {reduce!r}")
    return DataParallel(loss, batch_argnums, reduce, argnums, with_value)


class DataParallel:
    """What :func:`data_parallel` returns; ``.graph(*args)`` builds without computing."""

    def __init__(self, loss, batch_argnums, reduce, argnums, with_value):
        if not callable(loss):
            raise TypeError(f"data_parallel() needs a function, got {type(loss)}")
        self.loss = loss
        self.batch = _positions(batch_argnums)
        self.argnums = argnums if isinstance(argnums, int) else tuple(argnums)
        wrt = (self.argnums,) if isinstance(self.argnums, int) else self.argnums
        both = sorted(set(wrt) & set(self.batch))
        if both:
            raise ValueError(
                f"argnums {both} are batch arguments: data_parallel differentiates "
                "parameters; for gradients of the data use s2sad.grad on the Dask "
                "arrays"
            )
        self.reduce = reduce
        self.with_value = with_value
        self._signature = inspect.signature(loss)
        self._checked: set = set()

    def __repr__(self) -> str:
        name = getattr(self.loss, "__qualname__", repr(self.loss))
        return (
            f"<s2sad.data_parallel of {name}, batch_argnums={self.batch}, "
            f"reduce={self.reduce!r}, argnums={self.argnums!r}>"
        )

    def __call__(self, *args, **kwargs):
        import dask

        value, grads = dask.compute(self.graph(*args, **kwargs))[0]
        return (value, grads) if self.with_value else grads

    def graph(self, *args, **kwargs) -> Any:
        """The lazy ``(value, gradients)`` (a ``dask.delayed`` object)."""
        import dask

        values = self._bind(args, kwargs)
        arrays = self._batch_arrays(values)
        self._check(values, arrays)
        rows = arrays[0].chunks[0]
        total = sum(rows)
        if total == 0:
            raise ValueError("data_parallel: the batch arguments have no rows")
        blocks = [a.to_delayed().ravel() for a in arrays]
        shared = list(values)
        for i in self.batch:
            shared[i] = None
        shared = dask.delayed(tuple, pure=True)(shared)
        spec = LossSpec(self.loss, self.argnums)
        parts = []
        for k, n in enumerate(rows):
            if n == 0:  # an empty block adds nothing (its mean would be nan)
                continue
            weight = n / total if self.reduce == "mean" else 1.0
            block = [b[k] for b in blocks]
            parts.append(
                dask.delayed(_block_gradient, pure=True)(
                    spec, shared, self.batch, block, weight
                )
            )
        while len(parts) > 1:  # one tree reduction, pairs at each level
            pairs = [
                dask.delayed(_add, pure=True)(parts[i], parts[i + 1])
                for i in range(0, len(parts) - 1, 2)
            ]
            parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
        return parts[0]

    # ---------------------------------------------------------------- checks
    def _bind(self, args: tuple, kwargs: dict) -> list:
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        if bound.kwargs:
            raise TypeError("data_parallel: keyword-only arguments are not supported")
        values = list(bound.args)
        for i in self.batch:
            if i >= len(values):
                raise IndexError(
                    f"batch_argnums={i} but {self.loss.__name__} takes "
                    f"{len(values)} arguments"
                )
        return values

    def _batch_arrays(self, values: list) -> list:
        """The batch arguments as Dask arrays with the first one's row chunks and
        one chunk across every other axis (rechunked where they differ)."""
        from s2sad.runtime import backend

        names = list(self._signature.parameters)
        arrays = []
        for i in self.batch:
            a = values[i]
            if backend.library(a) != "dask" or not getattr(a, "ndim", 0):
                raise NonDifferentiableArgumentError(
                    f"data_parallel: argument '{names[i]}' (batch_argnums) must be a "
                    f"Dask array with rows, got {type(a).__name__}; for NumPy data "
                    "use s2sad.value_and_grad"
                )
            arrays.append(a)
        rows = arrays[0].chunks[0]
        total = arrays[0].shape[0]
        if any(math.isnan(n) for n in rows):  # Dask does not know the block sizes
            raise ValueError(
                f"data_parallel: the row blocks of '{names[self.batch[0]]}' have "
                "unknown sizes; call .compute_chunk_sizes() on it first"
            )
        for i, a in zip(self.batch, arrays):
            if a.shape[0] != total:
                raise ValueError(
                    f"data_parallel: '{names[i]}' has {a.shape[0]} rows, "
                    f"'{names[self.batch[0]]}' has {total}"
                )
        out = []
        for a in arrays:
            want = (rows,) + tuple((n,) for n in a.shape[1:])
            out.append(a if a.chunks == want else a.rechunk(want))
        for i, v in enumerate(values):  # a NumPy array of the data's length
            lead = getattr(v, "shape", (0,))[:1]
            if i not in self.batch and total > 1 and lead == (total,):
                raise ValueError(
                    f"data_parallel: '{names[i]}' has as many rows as the batch "
                    f"({total}) but is not in batch_argnums: each block would "
                    "see all of it; list it in batch_argnums (as a Dask array)"
                )
        return out

    def _check(self, values: list, arrays: list) -> None:
        ranks = dict(zip(self.batch, (a.ndim for a in arrays)))
        key = tuple(
            (ranks[i],) if i in ranks else (type(v), np.shape(v))
            for i, v in enumerate(values)
        )
        if key in self._checked:
            return
        from s2sad import rowwise

        try:
            rowwise.check(self.loss, ranks, values, self.reduce)
        except NotRowwiseError as exc:
            raise exc.with_traceback(None) from None
        self._checked.add(key)


def _positions(batch_argnums: Any) -> tuple:
    batch = (batch_argnums,) if isinstance(batch_argnums, int) else batch_argnums
    batch = tuple(int(i) for i in batch)
    if not batch:
        raise ValueError("data_parallel needs at least one batch argument")
    return batch


# ---------------------------------------------------------------- on the workers

#: per process: LossSpec.key -> s2sad.value_and_grad
_GRADIENTS: dict = {}


class LossSpec:
    """The loss as the workers get it: the function (cloudpickle ships one from
    ``__main__`` by value and names its code ``<dynamic-code>``), with the file
    it came from and that file's text, so that a worker can read its source (and
    that of the helpers it calls from the same file) to compile the gradient."""

    def __init__(self, loss: Callable, argnums: Any):
        self.loss = loss
        self.argnums = argnums
        code = loss.__code__
        self.filename = code.co_filename
        self.lines = linecache.getlines(self.filename)
        self.helpers = sorted(_same_file_helpers(loss))
        digest = hashlib.sha256("".join(self.lines).encode()).hexdigest()
        self.key = (loss.__module__, loss.__qualname__, self.filename, digest, argnums)

    def __dask_tokenize__(self) -> Any:
        return self.key

    def gradient(self) -> Callable:
        """``s2sad.value_and_grad`` of the loss, made once per process."""
        vg = _GRADIENTS.get(self.key)
        if vg is None:
            import s2sad

            if self.lines and not linecache.getlines(self.filename):
                text = "".join(self.lines)
                linecache.cache[self.filename] = (
                    len(text),
                    None,
                    self.lines,
                    self.filename,
                )
            for fn in [self.loss] + [
                self.loss.__globals__.get(n) for n in self.helpers
            ]:
                if (
                    isinstance(fn, types.FunctionType)
                    and fn.__code__.co_filename != self.filename
                ):
                    fn.__code__ = fn.__code__.replace(co_filename=self.filename)
            vg = _GRADIENTS[self.key] = s2sad.value_and_grad(
                self.loss, argnums=self.argnums
            )
        return vg


def _same_file_helpers(loss: Callable) -> set:
    """Global functions defined in the loss's file that it (or they) call."""
    found: set = set()
    todo = [loss]
    while todo:
        fn = todo.pop()
        for name in fn.__code__.co_names:
            g = loss.__globals__.get(name)
            if (
                isinstance(g, types.FunctionType)
                and g.__code__.co_filename == loss.__code__.co_filename
                and name not in found
            ):
                found.add(name)
                todo.append(g)
    return found


def _block_gradient(spec: LossSpec, shared: tuple, batch: tuple, block: list, w: float):
    """``value_and_grad`` of the loss on one row block, times the block's weight."""
    values = list(shared)
    for i, b in zip(batch, block):
        values[i] = b
    value, grads = spec.gradient()(*values)
    return _scale(value, w), _scale(grads, w)


def _scale(x: Any, w: float) -> Any:
    if w == 1.0:
        return x
    if isinstance(x, dict):
        return {k: _scale(v, w) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        items = [_scale(v, w) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    if x is None:
        return None
    if isinstance(x, float):
        return x * w
    return x * x.dtype.type(w) if isinstance(x, (np.ndarray, np.generic)) else x * w


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, dict):
        return {k: _add(v, b[k]) for k, v in a.items()}
    if isinstance(a, (list, tuple)):
        items = [_add(x, y) for x, y in zip(a, b)]
        return type(a)(*items) if hasattr(a, "_fields") else type(a)(items)
    if a is None:
        return None
    return a + b
