"""Statements for the call forms and rules added in sessions 8 and 9 (a mixin
of the generator, drawn with the merged forms of ``newforms.py``).

- a module-level ``functools.partial`` of a function, called with an
  expression (``SOFT(v)``): its stored keyword is read when the code runs;
- a module-level object whose class has a static method, a class method
  reading a class attribute, and a method calling both through ``self``
  (``OPS.both(v)``, ``OPS.soft(v)``, ``Ops.scaled(v)``);
- a helper with an early ``return`` in an ``if`` ahead of a loop, called
  with a constant flag of either sign (the crash of fuzz seed 9200: the
  callee's residuals bound only after the return);
- the sequence and order-statistic rules: ``np.convolve``/``np.correlate``
  in each mode, ``np.polyval``, ``np.trapezoid``, ``np.quantile``/
  ``np.percentile``, ``np.select``, ``np.delete``, ``np.interp``,
  ``np.insert`` and ``np.partition`` on vectors, reduced to a number.

Everything is drawn from ``self.rng`` in a fixed order.
"""

from __future__ import annotations

from s2sad.fuzz.exprs import SCALAR, VECTORS

PARTIAL = [
    "import functools",
    "",
    "",
    "def soft_step(z, k=1.0, shift=0.0):",
    "    return np.tanh(z * k) + shift * z",
    "",
    "",
    "SOFT = functools.partial(soft_step, k=0.7, shift=0.3)",
]

OPS = [
    "class Ops:",
    "    scale = 0.5",
    "",
    "    @staticmethod",
    "    def soft(z):",
    "        return z / (1.0 + np.abs(z))",
    "",
    "    @classmethod",
    "    def scaled(cls, z):",
    "        return cls.scale * np.sin(z)",
    "",
    "    def both(self, z):",
    "        return self.soft(z) + self.scaled(z) * 2.0",
    "",
    "",
    "OPS = Ops()",
]

EARLY = [
    "def early_sum(a, flag):",
    "    if flag > 0.0:",
    "        return np.sum(np.tanh(a))",
    "    out = 0.0",
    "    for k in range(3):",
    "        out = out + np.sum(np.sin(a * (k + 1.0)))",
    "    return out",
]


class MoreForms:
    """Mixin of :class:`s2sad.fuzz.grammar.Generator` (uses ``rhs``, ``bind``)."""

    has_partial = False
    has_ops = False
    has_early = False

    def more_kinds(self) -> list[str]:
        kinds = ["seq_rule", "seq_rule"]
        if self.has_partial:
            kinds += ["partial_call"]
        if self.has_ops:
            kinds += ["ops_call", "ops_call"]
        if self.has_early:
            kinds += ["early_call"]
        return kinds

    def _shape_any(self):
        return self.rng.choice([SCALAR, *VECTORS])

    def s_partial_call(self, depth, loop, ret):
        sh = self._shape_any()
        return [self.bind(self.fresh_name(), sh, f"SOFT({self.rhs(sh, 1)})")]

    def s_ops_call(self, depth, loop, ret):
        r = self.rng
        sh = self._shape_any()
        how = r.choice(["OPS.both", "OPS.soft", "Ops.scaled", "OPS.scaled"])
        return [self.bind(self.fresh_name(), sh, f"{how}({self.rhs(sh, 1)})")]

    def s_early_call(self, depth, loop, ret):
        r = self.rng
        sh = self._shape_any()
        flag = r.choice([-1.0, 1.0])
        return [
            self.bind(
                self.fresh_name(), SCALAR, f"early_sum({self.rhs(sh, 1)}, {flag})"
            )
        ]

    def s_seq_rule(self, depth, loop, ret):
        r = self.rng
        a, b = r.choice(VECTORS), r.choice(VECTORS)
        k = r.randrange(10)
        if k == 0:
            f = r.choice(["convolve", "correlate"])
            mode = r.choice(["full", "same", "valid"])
            src = f"np.{f}({self.rhs(a, 1)}, {self.rhs(b, 1)}, mode={mode!r})"
        elif k == 1:
            src = f"np.polyval({self.rhs(a, 1)}, {self.rhs(b, 1)})"
        elif k == 2:
            dx = round(r.uniform(0.1, 1.0), 2)
            src = f"np.trapezoid({self.rhs(a, 1)}, dx={dx})"
        elif k == 3:
            q = round(r.uniform(0.05, 0.95), 2)
            if r.random() < 0.5:
                src = f"np.quantile({self.rhs(a, 1)}, {q})"
            else:
                src = f"np.percentile({self.rhs(a, 1)}, {round(100 * q, 1)})"
        elif k == 4:
            x = self.rhs(a, 1)
            cut = round(r.uniform(-0.5, 0.5), 2)
            src = (
                f"np.select([{x} > {cut}], [{self.rhs(a, 1)}],"
                f" default={self.rhs(a, 1)})"
            )
        elif k == 5:
            src = f"np.delete({self.rhs(a, 1)}, {r.randrange(a[0])})"
        elif k == 6:
            src = f"np.convolve({self.rhs(a, 1)}, np.ones(2) / 2.0, mode='valid')"
        elif k == 7:  # breakpoints fixed and increasing, values and points generated
            xp = f"np.linspace(-1.0, 1.0, {b[0]})"
            src = f"np.interp(np.tanh({self.rhs(a, 1)}) * 0.9, {xp}, {self.rhs(b, 1)})"
        elif k == 8:
            at = r.choice([str(r.randrange(a[0])), "[0, 2]", "-1"])
            src = f"np.insert({self.rhs(a, 1)}, {at}, {self.rhs(SCALAR, 1)})"
        else:
            src = f"np.partition({self.rhs(a, 1)}, {r.randrange(a[0])})[: {a[0] - 1}]"
        v = self.fresh_name()
        return [self.bind(v, SCALAR, f"np.sum({src}) * 0.5")]
