"""Where s2sad keeps files by default, by the platform's conventions.

The gradient cache and the datasets live under the user cache directory that
``platformdirs`` (installed with black) reports: ``$XDG_CACHE_HOME/s2sad`` or
``~/.cache/s2sad`` on Linux, ``~/Library/Caches/s2sad`` on macOS,
``%LOCALAPPDATA%\\s2sad\\Cache`` on Windows.  ``S2SAD_CACHE_DIR`` and
``S2SAD_DATA_DIR`` override them.
"""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """The platform's per-user cache directory for s2sad (not created here)."""
    try:
        import platformdirs
    except ImportError:  # black depends on it; keep a sane default regardless
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "s2sad"
    return Path(platformdirs.user_cache_dir("s2sad", appauthor=False))
