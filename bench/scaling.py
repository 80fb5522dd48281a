#!/usr/bin/env python
"""How s2sad scales with program size and loop length (run by hand, never in tests).

    python bench/scaling.py                         # everything below
    python bench/scaling.py --sizes 10 100 --loops 100 1000 --no-problems

1. Straight-line programs of N statements (``--sizes``, default 10 100 1000
   3000): a generated module whose function chains N elementwise NumPy
   statements on two 16-vectors (tanh/sin/cos/exp, products, sums, reaching
   back one and two statements) and returns a sum.  For each N, a new process
   with an empty ``S2SAD_CACHE_DIR`` times ``value_and_grad(f).compile(x, w)``
   (cold compile) and a second new process with the cache it filled times the
   same call again (warm load): wall time, and in brackets the process's CPU
   time, which other jobs on a busy machine disturb less.  Python's bytecode
   cache is on and filled beforehand for s2sad, black and gast (as
   ``bench/run.py`` does), so neither pays for compiling s2sad itself.
2. Long loops (``--loops``, default 100 1000 10000 iterations): a scalar
   recurrence on a Python float and a 64-unit tanh RNN step (``W @ h + x``).
   Per-iteration cost: the slope of the value-and-gradient call's median time
   between loop lengths.  Tape bytes per iteration: the slope of the memory a
   call holds at its peak (``tracemalloc``, which sees NumPy's buffers), measured
   on a fresh gradient object's first call at that length so that the
   preallocated buffers of the workspace are counted too.
3. The bench problems (``bench/problems.py``): cold compile and warm load as in
   1, and the first call after the warm load.

Prints markdown tables; ``--json PATH`` also writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the statements a straight-line program cycles through (``p``: the previous
#: value, ``q``: the one before)
KINDS = [
    "{h} = np.tanh({p} * w + x)",
    "{h} = np.sin({p}) + 0.5 * {q}",
    "{h} = {p} * {q} - np.cos(x)",
    "{h} = np.exp(-{p} * {p}) + {q} * w",
]


def straight_line(n: int) -> str:
    """The source of a module whose ``f(x, w)`` has ``n`` statements."""
    lines = ["import numpy as np", "", "", "def f(x, w):", "    h0 = x", "    h1 = w"]
    for i in range(2, n):
        kind = KINDS[i % len(KINDS)]
        lines.append("    " + kind.format(h=f"h{i}", p=f"h{i - 1}", q=f"h{i - 2}"))
    lines.append(f"    return np.sum(h{max(n - 1, 1)})")
    return "\n".join(lines) + "\n"


PROBE = """
import json, sys, time
sys.path[:0] = [{gen!r}, {root!r}]
import numpy as np
t0 = time.perf_counter()
import s2sad
t1 = time.perf_counter()
from {module} import f
x = np.linspace(0.1, 0.9, 16)
w = np.linspace(-0.5, 0.5, 16)
vg = s2sad.value_and_grad(f, argnums=(0, 1))
c2, t2 = time.process_time(), time.perf_counter()
vg.compile(x, w)
c3, t3 = time.process_time(), time.perf_counter()
vg(x, w)
t4 = time.perf_counter()
print(json.dumps(dict(import_s=t1 - t0, load_s=t3 - t2, load_cpu_s=c3 - c2,
                      call_s=t4 - t3)))
