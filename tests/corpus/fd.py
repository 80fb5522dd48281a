"""Central finite differences in float64 for corpus tests."""

from __future__ import annotations

import copy

import numpy as np


def _leaves(tree, path=()):
    if isinstance(tree, dict):
        for k in sorted(tree):
            yield from _leaves(tree[k], path + (k,))
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            yield from _leaves(v, path + (i,))
    else:
        yield path, tree


def _get(tree, path):
    for p in path:
        tree = tree[p]
    return tree


def _set(tree, path, value):
    if not path:
        return value
    if isinstance(tree, tuple):
        items = list(tree)
        items[path[0]] = _set(items[path[0]], path[1:], value)
        return tuple(items)
    tree[path[0]] = _set(tree[path[0]], path[1:], value)
    return tree


def numerical_grad(f, args, argnum, eps=1e-6):
    """d f(*args) / d args[argnum], same structure as the argument."""
    arg = args[argnum]
    grad = copy.deepcopy(arg)
    for path, leaf in list(_leaves(arg)):
        arr = np.array(leaf, dtype=np.float64)
        g = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            vals = []
            for sign in (1, -1):
                bumped = arr.copy()
                bumped[idx] += sign * eps
                new_leaf = bumped if isinstance(leaf, np.ndarray) else float(bumped)
                new_args = list(copy.deepcopy(args))
                new_args[argnum] = _set(copy.deepcopy(arg), path, new_leaf)
                vals.append(float(np.sum(f(*new_args))))
            g[idx] = (vals[0] - vals[1]) / (2 * eps)
        grad = _set(grad, path, g if isinstance(leaf, np.ndarray) else float(g))
    return grad


def assert_close_tree(got, want, rtol=1e-5, atol=1e-6, where="gradient"):
    assert type(got) is type(want) or (
        isinstance(got, (float, np.floating)) and isinstance(want, (float, np.floating))
    ), f"{where}: type {type(got).__name__}, expected {type(want).__name__}"
    if isinstance(want, dict):
        assert set(got) == set(want), f"{where}: keys {set(got)} vs {set(want)}"
        for k in want:
            assert_close_tree(got[k], want[k], rtol, atol, f"{where}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close_tree(g, w, rtol, atol, f"{where}[{i}]")
    else:
        assert np.shape(got) == np.shape(
            want
        ), f"{where}: shape {np.shape(got)} vs {np.shape(want)}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)
