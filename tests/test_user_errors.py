"""What a user sees when something goes wrong: run-time errors located in their
source, compile errors without s2sad's frames, clear refusals, the compile log."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad import errors


def _real_part_sum(z):
    return np.sum(np.real(z) * 2.0)


# ---------------------------------------------------------------- complex arguments


@pytest.mark.parametrize(
    "value",
    [1.0 + 2.0j, np.complex128(1.0 + 2.0j), np.ones(3, dtype=complex)],
    ids=["complex", "complex128", "array"],
)
@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "jvp"])
def test_complex_arguments_are_refused_at_the_call(value, transform):
    with pytest.raises(errors.NonDifferentiableArgumentError) as info:
        if transform == "jvp":
            s2sad.jvp(_real_part_sum)(value, value)
        else:
            getattr(s2sad, transform)(_real_part_sum)(value)
    text = str(info.value)
    assert "complex arguments are not supported yet" in text
    assert "real and imaginary parts as separate float arguments" in text
    assert "argument 'z'" in text


def test_complex_inside_a_dict_is_named_by_its_path():
    with pytest.raises(errors.NonDifferentiableArgumentError, match=r"'p'\['w'\]"):
        s2sad.grad(lambda p: np.sum(np.real(p["w"])))({"w": np.ones(2, complex)})
