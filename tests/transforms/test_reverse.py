"""reverse: the forward sweep with its saves, and the backward sweep."""

import numpy as np

from tests.transforms.dumps import after, code


def straight(x, W):
    h = np.tanh(W @ x)
    return np.sum(h)


def doubling_loop(x):
    y = x
    for i in range(3):
        y = y * 2.0
    return np.sum(y)


def test_reverse_straight_line_code_reads_its_values_back_in_reverse_order():
    assert after("reverse", straight) == code("""
        # straight_value_and_grad
        matmul = W @ x
        h = np.tanh(matmul)
        out = np.sum(h)
        # ---- backward sweep ----
        # grad of: return np.sum(h)
        g_h = d_sum(g_out, out, h)[0]
        # grad of: h = np.tanh(W @ x)
        g_matmul = tanh_grad(g_h, h)
        g_x = d_matmul_rhs(g_matmul, matmul, W, x)[0]
    """)


def test_reverse_loop_pushes_overwritten_values_and_pops_them_backwards():
    # every re-assigned name is saved before it is overwritten (cleanup drops
    # the saves nobody reads); the backward loop runs over reversed(r)
    assert after("reverse", doubling_loop) == code("""
        # doubling_loop_value_and_grad
        y_old = y
        y = x
        r = range(3)
        i_old = i
        for i in r:
            tape.append(mul)
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
            mul = tape.pop()
        i = i_old
        # grad of: y = x
        g_x = g_y
        g_y = None
        y = y_old
    """)
