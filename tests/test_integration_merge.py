"""Adversarial programs that combine the features merged together (objects built
inside the loss, hoisted and peeled loops, lambdas passed to callees, ``zip(*xs)``,
keyword rule calls, dict methods, the ``methods`` pass on small arrays).

Each program is checked by :func:`s2sad.check_grads` against central finite
differences in float64: reverse mode, forward mode and (``order=2``) the
gradient's derivative along a direction, forward over reverse (an hvp).  A few
are also compared with plain-NumPy finite differences of the value, after
several calls, so that the workspace (buffers) is reused.
"""

import numpy as np
import pytest

import s2sad
from tests.repeated import check_repeated_calls, numeric_grad


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


RNG = np.random.default_rng(7)
XS = RNG.standard_normal((2, 4, 3)) * 0.5  # batch, time, features
W = RNG.standard_normal((3, 5)) * 0.4
U = RNG.standard_normal((5, 5)) * 0.4
V = RNG.standard_normal(5) * 0.5


class RNN:
    def __init__(self, W, U):
        self.W = W
        self.U = U
        self.hidden = U.shape[0]

    def run(self, xs):
        T = xs.shape[1]
        h = np.zeros((xs.shape[0], self.hidden))
        for t in range(T):
            h = np.tanh(xs[:, t, :] @ self.W + h @ self.U)
        return h

    def states(self, xs):
        hs = []
        h = np.zeros((xs.shape[0], self.hidden))
        for t in range(xs.shape[1]):
            h = np.tanh(xs[:, t, :] @ self.W + h @ self.U)
            hs.append(h)
        return hs

    def pair(self, xs):
        h = self.run(xs)
        return [(h[0], h[1]), (np.sin(h[0]), np.cos(h[1]))]


def rnn_in_object(xs, W, U, v):
    net = RNN(W, U)
    h = net.run(xs)
    return np.sum(np.tanh(h @ v))


def rnn_states_in_object(xs, W, U):
    net = RNN(W, U)
    hs = net.states(xs)
    return sum(np.sum(h * h) for h in hs) / len(hs)


def apply_twice(f, a):
    return f(f(a))


def fill_with(f, a):
    out = np.zeros(a.shape)
    out[0] = f(a[0])
    out[1:] = a[1:] * 2.0
    return out


def lambda_to_callee_mutating(x, w):
    y = fill_with(lambda z: np.tanh(z * w[1]), x)
    y += np.sin(x)
    return np.sum(y * y) + np.sum(apply_twice(lambda z: z * w, x))


def zip_over_method(xs, W, U):
    net = RNN(W, U)
    total = 0.0
    for a, b in zip(*net.pair(xs)):
        total = total + np.sum(a * b)
    return total


def zip_star_local(x, w):
    rows = [x * w, np.tanh(x), x * x]
    out = 0.0
    for a, b, c in zip(*rows):
        out = out + a * b - c
    return out


class Recorder:
    def __init__(self, n, k):
        self.states = np.zeros((n, k))

    def record(self, xs, W, U):
        h = np.zeros((xs.shape[0], U.shape[0]))
        for t in range(xs.shape[1]):
            h = np.tanh(xs[:, t, :] @ W + h @ U)
            self.states[t] = h[0]
        return h


def attribute_items_in_loop(xs, W, U):
    rec = Recorder(xs.shape[1], U.shape[0])
    h = rec.record(xs, W, U)
    return np.sum(rec.states * rec.states) + np.sum(h)


def attribute_matrix_in_loop(xs, W, U):
    rec = Recorder(3, 5)
    rec.W = W * 1.0
    h = np.zeros((xs.shape[0], 5))
    for t in range(xs.shape[1]):
        h = np.tanh(xs[:, t, :] @ rec.W + h @ U)
        rec.W[0] = rec.W[0] * 0.5  # changes the product's operand: no hoisting
    return np.sum(h)


