"""``check_grads``: s2sad's derivatives of a function against finite differences.

    s2sad.check_grads(loss, (W, x), order=1, modes=("rev", "fwd"))

For each differentiated argument ``i`` (every argument holding floats), with
random directions ``v`` (shaped like the argument) and ``u`` (like the output):

- ``"fwd"``: ``<u, J_i v>`` from s2sad's jvp against central differences
  ``<u, (f(x + h v) - f(x - h v)) / 2h>``;
- ``"rev"``: ``<J_i^T u, v>`` from s2sad's vjp against the same differences;
- both modes: the exact dot-product test ``<u, J v>`` (jvp) ``== <J^T u, v>``
  (vjp), to rounding.

``order=2`` repeats the checks on the gradient ``grad(f)`` in forward mode
(forward over reverse: the Hessian along ``v``).  Finite differences run in
float64.  A failure raises :class:`s2sad.errors.GradientCheckError` naming the
worst mismatch: the argument, the mode and the two numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import inspect
from typing import Any

import numpy as np

from s2sad.api import GradientFunction
from s2sad.errors import GradientCheckError, MissingRuleError
from s2sad.functional import vjp_at
from s2sad.higher import JvpFunction
from s2sad.runtime import pytrees

_MODES = ("fwd", "rev")


def _floats(x: Any) -> bool:
    return any(
        isinstance(v, float)
        or (isinstance(v, np.ndarray) and v.dtype.kind == "f")
        or (isinstance(v, np.floating))
        for _, v in pytrees.leaves(x)
    )


def _to64(x: Any) -> Any:
    def leaf(v: Any) -> Any:
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            return v.astype(np.float64)
        if isinstance(v, np.floating):
            return float(v)
        return v

    return pytrees.tree_map(leaf, x)


def _random(x: Any, rng: np.random.Generator) -> Any:
    def leaf(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return rng.standard_normal(v.shape)
        return float(rng.standard_normal())

    return pytrees.tree_map(leaf, x)


def _axpy(x: Any, h: float, v: Any) -> Any:
    return pytrees.tree_map(lambda a, b: a + h * b, x, v)


def _inner(a: Any, b: Any) -> float:
    la = [v for _, v in pytrees.leaves(a)]
    lb = [v for _, v in pytrees.leaves(b)]
    if len(la) != len(lb):  # a None cotangent against a subtree: zero
        return 0.0 if not la or not lb else float("nan")
    return float(
        sum(np.sum(np.asarray(p, float) * np.asarray(q, float)) for p, q in zip(la, lb))
    )


def _abs_inner(a: Any, b: Any) -> float:
    return float(
        sum(
            np.sum(np.abs(np.asarray(p, float)) * np.abs(np.asarray(q, float)))
            for (_, p), (_, q) in zip(pytrees.leaves(a), pytrees.leaves(b))
        )
    )


def _max_abs(x: Any) -> float:
    return max(
        [float(np.max(np.abs(v), initial=0.0)) for _, v in pytrees.leaves(x)],
        default=0.0,
    )


def check_grads(
    f: Callable,
    args: Sequence,
    order: int = 1,
    modes: Sequence[str] = _MODES,
    *,
    rtol: float = 1e-5,
    atol: float = 1e-7,
    eps: float = 1e-6,
    seed: int = 0,
) -> None:
    """Check s2sad's derivatives of ``f`` at ``args`` (see the module docstring).

    Raises :class:`~s2sad.errors.GradientCheckError` with the worst mismatch;
    returns None when every check passes.
    """
    if order not in (1, 2):
        raise ValueError("order must be 1 or 2")
    bad = [m for m in modes if m not in _MODES]
    if bad or not modes:
        raise ValueError(f"modes must be a non-empty subset of {_MODES}, not {modes!r}")
    args = tuple(_to64(a) for a in args)
    nums = tuple(i for i, a in enumerate(args) if _floats(a))
    if not nums:
        raise ValueError("check_grads: no argument holds floats")
    failures = _check(f, args, nums, tuple(modes), rtol, atol, eps, seed, "")
    if order == 2:
        gf = GradientFunction(f, nums, False)
        failures += _check(gf, args, nums, ("fwd",), rtol, atol, eps, seed + 1, "grad ")
    if failures:
        worst = max(failures, key=lambda r: r[0])
        _, text = worst
        raise GradientCheckError(
            f"check_grads({getattr(f, '__qualname__', f)!r}): {len(failures)} "
            f"check(s) failed; the worst: {text}"
        )


def _check(f, args, nums, modes, rtol, atol, eps, seed, prefix) -> list:
    rng = np.random.default_rng(seed)
    out = f(*args)
    u = _random(out, rng)
    failures = []
    names = _names(f, len(args))
    jf = JvpFunction(f, nums) if "fwd" in modes else None
    if jf is not None and "rev" in modes:
        try:
            jf.compile(*args)
        except MissingRuleError:  # e.g. a custom adjoint without a tangent rule:
            jf = None  # reverse mode is still checked
    cts = vjp_at(f, args, nums)[1](u) if "rev" in modes else None
    for k, i in enumerate(nums):
        v = _random(args[i], rng)
        h = eps * max(1.0, _max_abs(args[i]))
        plus = list(args)
        minus = list(args)
        plus[i], minus[i] = _axpy(args[i], h, v), _axpy(args[i], -h, v)
        fd = (_inner(u, f(*plus)) - _inner(u, f(*minus))) / (2 * h)
        noise = 1e-12 * _abs_inner(u, out) / h
        where = f"{prefix}argument {names[i]!r} (#{i})"
        got = {}
        if jf is not None:
            tangents = tuple(v if j == i else None for j in nums)
            got["fwd"] = _inner(u, jf(*args, tangents)[1])
        if cts is not None:
            got["rev"] = _inner(cts[k], v)
        for mode, value in got.items():
            tol = atol + noise + rtol * max(abs(value), abs(fd))
            err = abs(value - fd)
            if err > tol or not np.isfinite(value):
                failures.append(
                    (
                        err / tol if np.isfinite(value) else np.inf,
                        f"{where}, mode {mode!r}: <u, J v> = {value!r} but central "
                        f"differences give {fd!r} (difference {err:.3g} > tolerance "
                        f"{tol:.3g})",
                    )
                )
        if len(got) == 2:  # jvp against vjp: exact up to rounding
            a, b = got["fwd"], got["rev"]
            tol = 1e-9 * (1.0 + max(abs(a), abs(b)))
            if abs(a - b) > tol:
                failures.append(
                    (
                        abs(a - b) / tol,
                        f"{where}, dot-product test: <u, J v> from jvp = {a!r} but "
                        f"<J^T u, v> from vjp = {b!r}",
                    )
                )
    return failures


def _names(f: Callable, n: int) -> list[str]:
    try:
        names = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        names = []
    return (names + [f"#{i}" for i in range(len(names), n)])[:n]
