"""Finite-difference checks for adjoint rules and gradients.

``check_rule(np.tanh, x)`` calls the rule registered for ``np.tanh`` with a random
output cotangent ``u`` and compares, for a random input direction ``v``,

    <J^T u, v>   (what the rule computes)   with   <u, J v>   (central differences),

which checks the whole Jacobian along one random direction for the price of two
extra primal calls.  It also checks that every cotangent has its argument's
structure, shape and floating dtype, and that the rule mutated nothing.

Arguments may be floats, NumPy arrays, or lists/tuples/dicts of them.  Finite
differences always run in float64 (float32 arguments are promoted for the value
check; the dtype check uses the arguments as given).

``numerical_grad(f, args, argnums)`` is the element-by-element central-difference
gradient of a scalar function, for tests that want whole gradients.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Sequence

import numpy as np

from s2sad.runtime import pytrees, registry
from s2sad.runtime.support import unbroadcast

__all__ = ["check_rule", "check_nondifferentiable", "numerical_grad", "is_float_value"]

_EPS = 1e-6


# --------------------------------------------------------------------------
# Structures of floats: random draws, promotion, arithmetic, inner products
# --------------------------------------------------------------------------


def is_float_value(x: Any) -> bool:
    """True for floats, float arrays and containers holding at least one of them."""
    if isinstance(x, dict):
        return any(is_float_value(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return any(is_float_value(v) for v in x)
    if isinstance(x, float):
        return True
    if pytrees.is_object_node(x):  # a dataclass or registered object
        return any(is_float_value(c) for _, c in pytrees.children(x))
    return _arraylike(x) and x.dtype.kind == "f"


def _arraylike(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic))


def _random_like(x: Any, rng: np.random.Generator) -> Any:
    """A random value with the structure, shape and dtype of the float parts of x."""
    if not is_float_value(x):
        return None
    if isinstance(x, dict):
        return {k: _random_like(v, rng) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_random_like(v, rng) for v in x]
    if isinstance(x, float):
        return float(rng.standard_normal())
    if isinstance(x, np.generic):
        return x.dtype.type(rng.standard_normal())
    return rng.standard_normal(x.shape).astype(x.dtype)


def _to64(x: Any) -> Any:
    """x with every float leaf promoted to float64 (other leaves unchanged)."""
    if isinstance(x, dict):
        return {k: _to64(v) for k, v in x.items()}
    if pytrees.is_object_node(x):  # namedtuple, dataclass: the same type back
        return pytrees.rebuild(x, [_to64(c) for _, c in pytrees.children(x)])
    if isinstance(x, (list, tuple)):
        return type(x)(_to64(v) for v in x)
    if _arraylike(x) and x.dtype.kind == "f" and x.dtype != np.float64:
        return x.astype(np.float64) if isinstance(x, np.ndarray) else np.float64(x)
    return x


def _to32(x: Any) -> Any:
    """x with float64 arrays and NumPy scalars turned float32 (Python floats kept)."""
    if isinstance(x, dict):
        return {k: _to32(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_to32(v) for v in x)
    if _arraylike(x) and x.dtype == np.float64:
        return x.astype(np.float32) if isinstance(x, np.ndarray) else np.float32(x)
    return x


def _has_float64(x: Any) -> bool:
    """True if x holds a float64 array or NumPy float64 scalar."""
    if isinstance(x, dict):
        return any(_has_float64(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return any(_has_float64(v) for v in x)
    return _arraylike(x) and x.dtype == np.float64


def _axpy(x: Any, h: float, v: Any) -> Any:
    """x + h * v on structures (v None means zero); keeps x's container types."""
    if v is None:
        return x
    if isinstance(x, dict):
        return {k: _axpy(xv, h, v.get(k)) for k, xv in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_axpy(xi, h, vi) for xi, vi in zip(x, v))
    if isinstance(x, float):
        return x + h * v
    return (x + h * v).astype(np.asarray(x).dtype)


