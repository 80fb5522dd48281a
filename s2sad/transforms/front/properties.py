"""Properties of objects the function is given, read as the calls Python makes.

``layer.Wsq`` with ``Wsq`` a ``@property`` of ``layer``'s class (a dataclass,
a namedtuple or any class whose object the call passes in) is not a field:
read as one, its cotangent had nowhere to go and the gradient of the fields
it is computed from was silently wrong.  The read becomes the getter's call,
``type(layer).Wsq.fget(layer)``, compiled like any user function (the class
is the one compiled for: the cache key holds the argument's type).  A
getter that is not Python code s2sad can read, any other descriptor
(``functools.cached_property``: a value kept from an earlier read) and
``x.__dict__`` (the fields read by key, as silently wrong as a property
was) are refused at their line.
"""

from __future__ import annotations

import ast
import collections
import copy
import dataclasses
import functools
import types
from typing import Any

from s2sad.transforms.astutil import anno
from s2sad.transforms.front.calls import CallInfo, _has_source
from s2sad.transforms.front.parse import MISSING

#: what a class attribute read through an instance may be without running code
_PLAIN = (
    types.FunctionType,
    staticmethod,
    classmethod,
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.MemberDescriptorType,  # __slots__ fields: the value itself
    types.GetSetDescriptorType,
    type(collections.namedtuple("_T", "f").f),  # a namedtuple's field
)


def _on_class(cls: type, attr: str) -> Any:
    """``attr`` as the class (its MRO) defines it, without running a
    descriptor; MISSING if none does."""
    for k in cls.__mro__:
        if attr in k.__dict__:
            return k.__dict__[attr]
    return MISSING


def getter_call(norm: Any, e: ast.Attribute) -> ast.Call | None:
    """The getter's call for a property read ``x.attr`` of an object passed
    in (None: any other attribute, read as it is); refuses a descriptor it
    cannot compile (recorded on ``norm``, as the pass's other problems)."""
    obj = norm.example_value(e.value)
    if obj is MISSING or isinstance(obj, (type, types.ModuleType)):
        return None
    cls = type(obj)
    if any(hasattr(cls, a) for a in ("__array__", "__array_namespace__", "__dlpack__")):
        return None  # an array of some library: its attributes are the rules'
    if e.attr == "__dict__":  # its entries are the fields, out of the analyses' sight
        norm.error(
            e,
            f"'{ast.unparse(e)}' reads the fields through the object's __dict__",
            f"read the fields as attributes ({ast.unparse(e.value)}.name)",
        )
        return None
    desc = _on_class(cls, e.attr)
    if desc is MISSING or isinstance(desc, _PLAIN):
        return None
    where = f"'{ast.unparse(e)}' ({cls.__name__}.{e.attr})"
    if isinstance(desc, property):
        fget = desc.fget
        if isinstance(fget, types.FunctionType) and _has_source(fget):
            prop = ast.Attribute(
                value=ast.Call(
                    func=ast.Name("type", ast.Load()),
                    args=[copy.deepcopy(e.value)],
                    keywords=[],
                ),
                attr=e.attr,
                ctx=ast.Load(),
            )
            getter = ast.Call(
                func=ast.Attribute(value=prop, attr="fget", ctx=ast.Load()),
                args=[copy.deepcopy(e.value)],
                keywords=[],
            )
            for n in ast.walk(getter):
                if isinstance(n, ast.expr):
                    ast.copy_location(n, e)
            anno(getter)["call"] = CallInfo("user", fget)
            return getter
        norm.error(
            e,
            f"the property {where} runs code s2sad cannot read",
            "compute the value in the function from the object's fields",
        )
        return None
    if isinstance(desc, functools.cached_property):
        norm.error(
            e,
            f"the cached property {where} holds a value computed at its first read",
            "make it a plain @property (s2sad then differentiates its getter), "
            "or compute the value in the function",
        )
        return None
    if hasattr(type(desc), "__get__"):
        norm.error(
            e,
            f"the attribute {where} is a descriptor ({type(desc).__name__}) that "
            "computes its value when read",
            "compute the value in the function from the object's fields",
        )
    return None


#: attributes of an array that view its data in a form no rule differentiates
ARRAY_VIEWS = frozenset({"flat", "base", "data", "ctypes", "__array_interface__"})


def array_view_read(v: ast.Attribute, examples: dict) -> bool:
    """Whether ``x.attr``, read of a differentiated ``x`` as a pytree field
    (no attribute rule), is rather one of an array's views of its data
    (``x.flat``: its cotangent would be a field's, a dict, where an array's
    is due).  A pytree argument holding a field of that name is no such read."""
    if v.attr not in ARRAY_VIEWS or not isinstance(v.value, ast.Name):
        return False
    obj = examples.get(v.value.id, MISSING)
    if obj is not MISSING and not hasattr(type(obj), "__array__"):
        return not hasattr(obj, v.attr)
    return True


def array_view_problem(v: ast.Attribute) -> tuple[str, str]:
    """The refusal of :func:`array_view_read`: what and the hint."""
    what = (
        f"'{ast.unparse(v)}' reads a differentiated array through its "
        f"'.{v.attr}' attribute, which s2sad does not differentiate"
    )
    return what, "index or reshape the array itself (x.ravel()[k] for x.flat[k])"


def derived_field_read(v: ast.Attribute, examples: dict) -> bool:
    """Whether ``x.attr`` of a differentiated dataclass ``x`` reads a float field
    with ``init=False`` (set in ``__post_init__``, from the init fields as a
    rule): no pytree child, so its cotangent and tangent would be dropped and
    the fields it is computed from would miss their share, silently."""
    if not isinstance(v.value, ast.Name):
        return False
    obj = examples.get(v.value.id, MISSING)
    if obj is MISSING or isinstance(obj, type) or not dataclasses.is_dataclass(obj):
        return False
    return any(
        f.name == v.attr and not f.init and _holds_floats(getattr(obj, f.name, None))
        for f in dataclasses.fields(obj)
    )


def _holds_floats(x: Any) -> bool:
    """A float, a float array, or a container holding one."""
    if isinstance(x, dict):
        return any(map(_holds_floats, x.values()))
    if isinstance(x, (list, tuple)):
        return any(map(_holds_floats, x))
    return isinstance(x, float) or getattr(getattr(x, "dtype", None), "kind", "") in (
        "f",
        "c",
    )


def derived_field_problem(v: ast.Attribute) -> tuple[str, str]:
    """The refusal of :func:`derived_field_read`: what and the hint."""
    what = (
        f"'{ast.unparse(v)}' reads a field with init=False of a differentiated "
        "dataclass: not one of its leaves, so s2sad cannot tell how it depends on "
        "the others (set in __post_init__)"
    )
    hint = (
        "make it a @property computed from the init fields (s2sad differentiates "
        "its getter), or an init field of its own"
    )
    return what, hint
