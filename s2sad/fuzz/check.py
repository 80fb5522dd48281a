"""Compile one generated program with s2sad, compare with finite differences, classify.

Classes (``Result.cls``):

``ok``            every gradient matched float64 central differences;
``refused``       an expected refusal: an ``S2SADError`` at compile time whose
                  message names the generated file and the offending line;
``crash``         any other exception from s2sad or from the emitted code;
``wrong``         a value or gradient that differs from the plain run / the FDs;
``false_refusal`` an ``S2SADError`` for a program the grammar considers supported;
``unrefused``     a program that should be refused compiled anyway;
``unlocated``     an expected refusal whose message does not point at the line;
``invalid``       the program fails in plain NumPy, is not finite, or is not
                  smooth at any test point (the generator's fault).

Each program is run twice: once as given (small arrays: no workspace) and once
with the workspace thresholds forced to zero (``SMALL_BYTES``/``SPEED_BYTES``,
as ``tests/corpus/test_corpus.py`` does), calling the gradient three times on
the same shapes: plain first call, recording call, buffered call.  With the
``forward`` phase (``python -m s2sad.fuzz --forward``) forward mode runs too:
``s2sad.jvp`` along a random tangent against the finite differences' gradient
along it (a program refused only there counts as a false refusal, phase
``forward``).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import itertools
import os
import re
import signal
import sys
import tempfile
from dataclasses import dataclass, field

import numpy as np

from s2sad.fuzz.grammar import Program

H_FINE, H_COARSE = 1e-6, 1e-4
RTOL, ATOL = 1e-5, 1e-6
_counter = itertools.count()


@dataclass
class Result:
    cls: str
    phase: str = ""  # compile, plain, buffered#1..3, value
    detail: str = ""
    exc: str = ""  # exception type name for crash / refusals
    points: list = field(default_factory=list)

    def key(self) -> tuple:
        """What the shrinker keeps fixed: class, where it happened, exception type."""
        phase = self.phase.split("#")[0]
        return (self.cls, phase, self.exc)


class Timeout(BaseException):  # not caught by the programs' own handlers
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    def handler(signum, frame):
        raise Timeout(f"no result after {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def forced_buffers():
    """Give every call the buffered form, whatever the array sizes."""
    from s2sad.runtime import workspace

    saved = workspace.SMALL_BYTES, workspace.SPEED_BYTES
    workspace.SMALL_BYTES = workspace.SPEED_BYTES = 0
    try:
        yield
    finally:
        workspace.SMALL_BYTES, workspace.SPEED_BYTES = saved


def load(source: str, directory: str):
    """Write ``source`` to a fresh importable .py file (s2sad reads it back with inspect)."""
    name = f"fz_{os.getpid()}_{next(_counter)}"
    path = os.path.join(directory, name + ".py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod, path


def make_point(prog: Program, k: int) -> list:
    out = []
    for name, shape in prog.shapes.items():
        rng = np.random.default_rng([prog.seed, prog.index, k, *map(ord, name)])
        a = rng.uniform(-1.2, 1.2, size=shape)
        out.append(float(a) if shape == () else a)
    return out


def flatten(args) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(a, dtype=float)) for a in args])


def unflatten(flat, like) -> list:
    out, i = [], 0
    for a in like:
        n = np.size(a)
        part = flat[i : i + n]
        out.append(
            float(part[0]) if np.ndim(a) == 0 else part.reshape(np.shape(a)).copy()
        )
        i += n
    return out


def evaluate(fn, args):
    with np.errstate(all="ignore"):
        v = fn(*copy.deepcopy(args))
    if isinstance(v, (np.ndarray, list, tuple, dict)) or not np.isfinite(v):
        raise ValueError(f"target returned {v!r}")
    return float(v)


def finite_differences(fn, args, h) -> np.ndarray:
    x0 = flatten(args)
    g = np.zeros_like(x0)
    for i in range(x0.size):
        up, down = x0.copy(), x0.copy()
        up[i] += h
        down[i] -= h
        g[i] = (
            evaluate(fn, unflatten(up, args)) - evaluate(fn, unflatten(down, args))
        ) / (2 * h)
    return g


def smooth_points(prog: Program, fn, want=2, tries=6):
    """Test points (with their value and FD gradient) away from kinks and jumps."""
    points = []
    for k in range(tries):
        args = make_point(prog, k)
        value = evaluate(fn, args)
        fine = finite_differences(fn, args, H_FINE)
        coarse = finite_differences(fn, args, H_COARSE)
        scale = 1.0 + np.max(np.abs(fine), initial=0.0)
        if np.all(np.abs(fine - coarse) <= 1e-4 * np.abs(fine) + 1e-5 * scale):
            points.append((args, value, fine))
            if len(points) == want:
                break
    return points


def compare(value, grads, args, want_value, fd) -> str:
    """'' when s2sad's value and gradients match, else what differs."""
    if not np.isclose(float(value), want_value, rtol=1e-9, atol=1e-12):
        return f"value {float(value)!r} != {want_value!r}"
    if not isinstance(grads, tuple) or len(grads) != len(args):
        return f"gradient structure {type(grads).__name__}"
    for i, (g, a) in enumerate(zip(grads, args)):
        if np.shape(g) != np.shape(a) or not isinstance(
            g, (float, np.ndarray, np.floating)
        ):
            return f"d/darg{i}: got {type(g).__name__} of shape {np.shape(g)}"
    got = flatten(grads)
    scale = 1.0 + np.max(np.abs(fd), initial=0.0)
    bad = np.abs(got - fd) > RTOL * np.abs(fd) + ATOL * scale
    if np.any(bad):
        i = int(np.argmax(np.abs(got - fd)))
        return f"gradient component {i}: s2sad {got[i]!r}, finite differences {fd[i]!r}"
    return ""


