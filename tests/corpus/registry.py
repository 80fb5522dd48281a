"""Registration of corpus cases: a function, how to build its arguments, argnums."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

CASES: list["Case"] = []


@dataclass
class Case:
    fn: Callable
    makers: tuple
    argnums: Any

    @property
    def name(self) -> str:
        return f"{self.fn.__module__.rsplit('.', 1)[-1]}.{self.fn.__name__}"

    def args(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        return [m(rng) for m in self.makers]


def case(*makers, argnums=0):
    def register(fn):
        CASES.append(Case(fn, makers, argnums))
        return fn

    return register


def vec(n, positive=False):
    def make(rng):
        x = rng.normal(size=n)
        return np.abs(x) + 0.5 if positive else x

    return make


def mat(*shape, positive=False):
    def make(rng):
        x = rng.normal(size=shape)
        return np.abs(x) + 0.5 if positive else x

    return make


def scal(positive=False):
    def make(rng):
        x = float(rng.normal())
        return abs(x) + 0.5 if positive else x

    return make


def const(value):
    return lambda rng: value


def tree(**makers):
    return lambda rng: {k: m(rng) for k, m in makers.items()}


def lst(*makers):
    return lambda rng: [m(rng) for m in makers]
