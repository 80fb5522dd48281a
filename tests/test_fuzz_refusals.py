"""Fuzzer-found programs that are refused at the user's line, never differentiated
wrongly (the ones s2sad differentiates are corpus cases: tests/corpus/cases_fuzz.py)."""

import numpy as np
import pytest

import s2sad
from s2sad import errors
from tests.fixtures import fuzz_refused as bad
from tests.test_errors import line_of


def compile_error(fn, *args, argnums=0):
    with pytest.raises(errors.S2SADError) as info:
        s2sad.grad(fn, argnums=argnums)(*args)
    return info.value


def test_loop_over_an_array_changed_in_place_then_rebound_is_refused():
    # Python iterates the first array, whose item 1 the first iteration changes
    err = compile_error(bad.iterated_array_changed_then_rebound, np.ones(3), np.ones(3))
    assert isinstance(err, errors.AliasingError)
    assert err.filename == bad.__file__
    assert err.line == line_of(bad.iterated_array_changed_then_rebound, "for e in acc")
    assert "acc" in str(err) and ".copy()" in str(err)


@pytest.mark.parametrize(
    "fn, call",
    [
        (bad.list_insert, "q.insert"),
        (bad.list_extend, "q.extend"),
        (bad.list_pop, "q.pop"),
        (bad.list_remove, "q.remove"),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_list_and_dict_mutators_other_than_append_are_refused(fn, call):
    # q.insert(0, x[1]); q[0] used to give gradient 0 (the list seen as constant)
    err = compile_error(fn, np.array([0.5, 2.0, 3.0]))
    assert err.filename == bad.__file__
    assert err.line == line_of(fn, call)
    assert f"'{call.split('.')[0]}" in str(err)


def test_dict_update_with_a_literal_on_a_local_dict_is_differentiated():
    # once refused with the mutators above; now written as item writes
    # (front/containers.py): d["b"] = x[0]
    x = np.array([0.5, 2.0, 3.0])
    np.testing.assert_allclose(s2sad.grad(bad.dict_update)(x), [1.0, 0.0, 0.0])
