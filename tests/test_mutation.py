"""Mutation: what the caller's objects hold after a gradient call, and the forms
that stay refused (their messages name the user's line)."""

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError


class Recorder:
    def __init__(self):
        self.states = np.zeros((3, 4))

    def step(self, x):
        self.states[:, 1] = x
        return np.sum(x * x)


def attribute_item(layer, x):
    return layer.step(x)


def test_item_assignment_into_an_attribute_is_refused_at_its_line():
    with pytest.raises(UnsupportedSyntaxError) as e:
        s2sad.grad(attribute_item, argnums=1)(Recorder(), np.ones(3))
    msg = str(e.value)
    assert "test_mutation.py:16:" in msg
    assert "item assignment into the attribute 'self.states'" in msg
    assert "self.states = states" in msg
