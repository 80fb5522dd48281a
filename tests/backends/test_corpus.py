"""The whole corpus on each library: the same value and gradients as NumPy, or a
refusal, never a different answer.

Every corpus case that takes arrays runs with its arrays converted to the
library.  Three outcomes are allowed: NumPy's value and gradients (float64,
tight tolerance), an s2sad error (the case uses something not verified there),
or the library refusing the user's own function too (array-api-strict has no
``x[0]`` on a matrix, no methods).  The counts of matches are floors, so that
a change that quietly refuses more is seen.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import s2sad
from s2sad.errors import S2SADError
from tests.backends.libraries import _same_tree, convert
from tests.corpus import test_corpus  # noqa: F401  (registers every case)
from tests.corpus.registry import CASES

#: corpus cases verified (matching NumPy) at least, per library
FLOORS = {"torch": 170, "array_api_strict": 140, "cupy": 170}
_MATCHED: dict = {}


def _has_array(v) -> bool:
    if isinstance(v, np.ndarray):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_array(x) for x in v)
    if isinstance(v, dict):
        return any(_has_array(x) for x in v.values())
    return False


ARRAY_CASES = [c for c in CASES if _has_array(c.args(0))]


@pytest.mark.parametrize("case", ARRAY_CASES, ids=lambda c: c.name)
def test_corpus_case_matches_numpy_or_is_refused(lib, case):
    want_value, want = s2sad.value_and_grad(case.fn, argnums=case.argnums)(
        *case.args(0)
    )
    try:
        value, got = s2sad.value_and_grad(case.fn, argnums=case.argnums)(
            *convert(case.args(0), lib)
        )
    except S2SADError:
        return  # refused, saying what and where
    except Exception:  # noqa: BLE001 - allowed where the function fails there too
        with pytest.raises(Exception):  # noqa: B017 - any refusal will do
            case.fn(*convert(case.args(0), lib))
        return
    many = isinstance(case.argnums, tuple)
    _same_tree(got if many else (got,), want if many else (want,), lib, 1e-10)
    plain = value if isinstance(value, float) else lib.back(value)
    np.testing.assert_allclose(plain, want_value, rtol=1e-10)
    key = lib.name.split(":")[0]
    _MATCHED[key] = _MATCHED.get(key, 0) + 1


def test_most_of_the_corpus_is_verified(lib):
    """Runs after the cases (same module, declared later): the floors hold."""
    key = lib.name.split(":")[0]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("the counts are per process: run this module without -n")
    if not _MATCHED:
        pytest.skip("the corpus cases did not run in this session (-k?)")
    assert _MATCHED.get(key, 0) >= FLOORS[key] * (2 if key == "array_api_strict" else 1)
