"""The public API: decorator forms, argnums, pytrees, dtypes, out=, source/path, cache."""

import ast
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from tests.corpus.fd import numerical_grad


def loss(w, x, b=0.5):
    return np.sum(np.tanh(x @ w + b))


def test_bare_decorator_returns_gradient_shaped_like_argument():
    @s2sad.grad
    def f(w, x):
        return np.sum(np.sin(x @ w))

    w, x = np.ones(3) * 0.1, np.arange(6.0).reshape(2, 3)
    g = f(w, x)
    assert g.shape == w.shape
    np.testing.assert_allclose(
        g, numerical_grad(lambda w: np.sum(np.sin(x @ w)), [w], 0), rtol=1e-6
    )


def test_decorator_with_argnums_tuple():
    @s2sad.grad(argnums=(0, 1))
    def f(w, x):
        return np.sum(x @ w)

    gw, gx = f(np.ones(3), np.ones((2, 3)))
    np.testing.assert_allclose(gw, [2.0, 2.0, 2.0])
    np.testing.assert_allclose(gx, np.ones((2, 3)))


def test_value_and_grad_and_default_argument():
    w, x = np.full(3, 0.2), np.ones((2, 3))
    value, g = s2sad.value_and_grad(loss)(w, x)
    assert value == pytest.approx(loss(w, x))
    np.testing.assert_allclose(g, numerical_grad(loss, [w, x], 0), rtol=1e-6)
    value_kw, _ = s2sad.value_and_grad(loss)(w, x=x, b=0.0)
    assert value_kw == pytest.approx(loss(w, x, 0.0))


def test_float32_stays_float32_and_float_stays_float():
    w = np.ones(3, dtype=np.float32)
    x = np.ones((2, 3), dtype=np.float32)
    g = s2sad.grad(loss)(w, x)
    assert g.dtype == np.float32
    gs = s2sad.grad(lambda_free_scalar)(2.0)
    assert type(gs) is float and gs == pytest.approx(12.0)


def lambda_free_scalar(a):
    return a**3


def test_pytree_gradient_structure():
    def f(p, x):
        return np.sum(p["layers"][0]["W"] @ x) + p["scale"] * np.sum(p["layers"][1][0])

    p = {"layers": [{"W": np.ones((2, 3))}, (np.ones(2), np.ones(1))], "scale": 2.0}
    g = s2sad.grad(f)(p, np.arange(3.0))
    assert set(g) == {"layers", "scale"}
    np.testing.assert_allclose(g["layers"][0]["W"], [[0, 1, 2], [0, 1, 2]])
    assert isinstance(g["layers"][1], tuple)
    np.testing.assert_allclose(g["layers"][1][0], [2.0, 2.0])
    np.testing.assert_allclose(g["layers"][1][1], [0.0])  # unused leaf: zeros
    assert g["scale"] == pytest.approx(2.0)


def test_out_writes_into_caller_arrays():
    w, x = np.full(3, 0.2), np.ones((2, 3))
    buf = np.empty(3)
    res = s2sad.grad(loss)(w, x, out=buf)
    assert res is buf
    np.testing.assert_allclose(buf, s2sad.grad(loss)(w, x))


def test_returned_gradients_are_fresh_arrays():
    def f(x):
        return np.sum(x)

    gf = s2sad.grad(f)
    a = gf(np.ones(3))
    b = gf(np.ones(3))
    a[0] = 100.0
    assert b[0] == 1.0


def test_source_and_path():
    gf = s2sad.grad(loss)
    with pytest.raises(RuntimeError, match="not compiled yet"):
        gf.source
    gf(np.ones(3), np.ones((2, 3)))
    assert "def loss_value_and_grad(" in gf.source
    assert "# grad of:" in gf.source
    assert os.path.exists(gf.path)
    with open(gf.path) as f:  # the same code; the file's as ast.unparse wrote it
        cached = f.read().partition("\n")[2]
    assert ast.dump(ast.parse(gf.source)) == ast.dump(ast.parse(cached))


def test_emitted_module_imports_only_numpy_the_runtime_and_the_users_module():
    gf = s2sad.grad(loss).compile(np.ones(3), np.ones((2, 3)))
    imports = [ln for ln in gf.source.splitlines() if ln.startswith(("import", "from"))]
    own = f"import {__name__}"  # its globals are read (and checked) when it runs
    for line in imports:
        assert line.startswith(("import numpy", "from s2sad.runtime", own)), line


SCRIPT = textwrap.dedent("""
    import sys, numpy as np
    sys.path.insert(0, {root!r}); sys.path.insert(0, {here!r})
    import s2sad
    from s2sad import pipeline
    import model
    g = s2sad.grad(model.f)(np.arange(3.0))
    print(pipeline.RUN_COUNT, repr(g.tolist()), sep="|")
""")


def _run(tmp_path, cache):
    script = SCRIPT.format(root=os.getcwd(), here=str(tmp_path))
    env = dict(os.environ, S2SAD_CACHE_DIR=str(cache), PYTHONHASHSEED="0")
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    count, grad = out.stdout.strip().split("|")
    return int(count), grad


def test_second_process_hits_cache_and_edits_invalidate(tmp_path):
    (tmp_path / "model.py").write_text(
        "import numpy as np\nfrom helper import h\ndef f(x):\n    return np.sum(h(x))\n"
    )
    (tmp_path / "helper.py").write_text("def h(x):\n    return x * x\n")
    cache = tmp_path / "cache"
    first = _run(tmp_path, cache)
    second = _run(tmp_path, cache)
    assert first[0] >= 1 and second[0] == 0  # no transformation in the second process
    assert first[1] == second[1] == "[0.0, 2.0, 4.0]"
    (tmp_path / "helper.py").write_text("def h(x):\n    return x * x * x\n")
    third = _run(tmp_path, cache)
    assert third[0] >= 1 and third[1] == "[0.0, 3.0, 12.0]"


def test_damaged_cache_file_is_regenerated(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))

    def f(x):
        return np.sum(x * 3)

    gf = s2sad.grad(f)
    gf(np.ones(2))
    with open(gf.path, "a") as fh:
        fh.write("\nraise SystemExit('damaged file executed')\n")
    before = pipeline.RUN_COUNT
    g2 = s2sad.grad(f)(np.ones(2))
    assert pipeline.RUN_COUNT == before + 1
    np.testing.assert_allclose(g2, [3.0, 3.0])


def test_emitted_source_is_deterministic(tmp_path):
    src1, _ = pipeline.compile_function(loss, (0,))
    src2, _ = pipeline.compile_function(loss, (0,))
    assert src1 == src2


def test_grad_of_a_forward_mode_function_says_what_to_use():
    with pytest.raises(TypeError, match="s2sad.hvp"):
        s2sad.grad(s2sad.jvp(loss))


def test_two_threads_calling_one_gradient_function():
    """Emitted code keeps no shared state: concurrent calls give each caller its own answer."""
    import threading

    gf = s2sad.value_and_grad(loss)
    rng = np.random.default_rng(0)
    inputs = [(rng.normal(size=3), rng.normal(size=(4, 3))) for _ in range(8)]
    expected = [gf(w, x) for w, x in inputs]
    results: dict[int, list] = {0: [], 1: []}

    def work(k):
        for _ in range(25):
            results[k].append([gf(w, x) for w, x in inputs])

    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in (0, 1):
        for run in results[k]:
            for (v, g), (v0, g0) in zip(run, expected):
                assert v == v0
                np.testing.assert_array_equal(g, g0)