def keywords_in_comprehension(x, w):
    parts = [np.sum(np.clip(x * k, a_min=-0.5, a_max=0.7)) for k in (0.5, 1.0, 2.0)]
    cols = [np.sum(w * k, axis=0) for k in range(1, 3)]
    means = {k: np.mean(w * w, axis=k, keepdims=True) for k in (0, 1)}
    return (
        sum(parts)
        + sum(np.sum(c * c) for c in cols)
        + np.sum(means[0]) * np.sum(means[1])
    )


class Small:
    def __init__(self, w):
        self.w = w

    def feat(self, x):
        return np.tanh(x * self.w)


def methods_on_inlined(x, w):
    m = Small(w)
    f = m.feat(x)
    return f.sum() * f.mean() + f.max() + (f * f).sum(axis=0).sum() + np.prod(f + 2.0)


def dict_methods(x, w):
    cfg = {"scale": 2.0}
    cfg.update({"w": w * x}, shift=0.5)
    a = cfg.get("w") * cfg.get("scale", 1.0)
    b = cfg.get("missing", x) + cfg["shift"]
    return np.sum(a * b)


class Stack:
    def __init__(self, W, U):
        self.cells = [RNN(W, U), RNN(W * 0.5, U)]

    def forward(self, xs):
        out = 0.0
        for cell in self.cells:
            h = cell.run(xs)
            out = out + np.sum(np.tanh(h))
        return out


def object_holding_objects(xs, W, U):
    return Stack(W, U).forward(xs)


def peeled_with_keywords(xs, W, U):
    h = np.zeros((xs.shape[0], U.shape[0]))
    for t in range(xs.shape[1]):
        h = np.tanh(np.clip(xs[:, t, :] @ W, a_min=-3.0, a_max=3.0) + h @ U)
    return np.sum(np.mean(h, axis=0) ** 2)


def hoisted_with_break(xs, W, U):
    h = np.zeros((xs.shape[0], U.shape[0]))
    for t in range(xs.shape[1]):
        h = np.tanh(xs[:, t, :] @ W + h @ U)
        if t == 2:
            break
    return np.sum(h)


def hoisted_operand_rebound(xs, W, U):
    h = np.zeros((xs.shape[0], U.shape[0]))
    Wt = W
    for t in range(xs.shape[1]):
        h = np.tanh(xs[:, t, :] @ Wt + h @ U)
        Wt = Wt * 0.9  # rebound inside the loop: not hoistable
    return np.sum(h)


def hoisted_input_written(xs, W, U):
    ys = xs * 1.0
    h = np.zeros((xs.shape[0], U.shape[0]))
    for t in range(xs.shape[1] - 1):
        h = np.tanh(ys[:, t, :] @ W + h @ U)
        ys[:, t + 1, :] = ys[:, t + 1, :] + h[:, :3]  # the sequence changes as it goes
    return np.sum(h)


def lambda_reads_object(x, w):
    m = Small(w)
    g = apply_twice(lambda z: m.feat(z) * 2.0, x)
    return np.sum(g)


def nonzero_initial_state(xs, W, U, v):
    h = np.zeros((xs.shape[0], U.shape[0])) + v
    for t in range(xs.shape[1]):
        h = np.tanh(xs[:, t, :] @ W + h @ U)
    return np.sum(h)


def zero_state_then_changed(xs, W, U):
    h = np.zeros((xs.shape[0], U.shape[0]))
    h[0, 0] = np.sum(W)
    for t in range(xs.shape[1]):
        h = np.tanh(xs[:, t, :] @ W + h @ U)
    return np.sum(h)


def axis_from_a_tuple_in_a_loop(w):
    # second order: the gradient restores k from its tape (which also holds
    # arrays), and passing it as axis= was refused as a differentiated keyword
    out = 0.0
    for k in (0, 1):
        out = (
            out
            + np.sum(np.mean(w * w, axis=k) ** 2)
            + np.sum(w.sum(axis=k, keepdims=True))
        )
    return out


X3 = RNG.standard_normal(3)
W3 = RNG.standard_normal(3) * 0.7
M34 = RNG.standard_normal((3, 4)) * 0.7

