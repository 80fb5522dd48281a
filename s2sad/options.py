"""Compile options (kept apart so the API can build them without loading the compiler)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Options:
    """Compile options that change the emitted code (part of the cache key)."""

    optimize: bool = True
    #: NumPy calls of the top-level function write into preallocated buffers
    #: (``out=``); only with ``optimize``
    workspace: bool = True
    #: import the user's globals in the emitted module instead of binding them at load
    standalone: bool = False

    def key(self) -> str:
        return (
            f"opt={int(self.optimize)},standalone={int(self.standalone)},"
            f"ws={int(self.workspace and self.optimize)}"
        )
