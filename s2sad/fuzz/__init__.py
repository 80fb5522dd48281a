"""A differential fuzzer for s2sad: random NumPy programs, checked against finite differences.

``grammar`` generates programs, ``check`` classifies one (ok, refused, crash,
wrong, ...), ``shrink`` reduces a failure to a minimal reproduction, and
``python -m s2sad.fuzz --seeds 0-4 --count 1000 --out DIR`` runs the loop.
"""

from s2sad.fuzz.check import Result, check
from s2sad.fuzz.grammar import Program, generate
from s2sad.fuzz.shrink import reproduction, shrink

__all__ = ["Program", "Result", "check", "generate", "reproduction", "shrink"]
