"""The ``substitute`` pass: scalar code without dead resets, copies and temporaries,
and with invariant products out of loops (s2sad/transforms/buffers/substitute.py).

Each program is compiled with and without the pass: the values and gradients
must be the very same floats, and match central finite differences in float64;
``grad`` is called twice (its fast path).  Second order compiles its inner
gradient in the plain form (no ``scalar`` policy, so without this pass): it is
checked against differences of the rewritten first-order gradient.
"""

import math

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.transforms import liveness
from tests.transforms.dumps import from_string

# ---------------------------------------------------------------- programs


def recurrence(x):
    s = x
    for i in range(30):
        s = 0.9 * np.sin(s) + 0.1 * x
    return s


def two_carried(x, y):
    a = x
    b = y
    for i in range(6):
        a, b = a * np.cos(b) + 0.2 * y, b + 0.1 * np.sin(a) * x
    return a * b


def nested(x, y, n):
    t = 0.0
    for i in range(n):
        u = x
        for j in range(3):
            k = 0.5 * y  # invariant in both loops
            u = np.tanh(u * k + j)
        t = t + u * u
    return t


def while_loop(x):
    s = x
    k = 0
    while s < 10.0:
        c = 1.5 * x  # invariant; the loop may not run
        s = s * 1.5 + np.exp(-s) + c * 0.01
        k += 1
    return s * k


def zero_trip(x, n):
    c = x
    for i in range(n):
        c = 2.0 * x  # invariant, but read after the loop: stays
    return c * x


def read_after_loop(x, n):
    s = x
    g = 0.0
    for i in range(n):
        g = s * x  # read after the loop
        s = np.sin(s) + g
    return s + g * g


def branch_in_loop(x, y, n):
    s = 0.5
    for i in range(n):
        if i % 2 == 0:
            s = s + np.sin(x * s + y)
        else:
            s = s * y - x / (1.0 + s * s)
    return s


def _cell(a, b):
    return a * np.cos(b) + np.log1p(a * a)


def callee_in_loop(x, y):
    s = y
    for i in range(4):
        s = _cell(s, x) + 0.1 * i
    return s


def straight(x):
    a = np.sin(x)
    b = np.cos(a * x)
    return np.sin(b) * a + np.cos(x * b)


def with_local_function(x):
    def sq(v):
        return v * v

    s = x
    for i in range(3):
        s = sq(s) * 0.5 + x
    return s


def ints_and_floats(x, n):
    s = x
    m = 0
    for i in range(n):
        m = m + 2
        s = s * 0.5 + m * x - i
    return s * m


def recurrence_n(x, n):
    s = x
    for i in range(n):
        s = 0.5 * np.sin(s) + 0.3 * x
    return s * s


PROGRAMS = [
    (recurrence_n, (0.7, 0), (0,)),
    (recurrence_n, (0.7, 5), (0,)),
    (with_local_function, (0.6,), (0,)),
    (ints_and_floats, (0.6, 4), (0,)),
    (recurrence, (0.7,), (0,)),
    (recurrence, (-1.3,), (0,)),
    (two_carried, (0.4, 0.9), (0, 1)),
    (nested, (0.4, 0.9, 3), (0, 1)),
    (nested, (0.4, 0.9, 0), (0, 1)),
    (while_loop, (0.5,), (0,)),
    (while_loop, (12.0,), (0,)),
    (zero_trip, (0.7, 0), (0,)),
    (zero_trip, (0.7, 3), (0,)),
    (read_after_loop, (0.3, 0), (0,)),
    (read_after_loop, (0.3, 4), (0,)),
    (branch_in_loop, (0.3, 0.8, 5), (0, 1)),
    (callee_in_loop, (0.4, 0.7), (0, 1)),
    (straight, (0.7,), (0,)),
]


def emitted(fn, argnums, args, drop=()):
    """(source, entry function) of ``fn``'s gradient, without the passes ``drop``."""
    saved = pipeline.PASSES
    pipeline.PASSES = [p for p in saved if p[0] not in drop]
    try:
        src, bindings = pipeline.compile_function(fn, argnums, example_args=args)
    finally:
        pipeline.PASSES = saved
    namespace = dict(bindings)
    exec(compile(src, "<emitted>", "exec"), namespace)  # noqa: S102
    return src, namespace[f"{fn.__name__}_value_and_grad"]