def located(exc, path: str, token: str) -> bool:
    """Whether a refusal names the generated file and a line starting with ``token``."""
    places = [(p.filename, p.line) for p in getattr(exc, "problems", None) or []]
    if not places:
        places = [
            (m.group(1), int(m.group(2)))
            for m in re.finditer(r"^(.+?):(\d+):\d+: ", str(exc), re.M)
        ]
    lines = open(path).read().splitlines()
    for fname, line in places:
        if os.path.abspath(fname) == os.path.abspath(path) and 1 <= line <= len(lines):
            if not token or lines[line - 1].strip().startswith(token):
                return True
    return False


def run_phase(fn, path, prog, points, phase) -> Result | None:
    """Compile and call s2sad's gradient; a Result when anything is off, else None."""
    import s2sad
    from s2sad.errors import S2SADError

    dfn = s2sad.value_and_grad(fn, argnums=tuple(range(len(prog.shapes))))
    try:
        dfn.compile(*copy.deepcopy(points[0][0]))
    except S2SADError as e:
        name = type(e).__name__
        if prog.expected != "refused":
            return Result("false_refusal", "compile", str(e)[:2000], name)
        if not located(e, path, prog.token):
            return Result("unlocated", "compile", str(e)[:2000], name)
        return Result("refused", "compile", str(e)[:300], name)
    except Exception as e:  # noqa: BLE001 - any other exception is a crash
        return Result(
            "crash", "compile", f"{type(e).__name__}: {e}"[:2000], type(e).__name__
        )
    if prog.expected == "refused":
        return Result("unrefused", "compile", f"expected refusal of {prog.token!r}")
    calls = 3 if phase == "buffered" else 1
    for p, (args, want_value, fd) in enumerate(points):
        for c in range(1, calls + 1):
            where = f"{phase}#{c}" if phase == "buffered" else phase
            try:
                with np.errstate(all="ignore"):
                    value, grads = dfn(*copy.deepcopy(args))
            except Exception as e:  # noqa: BLE001
                return Result(
                    "crash", where, f"{type(e).__name__}: {e}"[:2000], type(e).__name__
                )
            diff = compare(value, grads, args, want_value, fd)
            if diff:
                return Result("wrong", where, f"point {p}: {diff}")
    return None


def direction(prog: Program, args: list, k: int) -> list:
    """A tangent per argument, drawn from the program's seed (like ``make_point``)."""
    rng = np.random.default_rng([prog.seed, prog.index, k, 7])
    return [
        (
            float(rng.uniform(-1.0, 1.0))
            if np.ndim(a) == 0
            else rng.uniform(-1.0, 1.0, size=np.shape(a))
        )
        for a in args
    ]


def run_forward(fn, path, prog, points) -> Result | None:
    """Forward mode: ``s2sad.jvp(target, args, tangents)`` against the finite
    differences' gradient along the tangent (a Result when anything is off)."""
    import s2sad
    from s2sad.errors import S2SADError

    for p, (args, want_value, fd) in enumerate(points):
        tangents = direction(prog, args, p)
        try:
            with np.errstate(all="ignore"):
                value, t_out = s2sad.jvp(
                    fn, tuple(copy.deepcopy(args)), tuple(tangents)
                )
        except S2SADError as e:
            name = type(e).__name__
            if prog.expected == "refused":
                return Result("refused", "forward", str(e)[:300], name)
            return Result("false_refusal", "forward", str(e)[:2000], name)
        except Exception as e:  # noqa: BLE001
            return Result(
                "crash", "forward", f"{type(e).__name__}: {e}"[:2000], type(e).__name__
            )
        if not np.isclose(float(value), want_value, rtol=1e-9, atol=1e-12):
            return Result("wrong", "forward", f"point {p}: value {float(value)!r}")
        d = flatten(tangents)
        want = float(fd @ d)
        scale = 1.0 + float(np.abs(fd) @ np.abs(d))
        if abs(float(t_out) - want) > RTOL * abs(want) + ATOL * scale:
            return Result(
                "wrong",
                "forward",
                f"point {p}: jvp {float(t_out)!r}, finite differences {want!r}",
            )
    return None


def check(
    prog: Program,
    directory: str | None = None,
    timeout: float = 60.0,
    phases: tuple = ("plain", "buffered"),
) -> Result:
    """Classify one program (see the module docstring)."""
    directory = directory or tempfile.mkdtemp(prefix="s2sad-fuzz-")
    mod = None
    try:
        compile(prog.source, "<program>", "exec")
        with time_limit(timeout / 4):  # a shrunk while loop may never end
            mod, path = load(prog.source, directory)
            fn = mod.target
            points = smooth_points(prog, fn)
    except (Exception, Timeout) as e:  # noqa: BLE001 - the program itself is broken
        if mod is not None:
            sys.modules.pop(mod.__name__, None)
        return Result(
            "invalid", "plain-numpy", f"{type(e).__name__}: {e}"[:500], type(e).__name__
        )
    if not points:
        sys.modules.pop(mod.__name__, None)
        return Result("invalid", "plain-numpy", "not smooth at any test point", "Kink")
    try:
        with time_limit(timeout):
            res = (
                run_phase(fn, path, prog, points, "plain")
                if "plain" in phases
                else None
            )
            if res is None and "buffered" in phases:
                with forced_buffers():
                    res = run_phase(fn, path, prog, points, "buffered")
            if res is None and "forward" in phases and prog.expected != "refused":
                res = run_forward(fn, path, prog, points)
    except Timeout as e:
        res = Result("crash", "timeout", str(e), "Timeout")
    finally:
        sys.modules.pop(mod.__name__, None)
    res = res or Result("ok")
    res.points = [p[0] for p in points]
    return res
