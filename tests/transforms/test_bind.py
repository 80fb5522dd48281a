"""bind (front/prepare.py): every global a function reads gets a module-level binding."""

import numpy as np

from s2sad import pipeline
from tests.transforms.dumps import after, code

SCALE = 1.5
tape = 3.0  # clashes with the name reverse-mode code uses for its tape


def reads_globals(x):
    return np.sum(x * SCALE)


def reads_a_clashing_global(x):
    return np.sum(x * tape)


def test_bind_keeps_a_free_global_name():
    assert after("bind", reads_globals) == code("""
        # reads_globals_value_and_grad
        def reads_globals(x):
            mul = x * SCALE
            out = np.sum(mul)
            return out
    """)
    _, bindings = pipeline.compile_function(reads_globals, (0,))
    assert bindings == {"SCALE": 1.5, "np": np}


def test_bind_renames_a_global_that_clashes_with_a_generated_name():
    assert after("bind", reads_a_clashing_global) == code("""
        # reads_a_clashing_global_value_and_grad
        def reads_a_clashing_global(x):
            mul = x * tape_1
            out = np.sum(mul)
            return out
    """)
    _, bindings = pipeline.compile_function(reads_a_clashing_global, (0,))
    assert bindings["tape_1"] == 3.0 and "tape" not in bindings
