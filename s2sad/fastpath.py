"""``grad``'s fast paths: which calls may skip binding and keying.

A call of a differentiated function normally binds its arguments and computes
the cache key (:mod:`s2sad.binding`). After a call that went well, a call of
the same argument types (Python numbers, small float arrays) goes straight to
the compiled entry; these functions decide when that is the same module.

Buffered calls (arrays of SMALL_BYTES and more, dicts of parameters) have a
warm path of their own (:func:`warm_entry`, :func:`warm_call`): a call whose
workspace key (``workspace.shape_key``: argument types, container layouts,
shapes, dtypes, int values) equals the last good call's goes straight to the
same workspace pool, skipping binding, ``type_signature``, the argument checks
and the module lookup, which that key decides as well.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from s2sad import locate
from s2sad.binding import type_signature
from s2sad.errors import GlobalsChangedError, S2SADError
from s2sad.outputs import check_scalar, unshare, write_into
from s2sad.runtime import workspace

#: argument types ``__call__``'s fast path takes
FAST_TYPES = (float, int, bool, np.ndarray)


def fast_guard(args: tuple, types: tuple, argnums: tuple) -> tuple | None | bool:
    """What ``grad``'s fast path checks on each call of these argument types:
    None (Python numbers only), ``((position, dtype), ...)`` of the arrays for
    :func:`small_floats`, or False: no fast path (other types, buffered arrays)."""
    if not all(t in FAST_TYPES for t in types):
        return False
    arrays = tuple(i for i, t in enumerate(types) if t is np.ndarray)
    if not arrays:
        return None
    if not type_signature(list(args)).endswith(";small"):
        return False
    pairs = tuple((i, args[i].dtype) for i in arrays)
    if any(dt.kind != "f" for i, dt in pairs if i in argnums):
        return False
    return pairs


def fast_entry(
    last: tuple | None, args: tuple, n_params: int, argnums: tuple, shape: tuple
) -> tuple | None:
    """``grad``'s fast path after a call of ``args`` that went well with the
    compiled entry ``last``: ``(argument types, emitted function, guard, *shape)``
    (one argument's type alone; ``shape``: one gradient, not a tuple of them,
    and the value with it).  The emitted function checks its globals itself,
    first thing; with arrays, each fast call checks :func:`small_floats` first,
    else goes the slow way.  None where calls like this one need the slow path."""
    if last is None or last[3] is not None or not args or len(args) != n_params:
        return None  # no entry, a workspace, defaults or keywords to bind
    types = tuple(map(type, args))
    guard = fast_guard(args, types, argnums)
    if guard is False:
        return None
    return (types[0] if len(types) == 1 else types, last[0], guard, *shape)


def small_floats(args: tuple, guard: tuple) -> bool:
    """Whether a call of the fast path's argument types picks the same module: its
    arrays (``guard``: position and dtype) hold less than SMALL_BYTES (no buffers)
    and have those dtypes (part of the module's key: ``array_key``)."""
    total = 0
    for i, dt in guard:
        a = args[i]
        total += a.nbytes
        if a.dtype is not dt and a.dtype != dt:
            return False
    return total < workspace.SMALL_BYTES


def remember(gf: Any, args: tuple) -> None:
    """After a call of ``gf`` (no keywords, no has_aux) that went well: the fast
    path for calls of Python numbers and small arrays like ``args``
    (:func:`fast_entry`), and the warm path for buffered ones (:func:`warm_entry`)."""
    shape = (gf._single, gf.with_value)
    n = len(gf._call.names)
    gf._hot = fast_entry(gf._last, args, n, gf._argnums, shape)
    gf._warm = None if gf._hot is not None else warm_entry(gf._last, args, n, shape)


def fast_failed(gf: Any, exc: Exception, args: tuple, out: Any):
    """The fast path's emitted function raised ``exc``: what ``__call__`` does."""
    if isinstance(exc, GlobalsChangedError):
        gf._hot = None  # compiled again, the slow way (nothing ran yet)
        return gf(*args, out=out)
    if isinstance(exc, S2SADError):
        raise exc
    value, grads = gf._failed(exc, list(args), [], args, {})
    check_scalar(gf, value)
    return fast_result(gf, value, grads, out)


def fast_result(gf: Any, value: Any, grads: tuple, out: Any):
    """What a fast call returns (its gradients written into ``out=`` arrays)."""
    if gf._single:
        grads = grads[0]
    if out is not None:
        grads = write_into(out, grads)
    return (value, grads) if gf.with_value else grads


# ---------------------------------------------------------------- buffered calls

#: leaves the warm path's key tells apart by type and value (or shape and dtype)
_PLAIN_LEAVES = (float, int, bool, str, complex, type(None), np.ndarray)


def _plain(v: Any) -> bool:
    """Whether ``shape_key`` keys ``v`` by what decides the module alone: NumPy
    arrays (not subclasses), numbers, strings, None, NumPy scalars, and dicts,
    lists and tuples of them.  Objects, functions, pytree nodes and arrays of
    other libraries are keyed by identity there, and their classes' attributes
    change the module too (``binding.type_signature``): the slow path's."""
    t = type(v)
    if t in _PLAIN_LEAVES:
        return True
    if t is dict:
        return all(map(_plain, v.values()))
    if t is list or t is tuple:
        return all(map(_plain, v))
    return isinstance(v, np.generic)


#: what :func:`warm_call` returns when the call must go the slow way
MISS = object()


def warm_entry(
    last: tuple | None, args: tuple, n_params: int, shape: tuple
) -> tuple | None:
    """The warm path after a buffered call of ``args`` that went well with the
    compiled entry ``last``: ``(key, pool, *shape)``, where ``key`` is the call's
    ``workspace.shape_key``.  A call with the same key has the same argument
    types, layouts, shapes, dtypes and ints, hence the same ``type_signature``
    (the module) and passes the same argument checks.  None where the slow path
    is needed: no workspace pool (Dask's backend, plain modules), defaults to
    fill in, objects or foreign arrays among the arguments, boolean masks."""
    if last is None or last[3] is None or not args or len(args) != n_params:
        return None
    values = list(args)
    if not all(map(_plain, values)):
        return None
    key = workspace.shape_key(values)
    if key is None:
        return None
    return (key, last[3], *shape)


def warm_call(gf: Any, warm: tuple, args: tuple, out: Any = None) -> Any:
    """``gf(*args, out=out)`` on the warm path, or :data:`MISS` when the call's key
    is not the warm one (or a global the module was specialised on was rebound:
    the slow path compiles again).  The emitted function checks its globals first
    thing; errors are handled as the slow path handles them."""
    values = list(args)
    key = workspace.shape_key(values)
    if key != warm[0]:
        return MISS
    results = None  # out= arrays for finalize, as api's _with_workspace passes them
    if out is not None:
        results = (out,) if warm[2] else out
        if not isinstance(results, tuple) or len(results) != len(gf._argnums):
            results = None
    try:
        (value, grads), ws = warm[1].call(key, values, results)
    except GlobalsChangedError:
        gf._warm = None
        return MISS
    except S2SADError as exc:
        raise locate.into_message(exc, gf.fun)
    except Exception as exc:  # noqa: BLE001 (as the slow path: _failed)
        value, grads = gf._failed(exc, values, [], args, {})
        ws = None
    t = type(value)
    if t is not float and t is not np.float64 and t is not np.float32:
        if ws is not None:  # a float holds no buffer: only others are looked at
            value = unshare(value, ws)
        check_scalar(gf, value)
    if warm[2]:  # one gradient, not a tuple of them
        grads = grads[0]
    if out is not None:
        grads = write_into(out, grads)
    return (value, grads) if warm[3] else grads
