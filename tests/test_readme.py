"""The README's claims that can drift: the rule count and the test command."""

import re
from pathlib import Path

from s2sad import docs

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_rule_count_matches_registry():
    m = re.search(r"^(\d+) NumPy and Python functions have adjoint rules", README, re.M)
    assert m, "README must state the rule count"
    assert int(m.group(1)) == docs.count_entry_points()


def test_ci_runs_the_readme_test_command():
    quick = README.split("## Quickstart", 1)[1].split("```", 2)[1].strip().splitlines()
    commands = [c for c in quick if c.strip()]
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = commands[1].strip()
    assert (
        test_command in ci.splitlines()
    ), ".ci/run must run the README's test command verbatim"


def test_readme_golden_excerpt_is_current():
    golden = (ROOT / "tests/transforms/golden/rnn_loop.py").read_text()
    block = README.split("verbatim from `tests/transforms/golden/rnn_loop.py`", 1)[1]
    code = block.split("```python", 1)[1].split("```", 1)[0]
    for line in code.strip().splitlines():
        if line.strip() != "...":
            assert line in golden, line


def test_readme_corpus_size_is_current():
    from tests.corpus.test_corpus import CASES

    m = re.search(r"has (\d+) small functions", README)
    assert m and int(m.group(1)) == len(CASES)
