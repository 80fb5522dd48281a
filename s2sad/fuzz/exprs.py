"""Random, shape-correct NumPy expressions for the differential fuzzer.

Every generated expression has a known *shape* (``()`` for a float, ``(N,)``,
``(K,)``, ``(N, K)`` or ``(K, N)``), so that each operator, call and index
type-checks when the program runs.  Values are kept smooth and bounded:
``exp`` only sees ``tanh``/``sin`` outputs, ``log``/``sqrt`` only see
``u * u + 1``, divisions are by ``v * v + 1``.  Kinks (``maximum``, ``max``,
``where``) are allowed; the checker rejects test points that lie near one.
"""

from __future__ import annotations

import ast
import random

N, K = 3, 4
SCALAR, VN, VK, MNK, MKN = (), (N,), (K,), (N, K), (K, N)
SHAPES = [SCALAR, VN, VK, MNK, MKN]
VECTORS = [VN, VK]
MATRICES = [MNK, MKN]

#: NumPy calls whose result is a fresh array (never a view of an argument)
VIEW_CALLS = {"reshape", "transpose", "ravel", "squeeze"}


def is_fresh(src: str) -> bool:
    """Whether an expression certainly evaluates to a new array (not a view or alias)."""
    node = ast.parse(src, mode="eval").body
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        f = node.func
        return (
            isinstance(f.value, ast.Name)
            and f.value.id == "np"
            and f.attr not in VIEW_CALLS
        )
    return False


class Env:
    """The names visible at one program point and what they hold.

    ``vars`` maps array/float names to shapes, ``ints`` maps integer names to
    an exclusive upper bound, ``conts`` maps container names to a type tuple
    (``("list", shape, length)``, ``("dict", {key: shape})``,
    ``("tuple", (shapes...))``).  ``fresh`` are local arrays that no other name
    aliases (only those may be changed in place); ``noview`` are names that may
    not be aliased (they are changed in place inside the current loop).
    """

    def __init__(self):
        self.vars: dict[str, tuple] = {}
        self.ints: dict[str, int] = {}
        self.conts: dict[str, tuple] = {}
        self.fresh: set[str] = set()
        self.noview: set[str] = set()
        self.args: set[str] = set()
        self.extra: list[tuple[str, tuple]] = []  # e.g. ("self.scale", ())

    def copy(self) -> "Env":
        e = Env()
        e.vars, e.ints, e.conts = dict(self.vars), dict(self.ints), dict(self.conts)
        e.fresh, e.noview, e.args = set(self.fresh), set(self.noview), set(self.args)
        e.extra = list(self.extra)
        return e

    def merge(self, a: "Env", b: "Env") -> None:
        """After a branch: keep what both sides define with the same type."""
        self.vars = {k: v for k, v in a.vars.items() if b.vars.get(k) == v}
        self.conts = {k: v for k, v in a.conts.items() if b.conts.get(k) == v}
        self.fresh = (a.fresh & b.fresh) & set(self.vars)

    def alias(self, src: str) -> None:
        """Every name read by ``src`` may now be aliased: no more in-place changes."""
        for node in ast.walk(ast.parse(src, mode="eval")):
            if isinstance(node, ast.Name):
                self.fresh.discard(node.id)


class Funcs:
    """User functions callable from the code being generated (helpers, methods)."""

    def __init__(self):
        self.items: list[tuple[str, list, tuple]] = []  # (call prefix, params, result)

    def add(self, name: str, params: list, result) -> None:
        self.items.append((name, params, result))

    def returning(self, shape) -> list:
        return [f for f in self.items if f[2] == shape]


