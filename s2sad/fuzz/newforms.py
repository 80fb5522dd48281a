"""Statements for the forms the merged front passes accept (a mixin of the generator).

- a recurrent loop ``for t in range(T): h = np.tanh(xs[:, t, :] @ W + h @ U)``
  after ``h = np.zeros(...)`` (the hoist and peel passes), sometimes with an
  item assignment or a re-binding of the product's operand in the loop, which
  must keep the product in the loop;
- an object of the module's class ``Cell`` built inside the function:
  ``__init__`` stores attributes, methods read them and set one that another
  method reads back, an attribute written from outside and read by a method;
- ``d.get``/``d.update`` on a local dict; a lambda given to the module's
  ``apply_fn``; ``zip(*rows)`` over a local list of known length;
- a local tuple or list unpacked into a display, ``np.stack((*parts, c))``;
- NumPy functions called with keyword arguments (``np.sum(a, axis=0)``,
  ``np.clip(a, a_min=.., a_max=..)``, ``keepdims=True``) and reductions as
  methods of small arrays (``a.sum(axis=1)``, ``a.mean()``: the methods pass).

Everything is drawn from ``self.rng`` in a fixed order (no set iteration).
"""

from __future__ import annotations

from s2sad.fuzz.exprs import MATRICES, SCALAR, VECTORS, K, N

CELL = [
    "class Cell:",
    "    def __init__(self, w, k):",
    "        self.w = w",
    "        self.k = k",
    "",
    "    def apply(self, z):",
    "        self.last = np.tanh(z * self.k) + self.w",
    "        return self.last * self.w",
    "",
    "    def total(self):",
    "        return np.sum(self.last) * self.k",
]

APPLY_FN = [
    "def apply_fn(f, a, twice=False):",
    "    out = f(a)",
    "    if twice:",
    "        out = f(out)",
    "    return out + f(a * 0.5)",
]


