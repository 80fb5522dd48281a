"""Which arguments a called function's result may share memory with.

The aliasing pass (``front/aliasing.py``) must know, for ``r = f(a, b)``,
whether a later in-place change of ``r`` reaches ``a`` or ``b`` (and the
other way round).  Without looking into ``f`` it assumes both, and through
``r`` it then also links ``a`` with ``b``: a change of ``b`` made ``a`` stale.
:func:`shared_params` reads the callee's source once and answers with the
positions of the parameters its result may share memory with::

    def helper(a, b):                       # -> frozenset()  (fresh arrays only)
        return np.max(b), np.tanh(a) * 2.0
    def pick(a, b):                         # -> {1}          (a view of b)
        return b[0]

or ``None`` when it cannot tell (no source, a callable object, a generator, a
nested function used otherwise than called by its name): then every argument is
assumed shared, as before. A nested function (``def g`` or ``g = lambda``) only
ever called by its name holds what its names may share: its call may return any
of it and store any argument into it. A call of another module-level user
function returns what its own summary says of the arguments in those positions.

The analysis is flow-insensitive and errs on the side of sharing: every local
name collects what any of its assignments may share; a container collects
what is stored into it (``d[k] = v``, ``lst.append(v)``, ``o.attr = v``); a
call that is not known to return a fresh value shares what its arguments and
receiver share, and may store any of them into the others.  Known fresh:
constants, arithmetic on numbers, comparisons, NumPy ufuncs (without
``out=``), the NumPy functions in :data:`FRESH_FUNCTIONS`, ``math``
functions, ``float``/``int``/``len``/``abs``/``sum``, and the array methods in
:data:`FRESH_METHODS` (not ``.copy()``: of a dict or a list it is shallow, its
items are the argument's).  A global array the callee returns is not one of its
arguments and is not tracked (as for any global).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
import textwrap
import types
from typing import Any

import numpy as np

from s2sad.transforms.astutil import anno, walk
from s2sad.transforms.front.returns_tables import (
    FLOATING,
    FRESH_BUILTINS,
    FRESH_FUNCTIONS,
    FRESH_METHODS,
    FULL_REDUCTIONS,
    VIEW_FUNCTIONS,
    VIEW_METHODS,
)

Shared = frozenset  # positions of parameters
#: (what the result may share, or None: unknown; for a function whose every
#: ``return`` is a tuple display of one length, what each element may share)
Summary = tuple  # (Shared | None, tuple[Shared, ...] | None)
_cache: dict[Any, Summary] = {}


def shared_params(target: Any, receiver: bool) -> tuple[Summary, int]:
    """(:func:`analyse` of ``target``; the offset of the call's argument 0 in its
    parameter list).  ``receiver``: the call site passes a method's object first."""
    fn = getattr(target, "__func__", target)
    offset = 1 if inspect.ismethod(target) and not receiver else 0
    node = source_node(fn)
    if node is None:
        return (None, None), offset
    if fn.__code__ not in _cache:
        _cache[fn.__code__] = (None, None)  # while analysed (recursion): unknown
        _cache[fn.__code__] = analyse(node, fn.__globals__)
    return _cache[fn.__code__], offset


_nodes: dict[Any, ast.FunctionDef | None] = {}


def source_node(fn: Any) -> ast.FunctionDef | None:
    """The syntax tree of a plain function's source (None: none to read)."""
    if not isinstance(fn, types.FunctionType):
        return None
    code = fn.__code__
    if code not in _nodes:
        try:
            # the code that runs (a decorated function's wrapper, never what it wraps)
            node = ast.parse(textwrap.dedent(inspect.getsource(code))).body[0]
            _nodes[code] = node if isinstance(node, ast.FunctionDef) else None
        except (OSError, TypeError, SyntaxError, IndexError):
            _nodes[code] = None
    return _nodes[code]


