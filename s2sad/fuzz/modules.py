"""Module-level parts of a generated program: helpers, recursion, a class, ``target``.

A mixin of :class:`s2sad.fuzz.grammar.Generator` (it uses the statement
generator ``block``): helper functions get typed parameters (a dict parameter,
a keyword with a default), one or two results; the recursive helper takes a
depth argument; the class ``Model`` has a module-level instance ``MODEL`` whose
methods may take an argument that never depends on the inputs.
"""

from __future__ import annotations

from s2sad.fuzz.exprs import MATRICES, SCALAR, Env, K, N


class ModuleParts:
    def params(self, env: Env, allow_dict: bool) -> list:
        r = self.rng
        out = []
        for p in range(r.randint(1, 3)):
            name = "abe"[p]
            if allow_dict and r.random() < 0.2:
                t = {k: self.shape() for k in r.sample(["a", "b", "c"], 2)}
                env.conts[name] = ("dict", t)
                out.append((name, "dict", t, None))
            else:
                env.vars[name] = self.shape()
                env.args.add(name)
                out.append((name, "arg", env.vars[name], None))
        if r.random() < 0.3:
            env.vars["c"] = SCALAR
            env.args.add("c")
            out.append(("c", "arg", SCALAR, repr(round(r.uniform(-1, 1), 2))))
        return out

    def function(
        self, name: str, env: Env, params: list, indent: str = ""
    ) -> list[str]:
        """A helper (or method) with a generated body; registers it for calls."""
        r = self.rng
        result = [self.shape(), self.shape()] if r.random() < 0.2 else self.shape()
        saved, self.env = self.env, env
        body = self.block(r.randint(1, 4), 1, False, result)
        if isinstance(result, list):
            body.append(f"return {self.expr(result[0])}, {self.expr(result[1])}")
        else:
            body.append(f"return {self.expr(result)}")
        self.env = saved
        sig = ", ".join(p[0] if p[3] is None else f"{p[0]}={p[3]}" for p in params)
        self_arg = "self, " if indent else ""
        lines = [f"def {name.split('.')[-1]}({self_arg}{sig}):"] + [
            "    " + b for b in body
        ]
        self.funcs.add(name, params, result)
        return [indent + ln for ln in lines]

    def recursive(self, name: str) -> list[str]:
        sh = self.shape()
        saved, self.env = self.env, Env()
        self.env.vars["a"] = sh
        self.env.args.add("a")
        base = self.expr(sh, 1)
        arg = self.expr(sh, 1)
        extra = self.expr(sh, 1)
        self.env = saved
        self.funcs.add(name, [("a", "arg", sh, None), ("depth", "int", 3, None)], sh)
        return [
            f"def {name}(a, depth):",
            "    if depth <= 0:",
            f"        return {base}",
            f"    return np.tanh({name}({arg}, depth - 1)) * 0.5 + {extra}",
        ]

    def klass(self) -> list[str]:
        lines = [
            "class Model:",
            "    def __init__(self, scale, bias):",
            "        self.scale = scale",
            "        self.bias = bias",
        ]
        for m in range(self.rng.randint(1, 2)):
            env = Env()
            env.extra = [("self.scale", SCALAR), ("self.bias", (N,))]
            params = self.params(env, False)
            if self.rng.random() < 0.5:  # an argument that never depends on the inputs
                env.vars["k"] = SCALAR
                env.args.add("k")
                params.insert(0, ("k", "const", SCALAR, None))
            lines += [""] + self.function(f"MODEL.m{m}", env, params, "    ")
        bias = self.const((N,))
        return lines + [
            "",
            "",
            f"MODEL = Model({round(self.rng.uniform(0.5, 2), 2)}, {bias})",
        ]

    def target(self) -> tuple[list[str], dict]:
        r = self.rng
        shapes = {"x": (N,)}
        if r.random() < 0.7:
            shapes["w"] = r.choice(MATRICES)
        if r.random() < 0.5:
            shapes["v"] = (K,)
        if r.random() < 0.6:
            shapes["s"] = SCALAR
        self.env = Env()
        self.env.vars.update(shapes)
        self.env.args |= set(shapes)
        self.in_target = True
        body = self.block(r.randint(3, 8), 0)
        self.in_target = False
        names = list(self.env.vars)
        picked = r.sample(names, min(len(names), r.randint(1, 4)))
        terms = [f"np.sum({n})" if self.env.vars[n] != SCALAR else n for n in picked]
        for name, t in self.env.conts.items():
            if t[0] == "list" and r.random() < 0.5:
                terms.append(f"np.sum({name}[-1])")
        body.append(
            "return "
            + " + ".join(f"{round(r.uniform(0.3, 1.5), 2)} * {t}" for t in terms)
        )
        return ["def target(" + ", ".join(shapes) + "):"] + [
            "    " + b for b in body
        ], shapes
