"""s2sad fuzzer reproduction: class 'crash', phase 'plain', AliasingError.

Found by ``python -m s2sad.fuzz`` (seed 10000, program 91), then shrunk.
Run: ``python {this file}`` (from a directory where s2sad is importable).

Open, a false refusal (session 10; the same at cfb02b6, before that
session's change): ``v17`` is a NumPy scalar read out of a list, which
cannot share memory with ``v15``, but front/aliasing.py merges the list's
elements with the array put beside one of them in the dict given to
``helper0``, so ``v15 *= ...`` marks ``v17`` stale.  It is a located
``AliasingError`` with a hint, not a wrong gradient.  front/rebinds.py's
run-time check covers only an augmented assignment that rebinds a number;
a run-time check of the stale read (refuse only when ``v17`` is an array
sharing memory with ``v15``) would clear it.

    AliasingError: /tmp/s2sad-fuzz-m71e5jz6/fz_28789_374.py:16:40: 'v17_1' shares memory with an array that was modified in place at line 15, so its gradient would be wrong (the value changed was a ndarray when it ran)
        return 0.97 * np.sum(v13) + 0.42 * v17 + 0.59 * np.sum(v15) + 0.83 * np.sum(x)
                                           ^
    hint: take a copy where 'v17_1' is created (e.g. '.copy()'), or modify a copy of the array
"""

import math
import numpy as np

def helper0(a, b, e):
    return b['c']

def target(x):
    v13 = 0.5
    v14 = 0.5
    v15 = np.stack([x[::-1], np.where(v14 > x, x, v14), np.maximum(x, v14), np.mean(v13) * x], axis=1)
    lst16 = []
    lst16.append(np.cos(np.mean(x)))
    v17 = sum(lst16)
    v17 = lst16[-1]
    v15 *= np.tanh(helper0(v17, {'b': lst16[0], 'c': v15}, lst16[-1]))
    return 0.97 * np.sum(v13) + 0.42 * v17 + 0.59 * np.sum(v15) + 0.83 * np.sum(x)


ARGS = [np.array([1.1744865345822861, -0.8104107128872008, 0.8938599147913762])]
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
