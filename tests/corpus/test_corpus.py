"""Every corpus function, compiled and checked against central finite differences."""

import numpy as np
import pytest

import s2sad
from tests.corpus import cases_basic  # noqa: F401  (registers cases)
from tests.corpus import cases_loops  # noqa: F401
from tests.corpus import cases_calls  # noqa: F401
from tests.corpus import cases_data  # noqa: F401
from tests.corpus import cases_combo  # noqa: F401
from tests.corpus import cases_programs  # noqa: F401
from tests.corpus import cases_builtins  # noqa: F401
from tests.corpus import cases_objects  # noqa: F401
from tests.corpus import cases_fuzz  # noqa: F401
from tests.corpus import cases_comprehensions  # noqa: F401
from tests.corpus import cases_generators  # noqa: F401
from tests.corpus import cases_unpacking  # noqa: F401
from tests.corpus import cases_refuse_runtime  # noqa: F401
from tests.corpus import cases_runtime_callees  # noqa: F401
from tests.corpus import cases_mutation  # noqa: F401
from tests.corpus import cases_local_forms  # noqa: F401
from tests.corpus import cases_objects_built  # noqa: F401
from tests.corpus.fd import assert_close_tree, numerical_grad
from tests.corpus.registry import CASES


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gradient_matches_finite_differences(case):
    for seed in (0, 1):
        args = case.args(seed)
        value, grads = s2sad.value_and_grad(case.fn, argnums=case.argnums)(*args)
        np.testing.assert_allclose(value, case.fn(*case.args(seed)), rtol=1e-12)
        nums = case.argnums if isinstance(case.argnums, tuple) else (case.argnums,)
        got = grads if isinstance(case.argnums, tuple) else (grads,)
        for i, g in zip(nums, got):
            want = numerical_grad(case.fn, case.args(seed), i)
            assert_close_tree(g, want, where=f"{case.name} d/darg{i} seed {seed}")


def test_corpus_is_large():
    assert len(CASES) >= 150


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_buffered_gradient_matches_finite_differences(case, monkeypatch):
    """The same check through the workspace: buffers for every array size, and
    the third call of each shape (the first runs plain, the second records)."""
    from s2sad.runtime import workspace

    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    dfn = s2sad.value_and_grad(case.fn, argnums=case.argnums)
    nums = case.argnums if isinstance(case.argnums, tuple) else (case.argnums,)
    for seed in (0, 1):
        for _ in range(3):
            value, grads = dfn(*case.args(seed))
        np.testing.assert_allclose(value, case.fn(*case.args(seed)), rtol=1e-12)
        got = grads if isinstance(case.argnums, tuple) else (grads,)
        for i, g in zip(nums, got):
            want = numerical_grad(case.fn, case.args(seed), i)
            assert_close_tree(g, want, where=f"{case.name} d/darg{i} seed {seed}")
