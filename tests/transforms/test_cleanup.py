"""cleanup: drop what nothing reads (reverse: save/restore pairs; forward: tangents)."""

import numpy as np

from s2sad.options import Options
from tests.transforms.dumps import after, code


def doubling_loop(x):
    y = x
    for i in range(3):
        y = y * 2.0
    return np.sum(y)


def test_reverse_cleanup_removes_saves_that_the_backward_sweep_never_reads():
    # after reverse: y_old/i_old and the tape traffic of mul are there too
    # (test_reverse.py); only y, read by the backward rule of y * 2.0, stays
    assert after("cleanup", doubling_loop) == code("""
        # doubling_loop_value_and_grad
        y = x
        r = range(3)
        for i in r:
            mul = y * 2.0
            tape.append(y)
            y = mul
        out = np.sum(y)
        # ---- backward sweep ----
        # grad of: return np.sum(y)
        g_y = d_sum(g_out, out, y)[0]
        g_mul = None
        for i in reversed(r):
            # grad of: y = y * 2.0
            g_mul = g_y
            g_y = None
            y = tape.pop()
            g_y = unbroadcast(g_mul * 2.0, y)
            g_mul = None
        # grad of: y = x
        g_x = g_y
    """)


def test_reverse_cleanup_keeps_everything_without_optimize():
    unoptimized = Options(optimize=False)
    assert after("cleanup", doubling_loop, options=unoptimized) == after(
        "reverse", doubling_loop, options=unoptimized
    )
    assert "tape.append(mul)" in after("cleanup", doubling_loop, options=unoptimized)


def test_forward_cleanup_drops_an_unread_tangent_initialisation():
    before = after("forward", doubling_loop, mode="forward")
    assert "t_mul = None\n" in before
    assert after("cleanup", doubling_loop, mode="forward") == code("""
        # doubling_loop_jvp
        # tangent of: y = x
        y = x
        t_y = t_x
        r = range(3)
        for i in r:
            # tangent of: y = y * 2.0
            mul = y * 2.0
            t_mul = t_y * 2.0
            y = mul
            t_y = t_mul
        # tangent of: return np.sum(y)
        out = np.sum(y)
        t_out = np.sum(t_y)
        return (out, finish(t_out, out))
    """)
