"""``for k, v in callee(x).items()`` (and ``.values()``, ``.keys()``): a view of
a callee's result is iterated by key as a local dict's is, behind the run-time
``check_mapping``.  Before: refused at compile time ("no adjoint rule for the
method '.items()'") although binding the result to a name first worked."""

import inspect

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError
from tests.repeated import buffer_everything, check_repeated_calls  # noqa: F401


@pytest.fixture(autouse=True)
def _buffers(buffer_everything):  # noqa: F811
    pass


def make_table(x):
    return {"b": np.sin(x), "a": x * 2.0, "c": x[:2] * x[1:3]}


def over_items(x):
    s = 0.0
    for k, v in make_table(x).items():
        s = s + np.sum(v * v) * (2.0 if k == "a" else 1.0)
    return s


def over_values(x, w):
    s = 0.0
    for v in make_table(x * w).values():
        s = s + np.sum(np.tanh(v))
    return s


def over_keys(x):
    s = 0.0
    for k in make_table(x).keys():  # noqa: SIM118 - the pattern under test
        s = s + np.sum(make_table(x)[k]) * len(k)
    return s


class Reversed(dict):
    """A mapping that iterates otherwise than a dict does."""

    def __iter__(self):
        return reversed(list(super().__iter__()))

    def items(self):
        return [(k, self[k]) for k in self]


def make_keywords(x):
    return dict(q=np.exp(x), p=x * x)  # noqa: C408 - the pattern under test


def pick(tables, key):
    return tables[key]


def over_keywords(x):
    s = 0.0
    for name, v in make_keywords(x).items():
        s = s + np.sum(v) * (1.0 if name == "p" else 3.0)
    return s


def over_reversed(x, tables):
    s = 0.0
    for name, v in pick(tables, "t").items():
        s = s + np.sum(v * x) * (1.0 if name == "p" else 3.0)
    return s


@pytest.mark.parametrize("shape", [(3,), (5,), (4, 3)])
def test_items_of_a_callee_result_against_central_differences(shape):
    x = np.linspace(0.2, 1.3, int(np.prod(shape))).reshape(shape)
    if x.ndim == 2:
        x = x[:, 0].copy()
    check_repeated_calls(over_items, (x,))
    check_repeated_calls(over_keys, (x,))
    check_repeated_calls(over_keywords, (x,))


def test_values_of_a_callee_result_with_broadcasting():
    x = np.linspace(-0.5, 0.7, 6)
    for w in (np.array(1.7), np.linspace(0.5, 1.0, 6)):
        check_repeated_calls(over_values, (x, w))


def test_forward_mode_and_second_order():
    x = np.linspace(0.2, 1.1, 4)
    s2sad.check_grads(over_items, (x,), modes=("rev", "fwd"))
    s2sad.check_grads(over_values, (x, np.array(0.9)), modes=("rev", "fwd"))


def test_a_view_of_a_mapping_that_iterates_otherwise_is_refused_where_the_loop_is():
    x = np.linspace(0.2, 1.1, 4)
    with pytest.raises(UnsupportedSyntaxError) as info:
        s2sad.value_and_grad(over_reversed)(x, {"t": Reversed(p=1.0, q=2.0)})
    err = info.value
    lines, first = inspect.getsourcelines(over_reversed)
    at = first + next(i for i, s in enumerate(lines) if "pick(tables" in s)
    assert (err.filename, err.line) == (__file__, at)
    assert "Reversed" in str(err)
    # the same loop over a plain dict: iterated by key, as Python does
    tables = {"t": {"q": 2.0, "p": 1.0}}
    vg = s2sad.value_and_grad(over_reversed)
    for _ in range(3):  # d/dx of sum(x) * (1.0 * 1.0 + 2.0 * 3.0): exactly 7
        value, g = vg(x, tables)
        np.testing.assert_allclose(value, over_reversed(x, tables), rtol=1e-14)
        np.testing.assert_allclose(g, np.full(4, 7.0), rtol=1e-14)
