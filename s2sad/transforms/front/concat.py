"""``args + (ones,)``: tuples and lists concatenated with ``+``, spelled out.

autograd's ``examples/rnn.py`` and ``lstm.py`` append a column of ones to the
arrays a callee gets as ``*args``::

    def concat_and_multiply(weights, *args):
        cat_state = np.hstack(args + (np.ones((args[0].shape[0], 1)),))

The generic ``+`` adjoint takes ``a + b`` for arrays (its cotangent is summed
back to each operand's shape), so the gradient of a concatenation of
sequences was refused when it ran.  Runs in validate, on the user's tree,
before the parameters are flattened (``*args`` is still known).  A chain
``a + b + ...`` whose operands are all tuples, or all lists, that the code
surely holds (displays; locals assigned once from a display and never changed
otherwise, as front/starred.py reads them; the ``*args`` parameter, never
rebound) becomes one display::

    t + (c,)        ->  (*t, c)      front/starred.py then writes (t[0], t[1], c)
    [a] + [b, c]    ->  [a, b, c]

and a chain holding ``*args``, whose length only the call tells, becomes a
comprehension (a loop that appends, after front/comprehensions.py), which
gives each item its own cotangent::

    args + (ones,)  ->  tuple([v for part in (args, (ones,)) for v in part])

Python evaluates the operands in the same order either way.  Anything else
(an operand that may be an array, a list added to a tuple, which Python
refuses) is left as written.
"""

from __future__ import annotations

import ast

from s2sad.transforms.astutil import call, copy_loc, name
from s2sad.transforms.front.starred import _own_nodes, _static_lengths


def run(node: ast.FunctionDef) -> None:
    """Rewrite ``node`` in place (its ``args.vararg`` not yet flattened)."""
    if not any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) for n in _own_nodes(node)
    ):
        return
    params = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
    stored = {
        n.id
        for n in _own_nodes(node)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    kinds: dict[str, type] = {}
    lengths = _static_lengths(node, params)
    for n in _own_nodes(node):
        if (
            isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
            and n.targets[0].id in lengths
        ):
            kind = (
                type(n.value)
                if isinstance(n.value, (ast.Tuple, ast.List))
                else ast.List
            )
            kinds[n.targets[0].id] = kind  # np.split(...) gives a list
    vararg = node.args.vararg.arg if node.args.vararg is not None else None
    if vararg in stored:
        vararg = None
    rewriter = _Rewriter(kinds, vararg)
    rewriter.shadowed = "tuple" in stored or "tuple" in params
    rewriter.visit_body(node)


#: the comprehension's own names (front/comprehensions.py gives them fresh ones)
_PART, _ITEM = "concat_part", "concat_item"


class _Rewriter(ast.NodeTransformer):
    def __init__(self, kinds: dict[str, type], vararg: str | None):
        self.kinds, self.vararg = kinds, vararg
        self.lazy = 0  # inside a branch Python may not evaluate: no comprehension

    def visit_body(self, node: ast.FunctionDef) -> None:
        node.body = [self.visit(s) for s in node.body]

    def visit_FunctionDef(self, node):  # another scope: its own names
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def visit_IfExp(self, node: ast.IfExp):
        node.test = self.visit(node.test)
        self.lazy += 1
        node.body, node.orelse = self.visit(node.body), self.visit(node.orelse)
        self.lazy -= 1
        return node

    def visit_BoolOp(self, node: ast.BoolOp):
        first = self.visit(node.values[0])
        self.lazy += 1
        rest = [self.visit(v) for v in node.values[1:]]
        self.lazy -= 1
        node.values = [first, *rest]
        return node

    def kind(self, e: ast.expr) -> type | None:
        if isinstance(e, (ast.Tuple, ast.List)) and isinstance(e.ctx, ast.Load):
            return type(e)
        if isinstance(e, ast.Name) and e.id == self.vararg:
            return ast.Tuple
        if isinstance(e, ast.Name):
            return self.kinds.get(e.id)
        return None

    def visit_BinOp(self, node: ast.BinOp):
        if not isinstance(node.op, ast.Add):
            return self.generic_visit(node)
        chain, e = [], node  # a + b + c: BinOp(BinOp(a, b), c), outermost first
        while isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            chain.append(e)
            e = e.left
        chain[-1].left = self.visit(e)
        for link in reversed(chain):
            link.right = self.visit(link.right)
        operands = [chain[-1].left] + [link.right for link in reversed(chain)]
        kinds = {self.kind(o) for o in operands}
        if len(kinds) != 1 or None in kinds:
            return node
        kind = kinds.pop()
        if not any(isinstance(o, ast.Name) and o.id == self.vararg for o in operands):
            items: list[ast.expr] = []
            for o in operands:
                if isinstance(o, ast.Name):
                    items.append(copy_loc(ast.Starred(value=o, ctx=ast.Load()), o))
                else:
                    items += o.elts
            return copy_loc(kind(elts=items, ctx=ast.Load()), node)
        if self.lazy or self.shadowed:
            return node
        comp = ast.ListComp(
            elt=name(_ITEM),
            generators=[
                ast.comprehension(
                    target=name(_PART, store=True),
                    iter=ast.Tuple(elts=operands, ctx=ast.Load()),
                    ifs=[],
                    is_async=0,
                ),
                ast.comprehension(
                    target=name(_ITEM, store=True),
                    iter=name(_PART),
                    ifs=[],
                    is_async=0,
                ),
            ],
        )
        out = call("tuple", comp)
        for n in ast.walk(out):
            if not hasattr(n, "lineno") or n is comp or n is out:
                copy_loc(n, node)
        return out