class ExprGen:
    """Generates expressions of a requested shape from an :class:`Env`."""

    def __init__(self, rng: random.Random, funcs: Funcs):
        self.rng = rng
        self.funcs = funcs
        self.env = Env()

    # -- leaves
    def const(self, shape) -> str:
        r = self.rng
        a = round(r.uniform(-1.5, 1.5), 2)
        if shape == SCALAR:
            return repr(a)
        b = round(r.uniform(-1.5, 1.5), 2)
        n = 1
        for d in shape:
            n *= d
        arr = f"np.linspace({a}, {b}, {n})"
        return arr if len(shape) == 1 else f"{arr}.reshape{shape}"

    def names(self, shape, viewish=False) -> list[str]:
        env = self.env
        out = [k for k, v in env.vars.items() if v == shape]
        if viewish:
            out = [k for k in out if k not in env.noview]
        out += [s for s, v in env.extra if v == shape]
        for name, t in env.conts.items():
            if viewish and name in env.noview:
                continue
            if t[0] == "dict":
                out += [f"{name}[{k!r}]" for k, v in t[1].items() if v == shape]
            elif t[0] == "tuple":
                out += [f"{name}[{i}]" for i, v in enumerate(t[1]) if v == shape]
            elif t[0] == "list" and t[1] == shape:
                out += [f"{name}[0]", f"{name}[-1]"]
        return out

    def atom(self, shape, viewish=False) -> str:
        r = self.rng
        names = self.names(shape, viewish)
        if names and r.random() < 0.85:
            return r.choice(names)
        others = [k for k in self.env.vars if not (viewish and k in self.env.noview)]
        if not others or r.random() < 0.25:
            return self.const(shape)
        u = r.choice(others)  # keep the value connected to the inputs
        mean = f"np.mean({u})"
        return mean if shape == SCALAR else f"(({self.const(shape)}) * {mean})"

    def base(self, shape, d) -> str:
        """An operand for a view-producing construct (slice, ``.T``, row)."""
        if self.rng.random() < 0.6:
            return self.atom(shape, viewish=True)
        return f"({self.binary(shape, d)})"

    def index(self, bound: int) -> str:
        ints = [k for k, b in self.env.ints.items() if b <= bound]
        if ints and self.rng.random() < 0.5:
            return self.rng.choice(ints)
        return str(self.rng.randrange(bound))

    # -- composite
    def expr(self, shape, d: int = 2) -> str:
        if d <= 0 or self.rng.random() < 0.2:
            return self.atom(shape)
        makers = [self.binary, self.binary, self.unary, self.ufunc, self.ufunc]
        makers += {
            SCALAR: [self.reduce, self.reduce, self.item, self.mathcall],
            VN: [self.vector, self.vector],
            VK: [self.vector, self.vector],
            MNK: [self.matrix],
            MKN: [self.matrix],
        }[shape]
        makers += [self.select, self.call]
        return self.rng.choice(makers)(shape, d)

    def binary(self, shape, d) -> str:
        r = self.rng
        op = r.choice(["+", "-", "*", "*", "/", "**"])
        a = self.expr(shape, d - 1)
        if op == "**":
            return f"({a}) ** 2"
        if op == "/":
            b = self.expr(r.choice([shape, SCALAR]), d - 1)
            return f"({a}) / (({b}) * ({b}) + 1.0)"
        if shape != SCALAR and r.random() < 0.3:  # broadcasting a float or a row
            other = SCALAR if len(shape) == 1 or r.random() < 0.5 else shape[1:]
            b = self.expr(other, d - 1)
            return f"({b}) {op} ({a})" if r.random() < 0.5 else f"({a}) {op} ({b})"
        return f"({a}) {op} ({self.expr(shape, d - 1)})"

    def unary(self, shape, d) -> str:
        return f"-({self.expr(shape, d - 1)})"

    def ufunc(self, shape, d) -> str:
        r = self.rng
        a = self.expr(shape, d - 1)
        kind = r.choice(["sin", "cos", "tanh", "tanh", "exp", "log", "sqrt", "max"])
        if kind == "exp":
            return f"np.exp(np.{r.choice(['tanh', 'sin'])}({a}))"
        if kind in ("log", "sqrt"):
            return f"np.{kind}(({a}) * ({a}) + 1.0)"
        if kind == "max":
            return f"np.maximum({a}, {self.expr(r.choice([shape, SCALAR]), d - 1)})"
        return f"np.{kind}({a})"

    def select(self, shape, d) -> str:
        r = self.rng
        a, b = self.expr(shape, d - 1), self.expr(shape, d - 1)
        if shape == SCALAR:
            return f"({a} if {self.cond(d - 1)} else {b})"
        c = self.expr(shape, d - 1)
        thr = self.expr(r.choice([shape, SCALAR]), 0)
        return f"np.where(({c}) > ({thr}), {a}, {b})"

    def cond(self, d=1) -> str:
        r = self.rng
        sh = r.choice(SHAPES)
        e = self.expr(sh, d)
        lhs = (
            e
            if sh == SCALAR and r.random() < 0.5
            else f"np.{r.choice(['sum', 'mean'])}({e})"
        )
        c = f"{lhs} {r.choice(['>', '<'])} {round(r.uniform(-1, 1), 2)}"
        if r.random() < 0.15:
            c = f"{c} {r.choice(['and', 'or'])} {self.cond(0)}"
        return c

    def reduce(self, shape, d) -> str:
        r = self.rng
        sh = r.choice(SHAPES[1:])
        a = self.expr(sh, d - 1)
        k = r.random()
        if k < 0.4:
            return f"np.sum({a})"
        if k < 0.55:
            return f"np.mean({a})"
        if k < 0.65:
            return f"np.max({a})"
        if k < 0.75:
            return f"({a}).sum()"
        v = r.choice(VECTORS)
        return f"np.dot({self.expr(v, d - 1)}, {self.expr(v, d - 1)})"

    def item(self, shape, d) -> str:
        r = self.rng
        sh = r.choice(SHAPES[1:])
        b = self.base(sh, d - 1)
        if len(sh) == 1:
            return f"{b}[{self.index(sh[0])}]"
        return f"{b}[{self.index(sh[0])}, {self.index(sh[1])}]"

    def mathcall(self, shape, d) -> str:
        r = self.rng
        a = self.expr(SCALAR, d - 1)
        f = r.choice(["sin", "cos", "tanh", "exp", "sqrt"])
        if f == "exp":
            return f"math.exp(math.tanh({a}))"
        if f == "sqrt":
            return f"math.sqrt(({a}) * ({a}) + 1.0)"
        return f"math.{f}({a})" if r.random() < 0.7 else f"float({a})"

    def vector(self, shape, d) -> str:
        r = self.rng
        n = shape[0]
        m = K if n == N else N
        k = r.randrange(9)
        if k == 0:  # reduce a matrix along one axis
            f = r.choice(["sum", "sum", "mean", "max"])
            if r.random() < 0.5:
                return f"np.{f}({self.expr((n, m), d - 1)}, axis=1)"
            return f"np.{f}({self.expr((m, n), d - 1)}, axis=0)"
        if k == 1:
            return f"({self.expr((n, m), d - 1)}) @ ({self.expr((m,), d - 1)})"
        if k == 2:
            return f"np.dot({self.expr((m,), d - 1)}, {self.expr((m, n), d - 1)})"
        if k == 3:  # row or column of a matrix
            if r.random() < 0.5:
                return f"{self.base((m, n), d - 1)}[{self.index(m)}]"
            return f"{self.base((n, m), d - 1)}[:, {self.index(m)}]"
        if k == 4:  # slice of the other vector
            if n == N:
                return f"{self.base(VK, d - 1)}[{r.choice(['0:3', '1:4', ':3', '1:'])}]"
            return (
                f"np.concatenate([{self.expr(VN, d - 1)}, {self.base(VN, d - 1)}[0:1]])"
            )
        if k == 5:
            parts = ", ".join(self.expr(SCALAR, d - 1) for _ in range(n))
            return f"np.stack([{parts}])"
        if k == 6:
            idx = [r.randrange(n) for _ in range(n)]
            return f"{self.base(shape, d - 1)}[{idx}]"
        if k == 7:
            return f"{self.base(shape, d - 1)}[::-1]"
        return (
            f"np.{r.choice(['cumsum', 'sort'])}({self.expr(shape, d - 1)})"
            if r.random() < 0.3
            else self.ufunc(shape, d)
        )

    def matrix(self, shape, d) -> str:
        r = self.rng
        n, m = shape
        k = r.randrange(6)
        if k == 0:
            return f"{self.base((m, n), d - 1)}.T"
        if k == 1:
            return f"np.transpose({self.base((m, n), d - 1)})"
        if k == 2:
            return f"{self.base((m, n), d - 1)}.reshape({n}, {m})"
        if k == 3:
            return f"np.outer({self.expr((n,), d - 1)}, {self.expr((m,), d - 1)})"
        if k == 4:
            rows = ", ".join(self.expr((m,), d - 1) for _ in range(n))
            return f"np.stack([{rows}])"
        cols = ", ".join(self.expr((n,), d - 1) for _ in range(m))
        return f"np.stack([{cols}], axis=1)"

    def call(self, shape, d) -> str:
        """A call to a helper function or method already defined in the module."""
        cands = self.funcs.returning(shape)
        if not cands:
            return self.binary(shape, d)
        name, params, _ = self.rng.choice(cands)
        return f"{name}({self.arglist(params, d - 1)})"

    def arglist(self, params, d) -> str:
        out = []
        for p in params:  # (name, kind, type, default-or-None)
            pname, kind, t, default = p
            if default is not None and self.rng.random() < 0.4:
                continue
            if kind == "dict":
                v = self.dict_literal(t, d)
            elif kind == "int":
                v = str(self.rng.randrange(t))
            elif kind == "const":
                v = self.const(t)  # an argument that does not depend on the inputs
            else:
                v = (
                    self.expr(t, d)
                    if self.rng.random() < 0.7
                    else self.atom(t, viewish=True)
                )
            out.append(f"{pname}={v}" if default is not None else v)
        return ", ".join(out)

    def dict_literal(self, t: dict, d) -> str:
        names = [
            k
            for k, v in self.env.conts.items()
            if v == ("dict", t) and k not in self.env.noview
        ]
        if names and self.rng.random() < 0.5:
            return self.rng.choice(names)
        return "{" + ", ".join(f"{k!r}: {self.expr(v, d)}" for k, v in t.items()) + "}"
