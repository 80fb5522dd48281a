"""``f(*xs)`` and ``(*xs, y)`` on a list the function builds itself, spelled
out item by item.

Runs in desugar, after the comprehensions became loops.  A later pass must
know a call's arguments one by one; for a local list that is possible in two
cases, both handled here (an argument of the differentiated function is
handled in normalize, from the call's example value):

* the list's length is fixed when the code is written: it is assigned once,
  from a list or tuple literal or from ``np.split`` (``array_split``,
  ``hsplit``, ``vsplit``, ``dsplit``) with a literal section count, and no
  use of it may change its length (a method, a slice written, ``del xs[i]``,
  the list handed on: ``ys = xs; ys.append(v)``, ``f(xs)``); every ``f(*xs)``
  becomes ``f(xs[0], ..., xs[n-1])``, and every tuple or list display
  ``(*xs, y)`` becomes ``(xs[0], ..., y)``;
* a ``for`` target says it: ``for q, k, v in zip(*heads)`` (picoGPT's attention
  heads) can only run with ``len(heads) == 3``, so the loop iterates
  ``zip(heads[0], heads[1], heads[2])`` after a check that raises the located
  ``ValueError`` Python would raise for another length::

      for q, k, v in zip(*heads):          if len(heads) != 3:
          out.append(att(q, k, v))   ->        raise ValueError("...")
                                           for q, k, v in zip(heads[0], heads[1], heads[2]):
                                               out.append(att(q, k, v))

What neither case covers stays as written, and is refused later if it carries
a differentiated value.
"""

from __future__ import annotations

import ast

from s2sad.transforms.astutil import call, const, copy_loc, name, walk

_SPLITS = {"split", "array_split", "hsplit", "vsplit", "dsplit"}
_STMT_LISTS = ("body", "orelse")


def run(node: ast.FunctionDef, source) -> None:
    """Rewrite ``node`` in place."""
    if not any(isinstance(s, ast.Starred) for s in _own_nodes(node)):
        return
    params = {a.arg for a in node.args.args}
    lengths = _static_lengths(node, params)
    node.body = _block(node.body, params, lengths, source)


def _own_nodes(node: ast.AST):
    """The nodes of ``node``, not entering nested functions or lambdas."""
    todo = list(ast.iter_child_nodes(node))
    while todo:
        sub = todo.pop()
        yield sub
        if not isinstance(sub, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(sub))


def _static_lengths(node: ast.FunctionDef, params: set[str]) -> dict[str, int]:
    stored: dict[str, list[ast.AST]] = {}
    for sub in ast.walk(node):  # nested functions too: nonlocal xs; xs = ...
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            stored.setdefault(sub.id, []).append(sub)
    changed = _length_may_change(node)
    lengths = {}
    for sub in _own_nodes(node):
        if not (
            isinstance(sub, ast.Assign)
            and len(sub.targets) == 1
            and isinstance(sub.targets[0], ast.Name)
        ):
            continue
        var = sub.targets[0].id
        if var in params or var in changed or len(stored.get(var, [])) != 1:
            continue
        n = _literal_length(sub.value)
        if n is not None:
            lengths[var] = n
    return lengths


def _length_may_change(node: ast.FunctionDef) -> set[str]:
    """Names some use of which may change the length of the list they hold:
    a method (``xs.append``), a slice written or an item deleted, or the list
    handed on (``ys = xs; ys.append(v)``, ``f(xs)``).  Reading items, ``*xs``,
    ``xs + ys``, ``len(xs)`` and iterating keep it."""
    keep: set[int] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name):
            if isinstance(sub.ctx, ast.Load) or (
                isinstance(sub.ctx, ast.Store) and not isinstance(sub.slice, ast.Slice)
            ):
                keep.add(id(sub.value))
        elif isinstance(sub, ast.Starred):
            keep.add(id(sub.value))
        elif isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Add):
            keep.update((id(sub.left), id(sub.right)))
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            if sub.func.id == "len" and len(sub.args) == 1:
                keep.add(id(sub.args[0]))
        elif isinstance(sub, (ast.For, ast.comprehension)):
            keep.add(id(sub.iter))
    return {
        sub.id
        for sub in ast.walk(node)
        if isinstance(sub, ast.Name)
        and isinstance(sub.ctx, ast.Load)
        and id(sub) not in keep
    }


