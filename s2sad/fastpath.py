"""``grad``'s fast path: which calls may skip binding and keying.

A call of a differentiated function normally binds its arguments and computes
the cache key (:mod:`s2sad.binding`). After a call that went well, a call of
the same argument types (Python numbers, small float arrays) goes straight to
the compiled entry; these functions decide when that is the same module.
"""

from __future__ import annotations

import numpy as np

from s2sad.binding import type_signature
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
