"""Corpus: call forms on values the function builds itself (issue 14):
``zip(*heads)`` and ``f(*parts)`` over local lists (front/starred.py)."""

import numpy as np

from tests.corpus.registry import case, lst, mat, vec


def attention(q, k, v):
    w = q @ k.T / np.sqrt(q.shape[-1])
    w = np.exp(w - np.max(w, axis=-1, keepdims=True))
    return (w / np.sum(w, axis=-1, keepdims=True)) @ v


def heads_attention(x, n_head):
    # picoGPT's mha: the length of qkv_heads is known from the loop target only
    qkv = np.split(x, 3, axis=-1)
    qkv_heads = list(map(lambda p: np.split(p, n_head, axis=-1), qkv))  # noqa: C417
    out_heads = [attention(q, k, v) for q, k, v in zip(*qkv_heads)]
    return np.hstack(out_heads)


@case(mat(4, 12))
def zip_star_local_heads(x):
    return np.sum(heads_attention(x, 2) ** 2)


@case(mat(3, 6), lst(mat(6, 18), mat(6, 18)), argnums=(0, 1))
def zip_star_heads_in_loop(x, Ws):
    for W in Ws:
        x = np.tanh(heads_attention(x @ W, 2))
    return np.sum(x**2)


@case(mat(3, 4), mat(3, 4), argnums=(0, 1))
def zip_star_for_statement(a, b):
    pairs = [[a[i], b[i]] for i in range(3)]
    total = 0.0
    for r0, r1, r2 in zip(*pairs):  # (a[0], a[1], a[2]), then the rows of b
        total = total + np.sum(np.sin(r0) * r1 * r2)
    return total


@case(vec(4), vec(4), argnums=(0, 1))
def star_literal_list_into_numpy(x, y):
    parts = [x * 2.0, y]
    return np.sum(np.maximum(*parts) ** 2) + np.sum(np.hypot(*parts))


@case(vec(6))
def star_split_into_numpy(x):
    halves = np.split(x, 2)
    return np.sum(np.maximum(*halves) * np.minimum(*halves))


def mixed_pairs(x, y):
    cols = [x, y * 2.0]
    return np.stack([np.sin(a) * b for a, b in zip(*cols)])


@case(vec(4), vec(4), argnums=(0, 1))
def zip_star_literal_in_callee_in_loop(x, y):
    total = 0.0
    for i in range(2):
        total = total + np.sum(mixed_pairs(x + i, y) ** 2)
    return total
