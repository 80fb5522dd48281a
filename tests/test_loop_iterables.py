"""``for`` over every kind of iterable: the emitted loop reads ``seq[i]`` by position,
which is what Python iterates only for sequences and arrays. A mapping (its keys),
a set, a generator or a dict view must be iterated as Python does, or refused with
a located error: never a silent wrong value or gradient (issue 16, session 7).

Before: ``for k in d`` over a dict the compiler could not prove to be one (built
with ``dict(...)``, an ``OrderedDict``, a callee's result, the argument of ``zip``
or ``enumerate``) read ``d[0], d[1], ...``: the values of a dict keyed 0..n-1 (a
wrong value and gradient, silently), else a KeyError.
"""

import collections
import re
import types

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError
from s2sad.runtime.iteration import check_positional, positional


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def _fd(f, args, h=1e-6):
    x = args[0]
    return (f(x + h, *args[1:]) - f(x - h, *args[1:])) / (2 * h)


def _right_twice(f, args):
    """value and gradient (wrt the first argument) match Python and central
    differences, on two calls of one gradient function (its workspace reused)."""
    vg = s2sad.value_and_grad(f)
    for _ in range(2):
        value, g = vg(*args)
        np.testing.assert_allclose(value, f(*args), rtol=1e-12)
        np.testing.assert_allclose(g, _fd(f, args), rtol=1e-6, atol=1e-8)
    return vg


# -- the silent wrong answers of before: now iterated as Python does ----------------


def dict_call(x):
    d = dict([(1, 4.0), (0, 3.0)])  # noqa: C406 - the pattern under test
    s = 0.0
    for k in d:  # keys 1, 0 (before: d[0], d[1], the values 3.0 and 4.0)
        s = s + k * x
    return s


def dict_keywords(x):
    d = dict(a=x, b=2.0 * x)  # noqa: C408 - the pattern under test
    s = 0.0
    for k in d:  # noqa: PLC0206
        s = s + d[k] * d[k]
    return s


def ordered_enumerate(x):
    d = collections.OrderedDict([(1, 4.0), (0, 3.0)])
    s = 0.0
    for i, k in enumerate(d):
        s = s + (k + i * 0.5) * x
    return s


def zip_over_dict(x):
    s = 0.0
    for k, v in zip({1: 4.0, 0: 3.0}, [1.0, 2.0]):
        s = s + k * x * v
    return s


def aliased_or_chosen_dict(x, d):
    e = d if x > 0 else {0: 1.0}
    s = 0.0
    for k in e:
        s = s + k * x * x
    return s


@pytest.mark.parametrize(
    "f, args",
    [
        (dict_call, (1.5,)),
        (dict_keywords, (1.5,)),
        (ordered_enumerate, (1.5,)),
        (zip_over_dict, (1.5,)),
        (aliased_or_chosen_dict, (1.5, {1: 2.0, 0: 5.0})),
    ],
)
def test_dicts_the_compiler_sees_are_iterated_by_key(f, args):
    assert f(*args) != 0.0
    _right_twice(f, args)
    s2sad.check_grads(f, args, order=2, modes=("rev", "fwd"))


def table(x):
    return {1: x * 2.0, 0: x * 5.0}


def loop_over_callee_dict(x):
    d = table(x)
    s = x
    for k in d:  # a dict only at run time: refused there, located
        s = s + k
    return s


def loop_over_callee_dict_keys(x):
    s = x
    for k in list(table(x)):  # what the refusal says to write
        s = s + k * x
    for i, k in enumerate(table(x).keys()):
        s = s + i * k * x
    return s


def _line_of(fn, text):
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(lines) if text in s)


