"""docs/rules.md must match the registered rules (rerun `python -m s2sad.docs`)."""

from __future__ import annotations

from s2sad.docs import RULES_MD, count_entry_points, render_rules_table


def test_rules_md_is_current():
    assert (
        RULES_MD.read_text() == render_rules_table()
    ), "docs/rules.md is stale: run `python -m s2sad.docs`"


def test_table_lists_every_family_and_method_forms():
    text = render_rules_table()
    for family in ("elementwise", "reductions", "shapes", "contractions", "indexing"):
        assert f"## {family}" in text
    assert "| `numpy.sum` | `x.sum(...)` |" in text
    assert "| `numpy.tanh` |  | `g * (1.0 - ans * ans)` |" in text
    assert "`x.T`" in text
    assert "zero gradient" in text and "broadcasts" in text


def test_entry_point_count():
    assert count_entry_points() >= 150


def test_method_aliases_of_the_issue_exist():
    from s2sad.runtime import registry

    names = (
        """sum mean max min prod std var cumsum cumprod reshape transpose ravel flatten
    squeeze swapaxes dot clip astype copy trace diagonal repeat take round argmax argmin
    argsort any all nonzero item""".split()
    )
    missing = [n for n in names if registry.lookup_method(n) is None]
    assert not missing
    for n in names:
        assert registry.lookup(registry.lookup_method(n)) is not None, n
