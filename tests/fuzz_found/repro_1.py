"""s2sad fuzzer reproduction: class 'crash', phase 'plain', UnboundLocalError.

Found by ``python -m s2sad.fuzz`` (seed 10, program 7), then shrunk.
Run: ``python {this file}`` (from a directory where s2sad is importable).

    UnboundLocalError: cannot access local variable 'g_y15' where it is not associated with a value
"""

import numpy as np

class Model:

    def __init__(self, scale, bias):
        self.scale = scale

    def m0(self, k, a, b, e):
        k = k
        return (e + e + e * e, np.tanh(-k))
MODEL = Model(1.77, np.linspace(1.06, -0.9, 3))

def helper0(a, b):
    v11, v12 = MODEL.m0(0.92, -(np.linspace(-0.62, 0.31, 12).reshape(4, 3) * np.mean(a)), np.linspace(-0.8, 0.72, 3) * np.mean(a), np.where(b > b, b, b))
    return v11[:, 0]

def target(x, w, v, s):
    y14 = np.zeros(3)
    s -= s
    if np.sum(s) < 0.38:
        y15 = np.zeros((3, 4))
        y15[2, 2] = s
        y14 = helper0(np.linspace(-1.42, -0.68, 4) * np.mean(y14) / (v * v + 1.0), np.maximum(y15, w))
        y15 = -y15 * (y15 + y15)
    elif np.sum(v - s) < 0.72:
        k16 = 0
        while k16 < 2:
            k16 += 1
            if k16 == 0:
                continue
            v = np.tanh((np.linspace(-0.07, 0.52, 12).reshape(4, 3) * np.mean(w) - np.linspace(-1.09, 0.3, 12).reshape(4, 3) * np.mean(s)) @ (np.linspace(0.47, 0.86, 3) * np.mean(y14)))
            v17 = y14
        k18 = 0
        while k18 < 1:
            k18 += 1
            v19 = v * w
    else:
        v20 = np.tanh(np.linspace(-1.24, 0.36, 12).reshape(4, 3) + np.linspace(0.71, -0.62, 12).reshape(4, 3))
    return 1.21 * np.sum(y14) + 0.68 * np.sum(x) + 1.1 * np.sum(v) + 1.14 * s


ARGS = [np.array([0.1280269593691592, -0.34205991896442467, 1.0658021394723496]), np.array([[-0.5567162293804183, 0.1431760702281124, -0.6533919414968733, -0.6316899409402744], [-0.763851837637983, -0.9109258823560737, -0.24276598064575183, 0.8083701079782497], [0.08295888482885139, 0.6325188028953894, 0.6723467211468839, -0.5525962306940909]]), np.array([-0.5520954996201012, -0.7945353057133054, 0.9887583703928702, 1.1655410321105333]), 1.170381706853511]
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
