"""Corpus: containers, indexing, item assignment, array methods and attributes, pytrees, dtypes."""

import numpy as np

from tests.corpus.registry import case, const, lst, mat, scal, tree, vec


@case(vec(3), vec(3))
def list_literal_sum(x, y):
    parts = [x, y * 2, x * y]
    return np.sum(sum(parts))


@case(vec(3))
def tuple_literal_index(x):
    t = (x, x * 2, 3.0)
    return np.sum(t[0] * t[1] + t[2])


@case(vec(3))
def dict_literal(x):
    d = {"a": x * 2, "b": np.sin(x)}
    return np.sum(d["a"] * d["b"])


@case(tree(W=mat(2, 3), b=vec(2)), vec(3))
def dict_params(params, x):
    return np.sum(np.tanh(params["W"] @ x + params["b"]))


@case(lst(vec(3), vec(3)), vec(3))
def list_params(ps, x):
    return np.sum(ps[0] * x + ps[1] * ps[0])


@case(tree(layers=lst(tree(w=vec(3)), tree(w=vec(3)))), vec(3))
def nested_pytree(p, x):
    h = x
    for layer in p["layers"]:
        h = np.tanh(h * layer["w"])
    return np.sum(h)


@case(tree(W=mat(2, 3), b=vec(2)), vec(3))
def dict_items_loop(params, x):
    s = 0.0
    for k, v in params.items():
        s = s + np.sum(v * v)
    return s


@case(mat(3, 4))
def index_int(X):
    return np.sum(X[1] * X[2, 3] + X[-1, 0])


@case(mat(4, 5))
def index_slices(X):
    return np.sum(X[1:3, ::2] * X[:2, 1:4]) + np.sum(X[::-1, 2:] ** 2)


@case(mat(4, 3))
def index_int_array(X):
    idx = np.array([0, 2, 2, 3])
    return np.sum(X[idx] ** 2)


@case(vec(5))
def index_repeated_accumulates(x):
    return np.sum(x[np.array([1, 1, 1, 4])] * 2)


@case(mat(3, 3))
def index_bool_mask(X):
    return np.sum(X[X > 0] ** 2)


@case(mat(2, 3))
def index_none_ellipsis(X):
    return np.sum(X[None, ..., 1] * X[:, None, :].sum())


@case(vec(4))
def item_assign(x):
    y = np.zeros(4)
    y[0] = x[1] * 2
    y[2] = np.sum(x)
    return np.sum(y * y + y)


@case(vec(4))
def slice_assign(x):
    y = np.ones(6)
    y[1:5] = x * x
    y[0] = y[2] * 3
    return np.sum(np.sin(y))


@case(vec(4))
def item_assign_overwrite(x):
    y = x.copy()
    y[1] = 0.0
    y[2] = y[3] * y[0]
    return np.sum(y * x)


@case(vec(3))
def augassign_item(x):
    y = np.zeros(3)
    y[1] += x[0] * 3
    y[1] *= x[2]
    return np.sum(y)


@case(mat(2, 3))
def methods_sum_mean(X):
    return X.sum() + X.mean(axis=0).sum() + X.sum(axis=1, keepdims=True).mean()


@case(mat(2, 3))
def methods_max_min(X):
    return X.max() * 2 + X.min(axis=1).sum()


@case(mat(2, 3))
def method_reshape(X):
    return np.sum(X.reshape(3, 2) * X.reshape((3, 2)) + X.reshape(-1)[0])


@case(mat(2, 3), mat(3, 2))
def method_dot_T(A, B):
    return np.sum(A.dot(B)) + np.sum(A.T @ B.T)


@case(mat(2, 3))
def method_astype(X):
    return np.sum(X.astype(np.float64) * 2)


@case(mat(2, 3))
def attributes_shape_size(X):
    n = X.shape[0] * X.size + len(X)
    return np.sum(X) * n / X.ndim


@case(mat(2, 3), vec(3))
def broadcasting(X, b):
    return np.sum((X + b) * (X - b[None, :]) / (1.0 + b * b))


@case(mat(2, 3), mat(1, 3), argnums=(0, 1))
def broadcasting_keepdim(X, b):
    return np.sum(X * b + b)


@case(scal(), vec(3), argnums=(0, 1))
def scalar_times_array(a, x):
    return np.sum(a * x + x / (a * a + 1.0))


@case(mat(3, 4))
def reductions_axis(X):
    return np.sum(
        np.max(X, axis=1) + np.min(X, axis=0).mean() + np.mean(X, axis=(0, 1))
    )


@case(mat(3, 4))
def reshape_transpose_fns(X):
    return np.sum(np.transpose(np.reshape(X, (4, 3))) * X)


@case(vec(3), vec(3))
def dot_vectors(x, y):
    return np.dot(x, y) + x.dot(y * 2)


@case(vec(3))
def list_append_sum(x):
    out = []
    out.append(x)
    out.append(x * 2)
    return np.sum(sum(out))


@case(vec(3))
def list_index_after_append(x):
    out = [x]
    for i in range(2):
        out.append(out[-1] * 2 + x)
    return np.sum(out[1] * out[2])


@case(vec(3))
def copy_then_mutate(x):
    y = x.copy()
    y[0] = y[1] * y[2]
    return np.sum(y * y)


@case(mat(2, 2))
def python_float_of_array(X):
    s = float(np.sum(X * X))
    return s + float(X[0, 1])


@case(vec(3), const(2))
def int_argument_not_differentiated(x, n):
    return np.sum(x**n)
