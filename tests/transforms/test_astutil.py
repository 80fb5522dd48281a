"""``astutil.walk``: ``ast.walk``'s nodes in ``ast.walk``'s order, faster.

The passes' results (and so the emitted code, byte for byte) depend on the
order they meet nodes in: the first use of a name, fresh names, which of two
candidates wins.  ``walk`` must give exactly what ``ast.walk`` gives, on any
tree, also when the caller rewrites a node's fields after it was yielded.
"""

from __future__ import annotations

import ast
import inspect

import gast
import pytest

from s2sad import pipeline
from s2sad.transforms import astutil
from s2sad.transforms.astutil import walk

SOURCES = [
    "x",
    "def f(x, *a, k=1, **kw):\n    return [y * 2 for y in x if y] + {**kw}.get('a', a)",
    (
        "class C(B, metaclass=M):\n    @d\n    def g(self, /, q: int = 3) -> None:\n"
        "        try:\n            del q[1:2, ...]\n        except (E, F) as e:\n"
        "            raise X from e\n        finally:\n            pass\n"
    ),
    (
        "match p:\n    case [1, *rest] if rest:\n        y = lambda z=1: z\n"
        "    case {'k': v, **kw}:\n        y = f'{v!r:>{w}}'\n"
    ),
    (
        "async def h():\n    async with a as (b, c):\n        await d\n"
        "    async for i in e:\n        yield i\n"
    ),
]


def _ids(nodes):
    return [(type(n).__name__, id(n)) for n in nodes]


@pytest.mark.parametrize("src", SOURCES)
def test_walk_gives_ast_walks_nodes_in_its_order(src):
    tree = ast.parse(src)
    assert _ids(walk(tree)) == _ids(ast.walk(tree))
    sub = tree.body[0]
    assert _ids(walk(sub)) == _ids(ast.walk(sub))


def test_walk_on_s2sads_own_passes_and_gast_trees():
    for module in (pipeline, astutil):
        tree = ast.parse(inspect.getsource(module))
        assert _ids(walk(tree)) == _ids(ast.walk(tree))
        gtree = gast.parse(inspect.getsource(module))
        assert _ids(walk(gtree)) == _ids(gast.walk(gtree))


def test_walk_queues_children_before_it_yields_a_node():
    """A field replaced after its node was yielded: the old children are still
    walked, the new ones are not (as with ``ast.walk``)."""

    def rewritten(walker):
        tree = ast.parse("a = f(b) + g(c)\nd = h(e)")
        seen = []
        for n in walker(tree):
            seen.append(n.id if isinstance(n, ast.Name) else type(n).__name__)
            if isinstance(n, ast.BinOp):
                n.right = ast.Name("new", ast.Load())
        return seen

    assert rewritten(walk) == rewritten(ast.walk)
    assert "new" not in rewritten(walk) and "c" in rewritten(walk)


def test_walk_skips_missing_fields_and_non_nodes():
    node = ast.Call(func=ast.Name("f", ast.Load()), args=[ast.Constant(1), "junk"])
    assert not hasattr(node, "keywords")  # never set: ast.walk skips it too
    assert _ids(walk(node)) == _ids(ast.walk(node))
    assert [type(n).__name__ for n in walk(node)] == [
        "Call",
        "Name",
        "Constant",
        "Load",
    ]


# ---------------------------------------------------------------- Namer.fresh


def _fresh_as_written(used: set, base: str) -> str:
    """What ``Namer.fresh`` gives: the first of base, base_1, base_2, ... unused."""
    candidate, i = base, 1
    while candidate in used:
        candidate, i = f"{base}_{i}", i + 1
    used.add(candidate)
    return candidate


def test_fresh_gives_the_first_unused_name_as_the_names_fill_up():
    namer = astutil.Namer({"h", "h_2", "np"})
    used = set(namer.used)
    script = ["h", "h", "x", "h", "h_1", "h", "x"] + ["tanh"] * 30 + ["h"]
    reserved_between = {5: ["h_4", "h_5"], 9: ["tanh_3", "x_1"], 20: ["tanh_25"]}
    for step, base in enumerate(script):
        for r in reserved_between.get(step, []):
            namer.reserve(r)
            used.add(r)
        assert namer.fresh(base) == _fresh_as_written(used, base)
    assert namer.used == used


def test_fresh_starts_over_when_a_snapshot_of_the_names_is_restored():
    namer = astutil.Namer()
    saved = set(namer.used)
    assert [namer.fresh("a") for _ in range(3)] == ["a", "a_1", "a_2"]
    namer.used = set(saved)  # module.restore: the dry run's names are free again
    assert [namer.fresh("a") for _ in range(2)] == ["a", "a_1"]
    namer.used = {"a", "a_1", "a_2", "a_3"}
    assert namer.fresh("a") == "a_4"


def test_fresh_mends_bases_that_are_no_identifiers():
    namer = astutil.Namer({"t1x"})
    assert namer.fresh("1x") == "t1x_1"
    assert namer.fresh("a.b-c") == "a_b_c"
    assert namer.fresh("") == "t"
