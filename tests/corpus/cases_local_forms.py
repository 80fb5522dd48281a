"""Corpus: call forms on values the function builds itself (issue 14):
``zip(*heads)`` and ``f(*parts)`` over local lists (front/starred.py)."""

import functools

import numpy as np

from tests.corpus.registry import case, const, lst, mat, scal, vec


def attention(q, k, v):
    w = q @ k.T / np.sqrt(q.shape[-1])
    w = np.exp(w - np.max(w, axis=-1, keepdims=True))
    return (w / np.sum(w, axis=-1, keepdims=True)) @ v


def heads_attention(x, n_head):
    # picoGPT's mha: the length of qkv_heads is known from the loop target only
    qkv = np.split(x, 3, axis=-1)
    qkv_heads = list(map(lambda p: np.split(p, n_head, axis=-1), qkv))  # noqa: C417
    out_heads = [attention(q, k, v) for q, k, v in zip(*qkv_heads)]
    return np.hstack(out_heads)


@case(mat(4, 12))
def zip_star_local_heads(x):
    return np.sum(heads_attention(x, 2) ** 2)


@case(mat(3, 6), lst(mat(6, 18), mat(6, 18)), argnums=(0, 1))
def zip_star_heads_in_loop(x, Ws):
    for W in Ws:
        x = np.tanh(heads_attention(x @ W, 2))
    return np.sum(x**2)


@case(mat(3, 4), mat(3, 4), argnums=(0, 1))
def zip_star_for_statement(a, b):
    pairs = [[a[i], b[i]] for i in range(3)]
    total = 0.0
    for r0, r1, r2 in zip(*pairs):  # (a[0], a[1], a[2]), then the rows of b
        total = total + np.sum(np.sin(r0) * r1 * r2)
    return total


@case(vec(4), vec(4), argnums=(0, 1))
def star_literal_list_into_numpy(x, y):
    parts = [x * 2.0, y]
    return np.sum(np.maximum(*parts) ** 2) + np.sum(np.hypot(*parts))


@case(vec(6))
def star_split_into_numpy(x):
    halves = np.split(x, 2)
    return np.sum(np.maximum(*halves) * np.minimum(*halves))


def mixed_pairs(x, y):
    cols = [x, y * 2.0]
    return np.stack([np.sin(a) * b for a, b in zip(*cols)])


@case(vec(4), vec(4), argnums=(0, 1))
def zip_star_literal_in_callee_in_loop(x, y):
    total = 0.0
    for i in range(2):
        total = total + np.sum(mixed_pairs(x + i, y) ** 2)
    return total


# ---------------------------------------------------------------- lambdas to callees


def apply(f, x):
    return f(x)


def odeint(func, y0, ts):
    y = y0
    for i in range(len(ts) - 1):
        y = y + (ts[i + 1] - ts[i]) * func(y, ts[i])
    return y


@case(vec(3), vec(3), argnums=(0, 1))
def lambda_to_callee(w, x):
    return np.sum(apply(lambda v: v * w, x) ** 2)


@case(vec(3), vec(3), argnums=(0, 1))
def local_def_to_callee(w, x):
    def scale(v):
        return np.sin(v) * w

    return np.sum(apply(scale, x) * x)


@case(vec(3), vec(3), argnums=(0, 1))
def lambda_to_callee_in_loop(w, x):
    total = 0.0
    for k in range(3):
        total = total + np.sum(apply(lambda v: np.tanh(v * w + k), x))  # noqa: B023
    return total


@case(vec(3), scal(), argnums=(0, 1))
def lambda_dynamics_to_odeint(y0, rate):
    # the dynamics close over the differentiated rate (autograd's ode examples)
    y = odeint(lambda y, t: -rate * y + np.sin(t * y), y0, np.linspace(0, 1, 5))
    return np.sum(y**2)


def fit_step(w, x):
    return apply(f=lambda v: np.exp(v * w), x=x - 1.0)


@case(vec(3), vec(3), argnums=(0, 1))
def lambda_by_keyword_in_callee(w, x):
    return np.sum(fit_step(w, x) + fit_step(x, w))


# ---------------------------------------------------------------- np.vectorize objects


