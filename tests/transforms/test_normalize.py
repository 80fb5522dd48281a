"""normalize: one operation per statement, fresh names for re-assignments."""

import ast

import numpy as np

from s2sad.transforms.front import desugar, normalize
from tests.transforms.dumps import after, code, expect, from_string, namer_for


def run_normalize(src: str) -> str:
    p = from_string(src)
    namer = namer_for(p)
    desugar.run(p.node, namer)
    node, _ = normalize.run(p, namer)
    return ast.unparse(node)


def nested_calls(x, W):
    h = np.tanh(W @ x + 1.0)
    return np.sum(h * h)


def test_normalize_flattens_and_renames():
    expect(
        run_normalize("""
        def f(x, W):
            h = np.tanh(W @ x + 1.0)
            h = h * 2
            return np.sum(h)
    """),
        """
        def f(x, W):
            matmul = W @ x
            add = matmul + 1.0
            h = np.tanh(add)
            h_1 = h * 2
            out = np.sum(h_1)
            return out
    """,
    )


def test_normalize_loop_over_rows_and_augassign():
    expect(
        run_normalize("""
        def f(X):
            s = 0.0
            for row in X:
                s += row
            return s
    """),
        """
        def f(X):
            s = 0.0
            check_positional(X, '<test>', 4, 16)
            len_1 = len(X)
            r = range(len_1)
            for i in r:
                row = X[i]
                add = s + row
                s = add
            return s
    """,
    )


def test_normalize_loop_over_a_known_list_has_no_check():
    """A local only ever bound to a list display is iterated as it is indexed:
    no run-time check (an argument of unknown type gets one, above)."""
    expect(
        run_normalize("""
        def f(x):
            xs = [x, x]
            s = 0.0
            for v in xs:
                s += v
            return s
    """),
        """
        def f(x):
            xs = [x, x]
            s = 0.0
            len_1 = len(xs)
            r = range(len_1)
            for i in r:
                v = xs[i]
                add = s + v
                s = add
            return s
    """,
    )


def test_normalize_ternary_becomes_branch():
    expect(
        run_normalize("""
        def f(x):
            y = x * 2 if x > 0 else -x
            return y
    """),
        """
        def f(x):
            cond = x > 0
            if cond:
                y = x * 2
            else:
                y = -x
            return y
    """,
    )


def test_normalize_in_the_pipeline_names_each_intermediate():
    assert after("normalize", nested_calls) == code("""
        # nested_calls_value_and_grad
        def nested_calls(x, W):
            matmul = W @ x
            add = matmul + 1.0
            h = np.tanh(add)
            mul = h * h
            out = np.sum(mul)
            return out
    """)


def test_normalize_gives_the_same_code_in_both_modes():
    forward = after("normalize", nested_calls, mode="forward")
    assert forward == after("normalize", nested_calls).replace(
        "_value_and_grad", "_jvp"
    )
