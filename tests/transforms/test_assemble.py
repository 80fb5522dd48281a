"""assemble: the functions a job emits (reverse: value_and_grad, or a
forward/backward pair for a called user function; forward: ``<f>_jvp``)."""

import numpy as np

from tests.transforms.dumps import after, code


def cell(x):
    return np.sin(x) * x


def calls_cell(x):
    return np.sum(cell(x))


def test_reverse_assemble_makes_value_and_grad_and_a_pair_per_callee():
    assert after("assemble", calls_cell) == code("""
        # calls_cell_value_and_grad
        def calls_cell_value_and_grad(x, g_out=1.0):
            cell_1, saved_cell = cell_forward(x)
            out = np.sum(cell_1)
            # grad of: return np.sum(cell(x))
            g_cell_1 = d_sum(g_out, out, cell_1)[0]
            g_x, = cell_backward(g_cell_1, saved_cell)
            return (out, (finalize(g_x, x),))

        # cell_forward, cell_backward
        def cell_forward(x):
            sin = np.sin(x)
            out = sin * x
            return (out, (sin, x))

        def cell_backward(g_out, saved):
            sin, x = saved
            # grad of: return np.sin(x) * x
            g_sin = unbroadcast(g_out * x, sin)
            g_x = unbroadcast(g_out * sin, x)
            g_x = accumulate(g_x, sin_grad(g_sin, x))
            return (g_x,)
    """)


def test_forward_assemble_appends_one_tangent_parameter_per_input():
    text = after("assemble", calls_cell, mode="forward")
    assert text.startswith("# calls_cell_jvp\ndef calls_cell_jvp(x, t_x):\n")
    assert "# cell_jvp\ndef cell_jvp(x, t_x):\n" in text
