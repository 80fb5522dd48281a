"""s2sad fuzzer reproduction: class 'false_refusal', phase 'compile', AliasingError.

Found by ``python -m s2sad.fuzz`` (seed 10, program 2), then shrunk.
Run: ``python {this file}`` (from a directory where s2sad is importable).

    /tmp/s2sad-fuzz-m42ivzra/fz_30421_143.py:14:26: 'v13' shares memory with an array that was modified in place at line 13, so its gradient would be wrong
        return 0.93 * np.sum(v13) + 0.54 * acc11 + 1.44 * np.sum(w)
                             ^
    hint: take a copy where 'v13' is created (e.g. '.copy()'), or modify a copy of the array
"""

import numpy as np

def helper1(a, b, e):
    pass

def target(x, w, s):
    v9 = 0.5
    acc11 = 0.0

    def inner12(z):
        return -np.cos(np.linspace(0.62, -0.14, 12).reshape(4, 3) * np.mean(s))
    v13 = inner12(helper1(v9, np.linspace(0.02, 0.49, 4) * np.mean(w), acc11))
    s += 0.5
    return 0.93 * np.sum(v13) + 0.54 * acc11 + 1.44 * np.sum(w)


ARGS = [np.array([0.5072514830222943, 0.149885959319644, -0.9537034363266899]), np.array([[0.06840059662161546, -0.022168490231819105, 0.2628718557039811, -0.10094651204665017], [0.547889331075323, -0.17406659371118272, 0.5743860536878764, -0.21645155062908406], [0.7124252718775779, -1.1063493213775593, 0.9594821814574874, -0.9913285365733799]]), 0.38196298590765565]
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