def returns_scalar(target: Any) -> bool:
    """Whether a user function always returns an immutable scalar: every
    ``return`` gives a number, a full reduction (``np.sum(a)``), a ``math``
    function, ``float(...)``, or arithmetic on those."""
    fn = getattr(target, "__func__", target)
    node = source_node(fn)
    if node is None or not node.body or not isinstance(node.body[-1], ast.Return):
        return False
    nested = (ast.FunctionDef, ast.Lambda, ast.Yield, ast.YieldFrom, ast.ClassDef)
    if any(isinstance(n, nested) for n in walk(node) if n is not node):
        return False
    values = [n.value for n in walk(node) if isinstance(n, ast.Return)]
    env = fn.__globals__
    return all(v is not None and _scalar_expr(v, env) for v in values)


def _resolve(e: ast.expr, env: dict, local: dict) -> Any:
    """The module-level object ``e`` names (``np.tanh``, ``math.exp``), or None
    (``local``: the function's own names)."""
    if isinstance(e, ast.Name):
        if e.id in local:
            return None
        if e.id in env:
            return env[e.id]
        return getattr(builtins, e.id, None)
    if isinstance(e, ast.Attribute):
        base = _resolve(e.value, env, local)
        if isinstance(base, types.ModuleType):
            return getattr(base, e.attr, None)
    return None


def _scalar_expr(e: ast.expr, env: dict) -> bool:
    if isinstance(e, ast.Constant):
        return type(e.value) in (int, float)
    if isinstance(e, ast.UnaryOp):
        return _scalar_expr(e.operand, env)
    if isinstance(e, ast.BinOp):
        return _scalar_expr(e.left, env) and _scalar_expr(e.right, env)
    if isinstance(e, ast.IfExp):
        return _scalar_expr(e.body, env) and _scalar_expr(e.orelse, env)
    if not isinstance(e, ast.Call) or e.keywords:
        return False
    f = _resolve(e.func, env, {})
    if f is None:
        return False
    if f in (builtins.float, builtins.int):
        return True
    if getattr(math, getattr(f, "__name__", ""), None) is f:
        return True  # math functions give Python numbers
    return _member(f, FULL_REDUCTIONS) and len(e.args) == 1


def summary(node: ast.FunctionDef, env: dict) -> Shared | None:
    """The parameters a function's result may share (None: unknown); ``env``:
    its globals, to know ``np.tanh`` from a user function."""
    return analyse(node, env)[0]


def analyse(node: ast.FunctionDef, env: dict) -> Summary:
    """:func:`summary`, and per element when every ``return`` gives a tuple."""
    a = node.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
        return None, None
    for sub in walk(node):
        if sub is not node and isinstance(
            sub,
            (
                ast.AsyncFunctionDef,
                ast.ClassDef,
                ast.Yield,
                ast.YieldFrom,
                ast.Global,
                ast.Nonlocal,
                ast.Await,
            ),
        ):
            return None, None
    closures = _closures(node)
    if closures is None:
        return None, None
    return _Summary(node, env, closures).run()


