"""Registration of the realistic programs: a loss, how to build its data, what to differentiate.

Each program is written the way published NumPy code is written (CS231n layers,
autograd's examples, picoGPT, min-char-rnn, DEAP objectives, textbook simulations),
not the way s2sad's own corpus cases are.  ``make(rng)`` returns the positional
arguments; ``argnums`` names the float arguments the gradient is taken in.  A
program that s2sad refuses today names the ``s2sad.errors`` class it expects in
``refused`` and why; the test checks that refusal is clear and located, and
fails if the program starts to work (so the README's count stays honest).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

PROGRAMS: list[Program] = []


@dataclass
class Program:
    fn: Callable
    make: Callable[[np.random.Generator], tuple]
    argnums: Any
    kind: str
    refused: str | None = None
    why: str = ""

    @property
    def name(self) -> str:
        return f"{self.kind}.{self.fn.__name__}"

    def args(self, seed: int = 0) -> tuple:
        return tuple(self.make(np.random.default_rng(seed)))


def program(make, argnums=0, refused=None, why=""):
    def register(fn):
        kind = fn.__module__.rsplit(".", 1)[-1]
        PROGRAMS.append(Program(fn, make, argnums, kind, refused, why))
        return fn

    return register


def normal(rng, *shape, scale=1.0):
    return rng.normal(size=shape) * scale


def labels(rng, n, classes):
    return rng.integers(0, classes, size=n)
