"""Adjoint rule for ``np.einsum``, and the general contraction helper.

:func:`einsum_grads` differentiates an einsum by contracting the output
cotangent with the other operands; ``contractions.py`` uses it for every
product its fast paths do not take (1-d operands, broadcast batches, N-d
``dot``, ``tensordot``, ``inner``).  Explicit and implicit outputs, ellipses
(with broadcasting), repeated indices (diagonals) and indices summed within one
operand are supported.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from s2sad.runtime.reductions import like
from s2sad.runtime.registry import adjoint


def _labels_of(sub: Sequence) -> list:
    """An einsum sublist ([0, Ellipsis, 1]) as a list of labels (ints and "...")."""
    return ["..." if s is Ellipsis else int(s) for s in sub]


def _parse_einsum(args: Sequence) -> tuple[list, list[list], list | None]:
    """(operands, input labels, output labels or None for implicit) of an einsum call.

    Labels are single characters or ``"..."``; both the string form and the
    interleaved sublist form are accepted.
    """
    if isinstance(args[0], str):
        spec = args[0].replace(" ", "")
        inputs, _, output = spec.partition("->")
        labels = [_split_labels(s) for s in inputs.split(",")]
        return list(args[1:]), labels, _split_labels(output) if "->" in spec else None
    operands, subs = list(args[0::2]), list(args[1::2])
    out = None
    if len(operands) > len(subs):
        operands, out = operands[:-1], _labels_of(operands[-1])
    return operands, [_labels_of(s) for s in subs], out


def _split_labels(s: str) -> list:
    labels, i = [], 0
    while i < len(s):
        if s.startswith("...", i):
            labels.append("...")
            i += 3
        else:
            labels.append(s[i])
            i += 1
    return labels


def _explicit(operands: list, labels: list[list], output: list | None) -> tuple:
    """Replace ellipses by fresh labels (right-aligned) and fill in an implicit output."""
    ell_ndims = [
        np.ndim(op) - (len(lab) - 1) if "..." in lab else 0
        for op, lab in zip(operands, labels)
    ]
    ell = [("...", k) for k in range(max(ell_ndims, default=0))]

    def fill(lab: list, n: int) -> list:
        if "..." not in lab:
            return list(lab)
        i = lab.index("...")
        return lab[:i] + ell[len(ell) - n :] + lab[i + 1 :]

    full = [fill(lab, n) for lab, n in zip(labels, ell_ndims)]
    if output is None:
        flat = [x for lab in labels for x in lab if x != "..."]
        once = sorted({x for x in flat if flat.count(x) == 1})
        output = ell + once
    else:
        output = fill(output, len(ell))
    return full, output


def _to_ints(*label_lists: list) -> list:
    """Map arbitrary hashable labels to small ints for np.einsum's sublist form."""
    ids: dict = {}
    return [[ids.setdefault(x, len(ids)) for x in lab] for lab in label_lists]


def einsum_grads(g: Any, operands: list, labels: list[list], output: list) -> list:
    """Cotangents of einsum(operands, labels -> output) with explicit labels."""
    grads = []
    for k, op in enumerate(operands):
        op = np.asarray(op)
        target = list(dict.fromkeys(labels[k]))
        others = [(operands[j], labels[j]) for j in range(len(operands)) if j != k]
        seen = set(output).union(*[set(lab) for _, lab in others])
        kept = [x for x in target if x in seen]
        ints = _to_ints(output, kept, *[lab for _, lab in others])
        args = [g, ints[0]]
        for (other, _), sub in zip(others, ints[2:]):
            args += [other, sub]
        h = np.einsum(*args, ints[1], optimize=len(args) > 4)
        grads.append(_place(h, op, labels[k], target, kept))
    return grads


def _place(h: Any, op: np.ndarray, lab: list, target: list, kept: list) -> Any:
    """Give the contracted cotangent ``h`` (labels ``kept``) the operand's layout."""
    sizes = dict(zip(lab, op.shape))
    h = np.expand_dims(h, [i for i, x in enumerate(target) if x not in kept])
    # labels summed inside this operand only: broadcast; size-1 labels: sum
    shape = [sizes[x] for x in target]
    h = np.broadcast_to(h, np.broadcast_shapes(h.shape, shape))
    summed = tuple(i for i, n in enumerate(shape) if n == 1 and h.shape[i] != 1)
    h = np.sum(h, axis=summed, keepdims=True) if summed else h
    if len(target) == len(lab):
        return np.transpose(h, [target.index(x) for x in lab]) if target != lab else h
    ct = np.zeros(op.shape, dtype=h.dtype)
    ints = _to_ints(lab, target)
    np.einsum(ct, ints[0], ints[1])[...] = h  # writeable view of the diagonal
    return ct


@adjoint(np.einsum)
def d_einsum(g, ans, *args, **kwargs):
    """One cotangent per operand (None for the subscripts string or sublists)."""
    operands, labels, output = _parse_einsum(args)
    labels, output = _explicit(operands, labels, output)
    grads = einsum_grads(g, operands, labels, output)
    grads = [like(c, op) for c, op in zip(grads, operands)]
    if isinstance(args[0], str):
        return (None, *grads)
    return tuple(x for c in grads for x in (c, None))
