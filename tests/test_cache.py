"""The on-disk cache: hits, damaged and untrusted files, private directories, atomic
writes, concurrent processes, and the helpers behind ``s2sad cache info|clear``."""

from __future__ import annotations

import importlib.util
import marshal
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import cache, pipeline

REPO = Path(__file__).resolve().parents[1]


def cube(x):
    return np.sum(x * x * x)


def shifted(x):
    return np.sum(np.sin(x + 1.0))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(path))
    return path


def compile_cube() -> tuple[s2sad.api.GradientFunction, int]:
    """A fresh gradient of ``cube`` (so nothing is remembered in memory), called once;
    returns it and how many times the pipeline ran for it."""
    before = pipeline.RUN_COUNT
    dcube = s2sad.grad(cube)
    np.testing.assert_array_equal(dcube(np.array([1.0, -2.0])), [3.0, 12.0])
    return dcube, pipeline.RUN_COUNT - before


def test_env_dir_is_used_and_created_private(cache_dir):
    dcube, runs = compile_cube()
    assert runs == 1
    assert Path(dcube.path).parent == cache_dir
    assert Path(dcube.path).name.startswith("test_cache.cube-")
    assert cache_dir.stat().st_mode & 0o777 == 0o700


def test_hit_skips_the_pipeline(cache_dir):
    first, _ = compile_cube()
    second, runs = compile_cube()
    assert runs == 0
    assert second.path == first.path and second.source == first.source


def test_damaged_file_is_regenerated_and_never_run(cache_dir, tmp_path):
    first, _ = compile_cube()
    path = Path(first.path)
    good = path.read_text()
    marker = tmp_path / "ran"
    head, _, body = good.partition("\n")
    path.write_text(f"{head}\nopen({str(marker)!r}, 'w').close()\n{body}")
    _, runs = compile_cube()
    assert runs == 1 and not marker.exists()
    assert path.read_text() == good
    path.write_text(
        good[: len(good) // 2]
    )  # truncated, as by a crash without atomic writes
    _, runs = compile_cube()
    assert runs == 1 and path.read_text() == good


def test_file_others_could_write_is_not_trusted(cache_dir):
    first, _ = compile_cube()
    path = Path(first.path)
    stored = cache.read_verified(path)  # as ast.unparse wrote it (.source: black's)
    tampered = cache.seal(stored + "\nraise SystemExit('tampered')\n")
    path.write_text(tampered)  # a correct hash line does not make it trusted ...
    path.chmod(0o600)
    assert cache.read_verified(path) is not None
    path.chmod(0o666)  # ... only who can write it does
    assert cache.read_verified(path) is None
    _, runs = compile_cube()
    assert runs == 1 and cache.read_verified(path) == stored


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777])
def test_directory_writable_by_others_is_refused(cache_dir, mode):
    cache_dir.mkdir()
    cache_dir.chmod(mode)
    # a sticky directory is shared on purpose (like /tmp): no chmod advice there
    fix = "S2SAD_CACHE_DIR to a directory of your own" if mode & 0o1000 else "chmod"
    with pytest.raises(cache.UnsafeCacheDirError, match=fix):
        s2sad.grad(cube)(np.ones(2))
    assert list(cache_dir.iterdir()) == []


def test_directory_of_another_user_is_refused(cache_dir, monkeypatch):
    cache_dir.mkdir(mode=0o700)
    uid = cache_dir.stat().st_uid
    monkeypatch.setattr(os, "getuid", lambda: uid + 1)
    with pytest.raises(cache.UnsafeCacheDirError, match="belongs to another user"):
        cache.cache_dir()


def test_default_directory_is_made_private_not_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("S2SAD_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    default = tmp_path / ".cache" / "s2sad"
    default.mkdir(parents=True)
    default.chmod(0o775)  # as a permissive umask leaves it (e.g. the datasets made it)
    assert cache.cache_dir() == default
    assert default.stat().st_mode & 0o777 == 0o755


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "m.py"
    target.write_text("old")

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        cache.write_atomic(target, "new")
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]
    assert target.read_text() == "old"


WORKER = """\
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import numpy as np
import s2sad
from concurrent_model import loss
go = Path(sys.argv[2])
Path(sys.argv[3]).touch()  # ready
while not go.exists():
    time.sleep(0.005)
g = s2sad.grad(loss)(np.array([0.5, -1.5, 2.0]))
print(" ".join(repr(float(v)) for v in g))
"""

CONCURRENT_MODEL = """\
import numpy as np


def loss(x):
    h = np.tanh(x * 2.0)
    for _ in range(3):
        h = np.sin(h) + x
    return np.sum(h * h)
"""