def fd(f, args, i, h=1e-6):
    lo, hi = list(args), list(args)
    lo[i] -= h
    hi[i] += h
    return (f(*hi) - f(*lo)) / (2 * h)


@pytest.mark.parametrize("fn,args,argnums", PROGRAMS)
def test_same_floats_as_without_the_pass_and_finite_differences(fn, args, argnums):
    _, plain = emitted(fn, argnums, args, drop=("substitute",))
    src, tidy = emitted(fn, argnums, args)
    assert tidy(*args) == plain(*args), src
    vg = s2sad.value_and_grad(fn, argnums=argnums)
    for _ in range(2):  # the second call takes the fast path
        value, grads = vg(*args)
        assert (value, grads) == tidy(*args)
        for g, i in zip(grads, argnums):
            assert type(g) is float
            np.testing.assert_allclose(g, fd(fn, args, i), rtol=1e-6, atol=1e-8)


def test_loop_backward_is_two_statements_and_the_invariant_leaves_the_loop():
    src, _ = emitted(recurrence, (0,), (0.7,))
    forward, backward = src.split("for s in reversed(tape):")
    head, loop = forward.split("for i in r:")
    assert "mul_1 = 0.1 * x" in head and "mul_1 = 0.1 * x" not in loop
    assert "s = 0.9 * math_sin(s) + mul_1" in loop and "math_sin = math.sin" in head
    assert "= None" not in src and "g_mul" not in src and "g_sin" not in src
    assert "tape.pop()" not in src  # the tape is walked backwards
    body = [ln.strip() for ln in backward.split("return")[0].splitlines()]
    body = [ln for ln in body if ln and not ln.startswith("#")]
    assert body == [
        "g_x = g_x + g_out * 0.1",
        "g_out = g_out * 0.9 * math_cos(s)",
        "g_x = g_x + g_out",
    ]
    assert "# grad of: s = 0.9 * np.sin(s) + 0.1 * x" in backward


def test_the_tape_is_walked_only_when_one_loop_owns_it():
    # a pop that is not first in the backward loop (ints_and_floats), tapes in
    # nested loops (nested), a while loop: popped; one value an iteration of a
    # loop over range(n): walked
    for fn, args in [
        (ints_and_floats, (0.6, 4)),
        (nested, (0.4, 0.9, 3)),
        (while_loop, (0.5,)),
    ]:
        src, _ = emitted(fn, (0,), args)
        assert "reversed(tape)" not in src and "tape.pop()" in src, fn.__name__
    src, _ = emitted(recurrence_n, (0,), (0.7, 5))
    assert "for s in reversed(tape):" in src


def test_a_carried_cotangent_is_not_copied_out_and_back():
    src, _ = emitted(nested, (0, 1), (0.4, 0.9, 3))
    assert "g_add_1" not in src and "g_out = " not in src
    assert "g_u = g_out * u + g_out * u" in src


def test_reads_after_the_loop_and_zero_trips_keep_invariants_inside():
    src, _ = emitted(zero_trip, (0,), (0.7, 3))
    assert src.split("for i in r:")[1].split("return")[0].count("2.0 * x") == 1
    src, _ = emitted(while_loop, (0,), (0.5,))
    before, loop = src.split("while ", 1)
    assert "    c = 1.5 * x\n" in before and "    c = 1.5 * x\n" not in loop


def test_expressions_stay_in_their_grad_of_block():
    src, _ = emitted(straight, (0,), (0.7,))
    blocks = src.split("# grad of:")
    assert len(blocks) == 4  # three user lines
    assert "return (out, (float(g_x),))" in src  # nothing computed in the return


def test_arrays_and_debug_nans_are_left_alone():
    def with_array(x):
        return np.sum(np.sin(x * 2.0))

    src, _ = emitted(with_array, (0,), (np.ones(3),))
    assert src == emitted(with_array, (0,), (np.ones(3),), drop=("substitute",))[0]
    vg = s2sad.value_and_grad(recurrence, debug_nans=True)
    vg(0.7)
    assert "g_mul" in vg.source  # no rewrite under debug_nans


