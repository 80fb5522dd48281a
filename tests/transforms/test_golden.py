"""Golden files: the emitted module for a handful of functions, byte for byte.

Reverse mode (``<f>_value_and_grad``) in golden/<name>.py, forward mode
(``<f>_jvp``) in golden/forward/<name>.py.  The emitted code is part of the
product; a change to it shows up here as a diff to review.  Regenerate on
purpose (both modes) with:

    S2SAD_UPDATE_GOLDEN=1 python -m pytest tests/transforms/test_golden.py
"""

import os
from pathlib import Path

import pytest

from s2sad import pipeline
from tests.corpus import cases_basic, cases_calls, cases_combo, cases_data, cases_loops

GOLDEN = Path(__file__).parent / "golden"
FORWARD_GOLDEN = GOLDEN / "forward"
UPDATE = bool(os.environ.get("S2SAD_UPDATE_GOLDEN"))

FUNCTIONS = {
    "straight_line": (cases_basic.matmul_op, (0,)),
    "branches": (cases_basic.if_elif_else, (0,)),
    "early_return": (cases_basic.early_return_top, (0,)),
    "rnn_loop": (cases_loops.rnn_loop, (0, 1, 2)),
    "while_break_continue": (cases_loops.while_break_continue, (0,)),
    "item_assignment_in_loop": (cases_loops.loop_item_assign, (0,)),
    "list_append": (cases_loops.loop_list_append, (0,)),
    "user_calls_and_recursion": (cases_calls.recursion, (0,)),
    "closure": (cases_calls.closure_reads_local, (0,)),
    "dict_params": (cases_data.dict_params, (0,)),
    "cell_function_in_loop": (cases_combo.rnn_with_cell_fn, (0, 1, 2)),
}

#: forward mode: a few of the same functions (straight line, branches, loops, calls)
FORWARD = [
    "straight_line",
    "branches",
    "rnn_loop",
    "while_break_continue",
    "list_append",
    "user_calls_and_recursion",
]


def check_golden(path: Path, source: str, name: str) -> None:
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(source)
    assert path.exists(), f"no golden file {path}; run with S2SAD_UPDATE_GOLDEN=1"
    assert (
        source == path.read_text()
    ), f"{name}: emitted code changed; review and regenerate with S2SAD_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_emitted_module_matches_golden_file(name):
    fn, argnums = FUNCTIONS[name]
    source, _ = pipeline.compile_function(fn, argnums)
    check_golden(GOLDEN / f"{name}.py", source, name)


@pytest.mark.parametrize("name", FORWARD)
def test_forward_mode_module_matches_golden_file(name):
    fn, argnums = FUNCTIONS[name]
    source, _ = pipeline.compile_function(fn, argnums, mode="forward")
    check_golden(FORWARD_GOLDEN / f"{name}.py", source, f"forward/{name}")


def test_every_golden_file_belongs_to_a_case():
    stale = sorted(
        {p.relative_to(GOLDEN).as_posix() for p in GOLDEN.rglob("*.py")}
        - {f"{n}.py" for n in FUNCTIONS}
        - {f"forward/{n}.py" for n in FORWARD}
    )
    assert not stale, f"golden files without a case (delete them): {stale}"