def _closures(node: ast.FunctionDef) -> dict[str, set[str]] | None:
    """Nested functions (``def g(...)`` or ``g = lambda ...``) by name -> the names
    of this function they read or bind (their parameters, what they capture);
    None when one is used otherwise than called by its name (passed, stored,
    returned: it could run where the analysis does not see it) or rebound, or a
    lambda is not so named."""
    out: dict[str, set[str]] = {}
    named: dict[int, str] = {}
    for sub in walk(node):
        if isinstance(sub, ast.FunctionDef) and sub is not node:
            fn, name = sub, sub.name
        elif (
            isinstance(sub, ast.Assign)
            and isinstance(sub.value, ast.Lambda)
            and len(sub.targets) == 1
            and isinstance(sub.targets[0], ast.Name)
        ):
            fn, name = sub.value, sub.targets[0].id
            named[id(fn)] = name
        else:
            continue
        if name in out:
            return None  # two functions of one name: which one runs is not known
        out[name] = {n.id for n in walk(fn) if isinstance(n, ast.Name)}
        out[name] |= {a.arg for a in walk(fn) if isinstance(a, ast.arg)}
    # the names bound here (globals, ``np``, are not this function's to share)
    bound = {a.arg for a in walk(node) if isinstance(a, ast.arg)}
    stored = [
        n.id
        for n in walk(node)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    ]
    out = {name: names & (bound | set(stored)) for name, names in out.items()}
    lambdas = set(named.values())
    if any(stored.count(name) != (name in lambdas) for name in out):
        return None  # the name is bound to something else too
    called = {id(sub.func) for sub in walk(node) if isinstance(sub, ast.Call)}
    for sub in walk(node):
        if isinstance(sub, ast.Lambda) and id(sub) not in named:
            return None
        if (
            isinstance(sub, ast.Name)
            and sub.id in out
            and isinstance(sub.ctx, ast.Load)
            and id(sub) not in called
        ):
            return None
    return out


