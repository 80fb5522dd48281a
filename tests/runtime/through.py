"""A rule checked through a small user function: ``s2sad.grad`` in each
differentiated argument, ``s2sad.jvp`` and ``s2sad.hvp`` against central
finite differences in float64 (the rule tests call the rules themselves; this
checks what the compiler makes of them)."""

from __future__ import annotations

import numpy as np

import s2sad
from tests.corpus.fd import assert_close_tree, numerical_grad

RNG = np.random.default_rng(47)
EPS = 1e-5


def check_through(fn, *args, argnums=(0,), hvp=True, rtol=1e-5):
    """``fn(*args)`` is a scalar; ``argnums`` the float arguments to check."""
    grads = {}
    for i in argnums:
        got = s2sad.grad(fn, i)(*args)
        grads[i] = numerical_grad(fn, list(args), i)
        assert_close_tree(got, grads[i], rtol=rtol, where=f"grad {i}")
    ts = tuple(RNG.normal(size=np.shape(args[i])) for i in argnums)
    _, t_out = s2sad.jvp(fn, argnums=tuple(argnums))(*args, ts)
    want = sum(np.sum(grads[i] * t) for i, t in zip(argnums, ts))
    assert_close_tree(float(t_out), float(want), rtol=rtol, where="jvp")
    if not hvp:
        return
    for i, v in zip(argnums, ts):
        got = s2sad.hvp(fn, i)(*args, v)
        g = s2sad.grad(fn, i)
        plus, minus = list(args), list(args)
        plus[i], minus[i] = args[i] + EPS * v, args[i] - EPS * v
        want = (g(*plus) - g(*minus)) / (2 * EPS)
        assert_close_tree(got, want, rtol=1e-4, atol=1e-5, where=f"hvp {i}")
