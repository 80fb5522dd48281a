"""Black formats only what a person reads: ``grad``'s disk cache holds the
``ast.unparse`` text, ``.source`` (and ``s2sad show``/``compile``) the formatted one,
and the line table describes the code that actually runs."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import cache, pipeline
from s2sad.transforms import emit
from tests.transforms.test_golden import FORWARD_GOLDEN, FUNCTIONS, GOLDEN

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "name, mode",
    [
        ("rnn_loop", "reverse"),
        ("user_calls_and_recursion", "reverse"),
        ("dict_params", "reverse"),
        ("closure", "reverse"),
        ("while_break_continue", "forward"),
        ("list_append", "forward"),
    ],
)
def test_formatting_later_gives_the_golden_text(name, mode):
    fn, argnums = FUNCTIONS[name]
    plain, _ = pipeline.compile_function(fn, argnums, mode=mode, formatted=False)
    golden = (FORWARD_GOLDEN if mode == "forward" else GOLDEN) / f"{name}.py"
    assert plain != golden.read_text()  # black did change something ...
    assert emit.formatted(plain) == golden.read_text()  # ... and does it later
    assert ast.dump(ast.parse(plain)) == ast.dump(ast.parse(golden.read_text()))


def _inner(h, v):
    return np.sum(np.tanh(h @ v))


def _outer(x, w, v):
    a = np.tanh(x * w) + np.sin(x) * np.cos(w) - np.exp(-x * x) * np.sqrt(w * w + 1.0)
    b = a * a + np.log1p(a * a) * np.tanh(w) - np.cos(a) * np.sin(x * w + a)
    return _inner(b, v)


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


def _first_helper_with_a_long_name(h):
    return np.tanh(h)


def _second_helper_with_a_long_name(h):
    return np.sin(h) * 2.0


def _wide(x, w, v):
    a = _first_helper_with_a_long_name(x * w) + _second_helper_with_a_long_name(x)
    h = a @ v
    return np.sum(h)


def test_the_cache_holds_unformatted_code_and_the_line_table_matches_it(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    x, w = np.linspace(0.1, 0.9, 6).reshape(2, 3), np.full((2, 3), 0.7)
    g = s2sad.grad(_wide, argnums=(0, 1)).compile(x, w, np.ones((3, 2)))
    stored = cache.read_verified(Path(g.path))
    assert stored != g.source and emit.formatted(stored) == g.source
    # black wraps the long guard at the top of the function: the failing line
    # sits lower in the formatted text than in the code that runs
    assert _offset(stored, "h = a @ v") < _offset(g.source, "h = a @ v")
    want = f"test_unformatted.py:{_line(_wide, 'h = a @ v')}: h = a @ v"
    for fresh in (g, s2sad.grad(_wide, argnums=(0, 1))):  # compiled, then loaded
        with pytest.raises(ValueError, match="matmul") as info:
            fresh(x, w, np.ones((4, 2)))
        assert info.value.__notes__[0].endswith(want), info.value.__notes__
        tb = info.value.__traceback__
        ran = [t for t in _frames(tb) if t.tb_frame.f_code.co_filename == g.path]
        assert "a @ v" in stored.splitlines()[ran[-1].tb_lineno - 2]  # 1: hash line


def _offset(text: str, statement: str) -> int:
    """Lines from the entry function's ``def`` to ``statement`` in ``text``."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("def "))
    return next(i for i, ln in enumerate(lines) if ln.strip() == statement) - start


def _frames(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def test_the_gradient_from_unformatted_code_matches_finite_differences(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(0)
    for shape_x, shape_w in [((2, 3), (2, 3)), ((4, 3), (3,)), ((1, 3), (5, 3))]:
        x = rng.uniform(0.1, 0.9, shape_x)
        w = rng.uniform(0.1, 0.9, shape_w)
        rows = np.broadcast_shapes(shape_x, shape_w)[0]
        v = rng.normal(size=(3, rows))
        args = (x, w, v)
        for _ in range(2):  # compiled, then loaded from the disk cache
            gx, gw = s2sad.grad(_outer, argnums=(0, 1))(*args)
            for arg, got in ((0, gx), (1, gw)):
                want = _central(args, arg)
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def _put(args: tuple, i: int, value) -> tuple:
    return args[:i] + (value,) + args[i + 1 :]


def _central(args: tuple, arg: int, eps: float = 1e-6) -> np.ndarray:
    """Central differences of ``_outer`` in float64 w.r.t. ``args[arg]``."""
    x = args[arg]
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        hi, lo = _put(args, arg, x + d), _put(args, arg, x - d)
        out[i] = (_outer(*hi) - _outer(*lo)) / (2 * eps)
    return out


PROBE = textwrap.dedent("""
    import sys
    import numpy as np
    import s2sad
    from tests.test_unformatted import _outer

    g = s2sad.grad(_outer)
    g(np.ones((2, 3)), np.ones((2, 3)), np.ones((3, 2)))
    print("black" in sys.modules)
    g.source
    print("black" in sys.modules)
    """)


def test_compiling_and_loading_do_not_import_black_and_source_does(tmp_path):
    env = {"S2SAD_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    for _ in ("cold", "warm"):
        run = subprocess.run(
            [sys.executable, "-c", PROBE],
            cwd=REPO,
            env={**__import__("os").environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert run.stdout.split() == ["False", "True"], run.stderr


def test_the_unformatted_text_is_deterministic():
    fn, argnums = FUNCTIONS["rnn_loop"]
    first, _ = pipeline.compile_function(fn, argnums, formatted=False)
    again, _ = pipeline.compile_function(fn, argnums, formatted=False)
    assert first == again and first.endswith("\n") and not first.endswith("\n\n")
