"""parse: a function object -> its ``ast.FunctionDef``, located in the user's file."""

import ast
import functools

import numpy as np
import pytest

from s2sad.errors import SourceUnavailableError
from s2sad.transforms.front import parse
from tests.transforms.dumps import code

SCALE = 2.0


def decorator(fn):
    @functools.wraps(fn)
    def wrapped(*args):
        return fn(*args)

    return wrapped


@decorator
def decorated(w, x):
    return np.sum(w * x)


def registered(fn):  # a decorator that returns the function itself
    return fn


@registered
def plain_decorated(w, x):
    return np.sum(w * x)


class Holder:
    def method_like(self, x):
        y = x * SCALE
        return y


square = lambda v: v * v


def test_parse_drops_decorators_and_keeps_the_body():
    p = parse.parse_function(plain_decorated)
    assert ast.unparse(p.node) + "\n" == code("""
        def plain_decorated(w, x):
            return np.sum(w * x)
    """)


def test_parse_reads_the_wrapper_a_decorator_returns_not_what_it_wraps():
    # the code that runs when decorated() is called (inspect would follow __wrapped__)
    p = parse.parse_function(decorated)
    assert ast.unparse(p.node) + "\n" == code("""
        def wrapped(*args):
            return fn(*args)
    """)


def test_parse_line_numbers_point_into_the_users_file():
    p = parse.parse_function(plain_decorated)
    first = plain_decorated.__code__.co_firstlineno  # the '@registered' line
    assert p.node.body[0].lineno == first + 2
    assert p.source.filename == __file__
    assert p.source.line(p.node.body[0].lineno) == "    return np.sum(w * x)"


def test_parse_dedents_a_nested_definition_and_shifts_columns():
    p = parse.parse_function(Holder.method_like)
    assert ast.unparse(p.node) + "\n" == code("""
        def method_like(self, x):
            y = x * SCALE
            return y
    """)
    assert p.node.body[0].col_offset == 8  # as written in this file
    assert p.source.qualname == "Holder.method_like"


def test_parse_turns_a_lambda_into_a_def():
    p = parse.parse_function(square)
    assert ast.unparse(p.node) + "\n" == code("""
        def lambda_fn(v):
            return v * v
    """)


def test_env_resolves_globals_then_builtins():
    env = parse.parse_function(Holder.method_like).env
    assert env.lookup("SCALE") == 2.0
    assert env.lookup("len") is len
    assert env.lookup("no_such_name") is parse.MISSING


def test_parse_refuses_a_function_without_source():
    namespace = {}
    exec("def typed_in(x):\n    return x\n", namespace)  # noqa: S102
    with pytest.raises(
        SourceUnavailableError, match="cannot read the source of typed_in"
    ):
        parse.parse_function(namespace["typed_in"])
