"""A number read back from the text of a differentiated value is refused.

Before: ``float(str(x)) * x``, ``float(f"{x}") * x`` and ``float(format(x,
".17g")) * x`` gave the gradient ``x`` where it is ``2 x``: the text was a
constant to the analysis, so the path through it lost its derivative
silently.  Text that is only printed or logged stays fine."""

import inspect
import logging

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError

log = logging.getLogger(__name__)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def through_str(x):
    s = str(x)
    return float(s) * x


def through_fstring(x):
    return float(f"{x:.17g}") * x


def through_format_and_strip(x):
    s = " " + format(x, ".17g")
    return np.float64(s.strip()) * x


def through_percent_format(x):
    return float("%.17g" % x) * x  # noqa: UP031 - the pattern under test


def through_format_method(x):
    return float("{:.17g}".format(x)) * x  # noqa: UP032 - the pattern under test


def printed_and_logged(x):
    print(f"x = {x}")
    log.info("x is %s", str(x))
    label = "value: " + str(x * 2.0)
    y = x * x
    print(label, repr(y))
    return y


def parsed_but_unused(x):
    unused = float(str(x))  # noqa: F841 - reaches no output
    return x * x


@pytest.mark.parametrize(
    "f, needle",
    [
        (through_str, "float(s)"),
        (through_fstring, "float(f"),
        (through_format_and_strip, "np.float64("),
        (through_percent_format, "% x"),
        (through_format_method, ".format(x)"),
    ],
)
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_numbers_read_back_from_text_are_refused(f, needle, mode):
    with pytest.raises(UnsupportedSyntaxError) as info:
        if mode == "reverse":
            s2sad.grad(f)(0.7)
        else:
            s2sad.jvp(f, (0.7,), (1.0,))
    err = info.value
    lines, first = inspect.getsourcelines(f)
    line = first + next(i for i, s in enumerate(lines) if needle in s)
    assert (err.filename, err.line) == (__file__, line)
    assert "read back from the text of a differentiated value" in str(err)


def test_text_for_printing_and_logging_is_fine(capsys):
    for x in (0.7, -1.3):
        g = s2sad.grad(printed_and_logged)(x)
        assert g == pytest.approx(2 * x, rel=1e-15)
        assert s2sad.grad(parsed_but_unused)(x) == pytest.approx(2 * x, rel=1e-15)
    assert "x = " in capsys.readouterr().out
