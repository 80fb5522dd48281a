"""The pieces of front/instances.py: which classes it takes apart, the objects
it tracks, and the rewriting of expressions (attribute reads become locals,
method calls are inlined before the statement)."""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from typing import Any

from s2sad.transforms.astutil import const, copy_loc, name
from s2sad.transforms.front.calls import is_library
from s2sad.transforms.front.parse import MISSING

_HOOKS = ("__getattr__", "__getattribute__", "__setattr__", "__delattr__", "__new__")
PLAIN = (int, float, bool, str, type(None), complex)
DEPTH = 12
ESCAPE_HINT = (
    "use the object only through its attributes and methods inside the "
    "differentiated function, or build it outside and pass it in"
)


def plain_class(cls: Any) -> bool:
    """A user class s2sad can take apart: plain ``type``, Python source for
    ``__init__``, none of the hooks that change what an attribute access does."""
    if not isinstance(cls, type) or type(cls) is not type or is_library(cls):
        return False
    for k in cls.__mro__[:-1]:
        if k.__module__ == "builtins" or any(h in vars(k) for h in _HOOKS):
            return False
    init = lookup(cls, "__init__")[0]
    if init is object.__init__:
        return True
    try:
        inspect.getsource(init)
    except (OSError, TypeError):
        return False  # dataclass and namedtuple __init__ have no source
    return isinstance(init, types.FunctionType) and not (
        set(init.__code__.co_freevars) - {"__class__"}
    )


def lookup(cls: type, attr: str, after: type | None = None):
    """(value, defining class) of ``attr`` along the MRO (after ``after``)."""
    mro = cls.__mro__
    if after is not None:
        mro = mro[mro.index(after) + 1 :]
    for k in mro:
        if attr in vars(k):
            return vars(k)[attr], k
    return MISSING, None


class Obj:
    """An object that is never built: its class and its attributes (locals or
    nested objects)."""

    def __init__(self, cls: type, label: str):
        self.cls, self.label = cls, label
        self.attrs: dict[str, str | Obj] = {}
        # an argument object (front/instance_args.py): its name, the value the
        # compiler was given, and the attributes the call may set
        self.real: str | None = None
        self.example: Any = None
        self.written: set[str] = set()
        self.items: set[str] = set()  # written into by item (copied on entry)


class Refused(Exception):
    def __init__(self, problem):
        self.problem = problem


class Ctx:
    """One function body being rewritten: its source (for errors), the names bound
    to objects, the class whose method it is (for ``super()``), and where to
    relocate inlined nodes that come from another file."""

    def __init__(self, source, scope, owner=None, here=None):
        self.source, self.scope, self.owner, self.here = source, scope, owner, here


def set_attributes(
    cls: type, skip: Any = None, only: Any = None, items: bool = False
) -> set[str]:
    """Attribute names the methods of ``cls`` (but ``skip``, or only ``only``)
    assign on ``self``, items included (``self.states[:, t] = h``); with
    ``items``, only those written into by item or ``+=``."""
    out = set()
    for k in cls.__mro__[:-1]:
        for v in vars(k).values():
            if not isinstance(v, types.FunctionType) or v is skip:
                continue
            if only is not None and v is not only:
                continue
            try:
                tree = ast.parse(textwrap.dedent(inspect.getsource(v)))
            except (OSError, TypeError, SyntaxError):
                continue
            for n in ast.walk(tree):
                if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Attribute):
                    out.add(n.target.attr)
                if (
                    not items
                    and isinstance(n, ast.Attribute)
                    and not isinstance(n.ctx, ast.Load)
                ):
                    out.add(n.attr)
                if isinstance(n, ast.Subscript) and not isinstance(n.ctx, ast.Load):
                    while isinstance(n, ast.Subscript):
                        n = n.value
                    if isinstance(n, ast.Attribute):
                        out.add(n.attr)
    return out


class Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name):
        if node.id in self.mapping:
            node.id = self.mapping[node.id]
        return node


