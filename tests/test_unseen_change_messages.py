"""The refusal of a user function that changes a differentiated argument in
place and is run as plain Python (front/fresh.py ``unseen_change``).

Before: for ``v26, v27 = helper(...)`` with the result read only where no
gradient flows (a test), the message said "its result is not used", and
named the compiler's temporary for a dict display (``'entries'``) as the
changed array, with the hint ``entries = helper(...)``."""

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def sets_item(d, e):
    d["k"] = e
    return np.sum(e) * 2.0, 0.5


def writes_through(d, e):
    q = d["a"]
    q[0] = e[0]
    return np.sum(e) * 2.0, 0.5


def writes_array(p, e):
    p[0] = e[0]
    return np.sum(e), 0.5


def result_in_a_test(x, w):
    v26, v27 = sets_item({"a": w}, np.tanh(x))
    if v26 > v27:
        return np.sum(x * w)
    return np.sum(x)


def reached_result_in_a_test(x, w):
    v26, v27 = writes_through({"a": w * 1.0}, np.tanh(x))
    if v26 > v27:
        return np.sum(x * w)
    return np.sum(x)


def named_array_result_in_a_test(x, w):
    y = w * 2.0
    v26, v27 = writes_array(y, np.tanh(x))
    if v26 > v27:
        return np.sum(x * y)
    return np.sum(x)


def result_dropped(x, w):
    writes_through({"a": w * 1.0}, np.tanh(x))
    return np.sum(x * w)


def _message(f, mode):
    x, w = np.array([0.3, -1.2, 0.8]), np.array([0.5, 0.1, 0.2])
    with pytest.raises(UnsupportedSyntaxError) as err:
        if mode == "grad":
            s2sad.grad(f, argnums=(0, 1))(x, w)
        else:
            s2sad.jvp(f, argnums=(0, 1))(x, w, (x, w))
    return str(err.value)


USED = "its result carries no derivative to the differentiated output"


@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_a_result_read_only_in_a_test_is_not_called_unused(mode):
    text = _message(result_in_a_test, mode)
    assert "test_unseen_change_messages.py" in text
    assert "v26, v27 = sets_item(" in text
    assert USED in text and "not used" not in text
    assert "its argument 1, which holds differentiated values," in text
    assert "entries" not in text  # the compiler's name for the dict display

    text = _message(reached_result_in_a_test, mode)
    assert "changes an object it is given in place" in text and USED in text
    assert "not used" not in text

    text = _message(named_array_result_in_a_test, mode)
    assert "changes the differentiated array 'y' in place" in text
    assert USED in text and "y = writes_array(...)" in text


@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_a_dropped_result_is_still_called_unused(mode):
    text = _message(result_dropped, mode)
    assert "and its result is not used" in text and USED not in text
