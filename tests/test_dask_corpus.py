"""The whole corpus over Dask arrays: NumPy's value and gradients, or a refusal.

Every corpus case that takes arrays runs with each array argument turned into a
chunked Dask array (two chunks along the first axis where it has two rows or
more), on Dask's synchronous scheduler (the distributed path is checked by
tests/test_dask.py on a LocalCluster).  Three outcomes are allowed: NumPy's
value and gradients (float64, tight tolerance; gradients of Dask arguments come
back lazy and are computed here), an ``s2sad.errors`` exception, or Dask
refusing the user's own function too.  The number of matches is a floor, so a
change that quietly refuses more is seen; a different answer always fails.
"""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.errors import S2SADError
from tests.corpus import test_corpus  # noqa: F401  (registers every case)
from tests.corpus.registry import CASES

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

#: corpus cases that must match NumPy on Dask (at least)
FLOOR = 180
_MATCHED: list[str] = []


def _has_array(v) -> bool:
    if isinstance(v, np.ndarray):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_array(x) for x in v)
    if isinstance(v, dict):
        return any(_has_array(x) for x in v.values())
    return False


def _to_dask(v):
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        rows = v.shape[0] if v.ndim else 1
        chunks = (max(1, (rows + 1) // 2),) + v.shape[1:] if v.ndim else ()
        return da.from_array(v, chunks=chunks)
    if isinstance(v, list):
        return [_to_dask(x) for x in v]
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return tuple(_to_dask(x) for x in v)
    if isinstance(v, dict):
        return {k: _to_dask(x) for k, x in v.items()}
    return v


def _computed(v):
    if hasattr(v, "__dask_graph__"):
        return np.asarray(v.compute())
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return type(v)(_computed(x) for x in v)
    if isinstance(v, dict):
        return {k: _computed(x) for k, x in v.items()}
    return v


def _close(got, want) -> None:
    if isinstance(want, dict):
        assert set(got) == set(want)
        for k in want:
            _close(got[k], want[k])
    elif isinstance(want, (list, tuple)) and not hasattr(want, "_fields"):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w)
    elif want is None:
        assert got is None
    elif (
        hasattr(want, "_fields") or not np.isscalar(want) and not hasattr(want, "shape")
    ):
        for g, w in zip(got, want):
            _close(g, w)
    else:
        np.testing.assert_allclose(
            np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-12
        )


ARRAY_CASES = [c for c in CASES if _has_array(c.args(0))]


@pytest.mark.parametrize("case", ARRAY_CASES, ids=lambda c: c.name)
def test_corpus_case_on_dask_matches_numpy_or_is_refused(case):
    want_value, want = s2sad.value_and_grad(case.fn, argnums=case.argnums)(
        *case.args(0)
    )
    args = [_to_dask(a) for a in case.args(0)]
    with dask.config.set(scheduler="synchronous"):
        try:
            value, got = s2sad.value_and_grad(case.fn, argnums=case.argnums)(*args)
            value, got = _computed(value), _computed(got)
        except S2SADError:
            return  # refused, saying what and where
        except Exception:  # noqa: BLE001 - allowed where the function fails there too
            with pytest.raises(Exception):  # noqa: B017 - any failure will do
                _computed(case.fn(*args))
            return
    np.testing.assert_allclose(np.asarray(value), np.asarray(want_value), rtol=1e-10)
    _close(got, want)
    _MATCHED.append(case.name)


def test_most_of_the_corpus_runs_on_dask():
    """Runs after the cases (same module, declared later): the floor holds."""
    import os

    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("the count is per process: run this module without -n")
    if not _MATCHED:
        pytest.skip("the corpus cases did not run in this session (-k?)")
    assert len(_MATCHED) >= FLOOR, len(_MATCHED)
