"""What a user sees when something goes wrong: run-time errors located in their
source, compile errors without s2sad's frames, clear refusals, the compile log."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import s2sad
from s2sad import errors


def _real_part_sum(z):
    return np.sum(np.real(z) * 2.0)


# ---------------------------------------------------------------- complex arguments


@pytest.mark.parametrize(
    "value",
    [1.0 + 2.0j, np.complex128(1.0 + 2.0j), np.ones(3, dtype=complex)],
    ids=["complex", "complex128", "array"],
)
@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "jvp"])
def test_complex_arguments_are_refused_at_the_call(value, transform):
    with pytest.raises(errors.NonDifferentiableArgumentError) as info:
        if transform == "jvp":
            s2sad.jvp(_real_part_sum)(value, value)
        else:
            getattr(s2sad, transform)(_real_part_sum)(value)
    text = str(info.value)
    assert "complex arguments are not supported yet" in text
    assert "real and imaginary parts as separate float arguments" in text
    assert "argument 'z'" in text


def test_complex_inside_a_dict_is_named_by_its_path():
    with pytest.raises(errors.NonDifferentiableArgumentError, match=r"'p'\['w'\]"):
        s2sad.grad(lambda p: np.sum(np.real(p["w"])))({"w": np.ones(2, complex)})


# ---------------------------------------------------------------- clearer refusals


def _stars(*xs):
    return xs[0] * 2.0


def _calls_stars(x):
    return np.sum(_stars(x, x))


class _Square:
    def __call__(self, x):
        return x * x


class _Opaque:
    __call__ = np.frompyfunc(abs, 1, 1)


_square = _Square()
_opaque = _Opaque()
_vectorized = np.vectorize(lambda t: t * 2.0)


def _calls_square(x):
    return np.sum(_square(x))


def _calls_opaque(x):
    return np.sum(_opaque(x))


def _calls_vectorized(x):
    return np.sum(_vectorized(x))


def test_a_callee_with_star_args_is_differentiated():
    # once refused ("calls to functions with *xs are not supported yet"); the
    # call site now passes the extra arguments as one tuple (tests/test_unpacking.py)
    np.testing.assert_allclose(s2sad.grad(_calls_stars)(np.ones(3)), np.full(3, 2.0))


def _calls_square_by_name(x):
    return np.sum(_square.__call__(x))


def test_a_callable_object_is_compiled_through_its_class_call():
    x = np.arange(3.0)
    np.testing.assert_allclose(s2sad.grad(_calls_square)(x), 2 * x)
    np.testing.assert_allclose(s2sad.grad(_calls_square_by_name)(x), 2 * x)


def test_a_callable_object_without_source_is_named_by_its_class():
    with pytest.raises(errors.MissingRuleError) as info:
        s2sad.grad(_calls_opaque)(np.ones(3))
    text = str(info.value)
    assert "_Opaque.__call__" in text and " object at 0x" not in text
    assert "@s2sad.adjoint(_opaque)" in text


def test_vectorize_is_named_after_the_users_function():
    with pytest.raises(errors.MissingRuleError) as info:
        s2sad.grad(_calls_vectorized)(np.ones(3))
    text = str(info.value)
    assert "numpy.vectorize(" in text
    assert "@s2sad.adjoint(_vectorized)" in text and "def d__vectorized(" in text
    assert "d_<lambda>" not in text


_log = logging.getLogger("tests.user_errors")


def _logs(x):
    h = np.tanh(x)
    _log.debug("h %s", h)
    logging.getLogger("tests.user_errors").info("sum %s", np.sum(h))
    print("h", h)
    return np.sum(h * h)


def test_logging_and_print_run_as_side_effects(caplog, capsys):
    x = np.linspace(0.1, 0.5, 3)
    with caplog.at_level(logging.DEBUG, logger="tests.user_errors"):
        g = s2sad.grad(_logs)(x)
        value, tangent = s2sad.jvp(_logs)(x, np.ones(3))
    h = np.tanh(x)
    np.testing.assert_allclose(g, 2 * h * (1 - h * h))
    assert value == pytest.approx(np.sum(h * h))
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count(f"h {h}") == 2  # once per transform, with the primal values
    assert sum(m.startswith("sum ") for m in messages) == 2
    assert capsys.readouterr().out.count("h [") == 2


# ---------------------------------------------------------------- the compile log


def _logged(w, x, k):
    return np.sum(np.tanh(x @ w)) * k


def test_compiles_cache_hits_and_recompiles_are_logged(caplog, tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    w, x = np.ones((3, 2)), np.ones((4, 3))
    with caplog.at_level(logging.DEBUG, logger="s2sad"):
        g = s2sad.grad(_logged)
        g(w, x, 1.0)
        g(w, x, 1.0)  # the same signature: nothing logged
        g(w, x, 2)  # an int argument: a new type signature
        g(w, x, 1.0)  # back to the first one: an in-memory hit, at DEBUG
        s2sad.grad(_logged)(w, x, 1.0)  # a new grad object: from the disk cache
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    what = f"{_logged.__module__}._logged (grad, argnums=(0,))"
    assert lines[0] == ("INFO", f"compiling {what}: not in the disk cache")
    assert (
        lines[1][1].startswith(f"compiled {what} in ") and str(tmp_path) in lines[1][1]
    )
    assert lines[2][0] == "INFO" and lines[2][1].startswith(
        f"recompiling {what}: new argument signature 'a<f8,a<f8,i;small'"
    )
    assert lines[3][1].startswith(f"compiling {what}: not in the disk cache (1 cached")
    assert lines[5] == ("DEBUG", f"reusing compiled {what} for 'a<f8,a<f8,-;small'")
    assert lines[6][0] == "INFO"
    assert lines[6][1].startswith(f"loaded {what} from the disk cache: {tmp_path}")
    assert len(lines) == 7


def test_the_environment_variable_attaches_a_stderr_handler():
    import subprocess
    import sys

    code = (
        "import logging, s2sad.logs as l; lg = logging.getLogger('s2sad'); "
        "print(lg.level, len(lg.handlers))"
    )
    env = {**os.environ, "S2SAD_LOG_COMPILES": "1"}
    on = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)
    env["S2SAD_LOG_COMPILES"] = "0"
    off = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)
    assert on.stdout.split() == [b"20", b"1"], on.stderr
    assert off.stdout.split() == [b"0", b"0"], off.stderr


# ---------------------------------------------------------------- the command line

CLI_MODEL = """\
import numpy as np

