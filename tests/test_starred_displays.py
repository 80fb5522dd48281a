"""``(*xs, y)`` and ``[*xs, y]``: items unpacked into a tuple or list display.

Before: the unpacked items were no operands of the display for the activity
analysis, so ``np.hstack((*t, ones))`` with ``t = (a, b)`` gave a zero gradient
for ``a`` and ``b``: a silent wrong gradient (also for a callee's ``*args``).
Now a local of fixed length is spelled out item by item (front/starred.py), and
anything else that carries a differentiated value is refused where it is
written (front/activity.py)."""

import inspect

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError
from tests.repeated import buffer_everything, check_repeated_calls  # noqa: F401


@pytest.fixture(autouse=True)
def _buffers(buffer_everything):  # noqa: F811
    pass


def tuple_of_locals(W, a, b):
    t = (a, b)
    cat = np.hstack((*t, np.ones((a.shape[0], 1))))
    return np.sum(np.tanh(cat @ W))


def list_twice(W, a, b):
    t = [a, b]
    parts = [*t, np.ones((a.shape[0], 1)), *t]
    return np.sum(np.tanh(np.hstack(parts) @ np.vstack([W, W[:-1]])))


def broadcast_items(a, b):
    t = (a, b)
    u = (*t, 2.0)
    return np.sum(u[0] * u[1] + u[2] * u[0] ** 2)


def concat_and_multiply(weights, *args):  # autograd's examples/lstm.py, written with *
    cat_state = np.hstack((*args, np.ones((args[0].shape[0], 1))))
    return cat_state @ weights


def through_callee_varargs(W, a, b):
    return np.sum(np.tanh(concat_and_multiply(W, a, b)))


def argument_tuple(x, xs):
    return np.sum(np.hstack((*xs, x)) ** 2)


def _data(rows, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(6, 2)),
        rng.normal(size=(rows, 2)),
        rng.normal(size=(rows, 3)),
    )


@pytest.mark.parametrize("rows", [1, 3, 5])
def test_a_local_of_fixed_length_is_spelled_out(rows):
    W, a, b = _data(rows)
    for f in (tuple_of_locals, list_twice):
        check_repeated_calls(f, (W, a, b))
        s2sad.check_grads(f, (W, a, b), modes=("rev", "fwd"))


def test_unpacked_items_broadcast():
    rng = np.random.default_rng(1)
    for a, b in (
        (rng.normal(size=(3, 4)), rng.normal(size=4)),
        (rng.normal(size=2), 0.7),
    ):
        argnums = (0, 1) if isinstance(b, np.ndarray) else (0,)
        check_repeated_calls(broadcast_items, (a, b), argnums=argnums)


def _line(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(lines) if text in s)


@pytest.mark.parametrize(
    "f, args, at",
    [
        (through_callee_varargs, _data(3), (concat_and_multiply, "np.hstack")),
        (argument_tuple, (np.ones(2), (np.ones(3), np.ones(1))), None),
    ],
)
def test_other_unpacked_differentiated_values_are_refused_where_written(f, args, at):
    """Before: a zero gradient for the unpacked items, silently."""
    fn, text = at if at else (f, "np.hstack")
    for transform in (
        lambda: s2sad.value_and_grad(f, argnums=tuple(range(len(args))))(*args),
        lambda: s2sad.check_grads(f, args, modes=("fwd",)),
    ):
        with pytest.raises(UnsupportedSyntaxError) as info:
            transform()
        err = info.value
        assert (err.filename, err.line) == (__file__, _line(fn, text))
        assert "unpacked with '*'" in str(err)
