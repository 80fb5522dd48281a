"""Test-wide settings: the suite never writes into the user's real gradient cache."""

from __future__ import annotations

import os
import tempfile

# Set before any test imports s2sad.cache; subprocesses inherit it.  A caller's
# own S2SAD_CACHE_DIR (CI sets one per run) is kept.
if not os.environ.get("S2SAD_CACHE_DIR"):
    os.environ["S2SAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="s2sad-tests-")