def soft_threshold(v):
    return v * v / (1.0 + v * v)


def pair_energy(a, b):
    return a * b + np.sin(a)


@case(mat(2, 3))
def vectorize_object_in_variable(x):
    f = np.vectorize(soft_threshold)
    return np.sum(f(x) * x) + np.sum(f(2.0 * x))


@case(vec(3), argnums=0)
def vectorize_lambda_object_in_loop(x):
    f = np.vectorize(lambda t: np.tanh(t) * t)
    total = 0.0
    for k in range(2):
        total = total + np.sum(f(x + k))
    return total


@case(mat(2, 3), vec(3), argnums=(0, 1))
def vectorize_two_arguments_broadcast(a, b):
    energy = np.vectorize(pair_energy)
    return np.sum(energy(a, b) ** 2) + np.sum(np.vectorize(pair_energy)(b, 0.5))


def vectorized_energy(a, b):
    f = np.vectorize(pair_energy)
    return np.sum(f(a, b * 2.0))


@case(vec(3), vec(3), argnums=(0, 1))
def vectorize_object_in_callee(a, b):
    return vectorized_energy(a, b) * vectorized_energy(b, a)


# ---------------------------------------------------------------- dict and list methods


def _cfg(rng):
    return {"mode": "train", "momentum": 0.8}


@case(mat(5, 3), _cfg, argnums=0)
def config_get_with_defaults(x, bn_param):
    # CS231n batchnorm: defaults read with get; the running mean written back
    momentum = bn_param.get("momentum", 0.9)
    running_mean = bn_param.get("running_mean", np.zeros(x.shape[1]))
    mu = x.mean(axis=0)
    bn_param["running_mean"] = momentum * running_mean + (1 - momentum) * mu
    rm = bn_param.get("running_mean")
    return np.sum(np.tanh(x - mu) * rm)


@case(vec(4), argnums=0)
def local_dict_methods(w):
    d = {}
    d["a"] = w
    d.setdefault("b", w * 2.0)
    d.setdefault("a", w * 100.0)  # present: not written
    d.update({"c": np.sin(w)}, scale=3.0)
    d.update(a=d["b"] + 1.0, b=d["a"])  # both values read before either write
    return np.sum(d["a"] * d.get("b") * d.get("c", 1.0)) * d.get("scale")


@case(vec(3), argnums=0)
def local_list_extend_in_loop(w):
    xs = [w]
    for k in range(2):
        xs.extend([xs[-1] * w, np.cos(xs[-1]) + k])
    return np.sum(np.stack(xs) ** 2)


def scaled(x, opts):
    d = {"shift": np.sin(x)}  # made here: read with get
    return x * opts.get("scale", 1.0) + d.get("shift", 0.0) * d.get("none", 2.0)


@case(vec(3), const({"scale": 2.0}), argnums=0)
def dict_get_in_callee(x, opts):
    return np.sum(scaled(x, opts) * scaled(x * 2.0, opts))


# ---------------------------------------------------------------- **kwargs, keyword-only


def _layer(x, **kw):
    return np.tanh(x * kw["scale"] + kw.get("shift", 0.0))


def _block(x, **kw):
    return _layer(x, **kw) * 2.0  # forwarded whole


@case(vec(3), scal(), argnums=(0, 1))
def kwargs_forwarded_two_levels(x, s):
    total = 0.0
    for k in range(2):
        total = total + np.sum(_block(x, scale=s * (k + 1), shift=x))
    return total + np.sum(_block(x, scale=s))


SCALE = 1.5


def _scaled_kwonly(x, *, scale=SCALE, act=np.tanh):
    return act(x) * scale


@case(vec(3), argnums=0)
def keyword_only_defaults_from_globals(x):
    return np.sum(_scaled_kwonly(x)) + np.sum(_scaled_kwonly(x, scale=x, act=np.sin))


@case(vec(3), lst(vec(3), vec(3), vec(3)), argnums=(0, 1))
def reduce_over_map_of_partial_lambda(w, xs):
    terms = map(functools.partial(lambda p, v: np.sum(np.sin(p * v)), w), xs)
    return functools.reduce(lambda a, b: a + b * b, terms)
