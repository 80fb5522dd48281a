"""Whole derivative matrices: ``hessian`` and ``jacobian``, built from jvp/hvp/vjp.

    s2sad.hessian(f)(x, W)                 # H, one H v per entry of x (small inputs)
    s2sad.jacobian(f)(x, W)                # forward or reverse mode, by the shapes

Each column (or row) is one product computed by the emitted forward-mode or
gradient module, so these are meant for small inputs; use ``hvp``/``jvp`` on
large ones.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from s2sad.api import ForwardFunction
from s2sad.binding import argnums_tuple
from s2sad import functional
from s2sad.errors import NonScalarOutputError
from s2sad.higher import HvpFunction, JvpFunction, basis, reverse_function
from s2sad.options import Options
from s2sad.runtime import pytrees, support


def _is_tree(x: Any) -> bool:
    return pytrees.children(x) is not None


def _stack(columns: list[Any], in_shape: tuple, out_like: Any) -> Any:
    """Columns ``J e_k`` (each shaped like the output) as an array out.shape + in.shape."""
    cols = np.stack(
        [np.asarray(c, dtype=np.result_type(c, float)) for c in columns], axis=-1
    )
    shape = np.shape(out_like) + tuple(in_shape)
    result = cols.reshape(shape)
    return float(result) if not shape else result


class HessianFunction(ForwardFunction):
    """``hessian(f)(*args)``: the matrix of second derivatives (one H v per entry)."""

    def __init__(self, fun: Callable, argnums: int | tuple[int, ...] = 0):
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.argnums = argnums
        self._hvp = HvpFunction(fun, argnums)

    def __call__(self, *args: Any) -> Any:
        nums = argnums_tuple(self.argnums)
        xs = [args[i] for i in nums]
        if any(_is_tree(x) for x in xs):  # pytrees: JAX's layout, jacfwd(grad(f))
            return functional.hessian_tree(self.fun, self.argnums)(*args)
        zeros = [support.zeros_like(x) for x in xs]
        blocks = [[[] for _ in nums] for _ in nums]  # blocks[i][j]: columns of H_ij
        for j, x in enumerate(xs):
            for e in basis(x):
                v = tuple(e if k == j else zeros[k] for k in range(len(nums)))
                hv = self._hvp(*args, v if isinstance(self.argnums, tuple) else v[0])
                hv = hv if isinstance(self.argnums, tuple) else (hv,)
                for i in range(len(nums)):
                    blocks[i][j].append(hv[i])
        out = tuple(
            tuple(
                _stack(blocks[i][j], np.shape(xs[j]), xs[i]) for j in range(len(nums))
            )
            for i in range(len(nums))
        )
        return out if isinstance(self.argnums, tuple) else out[0][0]


def hessian(fun: Callable | None = None, argnums: int | tuple[int, ...] = 0):
    """The Hessian of a scalar function, shaped ``x.shape + x.shape``.

    Built from one Hessian-vector product per entry of the argument, so it is
    meant for small inputs.  A tuple ``argnums`` gives nested tuples of blocks
    ``H[i][j]`` of shape ``x_i.shape + x_j.shape``.
    """
    if fun is None:
        return lambda f: HessianFunction(f, argnums)
    return HessianFunction(fun, argnums)


class JacobianFunction(ForwardFunction):
    """``jacobian(f)(*args)``, shaped ``out.shape + x.shape``."""

    def __init__(
        self, fun: Callable, argnums: int | tuple[int, ...] = 0, mode: str = "auto"
    ):
        if mode not in ("auto", "forward", "reverse"):
            raise ValueError("mode must be 'auto', 'forward' or 'reverse'")
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.argnums = argnums
        self.mode = mode
        self._jvp = JvpFunction(fun, argnums)
        #: the mode the last call used
        self.last_mode: str | None = None

    def __call__(self, *args: Any) -> Any:
        nums = argnums_tuple(self.argnums)
        xs = [args[i] for i in nums]
        if any(_is_tree(x) for x in xs):  # pytrees: JAX's layout
            fwd = self.mode == "forward" or (
                self.mode == "auto"
                and sum(int(np.size(v)) for x in xs for _, v in pytrees.leaves(x))
                <= sum(int(np.size(v)) for _, v in pytrees.leaves(self.fun(*args)))
            )
            self.last_mode = "forward" if fwd else "reverse"
            jac = functional.jacfwd if fwd else functional.jacrev
            return jac(self.fun, self.argnums)(*args)
        mode = self.mode
        if mode == "auto":
            out = self.fun(*args)
            n_in = sum(int(np.size(x)) for x in xs)
            mode = "forward" if n_in <= int(np.size(out)) else "reverse"
        self.last_mode = mode
        blocks = (
            self._forward(args, nums, xs)
            if mode == "forward"
            else self._reverse(args, nums, xs)
        )
        return blocks if isinstance(self.argnums, tuple) else blocks[0]

    def _forward(self, args: tuple, nums: tuple, xs: list) -> tuple:
        zeros = [support.zeros_like(x) for x in xs]
        blocks = []
        value = None
        for j, x in enumerate(xs):
            cols = []
            for e in basis(x):
                v = tuple(e if k == j else zeros[k] for k in range(len(nums)))
                value, col = self._jvp(
                    *args, v if isinstance(self.argnums, tuple) else v[0]
                )
                cols.append(col)
            blocks.append(_stack(cols, np.shape(x), value))
        return tuple(blocks)

    def _reverse(self, args: tuple, nums: tuple, xs: list) -> tuple:
        """One vector-Jacobian product per output entry, seeding the gradient module."""
        values = list(inspect.signature(self.fun).bind(*args).args)
        fn = reverse_function(self.fun, nums, Options(workspace=False), values)
        value = fn(*values)[0]
        if isinstance(value, (list, tuple, dict)):
            raise NonScalarOutputError("jacobian needs a float or array output")
        rows: list[list] = [[] for _ in nums]
        for seed in basis(
            np.asarray(value, dtype=float) if np.ndim(value) else float(value)
        ):
            grads = fn(*values, seed)[1]
            for j, g in enumerate(grads):
                rows[j].append(np.asarray(g, dtype=float))
        blocks = []
        for j, x in enumerate(xs):
            stacked = np.stack(rows[j]).reshape(np.shape(value) + np.shape(x))
            blocks.append(float(stacked) if not stacked.shape else stacked)
        return tuple(blocks)


def jacobian(
    fun: Callable | None = None, argnums: int | tuple[int, ...] = 0, mode: str = "auto"
):
    """The Jacobian of ``f`` with respect to ``argnums``: ``out.shape + x.shape``.

    ``mode="auto"`` runs forward mode (one JVP per input entry) when the inputs
    have at most as many entries as the output, reverse mode (one VJP per output
    entry, through the emitted gradient module) otherwise.
    """
    if fun is None:
        return lambda f: JacobianFunction(f, argnums, mode)
    return JacobianFunction(fun, argnums, mode)
