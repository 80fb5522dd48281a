"""Emitted modules run with NumPy and s2sad.runtime alone.

The compiler's dependencies (gast, black) and the compiler itself are blocked
with an import hook in a fresh interpreter; the emitted module must still import
and compute the right gradient.
"""

from __future__ import annotations

import ast
import json
import os
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
GENERATED = REPO / "generated"

#: what generated code may never import, directly or through what it imports
COMPILER = (
    "gast",
    "black",
    "s2sad.transforms",
    "s2sad.pipeline",
    "s2sad.api",
    "s2sad.cache",
    "s2sad.cli",
    "s2sad.modelfile",
)

BLOCKED = f"""\
import importlib.abc, json, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith({COMPILER!r}):
            raise ImportError(f"{{name}} is blocked: emitted code must not need it")

sys.meta_path.insert(0, Block())
"""

PLAIN_MODEL = """\
import numpy as np

W = np.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]])


def layer(x, b):
    return np.tanh(x @ W + b)


def loss(x, b):
    h = layer(x, b)
    for _ in range(2):
        h = h * np.exp(-h)
    return np.sum(h * h) + np.sum(np.log(1.0 + b * b))
"""

RUN_IT = """\
sys.path[:0] = ["out", "."]
import numpy as np
from plain_model_loss_grad import loss_value_and_grad
x = np.array([[0.3, -0.2, 0.9], [1.1, 0.4, -0.5]])
b = np.array([0.1, -0.3])
value, (g_x, g_b) = loss_value_and_grad(x, b)
loaded = sorted(m for m in sys.modules if m.startswith(("s2sad", "gast", "black")))
print(json.dumps([float(value), g_x.tolist(), g_b.tolist(), loaded]))
"""


def cli(cwd: Path, *args: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO), S2SAD_CACHE_DIR=str(cwd / ".cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "s2sad.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def python(cwd: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def model_loss(path: Path):
    """The model's own loss function, run directly (no s2sad involved)."""
    return runpy.run_path(str(path))["loss"]


def central_differences(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        grad[i] = (f(x + step) - f(x - step)) / (2 * eps)
    return grad


def test_emitted_module_runs_with_the_compiler_blocked(tmp_path):
    (tmp_path / "plain_model.py").write_text(PLAIN_MODEL)
    cli(
        tmp_path,
        "compile",
        "plain_model.py",
        "-f",
        "loss",
        "--argnums",
        "x,b",
        "-o",
        "out",
    )
    proc = python(tmp_path, BLOCKED + RUN_IT)
    assert proc.returncode == 0, proc.stderr
    value, g_x, g_b, loaded = json.loads(proc.stdout)
    assert not [m for m in loaded if m.startswith(COMPILER)]
    assert all(
        m in ("s2sad", "s2sad._version", "s2sad.errors")
        or m.startswith("s2sad.runtime")
        for m in loaded
    )
    loss = model_loss(tmp_path / "plain_model.py")
    x = np.array([[0.3, -0.2, 0.9], [1.1, 0.4, -0.5]])
    b = np.array([0.1, -0.3])
    assert value == pytest.approx(loss(x, b), rel=1e-12)
    np.testing.assert_allclose(
        g_x, central_differences(lambda v: loss(v, b), x), rtol=1e-6, atol=1e-9
    )
    np.testing.assert_allclose(
        g_b, central_differences(lambda v: loss(x, v), b), rtol=1e-6, atol=1e-9
    )


def test_the_blocker_does_block(tmp_path):
    proc = python(tmp_path, BLOCKED + "import s2sad.pipeline\n")
    assert proc.returncode != 0 and "blocked" in proc.stderr


def imports_of(source: str) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module)
    return modules


@pytest.mark.parametrize("path", sorted(GENERATED.glob("*.py")), ids=lambda p: p.name)
def test_generated_files_import_only_numpy_runtime_and_their_example(path):
    example = path.read_text().partition(" from ")[2].partition(".py:")[0]
    for module in imports_of(path.read_text()):
        assert (
            module == "numpy" or module.startswith("s2sad.runtime") or module == example
        ), f"{path.name} imports {module}"


IMPORT_GENERATED = """\
import importlib
sys.path[:0] = [sys.argv[1], sys.argv[2]]
for name in sys.argv[3:]:
    module = importlib.import_module(name)
    assert callable(getattr(module, name.split("_", 2)[2][: -len("_grad")]
                            + "_value_and_grad")), name
print("ok")
"""


def test_generated_files_import_with_the_compiler_blocked():
    names = [p.stem for p in sorted(GENERATED.glob("*.py"))]
    if not names:
        pytest.skip("generated/ is empty")
    code = BLOCKED + IMPORT_GENERATED
    proc = python(REPO, code, str(REPO / "examples"), str(GENERATED), *names)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


DECORATED_MODEL = """\
import numpy as np
import s2sad

W = np.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]])


@s2sad.grad
def loss(x):
    return np.sum(np.tanh(x @ W))
"""


def test_module_of_a_decorated_model_runs_with_the_compiler_blocked(tmp_path):
    """The model's @s2sad.grad needs the (light) API, but never the compiler."""
    (tmp_path / "decorated.py").write_text(DECORATED_MODEL)
    cli(tmp_path, "compile", "decorated.py", "-o", "out")
    blocked = BLOCKED.replace(
        repr(COMPILER), repr(tuple(m for m in COMPILER if m != "s2sad.api"))
    )
    code = blocked + textwrap.dedent("""\
        sys.path[:0] = ["out", "."]
        import numpy as np
        from decorated_loss_grad import loss_value_and_grad
        print(loss_value_and_grad(np.ones((2, 3)))[1][0].shape)
    """)
    proc = python(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(2, 3)"


RUNTIME = REPO / "s2sad" / "runtime"


@pytest.mark.parametrize("path", sorted(RUNTIME.glob("*.py")), ids=lambda p: p.name)
def test_runtime_modules_import_nothing_of_the_compiler(path):
    """Not even ``ast``: parsing code is compiler work (transforms/buffers/record.py)."""
    for module in imports_of(path.read_text()):
        ok = module != "ast" and not module.startswith(COMPILER)
        assert ok, f"s2sad/runtime/{path.name} imports {module}"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def private_uses(source: str) -> list[str]:
    """``from m import _x`` and ``mod._x`` for modules bound by a runtime import."""
    tree = ast.parse(source)
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("s2sad"):
            found += [f"{node.module}.{a.name}" for a in node.names if _private(a.name)]
            if node.module == "s2sad.runtime":
                modules |= {a.asname or a.name for a in node.names}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _private(node.attr)
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("path", sorted(RUNTIME.glob("*.py")), ids=lambda p: p.name)
def test_runtime_modules_use_no_private_name_of_another_module(path):
    assert not private_uses(path.read_text())


def test_the_private_name_check_finds_both_spellings():
    src = "from s2sad.runtime import linalg\nfrom s2sad.runtime.nn import _x\nlinalg._mT\n"
    assert private_uses(src) == ["s2sad.runtime.nn._x", "linalg._mT"]
