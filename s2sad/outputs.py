"""What a gradient call hands back: checked, explained, copied into ``out=``.

Split from :mod:`s2sad.api` (the decorators and the call path): a differentiated
output must be a scalar (:func:`check_scalar`, with what to do when it is a
container); a failure caused by the output's structure is said as such
(:func:`explain_output`); ``out=`` arrays receive the gradients
(:func:`write_into`) and workspace buffers never leave (:func:`unshare`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from s2sad.errors import NonScalarOutputError


def unshare(value: Any, ws: Any) -> Any:
    """``value`` with every workspace buffer in it (aux included) copied."""
    if isinstance(value, tuple):
        return tuple(unshare(v, ws) for v in value)
    if isinstance(value, list):
        return [unshare(v, ws) for v in value]
    if isinstance(value, dict):
        return {k: unshare(v, ws) for k, v in value.items()}
    return value.copy() if ws.owns(value) else value


def _name(gf: Any) -> str:
    return getattr(gf.fun, "__qualname__", None) or repr(gf.fun)


def check_scalar(gf: Any, value: Any) -> None:
    """Refuse a differentiated output that is not a scalar, saying what to do."""
    if isinstance(value, (tuple, list, dict)):
        raise NonScalarOutputError(container_message(gf, value))
    # Dask: no compute; torch: size is a method
    size = math.prod(value.shape) if hasattr(value, "shape") else np.size(value)
    if not (type(value) is float or size == 1):
        raise NonScalarOutputError(
            f"{_name(gf)} returned a value of shape {np.shape(value)}; grad needs "
            "a scalar output. Reduce it first (e.g. np.sum(...)), or differentiate each "
            "output separately."
        )


def container_message(gf: Any, value: Any) -> str:
    what = f"a {type(value).__name__} of {len(value)} values"
    if gf.has_aux:
        return (
            f"{_name(gf)} returned {what} as its differentiated value; with "
            "has_aux=True it must return a pair (value, aux) whose value is a scalar"
        )
    return (
        f"{_name(gf)} returned {what}; grad needs a scalar output. If the other "
        "values are auxiliary data (metrics, states), return (loss, aux) and pass "
        "has_aux=True: grad(f, has_aux=True) gives (gradient, aux), "
        "value_and_grad(f, has_aux=True) gives ((loss, aux), gradient)."
    )


def explain_output(gf: Any, args: tuple, kwargs: dict, exc: Exception):
    """The emitted function failed: when the cause is the output's structure (a
    tuple without has_aux, no pair with it), raise a clear error instead.  Runs
    the user's function once more, on the failure path only."""
    try:
        result = gf.fun(*args, **kwargs)
    except Exception:
        return  # the function itself fails: the original error says more
    if gf.has_aux:
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            shape = (
                f"a {type(result).__name__} of {len(result)} values"
                if isinstance(result, (tuple, list, dict))
                else f"a {type(result).__name__}"
            )
            raise NonScalarOutputError(
                f"has_aux=True: {_name(gf)} must return a pair (value, aux), but it "
                f"returned {shape}"
            ) from exc
        if isinstance(result[0], (tuple, list, dict)):
            raise NonScalarOutputError(container_message(gf, result[0])) from exc
    elif isinstance(result, (tuple, list, dict)):
        raise NonScalarOutputError(container_message(gf, result)) from exc


def write_into(out: Any, grads: Any) -> Any:
    """Copy gradients into the caller's arrays (same structure); return ``out``."""
    if type(out) is tuple and type(grads) is tuple and len(out) == len(grads):
        for o, g in zip(out, grads):  # finalize wrote every one of them already
            if o is not g or type(o) is not np.ndarray:
                break
        else:
            return out
    if isinstance(out, dict):
        for k in out:
            out[k] = write_into(out[k], grads[k])
        return out
    if isinstance(out, (list, tuple)) and len(out) != len(grads):
        raise ValueError(
            f"out= holds {len(out)} entries where there are {len(grads)} gradients"
        )
    if isinstance(out, list):
        for i in range(len(out)):
            out[i] = write_into(out[i], grads[i])
        return out
    if isinstance(out, tuple):
        return tuple(write_into(o, g) for o, g in zip(out, grads))
    if isinstance(out, np.ndarray):
        if grads is not out:  # the emitted code may have written it already
            np.copyto(out, grads)
        return out
    raise TypeError("out= must hold NumPy arrays where the gradients are arrays")
