"""Test-wide settings: the suite never writes into the user's real gradient cache."""

from __future__ import annotations

import os
import tempfile
import warnings

import pytest

# Set before any test imports s2sad.cache; subprocesses inherit it.  A caller's
# own S2SAD_CACHE_DIR (CI sets one per run) is kept.
if not os.environ.get("S2SAD_CACHE_DIR"):
    os.environ["S2SAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="s2sad-tests-")


# ---------------------------------------------------------------- Dask (extra 'dask')


@pytest.fixture(scope="module")
def client():
    """A 2-worker dask.distributed LocalCluster (processes) for one test module
    (the module skips itself first when Dask is not installed)."""
    from dask import distributed

    cluster = distributed.LocalCluster(
        n_workers=2,
        processes=True,
        threads_per_worker=1,
        dashboard_address=None,
        silence_logs=40,
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture
def computes(monkeypatch):
    """Counts dask.compute calls and the largest array they bring to the driver;
    Dask's NumPy fallback (which computes a copy on the driver) fails the test."""
    from tests.fixtures.dask_cluster import Computes

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*not implemented by Dask array")
        yield Computes(monkeypatch)
