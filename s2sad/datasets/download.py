"""Download one pinned wheel over HTTP, with its size up front, progress and a time bound.

The wheel is found on a package index's simple page (PEP 503 HTML or PEP 691
JSON, as pip reads them): ``$S2SAD_INDEX_URL``, else ``https://pypi.org/simple``.
Before the transfer one line on stderr says what is fetched, how large it is
and where it goes; during it a ``tqdm`` bar shows bytes, rate and ETA when
tqdm is installed and stderr is a terminal (a plain line otherwise). Every
socket operation waits at most ``$S2SAD_DOWNLOAD_TIMEOUT`` seconds (default
30), so an index that never answers fails in bounded time.
Proxies are taken from the usual ``HTTPS_PROXY`` variables by urllib.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import IO, Any

from s2sad.datasets.errors import DataUnavailableError

DEFAULT_INDEX = "https://pypi.org/simple"
DEFAULT_TIMEOUT = 30.0
CHUNK = 1 << 16
ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


class DownloadError(DataUnavailableError):
    """The index or the file could not be reached or read; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, reason)


def index_url() -> str:
    """The package index's simple API root (``$S2SAD_INDEX_URL`` or PyPI's)."""
    return (os.environ.get("S2SAD_INDEX_URL") or DEFAULT_INDEX).rstrip("/")


def timeout() -> float:
    """Seconds any one network operation may take (``$S2SAD_DOWNLOAD_TIMEOUT``)."""
    text = os.environ.get("S2SAD_DOWNLOAD_TIMEOUT", "")
    try:
        value = float(text) if text else DEFAULT_TIMEOUT
    except ValueError:
        value = DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def human_size(n: int | None) -> str:
    """``20.3 MB`` (decimal units, as pip and PyPI show sizes)."""
    if n is None:
        return "size unknown"
    for unit in ("B", "kB", "MB"):
        if n < 1000 or unit == "MB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover (MB above catches everything)


def download(
    project: str, version: str, filename: str, dest: Path, what: str, into: Path
) -> None:
    """Write the index's ``filename`` of ``project`` to ``dest`` (bytes as served).

    ``what`` names the data for the user (``MNIST``), ``into`` the folder the
    file will be kept in. Raise :class:`DownloadError` when the index or the
    file cannot be had within the time bound.
    """
    url, size = find_file(project, filename)
    where = urllib.parse.urlsplit(url).netloc or url
    say(
        f"s2sad: downloading {what} ({project} {version}, {human_size(size)}) "
        f"from {where} into {into} (once)"
    )
    start = time.monotonic()
    with _open(url) as response, open(dest, "wb") as out:
        length = response.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else size
        got = _copy(response, out, total, filename)
    seconds = time.monotonic() - start
    say(f"s2sad: got {human_size(got)} in {seconds:.1f} s")


def find_file(project: str, filename: str) -> tuple[str, int | None]:
    """(URL, size or None) of ``filename`` on the index's page for ``project``."""
    name = re.sub(r"[-_.]+", "-", project).lower()
    page = f"{index_url()}/{name}/"
    with _open(page, accept=ACCEPT) as response:
        kind = response.headers.get("Content-Type", "")
        body = _read_all(response)
    if "json" in kind:
        try:
            files = json.loads(body)["files"]
        except (ValueError, KeyError, TypeError) as exc:
            raise DownloadError(f"{page} is not a package index page ({exc})") from exc
        for entry in files:
            if entry.get("filename") == filename:
                return urllib.parse.urljoin(page, entry["url"]), entry.get("size")
    else:
        for href in re.findall(
            r"""href\s*=\s*["']([^"']+)["']""", body.decode("utf-8", "replace")
        ):
            target = urllib.parse.urljoin(page, href)
            if urllib.parse.urlsplit(target).path.rsplit("/", 1)[-1] == filename:
                return target.split("#", 1)[0], None
    raise DownloadError(f"{page} lists no file {filename}")


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --- transfers --------------------------------------------------------------------


def _open(url: str, accept: str | None = None) -> Any:
    """``urlopen`` with the time bound; network failures become DownloadError."""
    headers = {"User-Agent": "s2sad-datasets"}
    if accept:
        headers["Accept"] = accept
    request = urllib.request.Request(url, headers=headers)
    try:
        return urllib.request.urlopen(request, timeout=timeout())
    except urllib.error.HTTPError as exc:
        raise DownloadError(f"{url} answered HTTP {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        raise DownloadError(_reason(url, exc.reason)) from exc
    except (OSError, http.client.HTTPException) as exc:
        raise DownloadError(_reason(url, exc)) from exc


def _reason(url: str, exc: Any) -> str:
    host = urllib.parse.urlsplit(url).netloc or url
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"{host} did not answer within {timeout():g} s"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {host} (no network or no DNS?)"
    return f"cannot reach {host}: {exc}"


def _read_all(response: Any) -> bytes:
    try:
        return response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise DownloadError(_reason(response.geturl(), exc)) from exc


def _copy(response: Any, out: IO[bytes], total: int | None, label: str) -> int:
    """Copy the body to ``out`` chunk by chunk, drawing progress; bytes copied."""
    bar = progress_bar(total, label)
    got = 0
    try:
        while True:
            try:
                chunk = response.read(CHUNK)
            except (OSError, http.client.HTTPException) as exc:
                raise DownloadError(_reason(response.geturl(), exc)) from exc
            if not chunk:
                break
            out.write(chunk)
            got += len(chunk)
            bar.update(len(chunk))
    finally:
        bar.close()
    if total is not None and got != total:
        raise DownloadError(f"the transfer stopped after {got} of {total} bytes")
    return got


def progress_bar(total: int | None, label: str) -> Any:
    """A tqdm byte bar (rate, ETA) on a terminal; else a plain line when done."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _PlainBar(total, label)
    return tqdm(
        total=total,
        desc=label,
        unit="B",
        unit_scale=True,
        unit_divisor=1000,
        file=sys.stderr,
        disable=None,  # tqdm's rule: no bar when stderr is not a terminal
        leave=True,
    )


class _PlainBar:
    """Without tqdm: ``  12.0 / 20.3 MB`` redrawn on a terminal, nothing otherwise."""

    def __init__(self, total: int | None, label: str) -> None:
        self.total, self.label, self.done = total, label, 0
        self.live, self.last = sys.stderr.isatty(), 0.0

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.live and now - self.last > 0.2:
            self.last = now
            of = f" / {human_size(self.total)}" if self.total else ""
            sys.stderr.write(f"\r  {self.label}: {human_size(self.done)}{of}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.live and self.last:
            sys.stderr.write("\n")
            sys.stderr.flush()