def _inner(a: Any, b: Any) -> float:
    """Sum of elementwise products over two structures; None is zero."""
    if a is None or b is None:
        return 0.0
    if isinstance(a, dict) or isinstance(b, dict):
        return sum(_inner(a.get(k), b.get(k)) for k in set(a) | set(b))
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if not isinstance(b, (list, tuple)) or not isinstance(a, (list, tuple)):
            # a list cotangent against an array value (e.g. builtins.sum(array))
            a, b = np.asarray(a, float), np.asarray(b, float)
            return float(np.sum(a * b))
        assert len(a) == len(b), f"structure lengths differ: {len(a)} vs {len(b)}"
        return sum(_inner(x, y) for x, y in zip(a, b))
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, f"shapes differ in inner product: {a.shape} vs {b.shape}"
    return float(np.sum(a * b))


def _abs_inner(a: Any, b: Any) -> float:
    """<|a|, |b|> over structures, to estimate rounding noise."""
    if a is None or b is None:
        return 0.0
    if isinstance(a, dict):
        return sum(_abs_inner(a.get(k), b.get(k)) for k in a)
    if isinstance(a, (list, tuple)):
        return sum(_abs_inner(x, y) for x, y in zip(a, b))
    return float(np.sum(np.abs(np.asarray(a, float)) * np.abs(np.asarray(b, float))))


def _max_abs(x: Any) -> float:
    if isinstance(x, dict):
        return max([_max_abs(v) for v in x.values()], default=0.0)
    if isinstance(x, (list, tuple)):
        return max([_max_abs(v) for v in x], default=0.0)
    if not is_float_value(x):
        return 0.0
    return float(np.max(np.abs(x), initial=0.0))


