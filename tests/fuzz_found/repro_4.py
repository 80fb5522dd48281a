"""s2sad fuzzer reproduction: class 'wrong', phase 'plain'.

Found by ``python -m s2sad.fuzz`` (seed 10, program 16), then shrunk.
Run: ``python {this file}`` (from a directory where s2sad is importable).

    point 0: gradient component 0: s2sad np.float64(1.1621978206472994), finite differences np.float64(-0.09380450649576488)
"""

import numpy as np

def target(x, w):
    v5 = 0.5
    lst6 = []
    lst6.append(np.where(x > v5, x, x) * (np.linspace(0.49, 0.5, 3) * np.mean(x) - x))
    v7 = sum(lst6)
    y11 = np.zeros(4)
    y11[[2, 2, 3]] = v7
    return np.sum(y11)


ARGS = [np.array([-0.8052611176407158, 0.2819224707791961, -0.8419302851838424]), np.array([[-0.17709179293667354, -0.15436572595647036, 0.16564737670237983, -0.010596425158917233], [-0.20153464487517325, 0.9739017925172184, -0.8670995188051516, 0.19434639816078825], [-0.029704048703636854, -0.19740127352161174, 0.39025269444847366, 1.0214178841718782]])]
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
