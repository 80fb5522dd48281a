"""The differential fuzzer (s2sad.fuzz): a small fixed-seed run, classification, shrinking.

The compiler still has known defects, so the run only prints its counts; it
asserts that the generator produces no invalid program and that a program can
be classified as ok, refused, wrong and crash.
"""

import collections
import textwrap

import numpy as np
import pytest

from s2sad.fuzz import Program, check, generate, reproduction, shrink


def d_cos_wrong(g, ans, x):
    return (g * np.sin(x),)  # sign error on purpose


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


def program(body: str, **shapes) -> Program:
    src = "import math\n\nimport numpy as np\n\n\n" + textwrap.dedent(body)
    return Program(src, shapes or {"x": (3,)}, seed=7, index=0)


def test_fixed_budget_has_no_invalid_program(tmp_path):
    counts = collections.Counter()
    for index in range(40):
        res = check(generate(0, index), str(tmp_path))
        counts[res.cls] += 1
        assert res.cls != "invalid", (index, res.detail, generate(0, index).source)
    print("fuzz counts:", dict(counts))
    assert counts["ok"] >= 10


LATER_FORMS = ("SOFT(", "OPS.", "Ops.", "early_sum(", "np.convolve(", "np.polyval(")


def test_later_call_forms_are_generated_and_differentiate(tmp_path):
    """The forms of fuzz/moreforms.py (a global partial, a static and a class
    method through an object, a callee with an early return ahead of a loop,
    the sequence rules) appear in the stream, and programs using them are
    differentiated right (checked against central differences by ``check``)."""
    found = {}
    for index in range(300):
        prog = generate(11, index)
        body = prog.source.split("def target")[1]
        for form in LATER_FORMS:
            if form in body and form not in found and prog.expected == "ok":
                found[form] = prog
        if len(found) == len(LATER_FORMS):
            break
    assert set(found) == set(LATER_FORMS)
    for form, prog in found.items():
        res = check(prog, str(tmp_path))
        assert res.cls in ("ok", "false_refusal"), (
            form,
            res.cls,
            res.detail,
            prog.source,
        )


def jvp_cos_wrong(t, ans, x):
    return t * np.sin(x)  # sign error on purpose


def test_forward_phase_checks_jvp(tmp_path):
    """The forward phase (``--forward``) compares ``s2sad.jvp`` with the finite
    differences along a tangent: right, then a wrong tangent rule is caught."""
    from s2sad.runtime import registry, tangents

    prog = program("def target(x):\n    return np.sum(np.cos(x) * x)\n")
    assert check(prog, str(tmp_path), phases=("forward",)).cls == "ok"
    registry.ensure_loaded()
    key = registry.key_of(np.cos)
    before = tangents._TANGENTS.get(key)  # (none: derived from the adjoint)
    tangents.tangent(np.cos)(jvp_cos_wrong)
    try:
        prog.index = 1  # another module: compiled again
        res = check(prog, str(tmp_path), phases=("forward",))
    finally:
        if before is None:
            del tangents._TANGENTS[key]
        else:
            tangents._TANGENTS[key] = before
        tangents._CHANGES[0] += 1
    assert (res.cls, res.phase) == ("wrong", "forward"), res


def test_generation_is_deterministic():
    assert generate(3, 5).source == generate(3, 5).source
    assert generate(3, 5).source != generate(3, 6).source


def test_ok_and_refused(tmp_path):
    ok = program("def target(x):\n    return np.sum(np.tanh(x) * x)\n")
    assert check(ok, str(tmp_path)).cls == "ok"
    bad = program(
        "def target(x):\n    try:\n        y = x\n    except ValueError:\n"
        "        y = x\n    return np.sum(y)\n"
    )
    bad.expected, bad.token = "refused", "try"
    res = check(bad, str(tmp_path))
    assert res.cls == "refused", res.detail


def test_wrong_rule_is_classified_wrong(tmp_path, monkeypatch):
    """A deliberately wrong adjoint for np.cos must make the fuzzer say 'wrong'."""
    import s2sad
    from s2sad.runtime import registry

    registry.ensure_loaded()
    monkeypatch.setitem(
        registry._RULES,
        registry.key_of(np.cos),
        registry._RULES[registry.key_of(np.cos)],
    )
    monkeypatch.setattr(registry, "_FINGERPRINT", [])
    s2sad.adjoint(np.cos)(d_cos_wrong)
    res = check(
        program("def target(x):\n    return np.sum(np.cos(x))\n"), str(tmp_path)
    )
    assert res.cls == "wrong", res.detail