def test_a_mapping_from_a_callee_is_refused_where_the_loop_runs():
    """Before: 13.0 (``d[0] + d[1]``) where Python gives 3.5, gradient 8.0 for 1.0."""
    for transform in (s2sad.value_and_grad, lambda f: (lambda x: s2sad.jvp(f)(x, 1.0))):
        with pytest.raises(UnsupportedSyntaxError) as info:
            transform(loop_over_callee_dict)(1.5)
        err = info.value
        assert err.filename == __file__
        assert err.line == _line_of(loop_over_callee_dict, "for k in d:")
        assert err.col == 14
        text = str(err)
        assert "'for' over a mapping (dict)" in text
        assert "list(d)" in text and "for k in d:" in text
    _right_twice(loop_over_callee_dict_keys, (1.5,))
    s2sad.check_grads(loop_over_callee_dict_keys, (1.5,), modes=("rev", "fwd"))


def nested_loop_over_items(x, ds):
    s = 0.0
    for d in ds:  # d is an item of a list: unknown to the compiler
        for k in d:
            s = s + k * x
    return s


def test_a_mapping_inside_a_container_is_refused_or_iterated_by_key():
    """``ds`` a list of dicts given in the call: its loop is unrolled over the
    objects, so each ``d`` is a path into the argument and known to be a dict."""
    _right_twice(nested_loop_over_items, (1.5, [{1: 0.0, 0: 0.0}, {2: 0.0}]))


class MyDict(dict):
    pass


def loop_over_argument(x, d):
    s = 0.0
    for k in d:
        s = s + k * x
    return s


@pytest.mark.parametrize(
    "d",
    [
        {1: 4.0, 0: 3.0},
        MyDict({1: 4.0, 0: 3.0}),
        collections.OrderedDict([(1, 4.0), (0, 3.0)]),
        types.MappingProxyType({1: 4.0, 0: 3.0}),
        {1.0, 2.5},
        frozenset({3.0}),
        {1: 0, 2: 0}.keys(),
        [1.0, 2.0],
        (1.0, 2.0),
        range(1, 4),
    ],
)
def test_arguments_of_every_kind_are_iterated_as_python_does(d):
    _right_twice(loop_over_argument, (1.5, d))


def test_a_dict_splat_and_a_set_display_are_refused_at_compile_time():
    def splat(x, d):
        e = {**d}
        s = 0.0
        for k in e:
            s = s + k * x
        return s

    def set_display(x):
        s = 0.0
        for v in {1.0, 2.0}:  # noqa: PLC0208 - refused
            s = s + v * x
        return s

    for f, args in ((splat, (1.5, {1: 1.0})), (set_display, (1.5,))):
        with pytest.raises(UnsupportedSyntaxError) as info:
            s2sad.value_and_grad(f)(*args)
        assert info.value.filename == __file__


# -- other iterables: strings, ranges, generators, reversed, views -----------------


def strings_ranges_generators(x, t):
    s = 0.0
    for c in t:
        s = s + x
    for c in "ab":
        s = s + x * 2.0
    r = range(1, 4)
    for v in r:
        s = s + v * x
    for v in reversed([1.0, 2.0]):
        s = s + v * x * x
    g = (v * x for v in [1.0, 3.0])
    for v in g:
        s = s + v * v
    for k, v in zip(reversed([2.0, 1.0]), "xy"):
        s = s + k * x
    return s


def views(x, d):
    s = 0.0
    ks = d.keys()
    for k in ks:
        s = s + k * x
    for k, v in zip(d, d.keys()):
        s = s + k * v * x
    return s


def test_strings_ranges_generators_and_views():
    _right_twice(strings_ranges_generators, (1.5, "abc"))
    s2sad.check_grads(strings_ranges_generators, (1.5, "abc"), order=2)
    _right_twice(views, (1.5, {1: "a", 0: "b"}))


# -- arrays: no check where the type is known, one cheap check otherwise ------------


def rows(X, w):
    s = 0.0
    for row in X:
        s = s + np.sum(np.tanh(row * w))
    return s


def weights_in_a_dict(X, p):
    s = 0.0
    for W in p["Ws"]:  # a list at compile time, but its type is not in the key
        s = s + np.sum(np.tanh(X @ W))
    return s


def parts(x):
    return [x, x * 2.0]


