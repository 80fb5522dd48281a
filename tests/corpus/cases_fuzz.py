"""Corpus: minimal programs found by a random-program fuzzer (each once a crash,
a refusal or a wrong gradient)."""

import numpy as np

from tests.corpus.registry import case, vec


class Identity:
    def apply(self, u):
        return u

    def twice(self, u):
        return self.apply(u) * 2.0


class Squarer(Identity):
    def apply(self, u):
        return u * u


IDENTITY = Identity()
SQUARER = Squarer()


@case(vec(3))
def method_inactive_argument(x):
    m = IDENTITY.apply(1)
    return np.sum(x * m)


@case(vec(3))
def method_calls_method(x):
    return np.sum(IDENTITY.twice(x) * SQUARER.twice(x))


@case(vec(3))
def nested_function_default(x):
    w = x * 2.0

    def scaled(t, scale=3.0):
        return t * scale + w

    return np.sum(scaled(x) * scaled(x, 0.5))
