"""The ``lib`` fixture: every conformance test runs on each array library."""

from tests.backends.libraries import lib  # noqa: F401  (the fixture)
