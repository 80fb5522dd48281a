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
could hold the array where the function reads it).  Anything else keeps the
workspace's buffer and the copy.  The function reads a site's buffer only
through the site's own result, so which memory a buffer is never changes a
value.
"""

from __future__ import annotations

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
    return (
        type(out) is np.ndarray
        and out.shape == spec[0]
        and out.dtype == spec[1]
        and out.flags.c_contiguous
        and out.flags.writeable
    )


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
    ):
        return memo[4]
    chosen = _plan(results, args, layout, sites)
    if all(type(a) is np.ndarray or type(a) in _FLAT for a in args):
        # the memo holds the arrays themselves: their ids stay theirs, and an
        # array another object refers to cannot be resized (refcheck)
        _MEMO[0] = (sites, layout, tuple(results), tuple(args), chosen)
    return chosen


#: the last plan: (sites, layout, results, args, plan); calls with the very same
#: objects (a training loop's parameters and out= arrays) reuse it
_MEMO: list = [None]
_FLAT = (int, float, complex, bool, type(None), np.float64, np.float32)


def _same(kept: tuple, now: Any) -> bool:
    if len(kept) != len(now):
        return False
    for a, b in zip(kept, now):
        if a is not b:
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
    for key, out in list(chosen.items()):
        i = sites[key]
        if any(np.may_share_memory(out, a) for a in inputs) or any(
            np.may_share_memory(out, a) for j, a in others if j != i
        ):
            del chosen[key]
    return chosen
