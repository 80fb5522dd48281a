"""Shared fixtures for the rule tests: every rule of a family must be tested."""

from __future__ import annotations

import pytest

from s2sad.docs import rules_by_family
from s2sad.runtime import registry


def untested(family: str, tested: set) -> list[str]:
    """Names of the family's rules whose primal is not in ``tested``."""
    keys = {registry.key_of(fn) for fn in tested}
    return [
        r.name
        for r in rules_by_family(optional=True)[family]
        if registry.key_of(r.primal) not in keys
    ]


@pytest.fixture
def family_coverage():
    """``family_coverage(family, tested)`` fails listing the family's untested rules."""

    def check(family: str, tested: set) -> None:
        missing = untested(family, tested)
        assert not missing, f"rules without a test in {family}: {missing}"

    return check
