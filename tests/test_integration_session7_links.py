"""Session 7 integration QA: linked workspaces (buffers/links.py, ``ws.link`` /
``ws.enter_linked``) and ``for`` over every kind of iterable (runtime/iteration.py),
used the way a user would: each gradient against the plain function and float64
central differences, over 3+ calls of one gradient function (workspaces reused,
buffers on for every array)."""

import collections
import sys

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError
from s2sad.runtime import workspace
from tests.corpus.fd import assert_close_tree, numerical_grad

HERE = sys.modules[__name__]
ROWS = 2
LIMIT = 1e9


@pytest.fixture(autouse=True)
def _buffered(monkeypatch, tmp_path):
    monkeypatch.setattr(workspace, "SMALL_BYTES", 0)
    monkeypatch.setattr(workspace, "SPEED_BYTES", 0)
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def _check(vg, f, args, argnum=0, calls=3):
    for _ in range(calls):
        value, g = vg(*args)
        np.testing.assert_allclose(value, f(*args), rtol=1e-12, atol=1e-12)
        assert_close_tree(g, numerical_grad(f, list(args), argnum))


# -- linked workspaces ---------------------------------------------------------


def layer(w, x):
    h = np.tanh(x @ w)
    return h * h


def two_shapes(w, x, y):
    return np.sum(layer(w, x)) + np.sum(layer(w, y) ** 2)


def test_one_callee_two_sites_two_shapes_in_one_call():
    rng = np.random.default_rng(0)
    vg = s2sad.value_and_grad(two_shapes)
    w = rng.standard_normal((3, 4)) * 0.5
    for n, m in ((5, 2), (5, 2), (5, 2), (2, 5), (5, 5), (2, 2), (5, 2)):
        x, y = rng.standard_normal((n, 3)), rng.standard_normal((m, 3))
        _check(vg, two_shapes, (w, x, y), calls=1)
    assert "enter_linked" in vg.source and "ws.link(" in vg.source


def reshaped(w):
    return np.tanh(w.reshape(ROWS, -1))


def global_rows(w):
    h = reshaped(w)
    return np.sum(h[0] * h[-1]) + np.sum(h[:, 0] ** 3)


def test_a_rebound_global_sizes_the_callee(monkeypatch):
    rng = np.random.default_rng(1)
    vg = s2sad.value_and_grad(global_rows)
    w = rng.standard_normal(12)
    for rows in (2, 2, 2, 3, 3, 4, 2, 6, 6):
        monkeypatch.setattr(HERE, "ROWS", rows)
        _check(vg, global_rows, (w,), calls=2)


def split(w, k):
    return np.tanh(w.reshape(k, -1))


def int_rows(w, k):
    h = split(w, k)
    return np.sum(h[0] * h[-1]) + np.sum(h[:, 0] ** 3)


def test_an_int_argument_sizes_a_reshape():
    rng = np.random.default_rng(2)
    vg = s2sad.value_and_grad(int_rows)
    w = rng.standard_normal(12)
    for k in (2, 2, 2, 3, 4, 2, 6, 6, 3):
        _check(vg, int_rows, (w, k), calls=1)


def fixed_loop(w, x):
    h = x
    for _ in range(3):
        h = np.tanh(h * w)
    return h


def data_loop(w, x):
    h = x
    for _ in range(int(np.sum(x > 0.0)) % 3 + 1):
        h = np.tanh(h * w + 0.1)
    return h


def loops_loss(w, x):
    return np.sum(fixed_loop(w, x) ** 2) + np.sum(data_loop(w, x) * x)


def test_callees_looping_over_fixed_and_data_dependent_ranges():
    rng = np.random.default_rng(3)
    vg = s2sad.value_and_grad(loops_loss)
    w = rng.standard_normal(4)
    for n in (3, 3, 3, 3, 5, 5, 3):
        x = rng.standard_normal((n, 4))  # the count of positives varies
        _check(vg, loops_loss, (w, x), calls=1)
    assert "enter_linked" in vg.source  # fixed_loop's


def inner(w, x):
    return np.tanh(x * w)


def middle(w, x):
    return inner(w, inner(w, x)) * 2.0


def nested(w, x):
    return np.sum(middle(w, x) ** 2) + np.sum(inner(w, x[:1]))


def test_nested_callees():
    rng = np.random.default_rng(4)
    vg = s2sad.value_and_grad(nested)
    w = rng.standard_normal(3)
    for n in (4, 4, 4, 1, 1, 4):
        _check(vg, nested, (w, rng.standard_normal((n, 3))), calls=1)