def _own(node: ast.AST):
    """The nodes of ``node``'s body, not those of the functions nested in it."""
    todo = list(ast.iter_child_nodes(node))
    while todo:
        sub = todo.pop()
        yield sub
        if not isinstance(sub, (ast.FunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(sub))


class _Summary:
    def __init__(self, node: ast.FunctionDef, env: dict, closures: dict):
        self.node = node
        self.env = env
        self.params = [p.arg for p in node.args.args]
        self.share: dict[str, frozenset[int]] = {
            p: frozenset([i]) for i, p in enumerate(self.params)
        }
        # a nested function is a name that holds what its names may share; a
        # call of it may store any argument into any of them (one flat,
        # flow-insensitive namespace: a name used in both scopes merges)
        self.closures = closures
        for name in closures:
            self.share.setdefault(name, frozenset())

    def run(self) -> Summary:
        for _ in range(50):
            before = dict(self.share)
            for sub in walk(self.node):
                self.visit(sub)
            if before == self.share:
                break
        else:
            return None, None
        values = [sub.value for sub in _own(self.node) if isinstance(sub, ast.Return)]
        shared = frozenset().union(*[self.of(v) for v in values if v is not None])
        n = {len(v.elts) if isinstance(v, ast.Tuple) else -1 for v in values}
        if len(n) != 1 or -1 in n or not self.falls_off_never():
            return shared, None
        if any(isinstance(e, ast.Starred) for v in values for e in v.elts):
            return shared, None
        parts = tuple(
            frozenset().union(*[self.of(v.elts[k]) for v in values])
            for k in range(n.pop())
        )
        return shared, parts

    def falls_off_never(self) -> bool:
        """The body ends with a ``return`` (it cannot give None instead)."""
        return bool(self.node.body) and isinstance(self.node.body[-1], ast.Return)

    def add(self, target: ast.expr, what: frozenset[int]) -> None:
        """``target`` (a name, an unpacking, or an item/attribute of a container)
        now may share ``what``."""
        if isinstance(target, ast.Name):
            self.share[target.id] = self.share.get(target.id, frozenset()) | what
        elif isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                self.add(e, what)
        elif isinstance(target, ast.Starred):
            self.add(target.value, what)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            self.add(target.value, what)  # the container holds it now

    def visit(self, s: ast.AST) -> None:
        if isinstance(s, ast.FunctionDef) and s is not self.node:
            self.add(ast.Name(id=s.name), self.captured(s.name))
        elif isinstance(s, ast.Assign) and isinstance(s.value, ast.Lambda):
            self.add(s.targets[0], self.captured(s.targets[0].id))
        elif isinstance(s, ast.Assign):
            v = self.of(s.value)
            for t in s.targets:
                self.add(t, v)
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign)) and s.value is not None:
            self.add(s.target, self.of(s.value) | self.of(s.target))
        elif isinstance(s, (ast.For, ast.comprehension)):
            self.add(s.target, self.of(s.iter))
        elif isinstance(s, ast.withitem) and s.optional_vars is not None:
            self.add(s.optional_vars, self.of(s.context_expr))
        elif isinstance(s, ast.NamedExpr):
            self.add(s.target, self.of(s.value))
        elif isinstance(s, ast.Call) and not self.fresh_call(s):
            # it may store any argument into any other (lst.append(v), g(d, v))
            parts = list(s.args) + [k.value for k in s.keywords]
            if isinstance(s.func, ast.Attribute):
                parts.append(s.func.value)
            every = frozenset().union(*[self.of(p) for p in parts])
            for p in parts:
                root = p.value if isinstance(p, ast.Starred) else p
                while isinstance(root, (ast.Subscript, ast.Attribute)):
                    root = root.value
                if isinstance(root, ast.Name):
                    self.add(root, every)
            if isinstance(s.func, ast.Name) and s.func.id in self.closures:
                for n in self.closures[s.func.id]:  # its parameters, what it holds
                    self.add(ast.Name(id=n), every)

    def captured(self, name: str) -> frozenset[int]:
        """What the names of the nested function ``name`` may share."""
        return frozenset().union(
            *[self.share.get(n, frozenset()) for n in self.closures[name]]
        )

    def of(self, e: ast.expr) -> frozenset[int]:
        """The parameters the value of ``e`` may share memory with."""
        if isinstance(e, (ast.Constant, ast.Compare, ast.UnaryOp, ast.JoinedStr)):
            return frozenset()
        if isinstance(e, ast.Name):
            return self.share.get(e.id, frozenset())  # a global: not an argument
        if isinstance(e, ast.BinOp):  # new for arrays and numbers; lists keep items
            if not isinstance(e.op, (ast.Add, ast.Mult, ast.BitOr)):
                return frozenset()  # (no container keeps items through a ** 2, a - b)
            if any(self.numeric(side) for side in (e.left, e.right)):
                return frozenset()  # an array or number operand: a new result
            return self.of(e.left) | self.of(e.right)
        if isinstance(e, ast.Call):
            if self.fresh_call(e):
                return frozenset()
            known = self.user_call(e)
            if known is not None:
                return known
            parts = list(e.args) + [k.value for k in e.keywords]
            if isinstance(e.func, ast.Attribute):
                parts.append(e.func.value)
            if isinstance(e.func, ast.Name) and e.func.id in self.closures:
                parts.append(e.func)  # what the nested function may return
            return frozenset().union(*[self.of(p) for p in parts])
        if isinstance(e, (ast.Subscript, ast.Attribute, ast.Starred)):
            return self.of(e.value)
        out: frozenset[int] = frozenset()  # containers, a if c else b, a or b, ...
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                out |= self.of(child)
            elif isinstance(child, ast.comprehension):
                out |= self.of(child.iter)
        return out

    def user_call(self, e: ast.Call) -> frozenset[int] | None:
        """What a call of a module-level user function returns may share: what
        the arguments in the positions of its own summary share (None: unknown)."""
        target = self.resolve(e.func)
        if not isinstance(target, types.FunctionType):
            return None
        if any(isinstance(a, ast.Starred) for a in e.args):
            return None
        node = source_node(target)
        (shared, _), _ = shared_params(target, False)
        if shared is None or node is None:
            return None
        params = [p.arg for p in node.args.args]
        given = dict(enumerate(e.args))
        for k in e.keywords:
            if k.arg not in params:
                return None  # **kwargs, or a keyword-only parameter
            given[params.index(k.arg)] = k.value
        return frozenset().union(*[self.of(given[i]) for i in shared if i in given])

    def numeric(self, e: ast.expr) -> bool:
        """A float constant or a NumPy/``math`` result: ``+``, ``*`` with it make
        a new array or number (with a list, ``[a] * 2`` would keep ``a``)."""
        if isinstance(e, ast.Constant):
            return type(e.value) in (float, complex)
        if isinstance(e, ast.BinOp):  # np.tanh(a) * 0.5: still floating
            return self.numeric(e.left) or self.numeric(e.right)
        if isinstance(e, ast.UnaryOp):
            return self.numeric(e.operand)
        if isinstance(e, ast.Call) and self.fresh_call(e):
            target = self.resolve(e.func)
            return target is builtins.float or (
                getattr(target, "__name__", "") in FLOATING
                and getattr(target, "__module__", "") in ("numpy", "math", None)
            )
        return False

    def fresh_call(self, e: ast.Call) -> bool:
        if any(k.arg == "out" or k.arg is None for k in e.keywords):
            return False
        if any(isinstance(a, ast.Starred) for a in e.args):
            return False
        f = e.func
        target = self.resolve(f)
        if target is not None:
            if isinstance(target, np.ufunc):
                return True
            if target is np.array:
                return not any(k.arg == "copy" for k in e.keywords)
            if target in (builtins.max, builtins.min):
                return False  # one of its arguments
            if target is builtins.sum and len(e.args) + len(e.keywords) > 1:
                return False  # sum(lists, []) keeps the lists' items
            if _member(target, FRESH_FUNCTIONS) or _member(target, FRESH_BUILTINS):
                return True
            return getattr(math, getattr(target, "__name__", ""), None) is target
        if isinstance(f, ast.Attribute) and self.resolve(f.value) is None:
            return f.attr in FRESH_METHODS  # a method of an array
        return False

    def resolve(self, e: ast.expr) -> Any:
        """The module-level object ``e`` names (``np.tanh``, ``math.exp``), or None."""
        return _resolve(e, self.env, self.share)


