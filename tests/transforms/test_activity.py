"""activity: which names depend on the differentiated inputs and reach the output."""

import numpy as np
import pytest

from s2sad.errors import UnsupportedSyntaxError
from s2sad.transforms.front import activity
from tests.transforms.dumps import after, code, job_after


def mixed(x, n):
    k = n * 2
    y = x * k
    z = np.sin(y)
    w = x * 3.0  # noqa: F841  (active, never used)
    for i in range(2):
        z = z + k
    return np.sum(z)


def mutates_its_argument(x):
    x[0] = 1.0
    return np.sum(x)


def summary(act: activity.Activity) -> str:
    adjoint = sorted(n for n in act.active if act.needs_adjoint(n))
    rows = [
        ("active", sorted(act.active)),
        ("useful", sorted(act.useful)),
        ("adjoint", adjoint),
        ("never", sorted(act.never)),
    ]
    return "".join(f"{k:8}{' '.join(v)}".rstrip() + "\n" for k, v in rows)


def test_activity_runs_on_the_normalized_function():
    assert after("activity", mixed) == code("""
        # mixed_value_and_grad
        def mixed(x, n):
            k = n * 2
            y = x * k
            z = np.sin(y)
            w = x * 3.0
            r = range(2)
            for i in r:
                add = z + k
                z = add
            out = np.sum(z)
            return out
    """)


def test_reverse_activity_adjoints_are_active_and_useful():
    job, _ = job_after("activity", mixed)
    # w is active but unused; k is used but depends only on n
    assert summary(job.act) == code("""
        active  add out w x y z
        useful  add k out x y z
        adjoint add out x y z
        never
    """)


def test_forward_activity_keeps_inactive_useful_names_and_skips_loop_counters():
    job, _ = job_after("activity", mixed, mode="forward")
    assert summary(job.act) == code("""
        active  add out w x y z
        useful  add k n out x y z
        adjoint add out x y z
        never   i r
    """)


def test_activity_run_directly_on_a_normalized_node():
    job, _ = job_after("normalize", mixed, argnums=(1,))
    act = activity.run(job.node, ["n"], job.parsed.source)
    assert sorted(act.active) == ["add", "k", "n", "out", "y", "z"]
    assert not act.needs_adjoint("x")


def test_activity_refuses_an_in_place_change_of_an_argument():
    with pytest.raises(UnsupportedSyntaxError) as info:
        after("activity", mutates_its_argument)
    (problem,) = info.value.problems
    assert problem.line == mutates_its_argument.__code__.co_firstlineno + 1
    assert problem.message == "in-place change of the argument 'x'"
    assert problem.hint == "work on a copy: x = x.copy() (or list(x)) first"
