"""Functions of a script run with ``runpy.run_path``: their module is named
``<run_path>`` (no identifier, and gone from ``sys.modules`` afterwards), so
emitted code reads its globals through the globals dict, not by importing it."""

import runpy
import textwrap

import numpy as np

from tests.repeated import numeric_grad

SCRIPT = textwrap.dedent("""
    import numpy as np
    import s2sad

    SCALE = 0.5

    def affine(x, w, b):
        return x.reshape(x.shape[0], -1).dot(w) + b

    def loss(w, b, x):
        h = np.maximum(0, affine(x, w, b))
        return SCALE * np.sum(h * h)

    dloss = s2sad.grad(loss, argnums=(0, 1))
    rng = np.random.default_rng(0)
    w, b, x = rng.standard_normal((20, 6)), rng.standard_normal(6), rng.standard_normal((300, 4, 5))
    during = dloss(w, b, x)
    """)


def test_a_run_path_script_differentiates_while_running_and_after(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    ns = runpy.run_path(str(path))
    loss, w, b, x = ns["loss"], ns["w"], ns["b"], ns["x"]
    want = [numeric_grad(loss, [w, b, x], k) for k in (0, 1)]
    for got in (ns["during"], ns["dloss"](w, b, x), ns["dloss"](w, b, x)):
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    loss.__globals__["SCALE"] = 2.0  # globals are read when the gradient runs
    got = ns["dloss"](w, b, x)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, 4 * e, rtol=1e-5, atol=1e-6)
