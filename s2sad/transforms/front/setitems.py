"""Item assignment through containers: ``a[i][j] = v``, ``self.states[:, t] = v``.

Normalize lowers a target whose base is itself an item or an attribute into a
read of the inner container, one plain item assignment on it, and a write back
of the inner container to where it came from::

    xs[t][k] = 1              ->    xs_t = xs[t]
                                    xs_t[k] = 1
                                    xs[t] = xs_t

    self.states[:, t] = h     ->    states = self.states
                                    states[:, t] = h
                                    store_attribute(self, "states", states)

In Python the inner container (an array in a dict or list, an array attribute)
is changed in place and the write back stores the same object again, so the
emitted code does what the user's code does.  Later passes see only item
assignments on names, whose gradients they know: the write back is what tells
them that ``xs`` now holds the changed entry (``d_xs_t`` flows from ``d_xs[t]``,
then ``d_h`` from ``d_xs_t[k]``).
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from s2sad.transforms.astutil import anno, assign, name, walk
from s2sad.transforms.front import objects
from s2sad.transforms.front.aliasing import view_sources


class Chain:
    """The containers of one item target, outermost first, read into names."""

    def __init__(self, norm: Any, target: ast.Subscript, out: list[ast.stmt]):
        slices, root = [], target
        while isinstance(root, ast.Subscript):
            slices.insert(0, root.slice)
            root = root.value
        self.root = root  # a name, or obj.attr (obj a name: validate checks)
        if isinstance(root, ast.Name):
            self.names = [root.id]
        else:
            # reverse mode puts the items it overwrites back while it runs backward
            # (the tape), so the caller's object would not keep the change
            norm.error(
                target,
                f"item assignment into the attribute '{ast.unparse(root)}'",
                f"build the array in a local and store it whole: "
                f"{root.attr} = np.zeros(...); {root.attr}[...] = ...; "
                f"{ast.unparse(root)} = {root.attr}",
            )
            self.names = [norm.temp(root.attr)]
            out.append(assign(self.names[0], norm.value(root, out, root.attr)))
        self.index = [norm.index(s, out) for s in slices]
        for idx in self.index[:-1]:
            inner = norm.temp(f"{self.names[-1].lstrip('_')}_item")
            out.append(assign(inner, _item(self.names[-1], idx)))
            self.names.append(inner)

    @property
    def base(self) -> str:
        """The name holding the container the item assignment changes."""
        return self.names[-1]

    def write_back(self, out: list[ast.stmt]) -> None:
        """Store each changed inner container where it was read from."""
        for k in reversed(range(len(self.names) - 1)):
            node = assign(
                ast.Subscript(
                    value=name(self.names[k]),
                    slice=copy.deepcopy(self.index[k]),
                    ctx=ast.Store(),
                ),
                name(self.names[k + 1]),
            )
            anno(node)["setitem"] = True
            anno(node)["root"] = self.names[0]
            out.append(node)
            # the aliasing pass: the outer container holds the change by name now
            anno(node)["write_back"] = True
        if not isinstance(self.root, ast.Name):
            out.append(objects.store(self.root, name(self.names[0])))


def assign_item(norm: Any, target: ast.Subscript, value: ast.expr, out) -> None:
    """``target = value`` for any item target the validator accepts."""
    v = norm.atom(value, out, "value")
    chain = Chain(norm, target, out)
    norm._setitem(chain.base, copy.deepcopy(chain.index[-1]), v, out, chain.names[0])
    chain.write_back(out)


def _item(base: str, idx: ast.expr) -> ast.Subscript:
    return ast.Subscript(value=name(base), slice=copy.deepcopy(idx), ctx=ast.Load())


def aliases(node: ast.FunctionDef, params: set[str]) -> set[str]:
    """``params`` and the names that may share memory with them (``a = cfg["buf"]``,
    ``row = buf[0]``, ``v = w.reshape(...)``): an item written through one of
    them changes the caller's object.  Flow-insensitive, so it may take in a
    name that holds a fresh array at the write: keeping that item costs a copy."""
    out = set(params)
    assigns = [
        s
        for s in walk(node)
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
    ]
    grown = True
    while grown:
        grown = False
        for s in assigns:
            t = s.targets[0].id
            if t not in out and out & set(view_sources(s.value)):
                out.add(t)
                grown = True
    return out
