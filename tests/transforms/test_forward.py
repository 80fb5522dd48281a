"""forward: each statement followed by the statement computing its tangent
(plus unstar before the front passes, and imports over the module)."""

import numpy as np

from tests.transforms.dumps import after, code


def rebinds(x):
    y = x * 2.0
    y = np.sin(y)
    return np.sum(y)


def unpacks_star(x):
    a, b, *_ = (x, x * 2.0, x * 3.0)
    return np.sum(a * b)


def shadows_finish(x):
    finish = x * 2.0
    return np.sum(finish)


def test_forward_pairs_each_statement_with_its_tangent():
    assert after("forward", rebinds, mode="forward") == code("""
        # rebinds_jvp
        # tangent of: y = x * 2.0
        y = x * 2.0
        t_y = t_x * 2.0
        # tangent of: y = np.sin(y)
        y_1 = np.sin(y)
        t_y_1 = t_y * np.cos(y)
        # tangent of: return np.sum(y)
        out = np.sum(y_1)
        t_out = np.sum(t_y_1)
        return (out, finish(t_out, out))
    """)


def test_unstar_slices_instead_of_a_starred_underscore():
    assert after("unstar", unpacks_star, mode="forward") == code("""
        # unpacks_star_jvp
        def unpacks_star(x):
            a, b = (x, x * 2.0, x * 3.0)[:2]
            return np.sum(a * b)
    """)


def test_a_variable_named_like_a_runtime_helper_is_renamed():
    """front/hygiene.py renames the user's ``finish``: the helper keeps its name."""
    assert after("imports", shadows_finish, mode="forward") == code("""
        def shadows_finish_jvp(x, t_x):
            # tangent of: finish = x * 2.0
            finish_1 = x * 2.0
            t_finish_1 = t_x * 2.0
            # tangent of: return np.sum(finish)
            out = np.sum(finish_1)
            t_out = np.sum(t_finish_1)
            return (out, finish(t_out, out))
    """)
    text = after("emit", shadows_finish, mode="forward")
    assert "from s2sad.runtime.tangents import finish\n" in text
