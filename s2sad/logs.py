"""The ``s2sad`` logger: what was compiled, loaded from the cache or recompiled.

Off by default (no handler, nothing formatted).  ``S2SAD_LOG_COMPILES=1`` (like
``JAX_LOG_COMPILES``) attaches a stderr handler at INFO when s2sad first needs
the logger; or configure ``logging.getLogger("s2sad")`` yourself::

    s2sad: compiled model.loss (grad, argnums=(0,)) in 0.412 s -> ~/.cache/s2sad/model.loss-1f2e....py
    s2sad: loaded model.loss (grad, argnums=(0,)) from the disk cache: ~/.cache/s2sad/...
    s2sad: recompiling model.loss: new argument signature '-,i;small' (compiled before: '-,i')

In-memory cache hits are logged at DEBUG when a call switches to another
compiled signature (never on every call).
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger("s2sad")

#: the environment variable that switches compile logging on
ENV = "S2SAD_LOG_COMPILES"


def _configure() -> None:
    if os.environ.get(ENV, "").strip().lower() in ("", "0", "false", "no", "off"):
        return
    if not any(getattr(h, "_s2sad", False) for h in logger.handlers):
        handler = logging.StreamHandler()  # stderr
        handler.setFormatter(logging.Formatter("s2sad: %(message)s"))
        handler._s2sad = True
        logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)


_configure()


def describe(fn, argnums, options) -> str:
    """``model.loss (grad, argnums=(0,))`` for the log lines."""
    mode = "jvp" if options.key().startswith("mode=jvp") else "grad"
    where = f"{getattr(fn, '__module__', None) or '?'}.{fn.__qualname__}"
    return f"{where} ({mode}, argnums={tuple(argnums)})"
