"""s2sad fuzzer reproduction: class 'crash', phase 'plain', UnboundLocalError.

Found by ``python -m s2sad.fuzz`` (seed 9200, program 77), then shrunk.  The
method's early ``return`` skipped the hoisted loop, and its forward function
built the residual tuple with ``xs5_at_Wr6`` unbound.  Fixed in
transforms/reverse/assembly.py (``_pair``: names bound only inside an ``if`` or
a loop are set to None first).  The test is tests/test_early_return_residuals.py.

    UnboundLocalError: cannot access local variable 'xs5_at_Wr6' where it is not associated with a value
"""

import math
import numpy as np

class Model:

    def __init__(self, scale, bias):
        self.bias = bias

    def m0(self, a, b, e):
        pass

    def m1(self, k, a, b, e, c=0.93):
        i = 0
        if i == 0:
            return np.where(np.linspace(-0.87, -0.43, 3) * np.mean(a) > self.bias, np.linspace(0.02, 1.08, 3) * np.mean(c), self.bias)
        xs5 = (np.stack([a, a, a], axis=1) * 1.0).reshape(1, 4, 3)
        for t in range(4):
            h8 = np.tanh(xs5[:, t, :] @ Wr6 + h8 @ Ur7)
        v9 = h8[0] * 1.0
        return np.dot(MODEL.m0(v9, a, np.linspace(0.38, 0.87, 12).reshape(4, 3) * np.mean(v9)), np.log(np.linspace(-0.35, 1.12, 12).reshape(4, 3) * np.mean(c) * (np.linspace(-0.35, 1.12, 12).reshape(4, 3) * np.mean(c)) + 1.0))
MODEL = Model(1.13, -0.59)

def target(x, w):
    w = np.tanh(np.outer(MODEL.m1(1.37, np.linspace(0.83, -0.05, 4) * np.mean(w), w, np.mean(x), c=-0.6), np.log(np.linspace(-1.22, -0.55, 4) * np.mean(w) * (np.linspace(-1.22, -0.55, 4) * np.mean(w)) + 1.0)))
    return np.tanh(np.mean(w))


ARGS = [np.array([-0.009059683819423014, 0.5859965223076111, -0.9314625981171879]), np.array([[-0.7821062983070195, 0.7703637857943706, -0.7399507779043638, -0.642858968672298], [0.7445901490290019, 0.053129233839410706, -0.14530011813490207, -0.9552397728304161], [-0.3141410406208579, -0.6445994439341601, -1.1875781667650263, -0.6064712233883544]])]
BUFFERED = False  # force the workspace (buffers) as the fuzzer did


if __name__ == "__main__":
    import importlib
    import os
    import sys

    import s2sad
    from s2sad.runtime import workspace

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)  # s2sad reads the function from a real module file
    mod = importlib.import_module(os.path.splitext(os.path.basename(__file__))[0])
    if BUFFERED:
        workspace.SMALL_BYTES = workspace.SPEED_BYTES = 0
    fresh = lambda: [np.array(a) if isinstance(a, np.ndarray) else a for a in ARGS]
    print("plain value:", mod.target(*fresh()))
    dfn = s2sad.value_and_grad(mod.target, argnums=tuple(range(len(ARGS))))
    for call in range(3 if BUFFERED else 1):
        print("s2sad call", call + 1, dfn(*fresh()))
    fd = []
    for k, a in enumerate(ARGS):
        flat = np.array(a, dtype=float).ravel()
        g = np.zeros_like(flat)
        for i in range(flat.size):
            vals = []
            for h in (1e-6, -1e-6):
                b = flat.copy()
                b[i] += h
                args = fresh()
                args[k] = float(b[0]) if isinstance(a, float) else b.reshape(np.shape(a))
                vals.append(mod.target(*args))
            g[i] = (vals[0] - vals[1]) / 2e-6
        fd.append(float(g[0]) if isinstance(a, float) else g.reshape(np.shape(a)))
    print("finite differences", tuple(fd))
