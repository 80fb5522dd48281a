"""Python's operators, one table for every pass.

``x + y`` is differentiated as ``np.add``, named ``add`` when normalize gives
its result a temporary, and rewritten as ``np.add(x, y, out=...)`` by the
buffer passes; all three facts live here.
"""

from __future__ import annotations

import ast

import numpy as np

#: the NumPy function each arithmetic operator stands for (its adjoint and tangent)
BINOPS = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.true_divide,
    ast.Pow: np.power,
    ast.MatMult: np.matmul,
    ast.Mod: np.mod,
}
UNARYOPS = {ast.USub: np.negative, ast.UAdd: np.positive}
COMPARES = {
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}
#: operators the buffer passes rewrite into ``np.<name>(a, b, out=...)``
BUFFERED = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.MatMult)

#: the name a temporary holding the operator's result is given
LABELS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.MatMult: "matmul",
    ast.Pow: "pow",
    ast.Mod: "mod",
    ast.FloorDiv: "floordiv",
    ast.USub: "neg",
    ast.UAdd: "pos",
    ast.Not: "not_",
    ast.Invert: "invert",
    ast.BitAnd: "and_",
    ast.BitOr: "or_",
    ast.BitXor: "xor",
    ast.LShift: "lshift",
    ast.RShift: "rshift",
}


def label(op: ast.AST, default: str = "t") -> str:
    """The temporary's name for an operator node (``ast.Add()`` -> ``"add"``)."""
    return LABELS.get(type(op), default)


def numpy_name(op: ast.AST) -> str:
    """``np.<name>`` of a buffered binary operator or a comparison."""
    fn = BINOPS.get(type(op)) or COMPARES[type(op)]
    return "divide" if fn is np.true_divide else fn.__name__