CASES = [
    (rnn_in_object, (XS, W, U, V)),
    (rnn_states_in_object, (XS, W, U)),
    (lambda_to_callee_mutating, (X3, W3)),
    (zip_over_method, (XS, W, U)),
    (zip_star_local, (X3, W3)),
    (attribute_items_in_loop, (XS, W, U)),
    (attribute_matrix_in_loop, (XS, W, U)),
    (keywords_in_comprehension, (X3, M34)),
    (methods_on_inlined, (X3, W3)),
    (dict_methods, (X3, W3)),
    (axis_from_a_tuple_in_a_loop, (M34,)),
    (peeled_with_keywords, (XS, W, U)),
    (hoisted_with_break, (XS, W, U)),
    (hoisted_operand_rebound, (XS, W, U)),
    (hoisted_input_written, (XS, W, U)),
    (nonzero_initial_state, (XS, W, U, V)),
    (zero_state_then_changed, (XS, W, U)),
]


@pytest.mark.parametrize("f,args", CASES, ids=[c[0].__name__ for c in CASES])
def test_reverse_forward_and_hvp(f, args):
    s2sad.check_grads(f, args, order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("f,args", CASES, ids=[c[0].__name__ for c in CASES])
def test_gradient_against_finite_differences_after_repeated_calls(f, args):
    check_repeated_calls(f, args)


@pytest.mark.parametrize(
    "f,args,where",
    [
        (object_holding_objects, (XS, W, U), "self.cells = [RNN(W, U)"),
        (lambda_reads_object, (X3, W3), "g = apply_twice(lambda z: m.feat(z)"),
    ],
    ids=["objects_in_a_list_attribute", "lambda_reading_a_built_object"],
)
def test_refused_with_a_located_error(f, args, where):
    """Objects built inside from differentiated values and kept in a list, and a
    lambda reading such an object, are refused at the user's line (not done)."""
    with pytest.raises(s2sad.errors.S2SADError) as info:
        s2sad.grad(f, argnums=tuple(range(len(args))))(*args)
    text = str(info.value)
    assert "test_integration_merge.py:" in text and where in text, text


def rec(a, depth):
    if depth <= 0:
        return np.tanh(a)
    return np.tanh(
        rec((np.linspace(-0.61, -1.29, 4) * np.mean(a))[0], depth - 1)
    ) * 0.5 + np.tanh(a)


def recursive_callee(x):
    return rec(np.mean(x), 1) + rec(x[0] * x[1], 2)


def test_second_order_of_a_recursive_callee_with_two_specialisations():
    """Found by the fuzzer (second order): the gradient's own derivative named the
    result of ``rec_forward(...)`` ``rec_forward_1``, the global the entry
    function's guard reads (the other specialisation): UnboundLocalError."""
    x = np.array([0.3, -0.2, 0.5])
    s2sad.check_grads(recursive_callee, (x,), order=2, modes=("rev", "fwd"))
    hv = s2sad.hvp(recursive_callee)(x, np.array([1.0, 0.0, 0.0]))
    g = s2sad.grad(recursive_callee)
    h = 1e-5
    fd = (g(x + [h, 0, 0]) - g(x - [h, 0, 0])) / (2 * h)
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-8)


class Layer:
    def __init__(self, k):
        self.k = k

    def run(self, xs):
        h = np.zeros((xs.shape[0], self.U.shape[0]))
        for t in range(xs.shape[1]):
            h = np.tanh(xs[:, t, :] @ self.W + h @ self.U)
        self.last = h
        return np.sum(h) * self.k


def attributes_written_on_an_argument(layer, xs, W, U):
    layer.W = W
    layer.U = U * 1.0
    out = layer.run(xs)
    return out + np.sum(layer.last**2)