def test_second_order_agrees_with_the_rewritten_first_order():
    for x in (0.3, 1.1):
        h = s2sad.grad(s2sad.grad(recurrence))(x)
        g = s2sad.grad(recurrence)
        want = (g(x + 1e-5) - g(x - 1e-5)) / 2e-5
        np.testing.assert_allclose(h, want, rtol=1e-5)
        hess = s2sad.hessian(two_carried)(x, 0.9)
        gx = s2sad.grad(two_carried)
        want = (gx(x + 1e-5, 0.9) - gx(x - 1e-5, 0.9)) / 2e-5
        np.testing.assert_allclose(hess, want, rtol=1e-5, atol=1e-8)


def test_forward_mode_is_untouched():
    out, tangent = s2sad.jvp(recurrence)(0.7, 1.0)
    assert out == recurrence(0.7)
    np.testing.assert_allclose(tangent, fd(recurrence, (0.7,), 0), rtol=1e-6)


# ---------------------------------------------------------------- liveness


def _live(src):
    fn = from_string(src).node
    live = liveness.live_after(fn.body)
    return fn, live


def test_a_reset_read_in_the_next_iteration_is_live():
    fn, live = _live("""
        def f(x, n):
            g = 1.0
            for i in range(n):
                if g is not None:
                    x = x + g
                g = None
            return x
        """)
    loop = fn.body[1]
    assert "g" in live[id(loop.body[1])]  # read by the next iteration's test
    assert "g" not in live[id(loop)]


def test_a_reset_bound_again_before_any_read_is_dead():
    fn, live = _live("""
        def f(x, n):
            g = 0.0
            for i in range(n):
                h = g
                g = None
                g = h * x
            return g
        """)
    loop = fn.body[1]
    assert "g" not in live[id(loop.body[1])]
    assert "g" in live[id(loop.body[2])]


def test_unsupported_statements_are_refused():
    for src in (
        "def f(x):\n    try:\n        y = x\n    except E:\n        y = 0\n    return y",
        "def f(x):\n    h = lambda: x\n    return h()",
        "def f(x):\n    for i in r:\n        break\n    return x",
    ):
        with pytest.raises(liveness.Unsupported):
            liveness.check(from_string(src).node.body)


def test_math_on_the_fast_path_stays_math():
    assert s2sad.grad(recurrence)(0.7) == s2sad.grad(recurrence)(0.7)
    assert math.isfinite(s2sad.grad(recurrence)(0.7))


def dead_division(x):
    z = 1.0 / x  # noqa: F841 (unused: still raises, as in the user's function)
    return x * 2.0


def test_a_dead_statement_that_may_raise_stays():
    assert s2sad.grad(dead_division)(0.5) == 2.0
    with pytest.raises(ZeroDivisionError):
        s2sad.grad(dead_division)(0.0)


def log_in_loop(x, n):
    s = 0.0
    for i in range(n):
        s = s + np.log(x - 0.5 * i) * np.sqrt(x)
    return s


@pytest.mark.parametrize("x", [2.0, 1.0, 0.5, 0.0])
def test_math_read_once_in_a_loop_still_reruns_on_numpys_functions(x):
    vg = s2sad.value_and_grad(log_in_loop)
    with np.errstate(all="ignore"):
        got = vg(x, 3)
        want = s2sad.value_and_grad(log_in_loop)(np.float64(x), 3)  # general code
    assert "math_log = math.log" in vg.source
    np.testing.assert_array_equal(np.array([got[0], got[1]]), [want[0], want[1]])
    assert type(got[1]) is float


def with_aux(x):
    s = x
    for i in range(5):
        s = 0.5 * np.sin(s) + 0.2 * x
    return s, i


def test_has_aux_on_scalar_code():
    vg = s2sad.value_and_grad(with_aux, has_aux=True)
    for _ in range(2):
        (value, aux), g = vg(0.8)
        assert value == with_aux(0.8)[0] and aux == 4
        np.testing.assert_allclose(
            g, fd(lambda x: with_aux(x)[0], (0.8,), 0), rtol=1e-6
        )
