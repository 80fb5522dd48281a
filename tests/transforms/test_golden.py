"""Golden files: the emitted module for a handful of functions, byte for byte.

The emitted code is part of the product; a change to it shows up here as a diff
to review.  Regenerate on purpose with:

    S2SAD_UPDATE_GOLDEN=1 python -m pytest tests/transforms/test_golden.py
"""

import os
from pathlib import Path

import pytest

from s2sad import pipeline
from tests.corpus import cases_basic, cases_calls, cases_combo, cases_data, cases_loops

GOLDEN = Path(__file__).parent / "golden"

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


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_emitted_module_matches_golden_file(name):
    fn, argnums = FUNCTIONS[name]
    source, _ = pipeline.compile_function(fn, argnums)
    path = GOLDEN / f"{name}.py"
    if os.environ.get("S2SAD_UPDATE_GOLDEN"):
        path.write_text(source)
    assert path.exists(), f"no golden file {path}; run with S2SAD_UPDATE_GOLDEN=1"
    assert (
        source == path.read_text()
    ), f"{name}: emitted code changed; review and regenerate"
