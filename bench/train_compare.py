#!/usr/bin/env python
"""Epoch times of s2sad, PyTorch and JAX jit on the same model, in one table.

    python bench/train_compare.py rnn --epochs 3
    python bench/train_compare.py cnn --epochs 3 --limit 5000
    python bench/train_compare.py rnn --synthetic --epochs 3   # no downloads

Runs, one after another and each in its own process with the same options,
the s2sad example (examples/rnn_mnist.py or examples/cnn_imdb.py, memory
counting off), bench/train_torch.py (``--no-mem``) and bench/train_jax.py, reads
the JSON each writes and prints one markdown table.  ``vs s2sad`` divides each
framework's mean epoch time after the first (the mean of all epochs when only
one ran) by s2sad's; the CPU columns do the same with the process CPU time
of each epoch (steadier when other jobs share the machine; use --threads 1).  All three use the same data, batch size, optimizer and
learning rate; s2sad and JAX also start from the same weights (the examples'
seeded initialisation) and shuffle alike, so their losses agree; PyTorch uses
its own seeded initialisation.  ``--json PATH`` writes the three results.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"rnn": "examples/rnn_mnist.py", "cnn": "examples/cnn_imdb.py"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", choices=["rnn", "cnn"])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, help="use only this many training examples")
    p.add_argument("--synthetic", action="store_true", help="the examples' tiny data")
    p.add_argument(
        "--only", default="s2sad,torch,jax", help="frameworks, a subset of the default"
    )
    p.add_argument("--json", help="also write the three results here")
    return p.parse_args(argv)


def commands(opts: argparse.Namespace, folder: Path) -> dict[str, list[str]]:
    """framework -> command line writing <folder>/<framework>.json."""
    common = ["--epochs", str(opts.epochs), "--threads", str(opts.threads)]
    common += ["--seed", str(opts.seed)]
    if opts.limit:
        common += ["--limit", str(opts.limit)]
    if opts.synthetic:
        common += ["--synthetic"]
    py = sys.executable
    out = {
        "s2sad": [py, EXAMPLES[opts.model], *common, "--mem", "off"],
        "torch": [py, "bench/train_torch.py", opts.model, *common, "--no-mem"],
        "jax": [py, "bench/train_jax.py", opts.model, *common],
    }
    wanted = [n for n in opts.only.split(",") if n]
    return {
        name: cmd + ["--json", str(folder / f"{name}.json")]
        for name, cmd in out.items()
        if name in wanted
    }


def run_all(opts: argparse.Namespace) -> dict[str, dict]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p
    )
    results = {}
    with tempfile.TemporaryDirectory(prefix="s2sad-train-") as tmp:
        for name, cmd in commands(opts, Path(tmp)).items():
            print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
            proc = subprocess.run(
                cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False
            )
            lines = proc.stdout.replace("\r", "\n").splitlines()
            for line in lines:
                if line.startswith("epoch ") and " s, " in line:
                    print("   " + line, flush=True)
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
                print(f"   failed: {tail}", flush=True)
                continue
            results[name] = json.loads(
                (Path(tmp) / f"{name}.json").read_text(encoding="utf-8")
            )
    return results


def steady(result: dict) -> float | None:
    """Mean epoch time after the first, or the mean when only one epoch ran."""
    return result.get("mean_epoch_after_first_s") or result.get("mean_epoch_s")


def steady_cpu(result: dict) -> float | None:
    """The same in process CPU seconds (steadier on a shared machine)."""
    cpu = [e.get("cpu_seconds") for e in result.get("epochs", [])]
    cpu = cpu[1:] if len(cpu) > 1 else cpu
    return sum(cpu) / len(cpu) if cpu and None not in cpu else None


def table(results: dict[str, dict]) -> str:
    base = steady(results["s2sad"]) if "s2sad" in results else None
    base_cpu = steady_cpu(results["s2sad"]) if "s2sad" in results else None
    head = [
        "framework",
        "train / test",
        "first epoch",
        "mean epoch",
        "mean after first",
        "vs s2sad",
        "CPU s, mean after first",
        "vs s2sad (CPU)",
        "final test acc",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in results.items():
        after = r.get("mean_epoch_after_first_s")
        ratio = steady(r) / base if base and steady(r) else None
        cpu = steady_cpu(r)
        cpu_ratio = cpu / base_cpu if base_cpu and cpu else None
        cells = [
            f"{name} ({r['framework']})",
            f"{r['n_train']} / {r['n_test']}",
            f"{r['first_epoch_s']:.3f} s",
            f"{r['mean_epoch_s']:.3f} s",
            f"{after:.3f} s" if after is not None else "-",
            f"{ratio:.2f}x" if ratio is not None else "-",
            f"{cpu:.3f} s" if cpu is not None else "-",
            f"{cpu_ratio:.2f}x" if cpu_ratio is not None else "-",
            f"{r['final_test_accuracy']:.4f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    results = run_all(opts)
    if not results:
        return 1
    threads = {r.get("threads") for r in results.values()}
    print(f"\n{opts.model}, {opts.epochs} epoch(s), thread(s) {sorted(threads)}\n")
    print(table(results))
    if opts.json:
        Path(opts.json).write_text(
            json.dumps(results, indent=1) + "\n", encoding="utf-8"
        )
    return 0 if len(results) == len(commands(opts, Path("."))) else 1


if __name__ == "__main__":
    sys.exit(main())