"""


def _env(cache: str) -> dict:
    env = dict(os.environ, S2SAD_CACHE_DIR=cache, OPENBLAS_NUM_THREADS="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a normal install
    env["PYTHONPYCACHEPREFIX"] = os.path.join(cache, "pycache")
    return env


def _child(code: str, env: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip()[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def size_row(n: int) -> dict:
    """Cold compile and warm load of the N-statement program, each in a new process."""
    with tempfile.TemporaryDirectory(prefix="s2sad-scaling-") as tmp:
        gen = os.path.join(tmp, "gen")
        os.mkdir(gen)
        module = f"straight_{n}"
        Path(gen, f"{module}.py").write_text(straight_line(n))
        cache = os.path.join(tmp, "cache")
        env = _env(cache)
        warmup = f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
        warmup += "import s2sad.pipeline, s2sad.cache, black, gast"
        subprocess.run([sys.executable, "-c", warmup], env=env, check=True)
        code = PROBE.format(gen=gen, root=str(ROOT), module=module)
        cold = _child(code, env)
        warm = _child(code, env)
        files = [p for p in Path(cache).iterdir() if p.is_file()]
        py = sum(p.stat().st_size for p in files if p.suffix == ".py")
        lines = sum(len(p.read_text().splitlines()) for p in files if p.suffix == ".py")
    return {
        "statements": n,
        "cold_compile_s": cold["load_s"],
        "cold_compile_cpu_s": cold["load_cpu_s"],
        "warm_load_s": warm["load_s"],
        "warm_load_cpu_s": warm["load_cpu_s"],
        "warm_first_call_s": warm["call_s"],
        "emitted_lines": lines,
        "emitted_bytes": py,
    }


# ---------------------------------------------------------------- long loops

LOOPS = """
import numpy as np


def scalar_loop(x, n):
    s = x
    for i in range(n):
        s = 0.9 * np.sin(s) + 0.1 * x
    return s


def rnn_loop(W, x, h0, n):
    h = h0
    for t in range(n):
        h = np.tanh(W @ h + x)
    return np.sum(h * h)