def raise_after(w, x):
    h = layer(w, x)
    if np.sum(h) > LIMIT:
        raise ValueError("too big")
    return np.sum(h * x[:, :1])


def test_a_call_raising_after_the_linked_forward(monkeypatch):
    rng = np.random.default_rng(5)
    vg = s2sad.value_and_grad(raise_after)
    w = rng.standard_normal((3, 4)) * 0.5
    x = rng.standard_normal((5, 3))
    _check(vg, raise_after, (w, x))
    monkeypatch.setattr(HERE, "LIMIT", -1.0)
    for _ in range(3):
        with pytest.raises(ValueError, match="too big"):
            vg(w, x)
    monkeypatch.setattr(HERE, "LIMIT", 1e9)
    _check(vg, raise_after, (w, x))
    x2 = rng.standard_normal((2, 3))
    _check(vg, raise_after, (w, x2))


def aux_out(w, x):
    h = layer(w, x)
    return np.sum(h * h), h.shape


def test_has_aux_and_out_through_a_linked_callee():
    rng = np.random.default_rng(6)
    w = rng.standard_normal((3, 4)) * 0.5
    vg = s2sad.value_and_grad(aux_out, has_aux=True)
    out = np.empty_like(w)
    for n in (4, 4, 4, 7, 7, 4):
        x = rng.standard_normal((n, 3))
        (value, shape), g = vg(w, x, out=out)
        assert g is out and shape == (n, 4)
        np.testing.assert_allclose(value, aux_out(w, x)[0], rtol=1e-12)
        want = numerical_grad(lambda w, x: aux_out(w, x)[0], [w, x], 0)
        assert_close_tree(g, want)


def test_jvp_and_hvp_through_the_linked_callee():
    rng = np.random.default_rng(7)
    w = rng.standard_normal((3, 4)) * 0.5
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((2, 3))
    v = rng.standard_normal((3, 4))
    h = 1e-6
    hvp, g = s2sad.hvp(two_shapes), s2sad.grad(two_shapes)
    for _ in range(3):
        _value, tangent = s2sad.jvp(two_shapes, (w, x, y), (v, 0 * x, 0 * y))
        fd = (two_shapes(w + h * v, x, y) - two_shapes(w - h * v, x, y)) / (2 * h)
        np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-8)
        hv = hvp(w, x, y, v)
        fd2 = (g(w + h * v, x, y) - g(w - h * v, x, y)) / (2 * h)
        np.testing.assert_allclose(hv, fd2, rtol=1e-5, atol=1e-7)


SIZES = {"rows": 2}
SHAPE = [2]


def head(w, x):
    h = np.tanh(x * w)
    return np.sum(h[:, :ROWS] * w[:ROWS], axis=1)


def head_dict(w, x):
    h = np.tanh(x * w)
    return np.sum(h[:, : SIZES["rows"]] * w[: SIZES["rows"]], axis=1)


def head_list(w, x):
    h = np.tanh(x * w)
    return np.sum(h[:, : SHAPE[0]] * w[: SHAPE[0]], axis=1)


def head_loop(w, x):
    h = np.tanh(x * w)[0]
    for i in range(ROWS):
        h = np.tanh(h * x[i])
    return h


def heads(w, x):
    return (
        np.sum(head(w, x) ** 2)
        + np.sum(head_dict(w, x) ** 2)
        + np.sum(head_list(w, x) * x[:, 0])
        + np.sum(head_loop(w, x) ** 3)
    )


def test_globals_rebound_or_mutated_in_place_size_linked_callees(monkeypatch):
    """ROWS rebound, SIZES and SHAPE changed in place: read when the code runs,
    so the linked backward must follow (arrays of 100 KiB: buffered)."""
    rng = np.random.default_rng(8)
    vg = s2sad.value_and_grad(heads)
    w = rng.standard_normal(32) * 0.5
    x = rng.standard_normal((400, 32)) * 0.5
    try:
        for rows in (2, 2, 2, 3, 3, 5, 2, 2, 7):
            monkeypatch.setattr(HERE, "ROWS", rows)
            SIZES["rows"] = rows + 1
            SHAPE[0] = 9 - rows
            for _ in range(2):
                value, g = vg(w, x)
                np.testing.assert_allclose(value, heads(w, x), rtol=1e-12)
                want = numerical_grad(heads, [w, x], 0)
                assert_close_tree(g, want)
    finally:
        SIZES["rows"], SHAPE[0] = 2, 2
    src = vg.source
    for callee in ("head", "head_dict", "head_list", "head_loop"):
        assert f'"{callee}_backward", g_out, saved' in src.replace("\n        ", "")


