"""s2sad fuzzer reproduction: class 'crash', second order (TypeError).

Found by an ad hoc second-order sweep over ``s2sad.fuzz`` programs (seed 6001,
program 81, all new forms on); reduced by hand.  With the branch not taken the
tuple's cotangent starts at its unpacking (``add_at_index`` into None), and the
derivative of the gradient left its tangent None: ``t_g_t3[0]`` failed.
Fixed: runtime/indexing.py's jvp_add_at_index_acc.  The test is
tests/test_integration_merge.py::test_second_order_of_a_tuple_cotangent_started_by_an_unpacking.
"""

import numpy as np


def target(x, s):
    v1 = np.tanh(x)
    t3 = (s**2, v1 * 2.0)
    v4, v5 = t3
    v7 = x[0]
    if np.sum(x) < -10.0:
        v7 = t3[0] * v4
    return v7 + np.sum(v5)


ARGS = [np.array([0.1, 0.2, 0.3]), 0.4]

if __name__ == "__main__":
    import importlib
    import os
    import sys

    import s2sad

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    mod = importlib.import_module(os.path.splitext(os.path.basename(__file__))[0])
    s2sad.check_grads(mod.target, ARGS, order=2)
    print("second order ok")