def _literal_length(value: ast.expr) -> int | None:
    if isinstance(value, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in value.elts):
            return None
        return len(value.elts)
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _SPLITS
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id in ("np", "numpy")
    ):
        sections = value.args[1] if len(value.args) > 1 else None
        for k in value.keywords:
            if k.arg == "indices_or_sections":
                sections = k.value
        if (
            isinstance(sections, ast.Constant)
            and type(sections.value) is int
            and sections.value > 0
        ):
            return sections.value
    return None


def _block(stmts, params, lengths, source) -> list[ast.stmt]:
    out = []
    for s in stmts:
        for field in _STMT_LISTS:
            inner = getattr(s, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                setattr(s, field, _block(inner, params, lengths, source))
        if isinstance(s, ast.For):
            out.extend(_zip_target(s, params, lengths, source))
        for sub in _stmt_nodes(s):
            if isinstance(sub, ast.Call):
                _splice(sub, lengths)
            elif isinstance(sub, (ast.Tuple, ast.List)) and isinstance(
                sub.ctx, ast.Load
            ):
                sub.elts = _spliced(sub.elts, lengths)
        out.append(s)
    return out


def _stmt_nodes(s: ast.stmt):
    """The expressions of ``s`` itself (not of the statements nested in it)."""
    if isinstance(s, (ast.For, ast.While, ast.If)):
        roots = [s.iter] if isinstance(s, ast.For) else [s.test]
        if isinstance(s, ast.For):
            roots.append(s.target)
    elif isinstance(s, (ast.FunctionDef, ast.ClassDef)):
        roots = []
    else:
        roots = [s]
    for root in roots:
        yield root
        yield from _own_nodes(root)


def _item(var: str, i: int, like: ast.AST) -> ast.expr:
    sub = ast.Subscript(value=name(var), slice=const(i), ctx=ast.Load())
    for n in walk(sub):
        ast.copy_location(n, like)
    return sub


def _splice(c: ast.Call, lengths: dict[str, int]) -> None:
    c.args = _spliced(c.args, lengths)


def _spliced(items: list[ast.expr], lengths: dict[str, int]) -> list[ast.expr]:
    """``items`` (a call's arguments, or a display's ``(*xs, y)``) with each
    ``*xs`` of a known length spelled out as ``xs[0], ..., xs[n-1]``."""
    out = []
    for a in items:
        if (
            isinstance(a, ast.Starred)
            and isinstance(a.value, ast.Name)
            and a.value.id in lengths
        ):
            out += [_item(a.value.id, i, a) for i in range(lengths[a.value.id])]
        else:
            out.append(a)
    return out


def _zip_target(s: ast.For, params, lengths, source) -> list[ast.stmt]:
    """The check before ``for a, b in zip(*xs)`` on a local list, whose ``zip``
    it spells out; nothing when the loop is of another form."""
    it = s.iter
    if not (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "zip"
        and not it.keywords
        and isinstance(s.target, (ast.Tuple, ast.List))
        and not any(isinstance(e, ast.Starred) for e in s.target.elts)
    ):
        return []
    starred = [a for a in it.args if isinstance(a, ast.Starred)]
    if len(starred) != 1 or not isinstance(starred[0].value, ast.Name):
        return []
    var = starred[0].value.id
    if var in params or var in lengths:
        return []  # an argument: normalize, from its example; a known length: spliced
    n = len(s.target.elts) - (len(it.args) - 1)
    if n < 0:
        return []
    where = f"{source.filename}:{it.lineno}"
    message = (
        f"{where}: zip(*{var}) is unpacked into {len(s.target.elts)} names, so "
        f"{var} must hold {n} sequences (s2sad compiled the loop for that)"
    )
    fail = ast.Raise(exc=call("ValueError", const(message)), cause=None)
    test = ast.Compare(
        left=call("len", name(var)), ops=[ast.NotEq()], comparators=[const(n)]
    )
    guard = copy_loc(ast.If(test=test, body=[fail], orelse=[]), s)
    for sub in walk(guard):
        ast.copy_location(sub, s)
    lengths_here = dict(lengths)
    lengths_here[var] = n
    _splice(it, lengths_here)
    return [guard]
