#!/usr/bin/env python
"""Benchmark runner: s2sad against hand-written NumPy, autograd, JAX and PyTorch.

    python bench/run.py                       # everything, 1 thread
    python bench/run.py --only mlp2,rnn_mnist --repeat 11
    python bench/run.py --columns handwritten,s2sad
    python bench/run.py --check               # hand-written grads vs finite diffs

Thread settings must be in place before NumPy (or any BLAS) is loaded, so this
script parses its arguments and sets the environment first and imports the
numeric modules afterwards.  For each problem, every column's value and
gradients are compared with the hand-written ones before anything is timed; a
column that fails to import, raises or disagrees is skipped with the reason.
Results go to bench/results/latest.md and latest.json (latest-malloc-keep.* with
--malloc-keep).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBLEM_NAMES = [
    "sincos",
    "loop",
    "logsumexp",
    "logreg",
    "mlp2",
    "mlp_big",
    "rnn_mnist",
    "cnn_imdb",
]
COLUMN_NAMES = [
    "numpy_fwd",
    "handwritten",
    "s2sad",
    "s2sad_out",
    "autograd",
    "jax_eager",
    "jax_jit",
    "torch",
]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default=",".join(PROBLEM_NAMES), help="problems, a,b,c")
    p.add_argument("--columns", default=",".join(COLUMN_NAMES), help="columns, a,b")
    p.add_argument("--repeat", type=int, default=11, help="interleaved repetitions")
    p.add_argument("--target", type=float, default=0.05, help="s per measurement")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: the process's CPU time, steadier on a loaded machine (it adds up "
        "all threads, so it overstates multi-threaded columns)",
    )
    p.add_argument(
        "--blas-core",
        default="env",
        metavar="NAME",
        help="OpenBLAS kernels for the NumPy columns: 'env' (default) keeps "
        "OPENBLAS_CORETYPE as the environment sets it, 'auto' unsets it so "
        "OpenBLAS picks by CPU, any other value is set as OPENBLAS_CORETYPE",
    )
    p.add_argument("--check", action="store_true", help="FD check of hand-written")
    p.add_argument(
        "--malloc-keep",
        action="store_true",
        help="re-run with glibc told to keep freed memory (no page-fault churn)",
    )
    p.add_argument(
        "--no-compile-probe", action="store_true", help="skip s2sad cold/warm"
    )
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--no-save", action="store_true")
    p.add_argument("--s2sad-probe", metavar="PROBLEM", help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    opts.only = _names(opts.only, PROBLEM_NAMES, p)
    opts.columns = _names(opts.columns, COLUMN_NAMES, p)
    if "handwritten" not in opts.columns:
        opts.columns.insert(
            0, "handwritten"
        )  # the reference everything is checked with
    return opts


def _names(text: str, known: list[str], p: argparse.ArgumentParser) -> list[str]:
    names = [n for n in text.replace(" ", ",").split(",") if n]
    bad = [n for n in names if n not in known]
    if bad:
        p.error(f"unknown {bad}; choose from {known}")
    return [n for n in known if n in names]


def apply_blas_core(choice: str) -> None:
    """Set or clear OPENBLAS_CORETYPE; must run before NumPy is imported.

    Some machines' environments pin OpenBLAS to one kernel family (this
    project's development machines set ``OPENBLAS_CORETYPE=Haswell``, AVX2 only,
    on an AVX-512 CPU), which halves float32 GEMM speed against OpenBLAS's own
    choice, while XLA picks its kernels by CPU regardless.  The report records
    which kernels ran.
    """
    if choice == "auto":
        os.environ.pop("OPENBLAS_CORETYPE", None)
    elif choice != "env":
        os.environ["OPENBLAS_CORETYPE"] = choice


def blas_core() -> str:
    """Which OpenBLAS kernels NumPy's BLAS loaded, and why (after NumPy import)."""
    import ctypes
    import glob

    import numpy as np

    pinned = os.environ.get("OPENBLAS_CORETYPE")
    why = f"OPENBLAS_CORETYPE={pinned}" if pinned else "chosen by OpenBLAS"
    libdir = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for lib_path in sorted(glob.glob(str(libdir / "*openblas*"))):
        lib = ctypes.CDLL(lib_path)
        for symbol in ("scipy_openblas_get_corename64_", "openblas_get_corename"):
            get = getattr(lib, symbol, None)
            if get is not None:
                get.restype = ctypes.c_char_p
                return f"{get().decode()} ({why})"
    return f"unknown ({why})"


