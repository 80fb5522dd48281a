"""Random valid NumPy programs (as Python source text), deterministic from a seed.

:func:`generate` returns a :class:`Program`: a module that defines
``target(x, ...)`` returning a float, the shapes of its (all float) arguments,
and the class the checker should see (``"ok"``, or ``"refused"`` for programs
that deliberately use a construct s2sad documents as refused).

The module may hold helper functions (keyword/default arguments, dict
parameters, several results, recursion with a depth argument), a small class
with a module-level instance, and inside ``target``: assignments, augmented
and item assignments, branches on values, ``for``/``while`` loops with
``break``/``continue``/``return``, closures, lambdas, lists with ``append``,
dicts, tuples and unpacking.  Shapes are tracked per name (see ``exprs``) so
every program runs; the generator's own mistakes are counted as ``invalid``.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass, field

from s2sad.fuzz.exprs import (
    MATRICES,
    SCALAR,
    SHAPES,
    VECTORS,
    VK,
    VN,
    Env,
    ExprGen,
    Funcs,
    K,
    N,
    is_fresh,
)
from s2sad.fuzz.modules import ModuleParts
from s2sad.fuzz.moreforms import EARLY, OPS, PARTIAL, MoreForms
from s2sad.fuzz.newforms import APPLY_FN, CELL, NewForms

HEADER = "import math\n\nimport numpy as np\n"


@dataclass
class Program:
    """One generated module and how to call its ``target``."""

    source: str
    shapes: dict = field(default_factory=dict)  # argument name -> shape, in order
    expected: str = "ok"  # or "refused"
    token: str = ""  # for "refused": text the refused line starts with
    seed: int = 0
    index: int = 0


class Generator(MoreForms, NewForms, ModuleParts, ExprGen):
    """Builds statements and whole modules on top of :class:`ExprGen`."""

    def __init__(self, rng: random.Random):
        super().__init__(rng, Funcs())
        self.counter = 0
        self.defs: list[str] = []
        self.new_forms = False  # the merged forms (newforms.py), drawn in generate()
        self.more_forms = False  # the later call forms and rules (moreforms.py)
        self.in_target = False

    def fresh_name(self, prefix="v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def loop_var(self) -> str:
        return next(v for v in ("i", "j", "l", "q") if v not in self.env.ints)

    def shape(self):
        return self.rng.choice([SCALAR, SCALAR] + SHAPES[1:])

    # -- statements: each returns a list of source lines
    def block(self, n: int, depth: int, loop: bool = False, ret=SCALAR) -> list[str]:
        lines: list[str] = []
        for _ in range(n):
            lines += self.stmt(depth, loop, ret)
        return lines or ["pass"]

    def stmt(self, depth: int, loop: bool, ret) -> list[str]:
        r = self.rng
        kinds = ["assign"] * 6 + ["rebind"] * 3 + ["aug"] * 2 + ["item"] * 2
        if depth < 2:
            kinds += (
                ["if"] * 2
                + ["for"] * 2
                + ["while", "closure", "list", "dict", "tuple", "call"]
            )
        if loop:
            kinds += ["jump"] * 3
        if self.new_forms:
            kinds += self.new_kinds(depth, loop)
        if self.more_forms:
            kinds += self.more_kinds()
        kind = r.choice(kinds)
        return getattr(self, "s_" + kind)(depth, loop, ret)

    def rhs(self, shape, d=2) -> str:
        """An expression safe to bind to a new name (aliases no name kept for in-place use)."""
        for _ in range(10):
            src = self.expr(shape, d)
            if is_fresh(src):
                return src
            names = {
                n.id
                for n in ast.walk(ast.parse(src, mode="eval"))
                if isinstance(n, ast.Name)
            }
            if not names & self.env.noview:
                return src
        return f"np.tanh({self.const(shape)})" if shape != SCALAR else "0.5"

    def bind(self, name: str, shape, src: str) -> str:
        env = self.env
        if not is_fresh(src):
            env.alias(src)
        env.vars[name] = shape
        env.conts.pop(name, None)
        env.fresh.discard(name)
        if is_fresh(src) and shape != SCALAR and name not in env.args:
            env.fresh.add(name)
        return f"{name} = {src}"

    def s_assign(self, depth, loop, ret):
        sh = self.shape()
        return [self.bind(self.fresh_name(), sh, self.rhs(sh))]

    def s_rebind(self, depth, loop, ret):
        env = self.env
        cands = [k for k in env.vars if k not in env.noview]
        if not cands:
            return self.s_assign(depth, loop, ret)
        name = self.rng.choice(cands)
        sh = env.vars[name]
        src = self.rhs(sh)
        if loop:  # loop-carried values stay bounded
            src = f"np.tanh({src})"
        return [self.bind(name, sh, src)]

    def s_aug(self, depth, loop, ret):
        r, env = self.rng, self.env
        # a callee's parameter changed in place is refused (it may be an array)
        scal = [
            k
            for k, v in env.vars.items()
            if v == SCALAR and (self.in_target or k not in env.args)
        ]
        arrs = [k for k in env.fresh if k in env.vars and (not loop or k in env.noview)]
        cands = scal + sorted(arrs)
        if not cands:
            return self.s_assign(depth, loop, ret)
        name = r.choice(cands)
        sh = env.vars[name]
        op = r.choice(["+=", "-=", "*="])
        src = self.rhs(r.choice([sh, SCALAR]), 1)
        if op == "*=" or loop:
            src = f"np.tanh({src})"
        return [f"{name} {op} {src}"]

    def s_item(self, depth, loop, ret):
        r, env = self.rng, self.env
        arrs = sorted(
            k for k in env.fresh if k in env.vars and (not loop or k in env.noview)
        )
        if not arrs or r.random() < 0.3:
            if loop:
                return self.s_assign(depth, loop, ret)
            sh = r.choice(VECTORS + MATRICES)
            name = self.fresh_name("y")
            env.vars[name] = sh
            env.fresh.add(name)
            first = f"{name} = np.zeros({sh if len(sh) > 1 else sh[0]})"
            return [first] + self.s_item_into(name, sh)
        name = r.choice(arrs)
        return self.s_item_into(name, env.vars[name])

    def s_item_into(self, name, sh):
        r = self.rng
        if len(sh) == 1:
            k = r.randrange(5)
            if k == 0:
                return [f"{name}[{self.index(sh[0])}] = {self.rhs(SCALAR, 1)}"]
            if k == 1:
                i = r.randrange(sh[0] - 1)
                return [f"{name}[{i}:{i + 2}] = ({self.rhs(VN, 1)})[0:2]"]
            if k == 2:
                idx = [r.randrange(sh[0]) for _ in range(N)]
                return [f"{name}[{idx}] = {self.rhs(VN, 1)}"]
            if k == 3:
                return [f"{name}[:] = {self.rhs(sh, 1)}"]
            return [f"{name}[{self.index(sh[0])}] += {self.rhs(SCALAR, 1)}"]
        if r.random() < 0.5:
            return [f"{name}[{self.index(sh[0])}] = {self.rhs(sh[1:], 1)}"]
        return [
            f"{name}[{self.index(sh[0])}, {self.index(sh[1])}] = {self.rhs(SCALAR, 1)}"
        ]

    def sub(self, n, depth, loop, ret, env=None):
        """A nested block generated in a copy of the environment; returns (lines, env)."""
        saved = self.env
        self.env = (env or saved).copy()
        lines = self.block(n, depth + 1, loop, ret)
        out, self.env = self.env, saved
        return ["    " + ln for ln in lines], out

    def s_if(self, depth, loop, ret):
        r = self.rng
        head = [f"if {self.cond()}:"]
        a, ea = self.sub(r.randint(1, 3), depth, loop, ret)
        if r.random() < 0.2:
            b, eb = self.sub(r.randint(1, 2), depth, loop, ret)
            a += [f"elif {self.cond()}:"] + b
            ea.merge(ea, eb)
        c, ec = self.sub(r.randint(0, 3), depth, loop, ret)
        self.env.merge(ea, ec)
        return head + a + ["else:"] + c

    def loop_env(self):
        env = self.env.copy()
        inplace = [k for k in sorted(env.fresh) if self.rng.random() < 0.5]
        env.noview |= set(inplace)
        return env

    def s_for(self, depth, loop, ret):
        r = self.rng
        var = self.loop_var()
        n = r.randint(1, N)
        env = self.loop_env()
        env.ints[var] = n
        body, _ = self.sub(r.randint(1, 4), depth, True, ret, env)
        return [f"for {var} in range({n}):"] + body

    def s_while(self, depth, loop, ret):
        r = self.rng
        k = self.fresh_name("k")
        n = r.randint(1, N)
        test = f"{k} < {n}"
        if r.random() < 0.4:
            test += f" and {self.cond(0)}"
        env = self.loop_env()
        env.ints[k] = n + 1  # k is incremented before the body: 1..n there
        body, _ = self.sub(r.randint(1, 3), depth, True, ret, env)
        return [f"{k} = 0", f"while {test}:", f"    {k} += 1"] + body

    def s_jump(self, depth, loop, ret):
        r = self.rng
        ints = list(self.env.ints)
        c = (
            f"{r.choice(ints)} == {r.randrange(2)}"
            if ints and r.random() < 0.4
            else self.cond(0)
        )
        what = r.choice(["break", "continue", "return"])
        if what == "return" and isinstance(ret, list):
            what = f"return {self.expr(ret[0], 1)}, {self.expr(ret[1], 1)}"
        elif what == "return":
            what = f"return {self.expr(ret, 1)}"
        return [f"if {c}:", f"    {what}"]

    def s_closure(self, depth, loop, ret):
        sh = self.shape()
        name = self.fresh_name("inner")
        saved = self.env
        self.env = saved.copy()
        self.env.vars["z"] = sh
        self.env.noview = set(self.env.vars)  # a closure changes nothing in place
        body = self.expr(sh, 2)
        self.env = saved
        v = self.fresh_name()
        call = f"{name}({self.rhs(sh, 1)})"
        bound = self.bind(v, sh, call)
        # the result may be (a view of) a name the body reads: none of those may
        # change in place after this (``return v11`` is v11 itself)
        self.env.alias(body)
        self.env.fresh.discard(v)
        if self.rng.random() < 0.3:
            return [f"{name} = lambda z: {body}", bound]
        return [f"def {name}(z):", f"    return {body}", bound]

    def s_list(self, depth, loop, ret):
        r = self.rng
        sh = r.choice([SCALAR, VN, VK])
        n = r.choice([N, K]) if sh == SCALAR else N
        name = self.fresh_name("lst")
        env = self.loop_env()
        var = self.loop_var()
        env.ints[var] = n
        saved, self.env = self.env, env
        item = self.rhs(sh, 2)
        self.env = saved
        self.env.alias(item)
        self.env.conts[name] = ("list", sh, n)
        lines = [
            f"{name} = []",
            f"for {var} in range({n}):",
            f"    {name}.append({item})",
        ]
        v = self.fresh_name()
        use = r.choice(["sum", "stack", "item"])
        if use == "stack" and (n,) + sh not in SHAPES:
            use = "sum"
        if use == "sum":
            return lines + [self.bind(v, sh, f"sum({name})")]
        if use == "stack":
            return lines + [self.bind(v, (n,) + sh, f"np.stack({name})")]
        return lines

    def s_dict(self, depth, loop, ret):
        r = self.rng
        name = self.fresh_name("d")
        t = {k: self.shape() for k in r.sample(["a", "b", "c"], r.randint(1, 3))}
        src = self.dict_literal(t, 1)
        self.env.alias(src)
        self.env.conts[name] = ("dict", t)
        lines = [f"{name} = {src}"]
        if r.random() < 0.4:
            acc = self.fresh_name("acc")
            lines += [
                f"{acc} = 0.0",
                f"for key, val in {name}.items():",
                f"    {acc} = {acc} + np.sum(val)",
            ]
            self.env.vars[acc] = SCALAR
        return lines

    def s_tuple(self, depth, loop, ret):
        shs = (self.shape(), self.shape())
        a, b = self.rhs(shs[0], 1), self.rhs(shs[1], 1)
        name = self.fresh_name("t")
        self.env.alias(a)
        self.env.alias(b)
        self.env.conts[name] = ("tuple", shs)
        p, q = self.fresh_name(), self.fresh_name()
        self.env.vars[p], self.env.vars[q] = shs
        return [f"{name} = ({a}, {b})", f"{p}, {q} = {name}"]

    def s_call(self, depth, loop, ret):
        two = [f for f in self.funcs.items if isinstance(f[2], list)]
        if not two:
            return self.s_assign(depth, loop, ret)
        fname, params, shs = self.rng.choice(two)
        p, q = self.fresh_name(), self.fresh_name()
        args = self.arglist(params, 1)
        self.env.alias(f"f({args})")
        self.env.vars[p], self.env.vars[q] = shs
        self.env.fresh -= {p, q}
        return [f"{p}, {q} = {fname}({args})"]


REFUSED = [
    ("try", ["try:", "    vR = np.sum(x)", "except ValueError:", "    vR = 0.0"]),
    # value-neutral contexts (np.errstate, ...) are accepted now; binding one
    # with 'as' is still refused
    ("with", ["with np.errstate(all='ignore') as es:", "    vR = np.sum(x)"]),
    # x += ... and x[0] = ... on the argument differentiate now (on a copy taken
    # at entry, written back); in-place methods whose result is dropped do not
    ("x.sort(", ["x.sort()"]),
    ("x.fill(", ["x.fill(0.5)"]),
    # list comprehensions and generator expressions differentiate now; a set
    # comprehension (no order, no gradient) is still refused
    ("vR =", ["vR = sum({float(e) for e in x})"]),
    ("global", ["global MODEL"]),
]


def generate(
    seed: int,
    index: int = 0,
    refuse_rate: float = 0.08,
    new_rate: float = 0.5,
    more_rate: float = 0.3,
) -> Program:
    """The program number ``index`` of stream ``seed`` (same inputs, same text)."""
    rng = random.Random(f"{seed}:{index}")
    g = Generator(rng)
    parts: list[list[str]] = []
    g.new_forms = rng.random() < new_rate
    if g.new_forms and rng.random() < 0.5:
        parts.append(list(CELL))
        g.has_cell = True
    if g.new_forms and rng.random() < 0.4:
        parts.append(list(APPLY_FN))
        g.has_apply = True
    if more_rate and rng.random() < more_rate:
        g.more_forms = True
        for lines_, flag in (
            (PARTIAL, "has_partial"),
            (OPS, "has_ops"),
            (EARLY, "has_early"),
        ):
            if rng.random() < 0.5:
                parts.append(list(lines_))
                setattr(g, flag, True)
    if rng.random() < 0.4:
        parts.append(g.klass())
    for k in range(rng.randint(0, 3)):
        if rng.random() < 0.3:
            parts.append(g.recursive(f"rec{k}"))
        else:
            env = Env()
            parts.append(g.function(f"helper{k}", env, g.params(env, True)))
    lines, shapes = g.target()
    prog = Program("", shapes, seed=seed, index=index)
    if rng.random() < refuse_rate:
        prog.token, snippet = rng.choice(REFUSED)
        tops = [
            i
            for i, ln in enumerate(lines)
            if i > 0 and not ln.startswith(("     ", "    elif", "    else"))
        ]
        # x still the argument; a global statement ahead of any use of the name
        at = 1 if prog.token.startswith(("x", "global")) else rng.choice(tops)
        lines[at:at] = ["    " + s for s in snippet]
        prog.expected = "refused"
    parts.append(lines)
    prog.source = HEADER + "".join("\n\n" + "\n".join(p) + "\n" for p in parts)
    return prog