def callee_list(x, w):
    ps = parts(x)
    s = 0.0
    for p in ps:
        s = s + np.sum(p * w * p)
    return s


def test_arrays_and_lists_pass_the_check_and_keep_their_gradients():
    rng = np.random.default_rng(0)
    X, w = rng.normal(size=(5, 3)), rng.normal(size=3)
    vg = s2sad.value_and_grad(rows, argnums=(0, 1))
    vg(X, w)
    assert "check_positional" not in vg.source  # X's type is in the cache key
    s2sad.check_grads(rows, (X, w), order=2, modes=("rev", "fwd"))
    vg = s2sad.value_and_grad(callee_list, argnums=(0, 1))
    vg(X, w)
    assert len(re.findall(r"check_positional\(\s*ps,", vg.source)) == 1
    s2sad.check_grads(callee_list, (X, w), order=2, modes=("rev", "fwd"))
    # big enough for workspace buffers: two calls reuse them
    Xb = rng.normal(size=(64, 300))
    p = {"Ws": [rng.normal(size=(300, 300)) * 0.05 for _ in range(2)]}
    vg = s2sad.value_and_grad(weights_in_a_dict, argnums=(0, 1))
    first = vg(Xb, p)
    assert (
        re.search(r"check_positional\(\s*p_item,", vg.source) and "ws.take" in vg.source
    )
    second = vg(Xb, p)
    assert first[0] == second[0] == weights_in_a_dict(Xb, p)
    gx = second[1][0]
    np.testing.assert_array_equal(first[1][0], gx)
    E = np.zeros_like(Xb)
    E[3, 7] = 1e-6
    fd = (weights_in_a_dict(Xb + E, p) - weights_in_a_dict(Xb - E, p)) / 2e-6
    np.testing.assert_allclose(gx[3, 7], fd, rtol=1e-6)
    small = {"Ws": [rng.normal(size=(3, 2)), rng.normal(size=(3, 2))]}
    s2sad.check_grads(weights_in_a_dict, (X, small), modes=("rev", "fwd"))
    with pytest.raises(UnsupportedSyntaxError, match="'for' over a mapping"):
        vg(Xb, {"Ws": {0: p["Ws"][0]}})


# -- the run-time test itself --------------------------------------------------------


def test_positional_kinds():
    Pair = collections.namedtuple("Pair", "a b")

    class OldStyle:  # iterated through __getitem__ by position
        def __len__(self):
            return 2

        def __getitem__(self, i):
            if i >= 2:
                raise IndexError(i)
            return float(i)

    class OwnIter(OldStyle):  # __iter__ may give anything
        def __iter__(self):
            return iter([5.0])

    yes = [[1], (1,), np.ones(2), "ab", range(2), Pair(1, 2), OldStyle()]
    yes.append(collections.UserList([1.0]))
    no = [{0: 1}, MyDict(), collections.OrderedDict(), {1}, frozenset(), OwnIter()]
    no += [iter([1]), (v for v in [1]), {1: 2}.keys(), {1: 2}.values()]
    assert all(positional(v) for v in yes)
    assert not any(positional(v) for v in no)
    for v in no:
        with pytest.raises(UnsupportedSyntaxError) as info:
            check_positional(v, "m.py", 3, 9)
        assert str(info.value).startswith("m.py:3:9: unsupported construct: 'for'")


def rebound_in_the_body(x, w):
    acc = parts(x)  # a list only at run time: checked
    s = 0.0
    for e in acc:  # Python iterates the list acc named when the loop began
        acc = [e * w, e]
        s = s + np.sum(e * w)
    return s + np.sum(acc[-1])


def test_an_unknown_iterable_rebound_in_the_body():
    x, w = np.array([0.3, -0.2]), np.array([1.5, 0.5])
    s2sad.check_grads(rebound_in_the_body, (x, w), modes=("rev", "fwd"))
    vg = s2sad.value_and_grad(rebound_in_the_body, argnums=(0, 1))
    vg(x, w)
    assert re.search(r"check_positional\(\s*acc,", vg.source)
