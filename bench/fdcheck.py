"""Check mode: the hand-written gradients against central finite differences.

Everything runs in float64.  Small arguments are checked entry by entry; large
ones along a few random unit directions ``v`` (``<grad, v>`` against
``(f(a + eps v) - f(a - eps v)) / 2 eps``), which tests every entry at once at
the cost of two loss evaluations per direction.
"""

from __future__ import annotations

import numpy as np

from bench import handwritten
from bench.problems import Problem, copy_args, to_float64

EPS = 1e-5
TOL = 1e-5  # relative; the errors seen are 1e-12..1e-7, real bugs give >1e-2


def _directions(a, rng: np.random.Generator) -> list:
    if isinstance(a, float):
        return [1.0]
    if a.size <= 12:
        return [np.eye(a.size)[k].reshape(a.shape) for k in range(a.size)]
    out = []
    for _ in range(3):
        v = rng.normal(size=a.shape)
        out.append(v / np.linalg.norm(v))
    return out


def _directional_fd(problem: Problem, args: tuple, i: int, v) -> float:
    def at(sign: float) -> float:
        moved = list(copy_args(args))
        moved[i] = args[i] + sign * EPS * v
        return float(problem.loss(*moved))

    return (at(1.0) - at(-1.0)) / (2 * EPS)


def check_problem(problem: Problem) -> tuple[bool, list[str]]:
    """Finite-difference check of one hand-written gradient; (ok, report lines)."""
    rng = np.random.default_rng(0)
    args = to_float64(problem.make_data())
    value, grads = getattr(handwritten, problem.name)(*copy_args(args))
    ref_value = float(problem.loss(*copy_args(args)))
    worst = abs(value - ref_value) / max(abs(ref_value), 1e-12)
    lines = [f"  value   rel err {worst:.1e}"]
    for i, g in zip(problem.argnums, grads):
        errs = []
        for v in _directions(args[i], rng):
            fd = _directional_fd(problem, args, i, v)
            an = float(np.sum(np.asarray(g) * v))
            errs.append(abs(fd - an) / max(abs(fd), abs(an), 1e-8))
        lines.append(f"  arg {i}   max rel err {max(errs):.1e} ({len(errs)} dirs)")
        worst = max(worst, max(errs))
    return worst < TOL, lines


def run_check(problems: list[Problem]) -> bool:
    """Check every problem, print a report, return True when all pass."""
    all_ok = True
    for problem in problems:
        ok, lines = check_problem(problem)
        all_ok &= ok
        print(f"{problem.name}: {'ok' if ok else 'FAILED'}")
        print("\n".join(lines))
    return all_ok
