"""validate: refuse unsupported syntax (all problems at once), flatten the parameters."""

import numpy as np
import pytest

from s2sad.errors import UnsupportedSyntaxError
from tests.transforms.dumps import after, code


def keyword_only(x, *, k=2.0, scale=1.0):
    return np.sum(x * k * scale)


def two_problems(x):
    total = 0.0
    try:
        total = np.sum(x)
    except ValueError:
        pass
    ys = {v * 2 for v in x}
    return total + len(ys)


def test_validate_flattens_keyword_only_parameters():
    assert after("validate", keyword_only) == code("""
        # keyword_only_value_and_grad
        def keyword_only(x, k, scale):
            return np.sum(x * k * scale)
    """)


def test_validate_reports_every_problem_with_its_location():
    first = two_problems.__code__.co_firstlineno
    with pytest.raises(UnsupportedSyntaxError) as info:
        after("validate", two_problems)
    err = info.value
    assert [(p.line, p.col, p.message) for p in err.problems] == [
        (first + 2, 5, "unsupported construct: 'try' statement"),
        (first + 6, 10, "unsupported construct: set comprehension"),
    ]
    assert err.problems[1].hint.startswith("sets are unordered")
    assert err.filename == __file__