def apply_threads(n: int) -> None:
    """Limit every library to ``n`` threads; must run before NumPy is imported."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    if n == 1:
        flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "") + " " + flags
        ).strip()
    # Recent XLA CPU runtimes ignore the flags above and size their pool from the
    # CPUs the process may use, so restrict those too (this binds every library).
    cpus = sorted(os.sched_getaffinity(0))
    if n < len(cpus):
        os.sched_setaffinity(0, cpus[:n])
    os.environ["BENCH_THREADS"] = str(n)


# ----------------------------------------------------------------------------
# s2sad cold compile / warm load, each in a fresh process
# ----------------------------------------------------------------------------


def s2sad_probe(name: str) -> None:
    """(Child process) time the first and second s2sad call of one problem."""
    from bench.problems import PROBLEMS, copy_args

    problem = PROBLEMS[name]
    args = problem.make_data()
    t0 = time.perf_counter()
    import s2sad

    vg = s2sad.value_and_grad(problem.loss, argnums=problem.argnums)
    t1 = time.perf_counter()
    vg(*copy_args(args))
    t2 = time.perf_counter()
    vg(*copy_args(args))
    t3 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "first_s": t2 - t1, "second_s": t3 - t2}))


def s2sad_compile_times(name: str, threads: int) -> dict:
    """Cold (fresh cache dir) and warm (same dir, new process) first-call times."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="s2sad-bench-") as cache:
        env = dict(os.environ, S2SAD_CACHE_DIR=cache)
        # Python's own bytecode cache as on a normal install (this machine sets
        # PYTHONDONTWRITEBYTECODE, which recompiles every module in each process);
        # kept in the temporary folder, so the working tree stays clean
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(cache, "pycache")
        subprocess.run(  # fill that bytecode cache (compiler, black, gast), untimed
            [sys.executable, "-c", "import s2sad.pipeline, s2sad.cache, black, gast"],
            env=env,
            capture_output=True,
            timeout=600,
            check=False,
        )
        cmd = [sys.executable, __file__, "--threads", str(threads)]
        for phase in ("cold", "warm"):
            proc = subprocess.run(
                cmd + ["--s2sad-probe", name],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
                raise RuntimeError(f"{phase} probe failed: {tail}")
            times = json.loads(proc.stdout.strip().splitlines()[-1])
            out[f"s2sad_{phase}_first_call_s"] = times["first_s"]
            out[f"s2sad_{phase}_second_call_s"] = times["second_s"]
    return out


# ----------------------------------------------------------------------------
# The benchmark proper
# ----------------------------------------------------------------------------


def setup_columns(names: list[str], threads: int, skipped: list[str]) -> list:
    """Instantiate and set up the selected columns; failures are skipped."""
    from bench.columns import ALL_COLUMNS

    ready = []
    for cls in ALL_COLUMNS:
        if cls.name not in names:
            continue
        col = cls()
        try:
            col.setup(threads)
        except Exception as exc:  # noqa: BLE001 - any failure means "skip"
            skipped.append(f"{col.label}: all problems: setup failed: {exc!r}")
            print(f"skip {col.label}: setup failed: {exc!r}", flush=True)
            continue
        ready.append(col)
    return ready


def verified(columns: list, problem, args: tuple, skipped: list[str]) -> dict:
    """Prepared runs of the columns whose results match the hand-written ones."""
    from bench import timing

    tol = timing.tolerance(args)
    out, reference = {}, None
    # The hand-written column goes first: it is the reference for the others.
    for col in sorted(columns, key=lambda c: c.name != "handwritten"):
        try:
            prepared = col.prepare(problem, args)
            result = prepared.check()
            reference = reference or result
            err = timing.compare(result, reference)
            if err > tol:
                raise ValueError(f"differs from hand-written: rel err {err:.1e}")
        except Exception as exc:  # noqa: BLE001 - any failure means "skip"
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            skipped.append(f"{col.label}: {problem.name}: {reason}")
            print(f"  skip {col.label}: {reason}", flush=True)
            continue
        out[col.name] = (prepared, err)
    return out


def bench_problem(problem, columns, opts, result: dict) -> None:
    """Verify, time and record one problem."""
    from bench import timing

    args = problem.make_data()
    ready = verified(columns, problem, args, result["skipped"])
    runs = {name: prepared.run for name, (prepared, _) in ready.items()}
    clock = time.process_time if opts.clock == "cpu" else time.perf_counter
    timings = timing.interleaved(runs, opts.repeat, opts.target, clock)
    base = timings.get("handwritten", {}).get("median_s")
    for name, entry in timings.items():
        entry["ratio"] = entry["median_s"] / base if base else None
        entry["max_rel_err_vs_handwritten"] = ready[name][1]
    result["timings"][problem.name] = timings
    compile_entry = {}
    if "jax_jit" in ready:
        compile_entry["jax_jit_first_call_s"] = ready["jax_jit"][0].first_call_s
    if "s2sad" in ready and not opts.no_compile_probe:
        try:
            compile_entry.update(s2sad_compile_times(problem.name, opts.threads))
        except Exception as exc:  # noqa: BLE001
            result["skipped"].append(f"s2sad compile probe: {problem.name}: {exc}")
    result["compile"][problem.name] = compile_entry
    line = ", ".join(f"{n} {e['median_s'] * 1e6:.1f}us" for n, e in timings.items())
    print(f"  {line}", flush=True)


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs visible, {platform.system()}"


def git_commit() -> str:
    """Short hash of the checked-out commit (+ "-dirty" if files differ)."""
    try:
        run = lambda *a: subprocess.run(
            ["git", *a],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout.strip()
        dirty = run("status", "--porcelain", "--untracked-files=no")
        return run("rev-parse", "--short", "HEAD") + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


NOTES = [
    (
        "autograd and JAX run the very same NumPy source as the other columns, with "
        "the global `np` rebound to `autograd.numpy` / `jax.numpy`; JAX runs with "
        "`jax_enable_x64` so float64 problems stay float64 (float32 ones stay float32)."
    ),
    (
        "PyTorch is written as a PyTorch user would (`F.cross_entropy`, "
        "`F.binary_cross_entropy_with_logits`, `torch.logsumexp`, `F.conv1d`, "
        "`F.max_pool1d`, `F.embedding`), CPU, eager, `torch.autograd.grad`; the SGD "
        "step uses `torch.optim.SGD`."
    ),
    (
        "JAX jit times exclude compilation (first call reported separately); the jitted "
        "SGD step returns new parameters and donates the old ones (`donate_argnums`)."
    ),
    (
        "Before timing, each column's value and gradients are compared with the "
        "hand-written ones (norm-wise relative error <= 1e-7 in float64, 1e-4 in "
        "float32); the hand-written ones are checked against finite differences by "
        "`python bench/run.py --check`."
    ),
    (
        "Threads: OMP/MKL/OPENBLAS_NUM_THREADS, torch.set_num_threads, XLA flags, and "
        "the process CPU affinity limited to that many cores (XLA's CPU runtime "
        "ignores its thread flags)."
    ),
    (
        "`NumPy fwd only` is the loss alone, the floor any gradient method pays; the "
        "gradient-to-primal cost ratio divides each column's value-and-gradient "
        "time by it (AD papers report about 3-5x). The primal is the benchmark's "
        "NumPy source as written, so a hand-written gradient that calls `math` on "
        "floats (sincos, loop) can cost less than it."
    ),
    ("Geomean rows: geometric mean over the problems where both columns ran."),
    (
        "Memory: on the VM these numbers were taken on, a first touch of a fresh page "
        "costs ~4 us, and glibc returns freed blocks of 128 KB and more to the kernel, "
        "so code that allocates new temporaries every call pays page faults every "
        "call. `--malloc-keep` reruns with glibc keeping freed memory, to separate "
        "that cost from compute."
    ),
    (
        "s2sad cold/warm: each in a new process after `import s2sad`; the cold one "
        "with an empty gradient cache, the warm one with the cache the cold one "
        "filled. Both run with Python's bytecode cache on (in a temporary folder, "
        "filled beforehand for the compiler, black and gast), as on a normal "
        "install; the machine's PYTHONDONTWRITEBYTECODE would otherwise recompile "
        "every s2sad module in each process (about 40 ms)."
    ),
    (
        "`s2sad out=` passes `out=` arrays that the caller keeps: the gradients end "
        "up in them (written there by the site that computes each, or copied from "
        "the workspace at the end); `s2sad` returns new arrays."
    ),
]


def run_benchmarks(opts: argparse.Namespace) -> dict:
    from bench.problems import PROBLEMS

    start = time.perf_counter()
    result = {"skipped": [], "timings": {}, "compile": {}, "problems": {}}
    columns = setup_columns(opts.columns, opts.threads, result["skipped"])
    result["columns"] = [c.name for c in columns]
    result["labels"] = {c.name: c.label for c in columns}
    for name in opts.only:
        problem = PROBLEMS[name]
        print(f"{name}:", flush=True)
        result["problems"][name] = {
            "kind": problem.kind,
            "description": problem.description,
        }
        bench_problem(problem, columns, opts, result)
    result["notes"] = NOTES
    result["meta"] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "commit": git_commit(),
        "threads": opts.threads,
        "repeat": opts.repeat,
        "target_s": opts.target,
        "clock": opts.clock,
        "malloc": "keep freed memory" if opts.malloc_keep else "glibc default",
        "blas_core": blas_core(),
        "python": platform.python_version(),
        "versions": list(
            dict.fromkeys(v for v in (c.versions() for c in columns) if v)
        ),
        "wall_s": time.perf_counter() - start,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    return result


MALLOC_KEEP = {
    "MALLOC_MMAP_THRESHOLD_": "1073741824",
    "MALLOC_TRIM_THRESHOLD_": "1073741824",
}


def malloc_keep_reexec(argv: list[str] | None) -> None:
    """Restart this script with glibc's malloc keeping freed memory.

    glibc hands large freed blocks back to the kernel (munmap, heap trimming),
    so code that allocates fresh temporaries every call pays page faults every
    call, and on some VMs a fault costs several microseconds.  These variables
    are read once at process start, hence the re-exec.
    """
    if all(os.environ.get(k) == v for k, v in MALLOC_KEEP.items()):
        return
    os.environ.update(MALLOC_KEEP)
    args = sys.argv[1:] if argv is None else argv
    os.execv(sys.executable, [sys.executable, __file__, *args])


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    if opts.malloc_keep:
        malloc_keep_reexec(argv)
    apply_threads(opts.threads)
    apply_blas_core(opts.blas_core)
    sys.path.insert(0, str(ROOT))
    if opts.s2sad_probe:
        s2sad_probe(opts.s2sad_probe)
        return 0
    if opts.check:
        from bench.fdcheck import run_check
        from bench.problems import PROBLEMS

        return 0 if run_check([PROBLEMS[n] for n in opts.only]) else 1
    result = run_benchmarks(opts)
    from bench import report

    print()
    print(report.markdown(result))
    if not opts.no_save:
        stem = "latest-malloc-keep" if opts.malloc_keep else "latest"
        for path in report.save(result, Path(opts.out), stem):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
