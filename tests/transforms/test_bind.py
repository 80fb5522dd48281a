"""bind (front/prepare.py): every global a function reads gets a module-level binding."""

import sys

import numpy as np

from s2sad import pipeline
from tests.transforms.dumps import after, code

SCALE = 1.5
tape = 3.0  # clashes with the name reverse-mode code uses for its tape


def reads_globals(x):
    return np.sum(x * SCALE)


def reads_a_clashing_global(x):
    return np.sum(x * tape)


MOD = __name__.rsplit(".", 1)[-1]  # this module, as the emitted code imports it


def test_bind_reads_a_data_global_through_its_module_when_the_code_runs():
    assert after("bind", reads_globals) == code("""
        # reads_globals_value_and_grad
        def reads_globals(x):
            mul = x * MOD.SCALE
            out = np.sum(mul)
            return out
    """).replace("MOD", MOD)
    _, bindings = pipeline.compile_function(reads_globals, (0,))
    assert bindings == {MOD: sys.modules[__name__], "np": np}


def test_bind_reads_a_global_named_like_a_generated_name_through_its_module():
    assert after("bind", reads_a_clashing_global) == code("""
        # reads_a_clashing_global_value_and_grad
        def reads_a_clashing_global(x):
            mul = x * MOD.tape
            out = np.sum(mul)
            return out
    """).replace("MOD", MOD)
