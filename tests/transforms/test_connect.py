"""connect (module pass, reverse mode): when a callee takes a workspace ``ws``,
the top-level function takes one too and hands it on at every call."""

import numpy as np

from tests.transforms.dumps import after, code


def cell(x):
    return np.sin(x) * x


def calls_cell(x):
    return np.sum(cell(x))


def top_function(text: str) -> str:
    return text.split("\n\n")[0].removeprefix("# calls_cell_value_and_grad\n") + "\n"


def test_before_connect_only_the_callees_take_a_workspace():
    text = after("buffers", calls_cell)
    assert "def calls_cell_value_and_grad(x, g_out=1.0):\n" in text
    assert "def cell_forward(x, ws=NO_WORKSPACE):\n" in text
    assert "def cell_backward(g_out, saved, ws=NO_WORKSPACE):\n" in text


def test_connect_hands_the_workspace_to_the_callees():
    assert top_function(after("connect", calls_cell)) == code("""
        def calls_cell_value_and_grad(x, g_out=1.0, ws=NO_WORKSPACE):
            cell_1, saved_cell = cell_forward(x, ws=ws)
            out = np.sum(cell_1)
            # grad of: return np.sum(cell(x))
            g_cell_1 = d_sum(g_out, out, cell_1)[0]
            g_x, = cell_backward(g_cell_1, saved_cell, ws=ws)
            return (out, (finalize(g_x, x),))
    """)