def test_crash_is_classified_crash(tmp_path, monkeypatch):
    import s2sad
    from s2sad.runtime import registry

    registry.ensure_loaded()
    monkeypatch.setitem(
        registry._RULES,
        registry.key_of(np.sin),
        registry._RULES[registry.key_of(np.sin)],
    )
    monkeypatch.setattr(registry, "_FINGERPRINT", [])

    def broken(g, ans, x):
        raise KeyError("broken rule")

    s2sad.adjoint(np.sin)(broken)
    res = check(
        program("def target(x):\n    return np.sum(np.sin(x) * x)\n"), str(tmp_path)
    )
    assert (res.cls, res.exc) == ("crash", "KeyError"), res.detail


def test_shrinker_keeps_the_failure_and_removes_the_rest(tmp_path, monkeypatch):
    import s2sad
    from s2sad.runtime import registry

    registry.ensure_loaded()
    monkeypatch.setitem(
        registry._RULES,
        registry.key_of(np.cos),
        registry._RULES[registry.key_of(np.cos)],
    )
    monkeypatch.setattr(registry, "_FINGERPRINT", [])
    s2sad.adjoint(np.cos)(d_cos_wrong)
    prog = program(
        """\
        def helper(a):
            return np.tanh(a) * 2.0

        def target(x, w):
            v1 = helper(x) + np.sin(x)
            v2 = np.exp(np.tanh(x)) * 0.5
            v3 = np.cos(x * 1.5) + v2
            if np.sum(w) > 100.0:
                v1 = v1 * 2.0
            return np.sum(v1) + np.sum(v3) + np.sum(w * w)
        """,
        x=(3,),
        w=(4,),
    )
    res = check(prog, str(tmp_path))
    assert res.cls == "wrong"
    small, sres, used = shrink(prog, res, max_checks=150, directory=str(tmp_path))
    assert sres.key() == res.key()
    assert "np.cos" in small.source and "helper" not in small.source
    assert len(small.source) < len(prog.source) / 2, small.source
    script = reproduction(small, sres)
    compile(script, "repro.py", "exec")
    assert "ARGS = [" in script


def test_shrinking_keeps_the_imports():
    """Dropping ``import numpy as np`` made a NameError out of any defect (a false
    refusal's minimal program lost its import): no edit removes an import."""
    import ast

    from s2sad.fuzz.shrink import apply, candidates

    prog = program("def target(x):\n    y = np.sin(x)\n    return np.sum(y)\n")
    smaller = [apply(prog, e) for e in candidates(ast.parse(prog.source))]
    smaller = [p for p in smaller if p is not None]
    assert len(smaller) > 5
    for p in smaller:
        assert "import numpy as np" in p.source and "import math" in p.source, p.source


def test_generation_does_not_depend_on_string_hashing():
    """Iterating a set of names drew random numbers in hash order: the same seed
    gave other programs in another process (before/after runs did not match)."""
    import os
    import subprocess
    import sys

    code = (
        "import hashlib; from s2sad.fuzz.grammar import generate; "
        "text = ''.join(generate(900, i).source for i in range(40)); "
        "print(hashlib.md5(text.encode()).hexdigest())"
    )
    out = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
        out.add(run.stdout)
    assert len(out) == 1


def test_a_closure_result_keeps_the_names_its_body_reads_unchanged():
    """``def inner(z): return v11`` then ``v14 = inner(...)``: v14 is v11, so the
    generator must not change v11 in place afterwards (it did: a program the
    aliasing pass rightly refuses, counted as a false refusal; seed 9001, 177)."""
    import ast
    import random

    from s2sad.fuzz.exprs import Env
    from s2sad.fuzz.grammar import Generator

    for k in range(40):
        g = Generator(random.Random(k))
        g.env = Env()
        g.env.vars.update({"a": (3,), "b": (3,)})
        g.env.fresh.update({"a", "b"})
        lines = g.s_closure(0, False, None)
        body = lines[0].partition("lambda z: ")[2] or lines[1].strip()[len("return ") :]
        read = {n.id for n in ast.walk(ast.parse(body)) if isinstance(n, ast.Name)}
        assert not read & g.env.fresh, (lines, g.env.fresh)
