"""Users' own rules: used by the compiler, part of the cache key, never overwritten."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import numpy as np
    import s2sad

    def my_kernel(x, w):          # has source, but the rule wins
        return x * w * 100.0

    @s2sad.adjoint(my_kernel)
    def d_my_kernel(g, ans, x, w):
        return (g * w, g * x)     # a deliberately different (user-chosen) rule

    @s2sad.adjoint(np.sinc)       # overrides a built-in rule, before built-ins load
    def d_sinc(g, ans, x):
        return (g * 7.0,)

    s2sad.nondifferentiable(np.round)

    def loss(x, w):
        return np.sum(my_kernel(x, w)) + np.sum(np.sinc(x)) + np.sum(np.round(x) * x)

    gx, gw = s2sad.grad(loss, argnums=(0, 1))(np.array([0.2, 1.4]), np.array([3.0, 4.0]))
    import json
    print(json.dumps([gx.tolist(), gw.tolist()]))
""")


def test_user_rules_are_used_and_survive_builtin_loading(tmp_path):
    (tmp_path / "user_rules.py").write_text(SCRIPT)
    env = dict(
        os.environ, S2SAD_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO)
    )
    out = subprocess.run(
        [sys.executable, "user_rules.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    gx, gw = json.loads(out)
    # d/dx: w (user rule) + 7 (user sinc rule) + round(x) (round: zero gradient)
    assert gx == [3.0 + 7.0 + 0.0, 4.0 + 7.0 + 1.0]
    assert gw == [0.2, 1.4]