class NewForms:
    """Mixin of :class:`s2sad.fuzz.grammar.Generator` (uses ``rhs``, ``bind``, ``expr``)."""

    has_cell = False
    has_apply = False

    def new_kinds(self, depth: int, loop: bool) -> list[str]:
        kinds = ["kwcall", "kwcall", "small_method", "small_method", "dict_methods"]
        kinds += ["star_display"]
        if depth < 2:
            kinds += ["rnn", "rnn", "zip_star"]
        if self.has_cell:
            kinds += ["cell", "cell"]
        if self.has_apply:
            kinds += ["lambda_arg"]
        return kinds

    def _vec(self) -> tuple:
        return self.rng.choice(VECTORS)

    def s_rnn(self, depth, loop, ret):
        r = self.rng
        sh = r.choice(MATRICES)  # (time, features)
        steps, feat = sh
        hid = N if feat == K else K
        xs, W, U, h = (self.fresh_name(p) for p in ("xs", "Wr", "Ur", "h"))
        lines = [
            f"{xs} = (({self.rhs(sh, 1)}) * 1.0).reshape(1, {steps}, {feat})",
            f"{W} = {self.rhs((feat, hid), 1)}",
            f"{U} = 0.3 * np.outer({self.rhs((hid,), 1)}, np.tanh({self.rhs((hid,), 1)}))",
            f"{h} = np.zeros((1, {hid}))",
            f"for t in range({steps}):",
            f"    {h} = np.tanh({xs}[:, t, :] @ {W} + {h} @ {U})",
        ]
        k = r.randrange(4)
        if k == 1:  # the operand changes in the loop: the product stays there
            lines.append(f"    {W} = {W} * 0.9")
        elif k == 2:  # the sequence is written ahead of the step reading it
            lines += [
                f"    if t + 1 < {steps}:",
                f"        {xs}[0, t + 1, 0] = {xs}[0, t + 1, 0] + {h}[0, 0]",
            ]
        v = self.fresh_name()
        how = r.choice(["sum", "sum", "row"])
        src = f"np.sum({h}, axis=0)" if how == "sum" else f"{h}[0] * 1.0"
        self.env.vars[v] = (hid,)
        self.env.fresh.add(v)
        return lines + [f"{v} = {src}"]

    def s_cell(self, depth, loop, ret):
        r = self.rng
        sh = r.choice([SCALAR, self._vec()])
        c = self.fresh_name("cell")
        lines = [f"{c} = Cell({self.rhs(sh, 1)}, {self.rhs(SCALAR, 1)})"]
        if r.random() < 0.4:  # written from outside, read back by the methods
            lines.append(f"{c}.w = {self.rhs(sh, 1)}")
        v = self.fresh_name()
        lines.append(self.bind(v, sh, f"{c}.apply({self.rhs(sh, 1)})"))
        self.env.fresh.discard(v)
        if r.random() < 0.5:
            s = self.fresh_name()
            lines.append(self.bind(s, SCALAR, f"{c}.total()"))
        if r.random() < 0.3:
            s = self.fresh_name()
            lines.append(self.bind(s, SCALAR, f"np.sum({c}.last * {c}.k)"))
        return lines

    def s_dict_methods(self, depth, loop, ret):
        r = self.rng
        sh = r.choice([SCALAR, self._vec()])
        d = self.fresh_name("dm")
        lines = [f"{d} = {{'a': {self.rhs(sh, 1)}}}"]
        if r.random() < 0.6:
            lines.append(f"{d}.update({{'b': {self.rhs(sh, 1)}}}, c={self.rhs(sh, 1)})")
            got = r.choice(["b", "c"])
        else:
            got = "a"
        v = self.fresh_name()
        src = f"{d}.get({got!r}) * {d}.get('z', {self.rhs(sh, 1)}) + {d}['a']"
        lines.append(self.bind(v, sh, src))
        self.env.fresh.discard(v)
        return lines

    def s_lambda_arg(self, depth, loop, ret):
        r = self.rng
        sh = r.choice([SCALAR, self._vec()])
        saved = self.env
        self.env = saved.copy()
        self.env.vars["z"] = sh
        self.env.noview = set(self.env.vars)
        body = self.expr(sh, 1)
        self.env = saved
        twice = ", twice=True" if r.random() < 0.4 else ""
        body = f"np.tanh({body})" if twice else body
        v = self.fresh_name()
        call = f"apply_fn(lambda z: {body}, {self.rhs(sh, 1)}{twice})"
        return [self.bind(v, sh, call)]

    def s_zip_star(self, depth, loop, ret):
        r = self.rng
        sh = self._vec()
        n = r.randint(2, 3)
        rows = self.fresh_name("rows")
        names = [self.fresh_name("p") for _ in range(n)]
        acc = self.fresh_name("acc")
        items = ", ".join(self.rhs(sh, 1) for _ in range(n))
        self.env.alias(f"[{items}]")
        term = " * ".join(names[:2]) + (f" - np.tanh({names[2]})" if n == 3 else "")
        self.env.vars[acc] = SCALAR
        return [
            f"{rows} = [{items}]",
            f"{acc} = 0.0",
            f"for {', '.join(names)} in zip(*{rows}):",
            f"    {acc} = {acc} + {term}",
        ]

    def s_star_display(self, depth, loop, ret):
        r = self.rng
        sh = r.choice([self._vec()] + MATRICES)
        n = r.randint(1, 3)
        parts = self.fresh_name("parts")
        items = ", ".join(self.rhs(sh, 1) for _ in range(n))
        self.env.alias(f"({items},)")
        opening, closing = r.choice([("(", ",)"), ("[", "]")])
        other = self.rhs(sh, 1)
        if r.random() < 0.4:  # a constant: the display's value is the parts'
            other = f"np.full({sh}, {round(r.uniform(-1.0, 1.0), 2)})"
        display = f"{opening}*{parts}, {other}{closing}"
        if r.random() < 0.5:
            display = f"{opening}{other}, *{parts}{closing}"
        v = self.fresh_name()
        f = r.choice(["sum", "mean", "max"])
        return [
            f"{parts} = ({items},)" if r.random() < 0.5 else f"{parts} = [{items}]",
            self.bind(v, sh, f"np.{f}(np.stack({display}), axis=0)"),
        ]

    def s_kwcall(self, depth, loop, ret):
        r = self.rng
        k = r.randrange(4)
        v = self.fresh_name()
        if k == 0:
            sh = r.choice(MATRICES)
            ax = r.randrange(2)
            f = r.choice(["sum", "mean", "max"])
            return [
                self.bind(v, (sh[1 - ax],), f"np.{f}({self.rhs(sh, 1)}, axis={ax})")
            ]
        if k == 1:
            sh = r.choice([SCALAR, self._vec()] + MATRICES)
            lo = round(r.uniform(-1.5, -0.2), 2)
            hi = round(r.uniform(0.2, 1.5), 2)
            return [
                self.bind(v, sh, f"np.clip({self.rhs(sh, 1)}, a_min={lo}, a_max={hi})")
            ]
        if k == 2:
            sh = r.choice(MATRICES)
            return [
                self.bind(
                    v,
                    sh,
                    f"({self.rhs(sh, 1)}) - np.mean({self.rhs(sh, 1)}, axis=1, keepdims=True)",
                )
            ]
        sh = r.choice(MATRICES)
        return [self.bind(v, SCALAR, f"np.sum({self.rhs(sh, 1)}, axis=None) * 0.5")]

    def s_small_method(self, depth, loop, ret):
        r = self.rng
        v = self.fresh_name()
        if r.random() < 0.5:
            sh = r.choice(MATRICES)
            ax = r.randrange(2)
            f = r.choice(["sum", "mean", "max", "min"])
            return [self.bind(v, (sh[1 - ax],), f"({self.rhs(sh, 1)}).{f}(axis={ax})")]
        sh = r.choice([self._vec()] + MATRICES)
        f = r.choice(["sum", "mean", "max", "min", "prod"])
        return [self.bind(v, SCALAR, f"({self.rhs(sh, 1)}).{f}()")]
