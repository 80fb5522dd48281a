"""s2sad fuzzer reproduction: class 'unrefused', phase 'compile'.

Found by ``python -m s2sad.fuzz`` (seed 11, program 55); reduced by hand.
README promises that an in-place change of an argument is refused; here it compiles.
"""

import numpy as np


def target(x, w):
    x += 0.5
    return np.sum(w * w)


ARGS = [np.array([0.1, 0.2, 0.3]), np.array([0.5, -0.4])]

if __name__ == "__main__":
    import importlib
    import os
    import sys

    import s2sad

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    mod = importlib.import_module(os.path.splitext(os.path.basename(__file__))[0])
    print(s2sad.value_and_grad(mod.target, argnums=(0, 1))(*ARGS), "(expected an s2sad.errors refusal)")
