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


#: corpus cases whose jvp matches NumPy's at least, per library
JVP_FLOORS = {"torch": 200, "array_api_strict": 160, "cupy": 200}
_JVP_MATCHED: dict = {}


def _tangent(a, rng):
    if isinstance(a, np.ndarray):
        return rng.normal(size=a.shape)
    if isinstance(a, float):
        return float(rng.normal())
    if isinstance(a, dict):
        return {k: _tangent(v, rng) for k, v in a.items()}
    if isinstance(a, (list, tuple)):
        return type(a)(_tangent(v, rng) for v in a)
    return a


def _numpy(x, lib):
    if isinstance(x, dict):
        return {k: _numpy(v, lib) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_numpy(v, lib) for v in x]
    return x if isinstance(x, (float, int)) else lib.back(x)


@pytest.mark.parametrize("case", ARRAY_CASES, ids=lambda c: c.name)
def test_corpus_jvp_matches_numpy_or_is_refused(lib, case):
    """Forward mode over the corpus: NumPy's tangent (checked against finite
    differences in tests/corpus), an s2sad refusal, or the user's function
    failing on the library too."""
    nums = case.argnums if isinstance(case.argnums, tuple) else (case.argnums,)
    rng = np.random.default_rng(0)
    ts = tuple(_tangent(case.args(0)[i], rng) for i in nums)
    try:
        want_value, want = s2sad.jvp(case.fn, argnums=nums)(*case.args(0), ts)
    except S2SADError:
        pytest.skip("NumPy's jvp refuses this case")
    try:
        value, got = s2sad.jvp(case.fn, argnums=nums)(
            *convert(case.args(0), lib), convert(ts, lib)
        )
    except S2SADError:
        return
    except Exception:  # noqa: BLE001 - allowed where the function fails there too
        with pytest.raises(Exception):  # noqa: B017 - any refusal will do
            case.fn(*convert(case.args(0), lib))
        return
    for a, b in ((got, want), (value, want_value)):
        np.testing.assert_allclose(
            np.asarray(_numpy(a, lib), dtype=float),
            np.asarray(b, dtype=float),
            rtol=1e-10,
            atol=1e-12,
        )
    key = lib.name.split(":")[0]
    _JVP_MATCHED[key] = _JVP_MATCHED.get(key, 0) + 1


def test_most_of_the_corpus_jvp_is_verified(lib):
    key = lib.name.split(":")[0]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("the counts are per process: run this module without -n")
    if not _JVP_MATCHED:
        pytest.skip("the corpus cases did not run in this session (-k?)")
    floor = JVP_FLOORS[key] * (2 if key == "array_api_strict" else 1)
    assert _JVP_MATCHED.get(key, 0) >= floor
