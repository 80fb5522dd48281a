"""Compile options (kept apart so the API can build them without loading the compiler).

Whether a call's code writes into buffers is decided once, here, from the
call's arguments (:meth:`Options.for_call`); the compiler's buffer passes only
read the decision::

    Options().for_call([np.ones((512, 512))]).buffers   ->  "buffered"
    Options().for_call([np.ones(3)]).buffers            ->  "plain"  (too small)
    Options().for_call([2.0, 3]).buffers                ->  "scalar" (no arrays)
    Options().for_call([dask_array]).buffers             ->  "foreign" (Dask, torch...)
    Options().for_call([]).buffers                      ->  "buffered" (ahead of time)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: NumPy calls write into a workspace (``out=``/``into=``)
BUFFERED = "buffered"
#: NumPy calls stay as they are
PLAIN = "plain"
#: arrays of another library (Dask, torch, CuPy, Array API): plain calls, and
#: none of the rewrites that assume NumPy values (methods, hoisted products)
FOREIGN = "foreign"
#: no arrays among the arguments: ``np.sin(x)`` -> ``scalar.sin(x)`` as well
SCALAR = "scalar"
#: not decided yet (the pipeline decides from its example arguments)
AUTO = "auto"


@dataclass
class Options:
    """Compile options that change the emitted code (part of the cache key)."""

    optimize: bool = True
    #: NumPy calls of the top-level gradient function may write into preallocated
    #: buffers (``out=``); only with ``optimize``
    workspace: bool = True
    #: import the user's globals in the emitted module instead of binding them at load
    standalone: bool = False
    #: what this call's code does with buffers (BUFFERED, PLAIN, FOREIGN or SCALAR), decided
    #: by :meth:`for_call`; AUTO until then
    buffers: str = AUTO
    #: check every cotangent after each backward block and raise
    #: ``NonFiniteCotangentError`` at the first NaN or inf (``S2SAD_DEBUG_NANS=1``)
    debug_nans: bool = False

    def key(self) -> str:
        decided = "" if self.buffers == AUTO else f",buffers={self.buffers}"
        nans = ",debug_nans=1" if self.debug_nans else ""  # off: keys as before
        return (
            f"opt={int(self.optimize)},standalone={int(self.standalone)},"
            f"ws={int(self.workspace and self.optimize)}{decided}{nans}"
        )

    def for_call(self, values: Sequence[Any]) -> Options:
        """These options with ``buffers`` decided for a call with ``values``
        (the call's arguments; empty when compiling ahead of time)."""
        return dataclasses.replace(self, buffers=self._decide(values))

    def _decide(self, values: Sequence[Any]) -> str:
        if not (self.optimize and self.workspace):
            return PLAIN
        if self.buffers != AUTO:
            return self.buffers
        if not values:
            return BUFFERED
        from s2sad.runtime import backend

        if backend.foreign_in(list(values)) is not None:
            return FOREIGN  # Dask, torch...: plain NumPy-API calls, no buffers
        if not any(has_array(v) for v in values):
            return SCALAR
        from s2sad.runtime.workspace import worthwhile  # reads SMALL_BYTES now

        return BUFFERED if worthwhile(list(values)) else PLAIN


def debug_nans_from_env() -> bool:
    """Whether ``S2SAD_DEBUG_NANS`` asks for ``debug_nans`` (set, and not 0/false/no)."""
    import os

    value = os.environ.get("S2SAD_DEBUG_NANS", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


def has_array(v: Any) -> bool:
    """A NumPy array, or a dict/list/tuple holding one (at any depth)."""
    import numpy as np

    if isinstance(v, np.ndarray):
        return True
    if isinstance(v, dict):
        return any(has_array(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(has_array(x) for x in v)
    return False