def test_attributes_written_on_an_argument_object_and_read_by_a_hoisted_loop():
    def f(xs, W, U):
        return attributes_written_on_an_argument(Layer(0.7), xs, W, U)

    args = (XS, W, U)
    vg = s2sad.value_and_grad(attributes_written_on_an_argument, argnums=(1, 2, 3))
    want = [numeric_grad(f, args, k) for k in range(3)]
    for _ in range(3):
        layer = Layer(0.7)
        value, grads = vg(layer, *[np.array(a) for a in args])
        np.testing.assert_allclose(value, f(*args), rtol=1e-10)
        for g, w in zip(grads, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)
        # the object keeps what the function wrote, as in Python
        np.testing.assert_allclose(layer.W, W)
        assert layer.last.shape == (2, 5)
    s2sad.check_grads(
        attributes_written_on_an_argument,
        (Layer(0.7), *args),
        order=2,
        modes=("rev", "fwd"),
    )


def nested_hoisted_loops(xs, W, U):
    h = np.zeros((xs.shape[0], U.shape[0])) + 0.1
    for k in range(2):
        for t in range(xs.shape[1]):
            h = np.tanh(xs[:, t, :] @ W + h @ U)
        W = W * 0.5
    return np.sum(h)


def nested_hoisted_loop_without_u(xs, W, U):
    h = np.zeros((xs.shape[0], W.shape[1])) + 0.1
    for k in range(2):
        for t in range(xs.shape[1]):
            h = np.tanh(xs[:, t, :] @ W + h)
    return np.sum(h) + 0.0 * np.sum(U)


def tensordot_in_nested_loops(xs, W, U):
    out = 0.0
    for k in range(2):
        for ax in (1,):
            out = out + np.sum(np.tanh(np.tensordot(xs[0], W, axes=ax)))
        W = W * 0.5
    return out


@pytest.mark.parametrize(
    "f",
    [nested_hoisted_loops, nested_hoisted_loop_without_u, tensordot_in_nested_loops],
)
def test_second_order_of_hoisted_products_in_nested_loops(f):
    """A silent wrong Hessian-vector product, found by hand: in a nested loop the
    gradient restores the inner loop's range from its tape, the derivative of the
    gradient gave that range a tangent and passed it to d_stepwise_matmul's
    steps, which then added every step's product (even along U, unused)."""
    s2sad.check_grads(f, (XS, W, U), order=2, modes=("rev", "fwd"))


def tuple_unpacked_and_read_in_a_branch(x, s):
    v1 = np.tanh(x)
    t3 = (s**2, v1 * 2.0)
    v4, v5 = t3
    v7 = x[0]
    if np.sum(x) < -10.0:
        v7 = t3[0] * v4
    return v7 + np.sum(v5)


@pytest.mark.parametrize("x", [np.array([0.1, 0.2, 0.3]), np.array([-5.0, -4.0, -3.0])])
def test_second_order_of_a_tuple_cotangent_started_by_an_unpacking(x):
    """Found by the second-order sweep over fuzzer programs: with the branch not
    taken, the tuple's cotangent starts at its unpacking (add_at_index into
    None) and its tangent stayed None: TypeError on t_g_t3[0]."""
    s2sad.check_grads(
        tuple_unpacked_and_read_in_a_branch, (x, 0.4), order=2, modes=("rev", "fwd")
    )


def broadcast_then_item_assigned(x, s):
    v = np.ones((3, 4)) - np.mean(np.ones((3, 4)) * np.mean(x), axis=1, keepdims=True)
    v[0] = np.ones(4) * s
    w = np.ones((3, 4)) - x[:, None]
    w[1, 2] = s * x[0]
    return np.sum(v * v) + np.sum(w * w)


def test_forward_mode_item_assignment_into_a_broadcast_result():
    """Found by the second-order sweep over fuzzer programs (a keyword mean with
    keepdims=True): the tangent of ``c - m`` was a read-only broadcast view, and
    ``v[0] = ...`` wrote into it (ValueError in forward mode)."""
    args = (np.array([0.1, 0.2, 0.3]), 0.4)
    s2sad.check_grads(broadcast_then_item_assigned, args, order=2, modes=("rev", "fwd"))
