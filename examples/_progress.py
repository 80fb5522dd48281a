"""The per-epoch progress bar of the example scripts.

On a terminal with ``tqdm`` installed (the ``examples`` extra) the bar is
tqdm's: batches done, rate, elapsed time, ETA and the running loss. Without
tqdm, or when stderr is not a terminal (a log file, a test), one plain line is
written per epoch instead: ``epoch 1/5 [====>    ] 120/600 loss 0.41 3.2s``,
redrawn in place on a terminal.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def progress(label: str, total: int) -> Any:
    """A bar over ``total`` batches with ``update(done, loss)`` and ``close(loss)``."""
    if sys.stderr.isatty():
        try:
            import tqdm  # noqa: F401  (only whether it is there)
        except ImportError:
            pass
        else:
            return TqdmBar(label, total)
    return PlainBar(label, total)


class TqdmBar:
    """tqdm's bar (rate and ETA), with the running loss as its postfix."""

    def __init__(self, label: str, total: int) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=label, unit="batch", file=sys.stderr)
        self.done = 0

    def update(self, done: int, loss: float) -> None:
        self.bar.set_postfix_str(f"loss {loss:.4f}", refresh=False)
        self.bar.update(done - self.done)
        self.done = done

    def close(self, loss: float) -> None:
        self.bar.set_postfix_str(f"loss {loss:.4f}", refresh=False)
        self.bar.close()


class PlainBar:
    """One line on stderr: redrawn at most ten times a second on a terminal,
    otherwise written once when the epoch ends."""

    def __init__(self, label: str, total: int, width: int = 30) -> None:
        self.label, self.total, self.width = label, total, width
        self.live = sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self._last_draw = 0.0

    def update(self, done: int, loss: float) -> None:
        now = time.perf_counter()
        if self.live and (now - self._last_draw > 0.1 or done == self.total):
            self._last_draw = now
            sys.stderr.write("\r" + self._line(done, loss, now))
            sys.stderr.flush()

    def close(self, loss: float) -> None:
        line = self._line(self.total, loss, time.perf_counter())
        sys.stderr.write(("\r" if self.live else "") + line + "\n")
        sys.stderr.flush()

    def _line(self, done: int, loss: float, now: float) -> str:
        filled = self.width * done // max(self.total, 1)
        bar = "=" * filled + (">" if filled < self.width else "")
        return (
            f"{self.label} [{bar:<{self.width}}] {done}/{self.total} "
            f"loss {loss:.4f} {now - self.t0:.1f}s"
        )