class ExprRewriter(ast.NodeTransformer):
    """An expression with the objects' attributes read from their locals and their
    methods inlined (their statements go before the statement)."""

    def __init__(self, inl: Any, ctx: Ctx, pre: list):  # inl: instances.Inliner
        self.inl, self.ctx, self.pre = inl, ctx, pre
        self.guarded = 0  # inside and/or, if-else, a lambda or a comprehension

    def _guard(self, node):
        self.guarded += 1
        try:
            return self.generic_visit(node)
        finally:
            self.guarded -= 1

    visit_BoolOp = visit_Lambda = _guard
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _guard

    def _unguarded(self, node: ast.Call) -> None:
        if self.guarded:
            self.inl.refuse(
                self.ctx,
                node,
                f"'{ast.unparse(node)}' inside and/or, if-else, a lambda or a "
                "comprehension",
                "call the method in a statement of its own",
            )

    def _inline(self, fn, owner, obj, node: ast.Call) -> ast.expr:
        self._unguarded(node)
        args = [self.inl.argument(a, self.ctx, self.pre) for a in node.args]
        kws = [
            (k.arg, self.inl.argument(k.value, self.ctx, self.pre))
            for k in node.keywords
        ]
        if any(isinstance(a, ast.Starred) for a in node.args):
            self.inl.refuse(
                self.ctx, node, "'*' in a call to a method of an object built here", ""
            )
        return self.inl.inline(fn, owner, obj, args, kws, node, self.ctx, self.pre)

    def _method(self, obj: Obj, attr: str, node: ast.Call, after=None) -> ast.expr:
        value, owner = lookup(obj.cls, attr, after)
        if isinstance(value, staticmethod):
            return self._inline(value.__func__, owner, None, node)
        if isinstance(value, types.FunctionType):
            return self._inline(value, owner, obj, node)
        if obj.real is not None:  # a callable the object holds: called on it
            node.func = self.inl.real_read(obj, attr, node.func)
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            return node
        self.inl.refuse(
            self.ctx, node, f"'{attr}' of {obj.cls.__name__} is not a plain method", ""
        )

    def visit_Call(self, node: ast.Call):
        func, ctx = node.func, self.ctx
        if isinstance(func, ast.Attribute):
            base = func.value
            if (
                isinstance(base, ast.Call)
                and isinstance(base.func, ast.Name)
                and base.func.id == "super"
                and getattr(ctx, "self_name", None) is not None
            ):
                obj = ctx.scope[ctx.self_name]
                return self._method(obj, func.attr, node, after=ctx.owner)
            cls = self.inl.constructs(base, ctx)
            if cls is not None:
                self._unguarded(node)
                obj = self.inl.build(cls, base, cls.__name__.lower(), ctx, self.pre)
                return self._method(obj, func.attr, node)
            obj = self.inl.handle(base, ctx)
            if obj is not None:
                held = obj.attrs.get(func.attr)
                if isinstance(held, Obj):
                    return self._method(held, "__call__", node)
                if held is None:
                    return self._method(obj, func.attr, node)
        cls = self.inl.constructs(func, ctx)
        if cls is not None:  # Sigmoid()(z)
            self._unguarded(node)
            obj = self.inl.build(cls, func, cls.__name__.lower(), ctx, self.pre)
            return self._method(obj, "__call__", node)
        obj = self.inl.handle(func, ctx)
        if obj is not None:
            return self._method(obj, "__call__", node)
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute):
        obj = self.inl.handle(node.value, self.ctx)
        if obj is None:
            return self.generic_visit(node)
        held = obj.attrs.get(node.attr)
        if isinstance(held, str):
            return copy_loc(name(held), node)
        if isinstance(held, Obj):
            self.inl.refuse(
                self.ctx, node, f"the object '{ast.unparse(node)}' is used as a value"
            )
        value, owner = lookup(obj.cls, node.attr)
        if isinstance(value, property) and value.fget is not None:
            call = copy_loc(ast.Call(func=node, args=[], keywords=[]), node)
            return self._inline(value.fget, owner, obj, call)
        if obj.real is not None:
            return self.inl.real_read(obj, node.attr, node)
        if isinstance(value, PLAIN):
            return copy_loc(const(value), node)
        self.inl.refuse(
            self.ctx,
            node,
            f"'{ast.unparse(node)}' is read before it is set, or is not "
            "a number, a string or an attribute set by a method",
            "",
        )

    def visit_IfExp(self, node: ast.IfExp):
        known = self.inl.fold(node.test, self.ctx)
        if known is None:
            return self._guard(node)
        return self.visit(node.body if known else node.orelse)

    def visit_Name(self, node: ast.Name):
        if node.id in self.ctx.scope and isinstance(node.ctx, ast.Load):
            self.inl.refuse(
                self.ctx,
                node,
                f"the object '{node.id}' built here is used as a value "
                "(returned, passed to a function, stored or aliased)",
            )
        return node


def buildable(node: ast.AST, params: set[str]) -> set[str]:
    """Names assigned once, by a constructor call, used only through attributes
    and calls: those objects need not exist."""
    count: dict[str, int] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            count[n.id] = count.get(n.id, 0) + 1
    ok = {
        s.targets[0].id
        for s in ast.walk(node)
        if isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and isinstance(s.value, ast.Call)
    }
    ok = {v for v in ok if count.get(v) == 1 and v not in params}
    fine: set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            fine.add(id(n.value))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            fine.add(id(n.func))
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)
            and id(n) not in fine
        ):
            ok.discard(n.id)
    return ok


def fold(test: ast.expr, held: Obj | None, ctx: Ctx) -> bool | None:
    """``x is None`` / ``x is not None`` known here: ``x`` an object built here
    (``held``), or a parameter given None (``act=None``: ``Tanh() if act is None
    else act``); None when not known."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return None
    left = test.left
    if held is not None:
        is_none = False
    elif isinstance(left, ast.Name) and left.id in getattr(ctx, "nones", ()):
        is_none = True
    else:
        return None
    return is_none if isinstance(test.ops[0], ast.Is) else not is_none
