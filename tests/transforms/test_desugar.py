"""desugar: early exits, break and continue become flags (one final return)."""

import ast

import numpy as np

from s2sad.transforms.front import desugar
from tests.transforms.dumps import after, code, expect, from_string, namer_for


def run_desugar(src: str) -> str:
    p = from_string(src)
    return ast.unparse(desugar.run(p.node, namer_for(p)))


def early_exit(x):
    if np.sum(x) > 1.0:
        return x * 2.0
    return x


def test_desugar_early_return_in_loop():
    expect(
        run_desugar("""
        def f(x):
            for i in range(5):
                if x > 10:
                    return x
                x = x * 2
            return x
    """),
        """
        def f(x):
            result = None
            returned = False
            for i in range(5):
                if x > 10:
                    result = x
                    returned = True
                if not returned:
                    x = x * 2
                if returned:
                    break
            if not returned:
                result = x
            return result
    """,
    )


def test_desugar_break_and_continue_flags():
    expect(
        run_desugar("""
        def f(x):
            while x < 10:
                if x == 3:
                    continue
                if x == 5:
                    break
                x = x + 1
            return x
    """),
        """
        def f(x):
            stop = False
            while x < 10:
                skip = False
                if x == 3:
                    skip = True
                if not skip:
                    if x == 5:
                        stop = True
                    if not stop:
                        x = x + 1
                if stop:
                    break
            return x
    """,
    )


def test_desugar_leaves_a_single_final_return_alone():
    expect(
        run_desugar("""
        def f(x):
            y = x * 2
            return y
    """),
        """
        def f(x):
            y = x * 2
            return y
    """,
    )


def test_desugar_in_the_pipeline_keeps_one_return_at_the_end():
    assert after("desugar", early_exit) == code("""
        # early_exit_value_and_grad
        def early_exit(x):
            result = None
            returned = False
            if np.sum(x) > 1.0:
                result = x * 2.0
                returned = True
            if not returned:
                result = x
            return result
    """)
