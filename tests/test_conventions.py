"""Package and machine conventions: entry points, clear errors for user mistakes,
partial `s2sad compile`, platform cache locations, and a test suite that leaves
the user's real cache alone.  Command lines run in real subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from s2sad import cache, pipeline
from s2sad.errors import ArgnumsError

REPO = Path(__file__).resolve().parents[1]

TWO = """\
import numpy as np


def good(x, W):
    return np.sum(np.tanh(x @ W))


def bad(x):
    try:
        y = x * 2.0
    except ValueError:
        y = x
    return np.sum(y)
"""


def s2sad(cwd: Path, *args: str, prelude: str = "") -> subprocess.CompletedProcess:
    """``python -m s2sad ARGS`` in ``cwd`` (``prelude`` runs first, e.g. to hide
    a package)."""
    env = dict(os.environ, S2SAD_CACHE_DIR=str(cwd / ".cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    code = f"{prelude}\nimport runpy, sys\nsys.argv = ['s2sad', *{list(args)!r}]\n"
    code += "runpy.run_module('s2sad', run_name='__main__')"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_python_dash_m_s2sad_runs_the_command_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "s2sad", "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    from s2sad import __version__

    assert proc.stdout.strip() == f"s2sad {__version__}"


def test_compile_writes_every_function_it_can_and_exits_non_zero(tmp_path):
    (tmp_path / "two.py").write_text(TWO)
    proc = s2sad(tmp_path, "compile", "two.py", "-f", "good", "-f", "bad", "-o", "out")
    assert proc.returncode == 1
    assert (tmp_path / "out" / "two_good_grad.py").exists()
    assert not (tmp_path / "out" / "two_bad_grad.py").exists()
    assert "two.py:9:5: unsupported construct: 'try' statement" in proc.stderr
    assert "1 of 2 functions not compiled (1 written)" in proc.stderr
    assert "internal error" not in proc.stderr


def test_argnums_out_of_range_is_a_user_error_not_an_internal_one(tmp_path):
    (tmp_path / "model.py").write_text(
        "import numpy as np\nimport s2sad\n\n\n@s2sad.grad(argnums=3)\n"
        "def f(x, W):\n    return np.sum(x @ W)\n"
    )
    proc = s2sad(tmp_path, "compile", "model.py", "-o", "out")
    assert proc.returncode == 1
    assert "argnums=3 but f(x, W) takes 2 arguments" in proc.stderr
    assert "internal error" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_the_compiler_refuses_argnums_beyond_the_parameters():
    def f(x, W):
        return x * W

    with pytest.raises(ArgnumsError, match="argnums=2 but .*f\\(x, W\\) takes 2"):
        pipeline.compile_function(f, (2,))


def test_a_missing_black_is_named_with_the_fix(tmp_path):
    (tmp_path / "two.py").write_text(TWO)
    hide = "import sys; sys.modules['black'] = None  # as if not installed"
    proc = s2sad(tmp_path, "compile", "two.py", "-f", "good", "-o", "out", prelude=hide)
    assert proc.returncode == 1
    assert "black, which is not installed: pip install black" in proc.stderr
    assert "internal error" not in proc.stderr


def test_default_cache_follows_the_platform_convention(monkeypatch, tmp_path):
    monkeypatch.delenv("S2SAD_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert cache.default_cache_dir() == tmp_path / "xdg" / "s2sad"
    assert cache.cache_dir() == cache.default_cache_dir()


def test_a_shared_sticky_directory_is_refused_without_chmod_advice(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp
    with pytest.raises(cache.UnsafeCacheDirError) as info:
        cache.check_private(shared)
    assert "chmod" not in str(info.value)
    assert "set S2SAD_CACHE_DIR to a directory of your own" in str(info.value)
    plain = tmp_path / "group"
    plain.mkdir()
    plain.chmod(0o775)
    with pytest.raises(cache.UnsafeCacheDirError, match="chmod go-w"):
        cache.check_private(plain)


def test_the_suite_never_writes_into_the_users_real_cache():
    assert os.environ.get("S2SAD_CACHE_DIR")
    assert Path(os.environ["S2SAD_CACHE_DIR"]) != cache.default_cache_dir()


def test_cache_info_and_clear_cover_the_datasets(tmp_path):
    data = tmp_path / "data"
    (data / "mnist").mkdir(parents=True)
    (data / "mnist" / "x.npz").write_bytes(b"0" * 2048)
    env = dict(
        os.environ, S2SAD_CACHE_DIR=str(tmp_path / "c"), S2SAD_DATA_DIR=str(data)
    )
    env["PYTHONPATH"] = str(REPO)

    def cli(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "s2sad", "cache", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return proc.stdout

    info = cli("info")
    assert f"dataset directory: {data} (S2SAD_DATA_DIR)" in info
    assert "dataset files: 1 (2.0 KiB" in info
    assert "removed 0 files" in cli("clear")  # datasets kept without --datasets
    assert (data / "mnist" / "x.npz").exists()
    assert "removed 1 dataset files (2.0 KiB)" in cli("clear", "--datasets")
    assert not data.exists()


def test_license_is_declared_as_an_spdx_expression_with_its_file():
    text = (REPO / "pyproject.toml").read_text()
    assert 'license = "Apache-2.0"' in text
    assert 'license-files = ["LICENSE"]' in text
    assert "Apache License" in (REPO / "LICENSE").read_text()


def test_gast_and_black_have_upper_bounds():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    specs = {d.split(">")[0].split("<")[0]: d for d in project["dependencies"]}
    for name in ("gast", "black"):
        assert "<" in specs[name], f"{name} has no upper bound: {specs[name]}"


@pytest.mark.skipif(os.environ.get("S2SAD_SKIP_WHEEL") == "1", reason="asked")
def test_a_built_wheel_installs_and_runs_the_demo_in_a_clean_venv(tmp_path):
    """Build the wheel as pip would (isolated build), install it with its
    dependencies into a new virtual environment, and run the demo on a small
    slice from outside the repository."""
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(wheels),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(wheels.glob("s2sad-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", str(venv)],
        check=True,
        timeout=300,
    )
    py = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    # no PYTHONPATH: the repository on it would count as s2sad already installed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    install = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    env["S2SAD_CACHE_DIR"] = str(tmp_path / "cache")
    where = subprocess.run(
        [str(py), "-c", "import s2sad, sys; print(s2sad.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert str(venv) in where.stdout  # the installed wheel, not the repository
    demo = subprocess.run(
        [str(py), "-m", "s2sad", "demo", "--limit", "400", "--epochs", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "epoch 1" in demo.stdout
    assert textwrap.dedent(demo.stdout).count("\n") >= 2


def test_argnums_past_a_star_args_parameter_says_so():
    """``f(*xs)`` binds its arrays into one argument: argnums=1 is past it,
    and the message names the *args parameter s2sad does not differentiate."""
    import numpy as np
    import pytest

    import s2sad

    def total(*xs):
        return sum(np.sum(x**2) for x in xs)

    with pytest.raises(IndexError) as info:
        s2sad.grad(total, argnums=(0, 1))(np.ones(2), np.ones(2))
    text = str(info.value)
    assert "argnums=1 but total takes 1 arguments" in text
    assert "*xs counts as one" in text and "no *args parameter" in text
