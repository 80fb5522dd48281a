"""s2sad fuzzer reproduction: class 'crash', phase 'plain', TypeError.

Found by ``python -m s2sad.fuzz`` (seed 10, program 11), then shrunk.
Run: ``python {this file}`` (from a directory where s2sad is importable).

    TypeError: Model.m0() takes from 3 to 4 positional arguments but 5 were given
"""

import numpy as np

class Model:

    def __init__(self, scale, bias):
        pass

    def m0(self, k, a, c=0.88):
        pass
MODEL = Model(0.75, 0.5)

def target(x, w, v):
    v11 = MODEL.m0(-1.32, np.tanh(v), c=np.mean(x))
    return 0.42 * np.sum(x)


ARGS = [np.array([-1.0475856510261448, 0.3904894137681554, 0.25257767428557454]), np.array([[-1.1159685419516452, 1.0668135087409072, 0.4214703155841599], [-1.1944963377833269, -1.0947203197868278, -0.14572199889671378], [0.06890771649512484, 0.7150646769414135, 0.8040266769816362], [0.5740442546681748, -1.0911837689617634, -0.9216993241397584]]), np.array([0.934824904814447, 0.812841746025317, 0.3917929958701474, -0.460731967170772])]
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