def _float_leaves_equal(a: Any, b: Any) -> bool:
    """Exact equality of two structures (used to detect in-place mutation)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_float_leaves_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_float_leaves_equal(x, y) for x, y in zip(a, b))
    if _arraylike(a):
        return np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    return a is b or a == b


# --------------------------------------------------------------------------
# Cotangent structure checks
# --------------------------------------------------------------------------


def _check_cotangent(ct: Any, x: Any, where: str) -> None:
    """Assert that cotangent ``ct`` is shaped like argument ``x`` (None is fine)."""
    if ct is None:
        return
    if isinstance(x, dict):
        assert isinstance(ct, dict), f"{where}: dict argument needs a dict cotangent"
        for k, v in ct.items():
            assert k in x, f"{where}: cotangent key {k!r} not in argument"
            _check_cotangent(v, x[k], f"{where}[{k!r}]")
        return
    if isinstance(x, (list, tuple)):
        assert isinstance(
            ct, (list, tuple)
        ), f"{where}: sequence needs a list cotangent"
        assert len(ct) == len(x), f"{where}: cotangent length {len(ct)} != {len(x)}"
        for i, (c, xi) in enumerate(zip(ct, x)):
            _check_cotangent(c, xi, f"{where}[{i}]")
        return
    assert not isinstance(ct, (list, tuple, dict)), f"{where}: array cotangent expected"
    assert np.shape(ct) == np.shape(
        x
    ), f"{where}: cotangent shape {np.shape(ct)} != argument shape {np.shape(x)}"
    if _arraylike(x) and x.dtype.kind == "f":
        dtype = getattr(ct, "dtype", None)
        assert dtype == x.dtype, f"{where}: cotangent dtype {dtype} != {x.dtype}"
    assert np.all(np.isfinite(ct)), f"{where}: cotangent is not finite: {ct}"


# --------------------------------------------------------------------------
# check_rule
# --------------------------------------------------------------------------


def _resolve(primal: Callable | str) -> tuple[Callable, registry.Rule]:
    """(callable that computes the primal, its rule); a str names an array method."""
    if isinstance(primal, str):
        function = registry.lookup_method(primal)
        assert function is not None, f"no method alias for {primal!r}"
        name = primal

        def call(x: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(np.asarray(x), name)(*args, **kwargs)

        rule = registry.lookup(function)
        assert rule is not None, f"method {primal!r} maps to a function without rule"
        return call, rule
    rule = registry.lookup(primal)
    assert rule is not None, f"no rule registered for {registry.display_name(primal)}"
    return primal, rule


def apply_rule(rule: registry.Rule, g: Any, ans: Any, args: Sequence, kwargs: dict):
    """Call a rule the way the compiler does: pad to len(args), undo broadcasting."""
    assert rule.differentiable, f"{rule.name} is declared nondifferentiable"
    cts = rule.adjoint(g, ans, *args, **kwargs)
    assert isinstance(cts, tuple), f"{rule.name}: rule must return a tuple"
    # Entries past len(args) belong to parameters passed by keyword: dropped.
    cts = cts[: len(args)] + (None,) * (len(args) - len(cts))
    if rule.broadcasts:
        cts = tuple(unbroadcast(c, a) for c, a in zip(cts, args))
    return cts


def _check_structure(call, rule, args, kwargs, argnums, rng) -> Any:
    """Apply the rule once; check cotangent structure, shape, dtype and no mutation.

    Returns the random output cotangent it used (in the output's dtype).
    """
    ans = call(*args, **kwargs)
    u = _random_like(ans, rng)
    assert u is not None, f"{rule.name}: output holds no floats to differentiate"
    saved = (copy.deepcopy(args), copy.deepcopy(u))
    cts = apply_rule(rule, u, ans, args, kwargs)
    assert _float_leaves_equal(saved[0], args), f"{rule.name}: rule mutated its inputs"
    assert _float_leaves_equal(saved[1], u), f"{rule.name}: rule mutated its cotangent"
    for i in argnums:
        _check_cotangent(cts[i], args[i], f"{rule.name} argument {i}")
    return u


def _default_argnums(args: Sequence) -> tuple[int, ...]:
    return tuple(i for i, a in enumerate(args) if is_float_value(a))


def check_rule(
    primal: Callable | str,
    *args: Any,
    argnums: int | Sequence[int] | None = None,
    kwargs: dict | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-8,
    seed: int = 0,
    check_float32: bool = True,
) -> None:
    """Check the registered rule of ``primal`` at ``args`` against finite differences.

    ``primal`` is a function with a registered rule, or the name of an array
    method (``"reshape"``) whose alias is checked with ``args[0]`` as receiver.
    ``argnums`` defaults to every argument that holds floats.  With
    ``check_float32`` the structure/dtype check is repeated with every float64
    array (and NumPy scalar) turned into float32.
    """
    kwargs = dict(kwargs or {})
    call, rule = _resolve(primal)
    if argnums is None:
        argnums = _default_argnums(args)
    elif isinstance(argnums, int):
        argnums = (argnums,)
    rng = np.random.default_rng(seed)

    # 1. as given, and in float32: structure, shape, dtype, no mutation
    u = _check_structure(call, rule, args, kwargs, argnums, rng)
    args32 = [_to32(a) for a in args]
    if check_float32 and _has_float64(args):
        _check_structure(call, rule, args32, kwargs, argnums, rng)

    # 2. values, in float64
    args64 = [_to64(a) for a in args]
    u64 = _to64(u)
    ans64 = call(*args64, **kwargs)
    cts64 = apply_rule(rule, u64, ans64, args64, kwargs)
    vs = {i: _random_like(args64[i], rng) for i in argnums}
    lhs = sum(_inner(cts64[i], vs[i]) for i in argnums)

    h = _EPS * max([1.0] + [_max_abs(args64[i]) for i in argnums])
    plus = list(args64)
    minus = list(args64)
    for i in argnums:
        plus[i] = _axpy(args64[i], h, vs[i])
        minus[i] = _axpy(args64[i], -h, vs[i])
    f_plus, f_minus = call(*plus, **kwargs), call(*minus, **kwargs)
    rhs = (_inner(u64, f_plus) - _inner(u64, f_minus)) / (2 * h)
    noise = 1e-13 * _abs_inner(u64, ans64) / h
    tol = atol + noise + rtol * max(abs(lhs), abs(rhs))
    assert abs(lhs - rhs) <= tol, (
        f"{rule.name}: <J^T u, v> = {lhs!r} but finite differences give <u, J v> = "
        f"{rhs!r} (difference {abs(lhs - rhs):.3g} > tolerance {tol:.3g})"
    )


def check_nondifferentiable(
    primal: Callable | str, *args: Any, kwargs: dict | None = None, seed: int = 0
) -> None:
    """Check that ``primal`` is declared nondifferentiable and is locally constant.

    The output must hold no floats, or must not change when every float argument
    moves by a small random step (pick ``args`` away from jumps).
    """
    kwargs = dict(kwargs or {})
    if isinstance(primal, str):
        function = registry.lookup_method(primal)
        assert function is not None, f"no method alias for {primal!r}"
        rule = registry.lookup(function)

        def call(x: Any, *a: Any, **k: Any) -> Any:
            return getattr(np.asarray(x), primal)(*a, **k)

    else:
        rule, call = registry.lookup(primal), primal
    assert (
        rule is not None and not rule.differentiable
    ), f"{primal} not nondifferentiable"
    ans = call(*args, **kwargs)
    if not is_float_value(ans):
        return
    rng = np.random.default_rng(seed)
    moved = [_axpy(a, 1e-7, _random_like(a, rng)) for a in args]
    assert _float_leaves_equal(call(*moved, **kwargs), ans), f"{rule.name} moved"


# --------------------------------------------------------------------------
# numerical_grad
# --------------------------------------------------------------------------


def _grad_leaf(f: Callable[[Any], float], x: Any) -> Any:
    """Central-difference gradient of the scalar function f at the float leaf x."""
    if isinstance(x, float) or (isinstance(x, np.generic) and x.dtype.kind == "f"):
        h = _EPS * max(1.0, abs(float(x)))
        return (float(f(x + h)) - float(f(x - h))) / (2 * h)
    x64 = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x64)
    for j in np.ndindex(x64.shape):
        h = _EPS * max(1.0, abs(x64[j]))
        e = np.zeros_like(x64)
        e[j] = h
        grad[j] = (float(f(x64 + e)) - float(f(x64 - e))) / (2 * h)
    return grad


def _grad_struct(f: Callable[[Any], float], x: Any) -> Any:
    """numerical_grad for one argument that may be a container."""
    if not is_float_value(x):
        return None
    if isinstance(x, dict):
        return {
            k: _grad_struct(lambda v, k=k: f({**x, k: v}), xv) for k, xv in x.items()
        }
    if pytrees.is_object_node(x):  # namedtuple, dataclass: each field in turn
        kids = [c for _, c in pytrees.children(x)]

        def rebuilt(i: int, v: Any) -> Any:
            return pytrees.rebuild(x, [v if k == i else c for k, c in enumerate(kids)])

        return pytrees.rebuild(
            x,
            [
                _grad_struct(lambda v, i=i: f(rebuilt(i, v)), c)
                for i, c in enumerate(kids)
            ],
        )
    if isinstance(x, (list, tuple)):

        def replace(i: int, v: Any) -> Any:
            out = list(x)
            out[i] = v
            return type(x)(out)

        return type(x)(
            _grad_struct(lambda v, i=i: f(replace(i, v)), xi) for i, xi in enumerate(x)
        )
    return _grad_leaf(f, x)


def numerical_grad(
    f: Callable[..., Any], args: Sequence, argnums: int | Sequence[int] = 0
) -> Any:
    """Central-difference gradient of scalar ``f(*args)`` w.r.t. ``args[argnums]``.

    Returns one gradient (structured like its argument, float64 arrays) for an int
    ``argnums`` and a tuple for a sequence.
    """
    args = [_to64(a) for a in args]
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    grads = []
    for i in nums:

        def f_i(v: Any, i: int = i) -> float:
            return float(f(*args[:i], v, *args[i + 1 :]))

        grads.append(_grad_struct(f_i, args[i]))
    return grads[0] if isinstance(argnums, int) else tuple(grads)


# check_grad (compiled gradient against numerical_grad) is added by the compiler side.
