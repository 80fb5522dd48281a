"""``out=`` arrays as the buffers of the sites that compute the gradients.

A call ``dfn(*args, out=grads)`` runs with a workspace whose every site has a
buffer; ``finalize`` then copies each gradient from its buffer into the caller's
array.  Where one site (outside loops) binds gradient ``i``, the caller's array
``grads[i]`` can be that site's buffer for the call: the site writes the
gradient straight into it and ``finalize`` finds nothing to copy.

That is done only where it cannot change a value: the array is a plain,
C-contiguous, writeable ``np.ndarray`` of the site's recorded shape and dtype,
it shares no memory with any argument or with another ``out=`` array, and the
arguments are arrays, numbers or lists, tuples and dicts of them (an object
could hold the array where the function reads it); the compiler gives such
sites their gradient's place only in functions that read nothing but their
arguments (transforms/buffers/outside.py).  Anything else keeps the
workspace's buffer and the copy.  The function reads a site's buffer only
through the site's own result, so which memory a buffer is never changes a
value.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

_SCALARS = (int, float, complex, bool, str, bytes, type(None), np.generic)


def _arrays(value: Any, found: list, depth: int = 0) -> bool:
    """Collect the arrays in ``value`` into ``found``; False for anything whose
    arrays cannot all be seen (objects, deep nesting)."""
    if type(value) is np.ndarray:
        found.append(value)
        return True
    if isinstance(value, _SCALARS):
        return True
    if depth < 4 and type(value) in (list, tuple, dict):
        items = value.values() if type(value) is dict else value
        return all(_arrays(v, found, depth + 1) for v in items)
    return False


def _fits(out: Any, spec: tuple) -> bool:
    if type(out) is not np.ndarray or out.shape != spec[0]:
        return False
    dt = out.dtype
    flags = out.flags
    return (dt is spec[1] or dt == spec[1]) and flags.c_contiguous and flags.writeable


def plan(results: tuple, args: list, layout: Any, sites: Any) -> dict:
    """``{site key: the caller's array}`` for the sites that may write into it.

    ``sites`` is the function's ``buffer_results`` (site key -> gradient index,
    None where unknown); ``layout`` the workspace's (its fixed sites' shapes).
    The plan depends on the arrays themselves, so it is made per call.
    """
    if not isinstance(sites, dict) or not sites:
        return {}
    memo = _MEMO[0]
    if (
        memo is not None
        and memo[0] is sites
        and memo[1] is layout
        and _same(memo[2], results)
        and _same(memo[3], args)
        and all(_fits(out, layout.fixed[k]) for k, out in memo[4].items())
    ):
        return memo[4]
    chosen = _plan(results, args, layout, sites)
    kept_results, kept_args = _refs(results), _refs(args)
    if kept_results is not None and kept_args is not None:
        _MEMO[0] = (sites, layout, kept_results, kept_args, chosen)
    return chosen


#: the last plan, for calls with the very same arrays (a training loop's
#: parameters and out= arrays): (sites, layout, results, args, plan), arrays
#: held by weak references.  An array's memory moves only when it is resized to
#: another size, which changes its shape (so the layout: another shape key) or
#: makes an out= array no longer fit (checked on each reuse).
_MEMO: list = [None]
_FLAT = (int, float, complex, bool, type(None), np.float64, np.float32)


def _refs(values: Any) -> tuple | None:
    """Weak references to the arrays of ``values``, numbers as they are; None
    where anything else is among them."""
    kept = []
    for v in values:
        if type(v) is np.ndarray:
            kept.append(weakref.ref(v))
        elif type(v) in _FLAT:
            kept.append(v)
        else:
            return None
    return tuple(kept)


def _same(kept: tuple, now: Any) -> bool:
    if len(kept) != len(now):
        return False
    for k, v in zip(kept, now):
        if (k() if type(k) is weakref.ref else k) is not v:
            return False
    return True


def _plan(results: tuple, args: list, layout: Any, sites: dict) -> dict:
    count: dict[int, int] = {}
    for i in sites.values():
        if type(i) is int:
            count[i] = count.get(i, 0) + 1
    chosen: dict[str, np.ndarray] = {}
    for key, i in sites.items():
        if type(i) is not int or count[i] != 1 or not 0 <= i < len(results):
            continue
        spec = layout.fixed.get(key)
        if spec is not None and _fits(results[i], spec):
            chosen[key] = results[i]
    if not chosen:
        return chosen
    inputs: list = []
    if not all(_arrays(a, inputs) for a in args):
        return {}
    others: list = []  # every out= array, each with its place
    for j, r in enumerate(results):
        found: list = []
        if not _arrays(r, found):
            return {}
        others += [(j, a) for a in found]
    # arrays that own their memory share none with another one (NumPy allocated
    # each apart): for them identity tells; views are checked by their bounds
    owners = {id(a) for a in inputs if _owns(a)}
    views = [a for a in inputs if id(a) not in owners]
    for key, out in list(chosen.items()):
        i = sites[key]
        rest = [a for j, a in others if j != i]
        if _owns(out):
            clash = id(out) in owners or any(a is out for a in rest)
            near = views + [a for a in rest if not _owns(a)]
        else:
            clash = False
            near = inputs + rest
        if clash or any(np.may_share_memory(out, a) for a in near):
            del chosen[key]
    return chosen


def _owns(a: np.ndarray) -> bool:
    return a.base is None and a.flags.owndata
