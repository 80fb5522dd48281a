"""The columns of the benchmark table: one adapter per framework.

``Column.prepare(problem, args)`` returns a ``Prepared`` holding

* ``run()``: one timed call (a value-and-grad, or a whole SGD step for
  ``kind == "sgd"``), which returns only when the work is finished (JAX is
  asynchronous, so its adapters block on the result);
* ``check()``: value and gradients as NumPy arrays in the NumPy layout, computed
  on fresh copies of the arguments, compared with the hand-written ones before
  anything is timed.

Peer frameworks are imported inside ``setup()`` only, so importing this module
needs nothing but NumPy.  A column whose ``setup`` or ``prepare`` raises is
skipped by the runner with the reason printed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench import handwritten
from bench.problems import Problem, copy_args, rebind

# ----------------------------------------------------------------------------
# Shared pieces
# ----------------------------------------------------------------------------


@dataclass
class Prepared:
    """What the runner needs from a column for one problem."""

    run: Callable[[], Any]
    check: Callable[[], tuple[float, list | None]]
    first_call_s: float | None = None  # compile-on-first-call time, if any


def _as_tuple(grads: Any) -> tuple:
    return tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)


def _numpy_prepared(vg: Callable, problem: Problem, args: tuple) -> Prepared:
    """Prepared for any NumPy-in/NumPy-out value-and-grad function ``vg``."""

    def check():
        value, grads = vg(*copy_args(args))
        return float(value), [np.asarray(g) for g in _as_tuple(grads)]

    if problem.kind == "grad":
        return Prepared(lambda: vg(*args), check)
    state = list(copy_args(args))

    def step():
        value, grads = vg(*state)
        for i, g in zip(problem.argnums, _as_tuple(grads)):
            state[i] -= problem.lr * g
        return value

    return Prepared(step, check)


class Column:
    """A framework under test; subclasses fill in ``prepare``."""

    name = ""
    label = ""

    def setup(self, threads: int) -> None:
        """Import and configure the framework (raise if it is unavailable)."""

    def prepare(self, problem: Problem, args: tuple) -> Prepared:
        raise NotImplementedError

    def versions(self) -> str:
        return ""


# ----------------------------------------------------------------------------
# NumPy: forward only, hand-written, s2sad
# ----------------------------------------------------------------------------


class NumpyForward(Column):
    name, label = "numpy_fwd", "NumPy fwd only"

    def prepare(self, problem, args):
        loss = problem.loss
        return Prepared(lambda: loss(*args), lambda: (float(loss(*args)), None))

    def versions(self):
        return f"numpy {np.__version__}"


class Handwritten(Column):
    name, label = "handwritten", "hand-written"

    def prepare(self, problem, args):
        return _numpy_prepared(getattr(handwritten, problem.name), problem, args)

    def versions(self):
        return f"numpy {np.__version__}"


class S2SAD(Column):
    """THE HOOK for s2sad: ``s2sad.value_and_grad(fn, argnums=...)(*args)``."""

    name, label = "s2sad", "s2sad"

    def setup(self, threads: int) -> None:
        import s2sad

        self.s2sad = s2sad

    def prepare(self, problem, args):
        vg = self.s2sad.value_and_grad(problem.loss, argnums=problem.argnums)
        t0 = time.perf_counter()
        vg(*copy_args(args))  # compiles (or loads from the cache) on first call
        first = time.perf_counter() - t0
        prepared = _numpy_prepared(vg, problem, args)
        prepared.first_call_s = first
        return prepared

    def versions(self):
        return f"s2sad {self.s2sad.__version__}"


class S2SADOut(S2SAD):
    """s2sad writing the gradients into caller-owned arrays: ``vg(*args, out=g)``,
    the way a training loop that keeps its gradient buffers calls it."""

    name, label = "s2sad_out", "s2sad out="

    def prepare(self, problem, args):
        vg = self.s2sad.value_and_grad(problem.loss, argnums=problem.argnums)
        outs = tuple(np.empty_like(np.asarray(args[i])) for i in problem.argnums)
        t0 = time.perf_counter()
        vg(*copy_args(args), out=outs)
        first = time.perf_counter() - t0
        if any(not isinstance(args[i], np.ndarray) for i in problem.argnums):
            outs = None  # floats have no buffer to write into

        def call(*a):
            return vg(*a) if outs is None else vg(*a, out=outs)

        prepared = _numpy_prepared(call, problem, args)
        prepared.first_call_s = first
        return prepared


# ----------------------------------------------------------------------------
# autograd
# ----------------------------------------------------------------------------


class Autograd(Column):
    name, label = "autograd", "autograd"

    def setup(self, threads: int) -> None:
        import autograd
        import autograd.numpy as anp

        self.autograd, self.anp = autograd, anp

    def prepare(self, problem, args):
        fn = rebind(problem.loss, self.anp)
        vg = self.autograd.value_and_grad(fn, argnum=problem.argnums)
        return _numpy_prepared(vg, problem, args)

    def versions(self):
        import importlib.metadata as md

        return f"autograd {md.version('autograd')}"


# ----------------------------------------------------------------------------
# JAX (eager and jit)
# ----------------------------------------------------------------------------


class JaxEager(Column):
    name, label = "jax_eager", "JAX eager"
    jit = False

    def setup(self, threads: int) -> None:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)  # float32 inputs stay float32
        self.jax, self.jnp = jax, jnp

    def _device(self, args: tuple) -> list:
        return [self.jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]

    def _step_fn(self, vg: Callable, problem: Problem) -> Callable:
        def step(*args):
            value, grads = vg(*args)
            new = [args[i] - problem.lr * g for i, g in zip(problem.argnums, grads)]
            return value, new

        return step

    def prepare(self, problem, args):
        jax = self.jax
        vg = jax.value_and_grad(rebind(problem.loss, self.jnp), argnums=problem.argnums)
        checked = jax.jit(vg) if self.jit else vg  # verify what is timed

        def check():
            value, grads = checked(*self._device(args))
            return float(value), [np.asarray(g) for g in grads]

        fn = vg if problem.kind == "grad" else self._step_fn(vg, problem)
        if self.jit:  # the SGD step donates its parameters: XLA may update in place
            donate = problem.argnums if problem.kind == "sgd" else ()
            fn = (
                checked
                if problem.kind == "grad"
                else jax.jit(fn, donate_argnums=donate)
            )
        state = self._device(args)

        def run():
            out = fn(*state)
            if problem.kind == "sgd":
                for i, p in zip(problem.argnums, out[1]):
                    state[i] = p
            return jax.block_until_ready(out)

        prepared = Prepared(run, check)
        if self.jit:
            t0 = time.perf_counter()
            run()  # trace + compile + one execution
            prepared.first_call_s = time.perf_counter() - t0
        return prepared

    def versions(self):
        import jaxlib

        return f"jax {self.jax.__version__} / jaxlib {jaxlib.__version__}"


class JaxJit(JaxEager):
    name, label = "jax_jit", "JAX jit"
    jit = True


# ----------------------------------------------------------------------------
# PyTorch (eager, CPU)
# ----------------------------------------------------------------------------


class Torch(Column):
    name, label = "torch", "PyTorch eager"

    def setup(self, threads: int) -> None:
        import torch

        from bench import torch_problems

        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set (torch imported and used earlier)
            pass

        self.torch, self.specs = torch, torch_problems.SPECS

    def _leaves(self, spec, problem, args) -> tuple[list, list]:
        targs = spec.to_torch(args)
        params = [targs[i].requires_grad_() for i in problem.argnums]
        return targs, params

    def prepare(self, problem, args):
        torch, spec = self.torch, self.specs[problem.name]

        def check():
            targs, params = self._leaves(spec, problem, args)
            value = spec.loss(*targs)
            grads = torch.autograd.grad(value, params)
            return float(value.detach()), spec.grads_to_numpy(list(grads))

        targs, params = self._leaves(spec, problem, args)
        if problem.kind == "grad":
            return Prepared(
                lambda: torch.autograd.grad(spec.loss(*targs), params), check
            )
        opt = torch.optim.SGD(params, lr=problem.lr)

        def step():
            opt.zero_grad(set_to_none=True)
            value = spec.loss(*targs)
            value.backward()
            opt.step()
            return value

        return Prepared(step, check)

    def versions(self):
        return f"torch {self.torch.__version__} ({self.torch.get_num_threads()} thr)"


ALL_COLUMNS: list[type[Column]] = [
    NumpyForward,
    Handwritten,
    S2SAD,
    S2SADOut,
    Autograd,
    JaxEager,
    JaxJit,
    Torch,
]