def test_processes_compiling_the_same_function_at_once(cache_dir, tmp_path):
    (tmp_path / "concurrent_model.py").write_text(CONCURRENT_MODEL)
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                str(tmp_path),
                str(go),
                str(tmp_path / f"ready{i}"),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("ready*"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)  # all imported: let them compile at the same moment
    go.touch()
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    x = np.array([0.5, -1.5, 2.0])
    want = central_differences(x)
    for out, _ in outputs:
        np.testing.assert_allclose([float(v) for v in out.split()], want, rtol=1e-6)
    entries = sorted(p.name for p in cache_dir.iterdir())  # no temporary left
    assert len(entries) == 2 and entries[1].startswith("concurrent_model.loss-")
    module = cache_dir / entries[1]
    assert cache.read_verified(module) is not None
    assert entries[0] == cache.code_path(module).name
    assert cache.read_code(module, cache.read_sealed(module)[1]) is not None


def central_differences(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    def loss(x):
        h = np.tanh(x * 2.0)
        for _ in range(3):
            h = np.sin(h) + x
        return np.sum(h * h)

    basis = np.eye(len(x))
    return np.array(
        [(loss(x + eps * e) - loss(x - eps * e)) / (2 * eps) for e in basis]
    )


def test_info_and_clear_touch_only_cache_entries(cache_dir):
    compile_cube()
    s2sad.grad(shifted)(np.ones(3))
    (cache_dir / ".tmp-abc123.py").write_text("partial")  # left by a killed process
    damaged = cache_dir / "somemodule.f-0123456789abcdef.py"
    damaged.write_text("# not sealed\n")
    (cache_dir / "README.txt").write_text("not ours")
    (cache_dir / "data").mkdir()
    (cache_dir / "data" / "mnist-v1.npz").write_bytes(b"digits")
    report = cache.info()
    assert report.directory == cache_dir
    assert (report.modules, report.damaged, report.temporaries) == (3, 1, 1)
    codes = sorted(p.name for p in cache_dir.glob("*.code"))
    assert len(codes) == 2  # the two good modules' code objects
    assert report.bytes == sum(
        p.stat().st_size
        for p in cache_dir.iterdir()
        if p.name.endswith((".py", ".code"))
    )
    assert cache.clear() == 4  # modules and temporaries; code objects go too
    assert sorted(p.name for p in cache_dir.iterdir()) == ["README.txt", "data"]
    assert (cache_dir / "data" / "mnist-v1.npz").exists()
    assert cache.info().modules == 0


def test_read_verified_of_a_missing_file(tmp_path):
    assert cache.read_verified(tmp_path / "nope.py") is None


def test_seal_round_trip(tmp_path):
    path = tmp_path / "m.py"
    source = textwrap.dedent("""\
        # Generated by s2sad
        import numpy as np
        """)
    cache.write_atomic(path, cache.seal(source))
    assert cache.read_verified(path) == source
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of the s2sad package that :func:`cache.compiler_fingerprint` hashes
    instead of the real one (it finds the package next to ``cache.__file__``)."""
    import shutil

    root = tmp_path / "s2sad"
    shutil.copytree(REPO / "s2sad", root, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache, "__file__", str(root / "cache.py"))
    cache.compiler_fingerprint.cache_clear()
    yield root
    monkeypatch.undo()
    cache.compiler_fingerprint.cache_clear()


def edited(path: Path) -> None:
    path.write_text(path.read_text() + "\n# an edit\n")
    cache.compiler_fingerprint.cache_clear()


def test_editing_a_transform_in_a_subfolder_changes_the_fingerprint(package_copy):
    """Every transform counts, however deep: a fingerprint that globbed only the
    top of transforms/ would keep stale modules after an edit to front/parse.py."""
    first = cache.compiler_fingerprint()
    key = cache.key_for(cube, (0,), "opt=1", "-;")
    edited(package_copy / "transforms" / "front" / "parse.py")
    assert cache.compiler_fingerprint() != first
    assert cache.key_for(cube, (0,), "opt=1", "-;") != key


def test_editing_a_non_compiler_module_keeps_the_fingerprint(package_copy):
    first = cache.compiler_fingerprint()
    edited(package_copy / "cli.py")
    assert cache.compiler_fingerprint() == first
    edited(package_copy / "api.py")
    assert cache.compiler_fingerprint() != first


# ---------------------------------------------------------------- code objects


def test_the_code_object_is_kept_beside_the_module_and_loaded(cache_dir, monkeypatch):
    first, _ = compile_cube()
    module = Path(first.path)
    code = cache.code_path(module)
    assert code.name == f"{module.stem}.{sys.implementation.cache_tag}.code"
    assert code.stat().st_mode & 0o777 == 0o600

    def no_compile(*args, **kwargs):
        raise AssertionError("the module was compiled again")

    monkeypatch.setattr(cache, "compile", no_compile, raising=False)
    _, runs = compile_cube()  # a new grad: loads module and code object, exact values
    assert runs == 0


def _forged(module: Path, marker: Path) -> tuple[bytes, str]:
    """Marshal data of the module's real code plus a line that creates ``marker``,
    and the module's digest: what a code file must never run unchecked."""
    text = module.read_text() + f"open({str(marker)!r}, 'w').close()\n"
    return (
        marshal.dumps(compile(text, str(module), "exec")),
        cache.read_sealed(module)[1],
    )


def _retagged(header: bytes, old: str, new: str) -> bytes:
    assert old.encode() in header
    return header.replace(old.encode(), new.encode(), 1)


def _sealed_code(module: Path, digest: str, code) -> bytes:
    payload = marshal.dumps(code)
    return cache.code_header(module, digest, payload) + payload


#: ways a code file can be wrong; each gets (module path, digest, forged payload,
#: the good file's bytes) and returns the bad file's bytes
DAMAGES = {
    "truncated": lambda m, d, evil, good: good[: len(good) // 2],
    "payload swapped": lambda m, d, evil, good: good.partition(b"\n")[0] + b"\n" + evil,
    "not marshal data": lambda m, d, evil, good: cache.code_header(m, d, b"junk")
    + b"junk",
    "made for another text": lambda m, d, evil, good: cache.code_header(
        m, "0" * 64, evil
    )
    + evil,
    "made for another python": lambda m, d, evil, good: _retagged(
        cache.code_header(m, d, evil), sys.implementation.cache_tag, "cpython-20"
    )
    + evil,
    "another bytecode magic": lambda m, d, evil, good: _retagged(
        cache.code_header(m, d, evil),
        importlib.util.MAGIC_NUMBER.hex(),
        "00000d0a",
    )
    + evil,
    "compiled for another file": lambda m, d, evil, good: _sealed_code(
        m, d, marshal.loads(evil).replace(co_filename="elsewhere.py")
    ),
    "empty": lambda m, d, evil, good: b"",
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_code_file_is_ignored_and_written_again(cache_dir, tmp_path, damage):
    first, _ = compile_cube()
    module = Path(first.path)
    code = cache.code_path(module)
    good = code.read_bytes()
    marker = tmp_path / "ran"
    evil, digest = _forged(module, marker)
    bad = DAMAGES[damage](module, digest, evil, good)
    code.write_bytes(bad)
    _, runs = compile_cube()  # exact gradient values checked inside
    assert runs == 0  # the module's text was good: only its code object is redone
    assert not marker.exists()
    assert code.read_bytes() != bad
    assert cache.read_code(module, digest) is not None


def test_a_code_file_others_could_write_is_not_run(cache_dir, tmp_path):
    first, _ = compile_cube()
    module = Path(first.path)
    code = cache.code_path(module)
    marker = tmp_path / "ran"
    evil, digest = _forged(module, marker)
    code.write_bytes(cache.code_header(module, digest, evil) + evil)
    code.chmod(0o666)  # a well-formed file, but others could have written it
    compile_cube()
    assert not marker.exists()
    code.write_bytes(cache.code_header(module, digest, evil) + evil)
    code.chmod(0o600)  # the control: the same file, private, is trusted like the module
    compile_cube()
    assert marker.exists()


def test_a_code_file_for_an_edited_module_is_not_used(cache_dir, tmp_path):
    """A module text changed (correctly sealed, by its owner) outranks its old code."""
    first, _ = compile_cube()
    module = Path(first.path)
    marker = tmp_path / "ran"
    text = cache.read_verified_text(module) + f"open({str(marker)!r}, 'w').close()\n"
    module.write_text(cache.seal(text))
    module.chmod(0o600)
    _, runs = compile_cube()
    assert runs == 0 and marker.exists()  # the edited text ran, not the stale code


# ---------------------------------------------------------------- the key's source


def _decorate(f):
    return f


@_decorate
def _decorated(x):
    y = np.sin(x)  # a statement over three lines
    return y
    # a comment under the body


class _Holder:
    def method(self, x):
        def inner(z):
            return z * 2.0

        return inner(x)


_lam = lambda x: np.sum(x * x)


def test_the_keys_source_text_is_what_inspect_reads():
    """cache.source_text finds the definition without tokenizing the file."""
    import inspect

    for fn in (
        _decorated,
        _Holder.method,
        _lam,
        cube,
        compile_cube,
        central_differences,
    ):
        assert cache.source_text(fn) == inspect.getsource(fn.__code__), fn
    assert "# a comment under the body" in cache.source_text(_decorated)
    assert cache.source_text(_decorated).startswith("@_decorate")