COUNT = 3


def loss(w):
    return np.sum(np.tanh(w))


def constant():
    return 1.0
"""


def _cli(tmp_path, capsys, *argv):
    """``s2sad ARGV`` in this process, with model.py as a module of its own name."""
    import sys

    from s2sad import cli

    (tmp_path / "model.py").write_text(CLI_MODEL)
    for name in ("model", "broken", "slow"):
        sys.modules.pop(name, None)  # another test's file of the same name
    status = cli.main([*argv])
    err = capsys.readouterr().err
    assert "internal error" not in err and "bug in s2sad" not in err, err
    return status, err


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            "raise RuntimeError('boom')\n",
            "error while importing broken.py: RuntimeError",
        ),
        ("def f(x)\n    return x\n", "broken.py:1:9: syntax error"),
        ("import not_a_module_s2sad\n", "No module named 'not_a_module_s2sad'"),
    ],
    ids=["raises", "syntax", "import"],
)
def test_cli_model_that_fails_to_import(
    tmp_path, capsys, monkeypatch, source, expected
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.py").write_text(source)
    status, err = _cli(tmp_path, capsys, "show", "broken.py:f")
    assert status == 1 and expected in err


def test_cli_names_that_are_not_functions(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, err = _cli(tmp_path, capsys, "show", "model.py:nothere")
    assert status == 1 and "no function named 'nothere' (found: constant, loss)" in err
    status, err = _cli(tmp_path, capsys, "show", "model.py:COUNT")
    assert status == 1 and "'COUNT' is an int, not a function" in err
    status, err = _cli(tmp_path, capsys, "show", "model.py:constant")
    assert status == 1 and "constant() takes no arguments" in err


def test_cli_output_that_is_not_a_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("")
    status, err = _cli(
        tmp_path, capsys, "compile", "model.py", "-f", "loss", "-o", "taken"
    )
    assert status == 1 and "--output taken: cannot write the modules there" in err


def test_cli_cache_directory_that_cannot_be_created(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "file" / "cache"))
    status, err = _cli(tmp_path, capsys, "cache", "info")
    assert status == 1 and "cannot create the s2sad cache" in err
    assert "Set S2SAD_CACHE_DIR" in err


def test_cli_keyboard_interrupt_while_importing_the_model(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "slow.py").write_text("raise KeyboardInterrupt\n")
    status, err = _cli(tmp_path, capsys, "show", "slow.py:f")
    assert status == 130 and err.strip() == "interrupted"


# ---------------------------------------------------------------- run-time errors


def _layer(x, w):
    z = x @ w
    return np.tanh(z)


def _shapes(w, x):
    h = x @ w
    y = _layer(h, w.T)
    return np.sum(y * y)


def _calls_layer(w, x):
    h = x @ w
    y = _layer(h, w)
    return np.sum(y * y)


def _root(x):
    r = np.sqrt(x)
    return np.sum(r)


def _line(fn, text):
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_shape_error_in_the_forward_pass_names_the_users_line():
    g = s2sad.grad(_shapes)
    with pytest.raises(ValueError, match="matmul") as info:
        g(np.ones((3, 2)), np.ones((4, 5)))
    line = _line(_shapes, "h = x @ w")
    assert info.value.__notes__ == [
        f"in the gradient of _shapes, forward pass of {__file__}:{line}: h = x @ w"
    ]
    value, _ = s2sad.value_and_grad(_shapes)(np.ones((3, 2)), np.ones((4, 3)))
    assert np.isfinite(value)


def test_an_error_in_a_callee_names_the_callee_and_its_line():
    with pytest.raises(ValueError, match="matmul") as info:
        s2sad.grad(_calls_layer)(np.ones((3, 2)), np.ones((4, 3)))
    line = _line(_layer, "z = x @ w")
    assert info.value.__notes__ == [
        f"in the gradient of _calls_layer, forward pass of {__file__}:{line} "
        "(in _layer): z = x @ w"
    ]


def test_an_error_in_the_backward_pass_is_located():
    # sqrt(0) is fine going forward; its derivative divides by zero going back
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError) as info:
        s2sad.grad(_root)(np.array([0.0, 1.0]))
    line = _line(_root, "r = np.sqrt(x)")
    assert info.value.__notes__ == [
        f"in the gradient of _root, backward pass of {__file__}:{line}: r = np.sqrt(x)"
    ]


def test_an_error_in_forward_mode_is_located():
    with pytest.raises(ValueError, match="matmul") as info:
        s2sad.jvp(_shapes)(np.ones((3, 2)), np.ones((4, 5)), np.ones((3, 2)))
    line = _line(_shapes, "h = x @ w")
    assert info.value.__notes__ == [
        f"in the jvp of _shapes, at {__file__}:{line}: h = x @ w"
    ]


def test_the_line_table_stays_out_of_the_source_and_survives_the_disk_cache(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    g = s2sad.grad(_shapes).compile(np.ones((3, 2)), np.ones((4, 3)))
    assert "_s2sad_lines" not in g.source and "s2sad-lines" not in g.source
    last = open(g.path).read().rstrip("\n").rpartition("\n")[2]
    assert last.startswith("# s2sad-lines: {")
    assert (
        f"('{_shapes.__module__}', {_line(_shapes, 'h = x @ w')}): 'h = x @ w'" in last
    )
    fresh = s2sad.grad(_shapes)  # loads the cached file: the table comes along
    with pytest.raises(ValueError) as info:
        fresh(np.ones((3, 2)), np.ones((4, 5)))
    assert info.value.__notes__[0].endswith(
        f":{_line(_shapes, 'h = x @ w')}: h = x @ w"
    )


def _compile_error(x):
    try:
        y = x * 2.0
    except ValueError:
        y = x
    return np.sum(y)


def test_a_compile_error_has_no_frames_inside_the_compiler(monkeypatch):
    import traceback

    monkeypatch.delenv("S2SAD_TRACEBACK_FILTERING", raising=False)
    with pytest.raises(errors.UnsupportedSyntaxError) as info:
        s2sad.grad(_compile_error)(np.ones(3))
    frames = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    assert frames[0] == __file__
    assert not [f for f in frames if "transforms" in f or f.endswith("pipeline.py")]
    assert info.value.__cause__ is None and info.value.__suppress_context__
    text = "".join(traceback.format_exception(info.value))
    assert "s2sad/transforms" not in text and "'try' statement" in text


def test_full_tracebacks_on_request(monkeypatch):
    import traceback

    monkeypatch.setenv("S2SAD_TRACEBACK_FILTERING", "off")
    with pytest.raises(errors.UnsupportedSyntaxError) as info:
        s2sad.grad(_compile_error)(np.ones(3))
    frames = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    assert any("transforms" in f for f in frames)