"""


def _loop_args(name: str, n: int, np) -> tuple:
    if name == "scalar_loop":
        return (0.3, n)
    rng = np.random.default_rng(0)
    W = rng.normal(scale=0.9 / 8.0, size=(64, 64))
    return (W, rng.normal(size=64) * 0.1, np.zeros(64), n)


def loop_rows(lengths: list[int], repeat: int) -> list[dict]:
    """Per-iteration time and tape bytes of the two long loops (in this process)."""
    import tracemalloc

    import numpy as np

    sys.path.insert(0, str(ROOT))
    tmp = tempfile.mkdtemp(prefix="s2sad-loops-")
    os.environ["S2SAD_CACHE_DIR"] = os.path.join(tmp, "cache")
    Path(tmp, "scaling_loops.py").write_text(textwrap.dedent(LOOPS))
    sys.path.insert(0, tmp)
    import scaling_loops

    import s2sad

    rows = []
    for name, argnums in (("scalar_loop", 0), ("rnn_loop", (0, 1))):
        fn = getattr(scaling_loops, name)
        s2sad.value_and_grad(fn, argnums=argnums)(*_loop_args(name, 2, np))  # compile
        times, peaks = {}, {}
        for n in lengths:
            args = _loop_args(name, n, np)
            vg = s2sad.value_and_grad(fn, argnums=argnums)  # loaded: no compile
            vg.compile(*args)
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            vg(*args)
            peaks[n] = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
            calls = max(1, int(20000 / n))
            samples = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                for _ in range(calls):
                    vg(*args)
                samples.append((time.perf_counter() - t0) / calls)
            times[n] = statistics.median(samples)
        lo, hi = lengths[0], lengths[-1]
        rows.append(
            {
                "loop": name,
                "call_s": times,
                "peak_bytes": peaks,
                "per_iteration_s": (times[hi] - times[lo]) / (hi - lo),
                "bytes_per_iteration": (peaks[hi] - peaks[lo]) / (hi - lo),
            }
        )
    return rows


PROBLEM_PROBE = """
import json, sys, time
sys.path.insert(0, {root!r})
from bench.problems import PROBLEMS, copy_args
problem = PROBLEMS[{name!r}]
args = problem.make_data()
import s2sad
vg = s2sad.value_and_grad(problem.loss, argnums=problem.argnums)
t0 = time.perf_counter()
vg.compile(*copy_args(args))
t1 = time.perf_counter()
vg(*copy_args(args))
t2 = time.perf_counter()
print(json.dumps(dict(load_s=t1 - t0, call_s=t2 - t1)))
"""


def problem_rows(names: list[str]) -> list[dict]:
    """The bench problems' cold compile and warm load (``.compile``, each in a new
    process as for the straight-line programs), and the first call after it."""
    sys.path.insert(0, str(ROOT))
    from bench.run import PROBLEM_NAMES

    rows = []
    for name in names or PROBLEM_NAMES:
        with tempfile.TemporaryDirectory(prefix="s2sad-scaling-") as tmp:
            env = _env(os.path.join(tmp, "cache"))
            warmup = f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
            warmup += "import s2sad.pipeline, s2sad.cache, black, gast, bench.problems"
            subprocess.run([sys.executable, "-c", warmup], env=env, check=True)
            code = PROBLEM_PROBE.format(root=str(ROOT), name=name)
            cold, warm = _child(code, env), _child(code, env)
        rows.append(
            {
                "problem": name,
                "cold_compile_s": cold["load_s"],
                "warm_load_s": warm["load_s"],
                "warm_first_call_s": warm["call_s"],
            }
        )
    return rows


# ---------------------------------------------------------------- report


def fmt_s(s: float) -> str:
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.2f} us"


def report(sizes: list[dict], loops: list[dict], problems: list[dict]) -> str:
    out = []
    if sizes:
        out += [
            (
                "| statements | emitted lines | cold compile (CPU) | warm load (CPU) | "
                "warm first call (after load) |"
            ),
            "|---|---|---|---|---|",
        ]
        for r in sizes:
            out.append(
                f"| {r['statements']:,} | {r['emitted_lines']:,} | "
                f"{fmt_s(r['cold_compile_s'])} ({fmt_s(r['cold_compile_cpu_s'])}) | "
                f"{fmt_s(r['warm_load_s'])} ({fmt_s(r['warm_load_cpu_s'])}) | "
                f"{fmt_s(r['warm_first_call_s'])} |"
            )
        out.append("")
    if loops:
        lengths = list(loops[0]["call_s"])
        head = " | ".join(f"call at n={n:,}" for n in lengths)
        out += [
            f"| loop | {head} | per iteration | tape bytes per iteration |",
            "|---" * (3 + len(lengths)) + "|",
        ]
        for r in loops:
            calls = " | ".join(fmt_s(r["call_s"][n]) for n in lengths)
            out.append(
                f"| {r['loop']} | {calls} | {fmt_s(r['per_iteration_s'])} | "
                f"{r['bytes_per_iteration']:,.0f} |"
            )
        out.append("")
    if problems:
        out += [
            "| problem | cold compile | warm load | warm first call (after load) |",
            "|---|---|---|---|",
        ]
        for r in problems:
            out.append(
                f"| {r['problem']} | {fmt_s(r['cold_compile_s'])} | "
                f"{fmt_s(r['warm_load_s'])} | {fmt_s(r['warm_first_call_s'])} |"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="*", default=[10, 100, 1000, 3000])
    p.add_argument("--loops", type=int, nargs="*", default=[100, 1000, 10000])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--problems", nargs="*", default=None, help="default: all")
    p.add_argument("--no-problems", action="store_true")
    p.add_argument("--json", help="also write the numbers here")
    opts = p.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sizes = []
    for n in opts.sizes:
        sizes.append(size_row(n))
        print(f"# {n} statements: {sizes[-1]}", file=sys.stderr, flush=True)
    loops = loop_rows(opts.loops, opts.repeat) if len(opts.loops) > 1 else []
    problems = [] if opts.no_problems else problem_rows(opts.problems or [])
    print(report(sizes, loops, problems))
    if opts.json:
        Path(opts.json).write_text(
            json.dumps({"sizes": sizes, "loops": loops, "problems": problems}, indent=1)
        )


if __name__ == "__main__":
    main()
