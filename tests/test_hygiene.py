"""User names never collide with the names emitted code needs (front/hygiene.py).

Each name below is used as a parameter, a local, a callee's parameter and a
float argument; value, gradient (grad, jvp, and the buffered third call) are
checked against central finite differences.  Before hygiene, ``ws`` crashed
(multiple values for argument 'ws'), ``g_out`` and ``tape`` parameters gave a
SyntaxError from the emitted module, and ``g_out = ...; return g_out`` returned
a wrong gradient silently.
"""

import importlib
import sys
import textwrap

import numpy as np
import pytest

import s2sad
from s2sad.runtime import workspace
from s2sad.testing import numerical_grad
from s2sad.transforms.front import hygiene
from s2sad.transforms.module import HELPERS, LOCALS, TANGENT_HELPERS
from tests.corpus.fd import assert_close_tree

#: fixed locals, helpers, builtins emitted code calls, rule aliases, emitted
#: functions and derivative names the passes make up
NAMES = sorted(
    set(LOCALS)
    | hygiene.FIXED
    | hygiene.BUILTINS
    | set(HELPERS)
    | set(TANGENT_HELPERS)
    | {"d_matmul", "d_sum", "d_mean", "d_getitem", "d_tanh", "d_maximum"}
    | {"g_x", "t_x", "ct_x", "g_h", "out", "saved_h", "count", "tape_1", "ws_1"}
)

TEMPLATE = """
def helper_{n}({n}, b):
    return numpy.tanh({n} @ b)


def param_{n}({n}, W):
    h = helper_{n}({n}, W)
    s = numpy.sum(numpy.sin(h) * numpy.exp({n} @ W)) + numpy.sum(numpy.maximum(h, 0.1))
    return s + numpy.mean({n}[0])


def local_{n}(x, W):
    {n} = helper_{n}(x, W)
    for k in (0, 1):
        {n} = numpy.sin({n}) * 1.5 + x[k, 0]
    out_{n} = {n}
    return numpy.sum(out_{n} * out_{n}) + numpy.mean(x[0])


def returned_{n}(x, W):
    {n} = numpy.sum(x * x) * 3.0
    return {n}


def scalar_{n}({n}, y):
    {n} += 0.5
    return numpy.sin({n}) * y + numpy.log(y * {n} + 2.0)
"""


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """The functions above for every name, in a real file (s2sad reads sources)."""
    folder = tmp_path_factory.mktemp("hygiene")
    text = "import numpy\n" + "".join(TEMPLATE.format(n=n) for n in NAMES)
    (folder / "hygiene_cases.py").write_text(textwrap.dedent(text))
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module("hygiene_cases")
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("hygiene_cases", None)


def arrays(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(4, 3)) * 0.5, rng.normal(size=(3, 3)) * 0.5]


def check_grad(fn, args, dfn=None):
    dfn = dfn or s2sad.value_and_grad(fn, argnums=(0, 1))
    value, grads = dfn(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    for i in (0, 1):
        assert_close_tree(grads[i], numerical_grad(fn, args, i), where=fn.__name__)


def check_jvp(fn, args):
    t = np.random.default_rng(3).normal(size=np.shape(args[0]))
    t = float(t) if isinstance(args[0], float) else t
    value, tangent = s2sad.jvp(fn, argnums=0)(*args, t)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    want = np.sum(numerical_grad(fn, args, 0) * t)
    np.testing.assert_allclose(tangent, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("n", NAMES)
def test_arrays_named_like_internal_names(cases, n):
    for kind in ("param", "local", "returned"):
        fn = getattr(cases, f"{kind}_{n}")
        check_grad(fn, arrays())
        check_jvp(fn, arrays())


@pytest.mark.parametrize("n", NAMES)
def test_floats_named_like_internal_names(cases, n):
    fn = getattr(cases, f"scalar_{n}")
    check_grad(fn, [0.7, 1.3])
    check_jvp(fn, [0.7, 1.3])


@pytest.mark.parametrize("n", ["ws", "g_out", "tape", "saved", "NO_WORKSPACE", "np"])
def test_buffered_calls_with_internal_names(cases, n, monkeypatch):
    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    for kind in ("param", "local"):
        fn = getattr(cases, f"{kind}_{n}")
        dfn = s2sad.value_and_grad(fn, argnums=(0, 1))
        for seed in (0, 0, 0, 1):
            check_grad(fn, arrays(seed), dfn)
        assert "ws.take" in dfn.source or "ws[" in dfn.source


def test_parameters_are_renamed_and_the_header_keeps_the_users_names(cases):
    dfn = s2sad.value_and_grad(cases.param_ws, argnums=(0, 1))
    dfn(*arrays())
    assert "wrt (ws, W)" in dfn.source
    assert "def param_ws_value_and_grad(ws_1, W, g_out=1.0" in dfn.source


def test_globals_named_like_internal_names_keep_their_values():
    check_grad(reads_globals, arrays())
    check_jvp(reads_globals, arrays())


ws = np.linspace(0.5, 1.0, 3)
tape = 2.0
accumulate = np.float64(0.25)


def reads_globals(x, W):
    return np.sum(np.tanh(x @ W) * ws) * tape + np.sum(x * x) * accumulate
