"""Corpus: argument unpacking (``f(*xs)``, ``f(**d)``), callees taking ``*args``
and ``**kwargs``, differentiated values by keyword, non-literal defaults."""

import numpy as np

from tests.corpus.registry import case, const, lst, mat, tree, vec


def concat_and_multiply(weights, *args):
    # autograd's rnn.py: the extra positional arguments arrive as one tuple
    cat_state = np.hstack(args)
    cat_state = np.hstack((cat_state, np.ones((args[0].shape[0], 1))))
    return np.dot(cat_state, weights)


@case(mat(5, 2), mat(3, 2), mat(3, 2), argnums=(0, 1, 2))
def star_args_callee(W, a, b):
    return np.sum(np.tanh(concat_and_multiply(W, a, b)))


@case(mat(5, 2), mat(3, 2), mat(3, 2), argnums=(0, 1))
def star_args_callee_in_loop(W, h, x):
    for _ in range(3):
        h = np.tanh(concat_and_multiply(W, h, x))
    return np.sum(h**2)


def total_energy(*parts, scale=1.0):
    return scale * sum(np.sum(p**2) for p in parts)


@case(lst(vec(3), mat(2, 3)), vec(3))
def star_param_into_star_callee(xs, y):
    # the callee's *parts gets tuple(xs): no length needed
    return total_energy(*xs, scale=2.0) + total_energy(y)


@case(mat(3, 2))
def star_literals(x):
    return np.sum(np.stack([x, x * 2]) ** 2) + np.sum(np.maximum(*[x, x**2]))


@case(lst(lst(mat(3, 2), mat(3, 2)), lst(mat(3, 2), mat(3, 2))))
def zip_star_pairs(pairs):
    # the length of pairs is the call's: specialised, checked when the code runs
    a, b = zip(*pairs)
    return np.sum(np.stack(a) * np.stack(b))


@case(mat(3, 3))
def star_shape_not_differentiated(x):
    return np.sum(x * np.eye(*x.shape)) + np.sum(x**2)


def layer_norm(x, g, b, eps: float = 1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return g * (x - mean) / np.sqrt(variance + eps) + b


def ffn(x, c_fc, c_proj):
    return np.tanh(x @ c_fc["w"] + c_fc["b"]) @ c_proj["w"] + c_proj["b"]


def block(x, mlp, ln_1):
    return x + ffn(layer_norm(x, **ln_1), **mlp)


_PARAMS = tree(
    mlp=tree(c_fc=tree(w=mat(4, 6), b=vec(6)), c_proj=tree(w=mat(6, 4), b=vec(4))),
    ln_1=tree(g=vec(4), b=vec(4)),
)


@case(mat(3, 4), lst(_PARAMS, _PARAMS), argnums=(0, 1))
def picogpt_style_blocks(x, blocks):
    # picoGPT: every parameter group passed as **params (keys unknown here:
    # each parameter of the callee reads its key)
    for params in blocks:
        x = block(x, **params)
    return np.sum(x**2)


def kwargs_callee(x, **kw):
    return np.sum(x * kw["scale"]) + np.sum(kw["shift"] ** 2)


@case(vec(3), vec(3), argnums=(0, 1))
def kwargs_callee_gets_extras(x, s):
    return kwargs_callee(x, scale=s, shift=x * 2.0)


@case(mat(3, 4), tree(g=vec(4), b=vec(4)), argnums=(0, 1))
def dict_param_unpacked(x, ln):
    return np.sum(layer_norm(x, **ln) ** 2)


@case(mat(3, 4), const({"axis": 0, "keepdims": True}))
def dict_param_into_numpy(x, opts):
    # keys specialised from the call, checked when the code runs
    return np.sum(np.sum(x**2, **opts) * np.mean(x, **opts))


@case(vec(3), vec(3), argnums=(0, 1))
def keyword_differentiated(x, w):
    return np.sum(layer_norm(x, b=w, g=np.tanh(w)))


Y_OBSERVED = np.linspace(-1.0, 1.0, 3)
HALF = np.float64(0.5)


def acq(x, y=Y_OBSERVED, scale=HALF):
    return scale * np.sum((x - y) ** 2)


@case(vec(3))
def non_literal_default(x):
    return acq(x) + acq(x * 2.0, scale=1.5)


@case(vec(3))
def non_literal_default_in_loop(x):
    total = 0.0
    for i in range(3):
        total = total + acq(x * (i + 1))
    return total
