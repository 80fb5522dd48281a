"""The layout rules of s2sad/, checked on the source files with ``ast``.

Each rule is one test whose message lists every offender:

- s2sad.runtime (what generated code imports) imports only the standard
  library, NumPy and s2sad.runtime itself (s2sad.errors is allowed too, though
  no runtime module needs it today): never ``ast``, ``gast``, ``black`` or the
  compiler;
- no pass module under s2sad/transforms/ imports the driver, s2sad.pipeline;
- s2sad's modules do not import each other in a circle;
- no source file under s2sad/ is longer than 500 lines;
- s2sad.api (first-order gradients) does not import s2sad.higher.

Imports are counted wherever they are written: at module level and inside
functions (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "s2sad"
MAX_LINES = 500

RUNTIME_ALLOWED_S2SAD = ("s2sad.runtime", "s2sad.errors")
RUNTIME_FORBIDDEN = ("ast", "gast", "black")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(mod: str) -> bool:
    return MODULES[mod].name == "__init__.py"


def imported_names(mod: str) -> list[tuple[str, int]]:
    """(absolute dotted name, line) for every import in ``mod``, at any depth.

    ``from p import x`` gives ``p.x`` when that is a module of s2sad, else ``p``;
    relative imports are resolved against ``mod``.
    """
    tree = ast.parse(MODULES[mod].read_text(), str(MODULES[mod]))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = mod.split(".") if _is_package(mod) else mod.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join(here + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((sub if sub in MODULES else base, node.lineno))
    return found


def _s2sad_target(name: str) -> str | None:
    """The s2sad module an imported dotted name loads (its longest known prefix)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in MODULES:
            return ".".join(parts[:i])
    return None


def import_graph() -> dict[str, set[str]]:
    """Module -> the s2sad modules it imports by name.

    An import of ``a.b.c`` is an edge to ``a.b.c`` only, not to the packages
    ``a`` and ``a.b`` that Python initialises on the way: otherwise every
    package whose ``__init__`` imports one of its children (``s2sad`` imports
    ``s2sad.runtime.registry``) would form a circle with that child.  An
    explicit ``from a.b import name`` of something defined in ``a/b/__init__.py``
    is an edge to the package and does count.
    """
    graph = {}
    for mod in MODULES:
        targets = {_s2sad_target(n) for n, _ in imported_names(mod)}
        graph[mod] = {t for t in targets if t is not None and t != mod}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (a -> b -> ... -> a) per strongly connected component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(set(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_circle_in(graph, comp) for comp in components]


def _circle_in(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself."""
    start = min(comp)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    return paths[v] + [start]
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no circle in {comp}")


def _where(mod: str, line: int) -> str:
    return f"{MODULES[mod].relative_to(ROOT)}:{line}"


def _runtime_may_import(name: str) -> bool:
    top = name.split(".")[0]
    if top in RUNTIME_FORBIDDEN:
        return False
    if top == "s2sad":
        return any(
            name == ok or name.startswith(ok + ".") for ok in RUNTIME_ALLOWED_S2SAD
        )
    return True


# -- the rules


def test_runtime_imports_no_parser_formatter_or_compiler():
    offenders = []
    for mod in MODULES:
        if not (mod == "s2sad.runtime" or mod.startswith("s2sad.runtime.")):
            continue
        for name, line in imported_names(mod):
            if not _runtime_may_import(name):
                offenders.append(f"{_where(mod, line)} imports {name}")
    assert not offenders, (
        "s2sad.runtime must import only the standard library, NumPy, s2sad.runtime "
        "and s2sad.errors:\n  " + "\n  ".join(offenders)
    )


def test_passes_do_not_import_the_driver():
    offenders = [
        f"{_where(mod, line)} imports {name}"
        for mod in MODULES
        if mod.startswith("s2sad.transforms")
        for name, line in imported_names(mod)
        if _s2sad_target(name) == "s2sad.pipeline"
    ]
    assert not offenders, (
        "passes are called by s2sad.pipeline, never the other way round:\n  "
        + "\n  ".join(offenders)
    )


def test_no_import_cycles_between_s2sad_modules():
    cycles = find_cycles(import_graph())
    assert not cycles, "s2sad modules import each other in a circle:\n  " + "\n  ".join(
        " -> ".join(c) for c in cycles
    )


def test_no_source_file_is_longer_than_500_lines():
    offenders = []
    for path in MODULES.values():
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            offenders.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert (
        not offenders
    ), f"split these files (at most {MAX_LINES} lines):\n  " + "\n  ".join(offenders)


def test_api_does_not_import_higher_order():
    offenders = [
        f"{_where('s2sad.api', line)} imports {name}"
        for name, line in imported_names("s2sad.api")
        if _s2sad_target(name) == "s2sad.higher"
    ]
    assert not offenders, (
        "s2sad.api must not depend on s2sad.higher (higher builds on api):\n  "
        + "\n  ".join(offenders)
    )


# -- the checker itself


def test_cycle_finder_reports_a_circle_and_ignores_a_chain():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_from_package_import_module_points_at_the_module():
    names = {n for n, _ in imported_names("s2sad.pipeline")}
    assert "s2sad.transforms.front.parse" in names
    assert "s2sad.transforms.reverse.assembly" in names
