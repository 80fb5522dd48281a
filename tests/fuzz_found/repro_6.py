"""s2sad fuzzer reproduction: class 'crash', second order (UnboundLocalError).

Found by an ad hoc second-order sweep over ``s2sad.fuzz`` programs (seed 6000,
program 42, all new forms on); reduced by hand.  The derivative of the emitted
gradient named a local ``rec0_forward_1`` (the result of ``rec0_forward(...)``),
the name of the other specialisation, which the entry function's guard reads.
Fixed: front/prepare.py reserves the module's function names.  The test is
tests/test_integration_merge.py::test_second_order_of_a_recursive_callee_with_two_specialisations.
"""

import math

import numpy as np


def rec0(a, depth):
    if depth <= 0:
        return np.tanh(a)
    return np.tanh(rec0((np.linspace(-0.61, -1.29, 4) * np.mean(a))[0], depth - 1)) * 0.5 + math.tanh(a)


def target(x):
    return rec0(np.mean(x), 1)


ARGS = [np.array([0.1, 0.2, 0.3])]

if __name__ == "__main__":
    import importlib
    import os
    import sys

    import s2sad

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    mod = importlib.import_module(os.path.splitext(os.path.basename(__file__))[0])
    s2sad.check_grads(mod.target, ARGS, order=2)
    print("second order ok")