def _member(target: Any, group: set) -> bool:
    try:
        return target in group
    except TypeError:  # unhashable
        return False


def sources(
    value: ast.expr, local_functions: dict, env: dict
) -> tuple[list[str], list | None]:
    """:func:`view_sources`, but for a call of a user function only the
    arguments its result may share (:func:`analyse`); and, for a call
    that returns a tuple, the arguments each element may share."""
    info = anno(value).get("call") if isinstance(value, ast.Call) else None
    kind = getattr(info, "kind", "")
    if kind not in ("user", "local") or value.keywords:
        return view_sources(value), None
    if kind == "local":
        node = getattr(local_functions.get(info.target), "node", None)
        found, offset = (
            (analyse(node, env), 0)
            if isinstance(node, ast.FunctionDef)
            else ((None, None), 0)
        )
    else:
        receiver = info.extra.get("self") is not None
        found, offset = shared_params(info.target, receiver)
    shared, parts = found
    if shared is None:
        return view_sources(value), None

    def names(positions) -> list[str]:
        return [
            a.id
            for i, a in enumerate(value.args)
            if isinstance(a, ast.Name) and i + offset in positions
        ]

    return names(shared), None if parts is None else [names(p) for p in parts]


def view_sources(value: ast.expr) -> list[str]:
    """Names whose memory ``value`` may share (views, plain copies of references)."""
    if isinstance(value, ast.Name):
        return [value.id]
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
        return [value.value.id]
    if (
        isinstance(value, ast.Attribute)
        and value.attr == "T"
        and isinstance(value.value, ast.Name)
    ):
        return [value.value.id]
    if isinstance(value, ast.Call):
        info = anno(value).get("call")
        kind = getattr(info, "kind", "")
        if kind == "method" and value.func.attr in VIEW_METHODS:
            return (
                [value.func.value.id] if isinstance(value.func.value, ast.Name) else []
            )
        fname = getattr(getattr(info, "target", None), "__name__", "")
        if kind in ("user", "local") or (kind == "rule" and fname in VIEW_FUNCTIONS):
            return [a.id for a in value.args if isinstance(a, ast.Name)]
    return []