def unused_callee(w, x, flag):
    h = layer(w, x)
    if flag:
        return np.sum(w * w)  # the linked forward ran, its backward does not
    return np.sum(h)


def test_a_linked_forward_whose_backward_never_runs():
    rng = np.random.default_rng(11)
    vg = s2sad.value_and_grad(unused_callee)
    w = rng.standard_normal((3, 4)) * 0.5
    for flag in (True, True, True, False, True, False, False):
        x = rng.standard_normal((5, 3))
        _check(vg, unused_callee, (w, x, flag), calls=1)
    assert "enter_linked" in vg.source


def test_vjp_through_nested_linked_callees_pulled_back_twice():
    rng = np.random.default_rng(12)
    w = rng.standard_normal(3)
    for n in (4, 4, 4, 2, 4):
        x = rng.standard_normal((n, 3))
        out, back = s2sad.vjp(middle, w, x)
        jac = s2sad.jacobian(middle)(w, x)
        g = rng.standard_normal(out.shape)
        want = np.einsum("ij,ijk->k", g, jac)
        np.testing.assert_allclose(back(g)[0], want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(back(3.0 * g)[0], 3.0 * want, rtol=1e-10)


# -- for over every kind of iterable ---------------------------------------------


class RevDict(dict):
    def __iter__(self):
        return iter(list(super().__iter__())[::-1])


class RevItems(dict):
    def items(self):
        return list(super().items())[::-1]


class RevKeys(dict):
    def keys(self):
        return list(super().keys())[::-1]


def over_keys(x, d):
    s = 0.0
    for k in d:
        s = np.sin(s) + d[k] * x
    return s


def over_items(x, d):
    s = 0.0
    for k, v in d.items():
        s = np.sin(s) + v * x + k
    return s


def over_values(x, d):
    s = 0.0
    for v in d.values():
        s = np.sin(s) + v * x
    return s


def over_keys_call(x, d):
    s = 0.0
    for k in d.keys():  # noqa: SIM118 - the form under test
        s = np.sin(s) + d[k] * x
    return s


def wrt_dict_items(d, x):
    s = 0.0
    for k, v in d.items():
        s = np.sin(s) + np.sum(np.tanh(v * x)) * k
    return s


def wrt_dict_keys(d, x):
    s = 0.0
    for k in d:
        s = np.sin(s) + np.sum(np.tanh(d[k] * x)) * k
    return s


def make_table(x):
    return {2.0: x, 1.0: 2.0 * x}


def from_callee_dict(x):
    d = make_table(x)
    s = 0.0
    for k in d:
        s = np.sin(s) + d[k] * k
    return s


def from_callee_items(x):
    d = make_table(x)
    s = 0.0
    for k, v in d.items():
        s = np.sin(s) + v * k
    return s


def make_set(x):
    return {1.5, 2.5, 0.5}


def from_callee_set(x):
    s = 0.0
    for c in make_set(x):
        s = np.sin(s) + c * x
    return s


def over_set_arg(x, cs):
    s = 0.0
    for c in cs:
        s = np.sin(s) + c * x
    return s


def gen(x):
    yield x
    yield 2.0 * x
    yield x * x


def from_generator(x):
    s = 0.0
    for v in gen(x):
        s = np.sin(s) + v
    return s


def over_gen_arg(x, g):
    s = 0.0
    for v in g:
        s = np.sin(s) + v * x
    return s


def rows_order(X, w):
    s = 0.0
    for row in X:
        s = np.sin(s) + np.sum(np.tanh(row * w))
    return s


def rows_3d(X, w):
    s = 0.0
    for plane in X:
        for row in plane:
            s = np.sin(s) + np.sum(row * w)
    return s


def list_of_arrays(xs, w):
    s = 0.0
    for a in xs:
        s = np.sin(s) + np.sum(np.tanh(a @ w))
    return s


def make_list(x):
    return [x, 2.0 * x, x * x]


def from_callee_list(x):
    s = 0.0
    for v in make_list(x):
        s = np.sin(s) + v
    return s


def sorted_dict_keys(x, d):
    s = 0.0
    for k in sorted(d):
        s = np.sin(s) + d[k] * x
    return s


def enumerate_dict(x, d):
    s = 0.0
    for i, k in enumerate(d):
        s = np.sin(s) + (i + 1) * d[k] * x
    return s


def items_of_callee(x):
    s = 0.0
    for k, v in make_table(x).items():
        s = np.sin(s) + v * k
    return s


TABLE = RevItems([(2.0, 0.5), (1.0, -1.5)])


def get_table():
    return TABLE


def from_callee_rev_items(x):
    d = get_table()
    s = 0.0
    for k, v in d.items():
        s = np.sin(s) + v * k * x
    return s


def _fd(f, make, h=1e-6):
    up, down = list(make()), list(make())
    up[0] = up[0] + h
    down[0] = down[0] - h
    return (f(*up) - f(*down)) / (2 * h)


def _right(f, make, calls=3):
    """value, gradient and tangent (wrt the first argument) match the plain
    function and central differences over several calls; ``make`` builds fresh
    arguments (a generator is used up by one call)."""
    vg, jvp = s2sad.value_and_grad(f), s2sad.jvp(f, 0)
    for _ in range(calls):
        value, g = vg(*make())
        np.testing.assert_allclose(value, f(*make()), rtol=1e-12)
        np.testing.assert_allclose(g, _fd(f, make), rtol=1e-6, atol=1e-9)
        value, t = jvp(*make(), 1.0)
        np.testing.assert_allclose(value, f(*make()), rtol=1e-12)
        np.testing.assert_allclose(t, _fd(f, make), rtol=1e-6, atol=1e-9)


def _refused(f, make, line_text):
    for transform in (s2sad.value_and_grad, lambda f: s2sad.jvp(f, 0)):
        with pytest.raises(UnsupportedSyntaxError) as info:
            (
                transform(f)(*make())
                if transform is s2sad.value_and_grad
                else (transform(f)(*make(), 1.0))
            )
        assert info.value.filename == __file__
        assert line_text in str(info.value)


MAPPINGS = {
    "dict": dict,
    "OrderedDict": collections.OrderedDict,
    "defaultdict": lambda kv: collections.defaultdict(float, kv),
}
LOOPS = [over_keys, over_items, over_values, over_keys_call, sorted_dict_keys]
LOOPS += [enumerate_dict]


@pytest.mark.parametrize("kind", sorted(MAPPINGS))
@pytest.mark.parametrize("f", LOOPS, ids=lambda f: f.__name__)
def test_plain_mappings_iterate_as_python_does(f, kind):
    def make():
        return 0.7, MAPPINGS[kind]([(1.0, 0.3), (3.0, -1.2), (2.0, 0.9)])

    _right(f, make)


@pytest.mark.parametrize("cls", [RevDict, RevItems, RevKeys], ids=lambda c: c.__name__)
@pytest.mark.parametrize("f", LOOPS, ids=lambda f: f.__name__)
def test_mapping_subclasses_overriding_iteration_are_refused_or_right(f, cls):
    """Before: a dict subclass overriding __iter__, keys or items was read
    through ``list(d.keys())`` and ``d[k]``: a silent wrong value and gradient."""

    def make():
        return 0.7, cls([(1.0, 0.3), (3.0, -1.2), (2.0, 0.9)])

    if f is sorted_dict_keys:
        _right(f, make)  # sorted(d) is a list: iterated as Python does
    else:
        _refused(f, make, "for ")


def test_mappings_from_callees():
    _refused(from_callee_dict, lambda: (0.7,), "for k in d")
    _right(from_callee_items, lambda: (0.7,))
    _refused(from_callee_rev_items, lambda: (0.7,), "for k, v in d.items()")


def test_differentiated_dict_values_by_items_and_keys():
    rng = np.random.default_rng(9)
    x = rng.standard_normal(5)
    for d in (
        {2.0: rng.standard_normal(5), 0.5: rng.standard_normal(5)},
        collections.OrderedDict([(0.5, rng.standard_normal(5)), (2.0, x)]),
    ):
        for f in (wrt_dict_items, wrt_dict_keys):
            vg = s2sad.value_and_grad(f)
            for _ in range(3):
                value, g = vg(d, x)
                np.testing.assert_allclose(value, f(d, x), rtol=1e-12)
                want = numerical_grad(f, [d, x], 0)
                # (an OrderedDict's gradient comes back as a dict: same values)
                assert_close_tree(dict(g), dict(want))
    with pytest.raises(UnsupportedSyntaxError):
        s2sad.value_and_grad(wrt_dict_items)(RevItems(d), x)


@pytest.mark.parametrize(
    "make",
    [
        lambda: (0.7, {1.5, 2.5, 0.5, 7.25}),
        lambda: (0.7, frozenset({1.5, 2.5, 0.5})),
        lambda: (0.7, (c for c in [1.0, 2.0, 3.0])),
        lambda: (0.7, {1.5: 0, 2.5: 0}.keys()),
        lambda: (0.7, {1: 1.5, 2: 2.5}.values()),
        lambda: (0.7, np.array([1.5, -2.0, 0.25])),
        lambda: (0.7, [1.5, -2.0]),
    ],
    ids=["set", "frozenset", "generator", "keys", "values", "array", "list"],
)
def test_sets_generators_views_and_arrays_as_arguments(make):
    _right(over_set_arg, make)


def test_generators_and_lists_from_callees():
    _right(from_generator, lambda: (0.7,))
    _right(from_callee_list, lambda: (0.7,))
    _refused(from_callee_set, lambda: (0.7,), "{1.5, 2.5, 0.5}")


def test_array_rows_and_lists_of_arrays():
    rng = np.random.default_rng(10)
    w = rng.standard_normal(4)
    for f, X in (
        (rows_order, rng.standard_normal((5, 4))),
        (rows_3d, rng.standard_normal((2, 3, 4))),
        (list_of_arrays, [rng.standard_normal((3, 4)), rng.standard_normal((1, 4))]),
    ):
        vg = s2sad.value_and_grad(f, argnums=(0, 1))
        jvp = s2sad.jvp(f, (0, 1))
        for _ in range(3):
            value, g = vg(X, w)
            np.testing.assert_allclose(value, f(X, w), rtol=1e-12)
            assert_close_tree(g[0], numerical_grad(f, [X, w], 0))
            assert_close_tree(g[1], numerical_grad(f, [X, w], 1))
            tx = (
                [np.ones_like(a) for a in X] if isinstance(X, list) else np.ones_like(X)
            )
            _, t = jvp(X, w, (tx, np.ones_like(w)))
            h = 1e-6
            up = [a + h for a in X] if isinstance(X, list) else X + h
            down = [a - h for a in X] if isinstance(X, list) else X - h
            fd = (f(up, w + h) - f(down, w - h)) / (2 * h)
            np.testing.assert_allclose(t, fd, rtol=1e-6, atol=1e-9)


def nested_keys(x, p):
    s = 0.0
    for k in p["t"]:
        s = np.sin(s) + p["t"][k] * x
    return s


def nested_items(x, p):
    s = 0.0
    t = p["t"]
    for k, v in t.items():
        s = np.sin(s) + v * k * x
    return s


def built_inside(x):
    d = RevDict([(1.0, 0.3), (3.0, -1.2), (2.0, 0.9)])
    s = 0.0
    for k in d:
        s = np.sin(s) + d[k] * x
    return s


@pytest.mark.parametrize("f", [nested_keys, nested_items], ids=lambda f: f.__name__)
def test_a_mapping_inside_an_argument_changing_class_between_calls(f):
    """Only an argument's own type is in the cache key, not its items': code
    compiled for a dict at p["t"] used to read a RevDict there by its keys (a
    silent wrong value); now checked at run time."""
    kv = [(1.0, 0.3), (3.0, -1.2), (2.0, 0.9)]
    _right(f, lambda: (0.7, {"t": dict(kv)}))
    vg = s2sad.value_and_grad(f)
    vg(0.7, {"t": dict(kv)})
    with pytest.raises(UnsupportedSyntaxError, match="RevDict"):
        vg(0.7, {"t": RevDict(kv)})
    assert vg(0.7, {"t": dict(kv)})[0] == pytest.approx(f(0.7, {"t": dict(kv)}))


def test_a_mapping_subclass_built_inside_is_refused():
    _refused(built_inside, lambda: (0.7,), "for k in d")


def nested_first(x, p):
    s = 0.0
    for k in p["t"]:
        s = np.sin(s) + p["t"][k] * x
    return s


def test_compiled_first_for_a_mapping_subclass_inside_an_argument():
    """The same cache key holds a dict at p["t"] after a RevDict: it runs."""
    kv = [(1.0, 0.3), (3.0, -1.2), (2.0, 0.9)]
    vg = s2sad.value_and_grad(nested_first)
    with pytest.raises(UnsupportedSyntaxError, match="RevDict"):
        vg(0.7, {"t": RevDict(kv)})
    _right(nested_first, lambda: (0.7, {"t": dict(kv)}))
    assert vg(0.7, {"t": dict(kv)})[0] == pytest.approx(
        nested_first(0.7, {"t": dict(kv)})
    )
