"""Every refusal names file:line:col, shows the line and says what to do."""

import os
import re

import numpy as np
import pytest

import s2sad
from s2sad import errors
from tests.fixtures import bad_code as bad

FILE = bad.__file__


def line_of(fn, text):
    """The file line number of the first line of ``fn`` containing ``text``."""
    import inspect

    lines, first = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return first + i
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def compile_error(fn, *args, argnums=0):
    with pytest.raises(errors.S2SADError) as info:
        s2sad.grad(fn, argnums=argnums)(*args)
    return info.value


def test_try_is_refused_with_location():
    err = compile_error(bad.uses_try, np.ones(3))
    assert isinstance(err, errors.UnsupportedSyntaxError)
    assert err.filename == FILE
    assert err.line == line_of(bad.uses_try, "try:")
    assert err.col == 5
    text = str(err)
    assert f"{os.path.basename(FILE)}" in text and "'try' statement" in text
    assert "try:" in text and "^" in text and "hint:" in text


def test_all_problems_reported_at_once():
    err = compile_error(bad.many_problems, np.ones(3))
    constructs = [p.message for p in err.problems]
    assert len(err.problems) == 3, constructs
    assert any("global" in m for m in constructs)
    assert any("with" in m for m in constructs)
    assert any("set comprehension" in m for m in constructs)
    assert [p.line for p in err.problems] == sorted(p.line for p in err.problems)
    assert str(err).startswith("3 problems found")


@pytest.mark.parametrize(
    "fn, needle, construct",
    [
        (bad.uses_yield, "yield x", "generator"),
        (bad.uses_eval, 'eval("x")', "eval()"),
        (bad.star_args, "def star_args", "'*args' parameter"),
        (bad.star_call, "np.add(*parts)", "unpacked with '*' or '**'"),
        (bad.attribute_assign, "x.scale", "attribute assignment on the differentiated"),
        (bad.nonlocal_write, "nonlocal total", "'nonlocal' statement"),
    ],
)
def test_unsupported_constructs(fn, needle, construct):
    err = compile_error(fn, np.ones(3))
    assert isinstance(err, errors.UnsupportedSyntaxError)
    assert any(construct in p.message for p in err.problems), str(err)
    assert any(p.line == line_of(fn, needle) for p in err.problems), str(err)
    assert all(p.hint for p in err.problems)


def test_missing_rule_names_function_and_shows_how_to_register():
    err = compile_error(bad.unknown_function, np.ones(4))
    assert isinstance(err, errors.MissingRuleError)
    assert err.line == line_of(bad.unknown_function, "np.fft.fft")
    text = str(err)
    assert "numpy" in text and "fft" in text
    assert "@s2sad.adjoint(" in text and "nondifferentiable" in text


def test_callable_object_with_source_is_compiled_through_its_call():
    # once refused; type(obj).__call__ is now compiled like a bound method
    np.testing.assert_allclose(s2sad.grad(bad.opaque_callee)(np.ones(3)), 2.0)


def test_mutating_an_argument_works_on_a_copy():
    # once refused: the gradient is with respect to the value on entry, and the
    # caller's array ends as Python leaves it
    x = np.array([3.0, 2.0, 5.0])
    np.testing.assert_array_equal(s2sad.grad(bad.mutates_argument)(x), [0, 1, 1])
    np.testing.assert_array_equal(x, [1.0, 2.0, 5.0])


def test_view_read_after_in_place_change():
    err = compile_error(bad.view_after_mutation, np.ones(3))
    assert isinstance(err, errors.AliasingError)
    assert err.line == line_of(bad.view_after_mutation, "return np.sum(z")
    assert "'z'" in str(err) and ".copy()" in str(err)


def test_differentiated_value_as_keyword_argument():
    err = compile_error(bad.keyword_active, np.ones(3), 0.5, argnums=1)
    assert "keyword argument 'min'" in str(err)
    assert "positional" in str(err)


def test_gradient_of_int_argument_is_an_error():
    with pytest.raises(
        errors.NonDifferentiableArgumentError, match="argument 'n'.*int"
    ):
        s2sad.grad(bad.scalar_ok, argnums=1)(np.ones(3), 3)
    with pytest.raises(TypeError):  # also a TypeError for users who catch that
        s2sad.grad(bad.scalar_ok, argnums=1)(np.ones(3), True)


def test_gradient_of_int_array_is_an_error():
    with pytest.raises(errors.NonDifferentiableArgumentError, match="dtype int64"):
        s2sad.grad(bad.scalar_ok)(np.arange(3), 2.0)


def test_non_scalar_output_is_an_error():
    with pytest.raises(errors.NonScalarOutputError, match=r"shape \(3,\)"):
        s2sad.grad(bad.vector_output)(np.ones(3))


def test_function_without_source():
    with pytest.raises(errors.SourceUnavailableError, match="cannot read the source"):
        s2sad.grad(eval("lambda x: x * 2"))(1.0)


def test_discarded_method_result_is_refused():
    err = compile_error(bad.sorts_in_place, np.array([3.0, 1.0, 2.0]))
    assert err.line == line_of(bad.sorts_in_place, "y.sort()")
    assert "in place" in str(err) and "np.sort(y" in str(err)


def test_augmented_assignment_seen_through_an_alias_is_refused():
    # numpy's k += 1 changes k2 too; s2sad would compute with the old k2
    err = compile_error(bad.augassign_through_alias, np.ones(3))
    assert isinstance(err, errors.AliasingError)
    assert err.line == line_of(bad.augassign_through_alias, "np.sum(x * k2)")


def test_callee_chosen_at_run_time_is_refused_with_a_reason():
    err = compile_error(bad.callee_chosen_at_run_time, np.ones(3))
    assert isinstance(err, errors.MissingRuleError)
    assert err.line == line_of(bad.callee_chosen_at_run_time, "f(x)")
    assert "cannot tell which function 'f' is" in str(err)
    assert "module-level name" in str(err)


@pytest.mark.parametrize(
    "fn, needle, name, hint",
    [
        (bad.builtin_filter, "list(filter(", "filter", "for loop"),
        (bad.builtin_next, "iter([x", "iter", "index the sequence"),
        (bad.builtin_set, "set([", "set", "keep a list"),
        # (forward mode refuses any differentiated keyword argument, rule or not)
        (bad.keyword_to_opaque, "SimpleNamespace(w=", "SimpleNamespace|keyword", ""),
    ],
)
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_builtins_without_rules_are_refused_not_constant(fn, needle, name, hint, mode):
    """A builtin (or any callable without source) with a differentiated argument,
    positional or keyword, and no rule is refused: its result would carry the
    gradient, so reading it as a constant would give a silently wrong zero."""
    with pytest.raises(errors.S2SADError) as info:
        if mode == "reverse":
            s2sad.grad(fn)(np.array([0.5, 1.5, 2.5]))
        else:
            s2sad.jvp(fn)(np.array([0.5, 1.5, 2.5]), np.ones(3))
    err = info.value
    assert isinstance(err, (errors.MissingRuleError, errors.UnsupportedSyntaxError))
    problem = err.problems[0]
    assert problem.filename == FILE
    assert problem.line == line_of(fn, needle), str(err)
    assert re.search(name, problem.message) and hint in problem.hint, str(err)
