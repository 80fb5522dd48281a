"""The none / set / maybe lattice that both modes track per derivative variable.

While generating code, each cotangent (reverse) or tangent (forward) variable is
known to be ``NONE`` (zero: the variable is None or unbound), ``SET`` (a value,
never None at run time) or ``MAYBE`` (None on some paths).  Straight-line code
stays ``SET`` and gets plain arithmetic; only joins of control flow produce
``MAYBE``, which is what costs an ``is not None`` guard or an ``or_zeros``.

    if c:  t_y = t_x * 2     SET
    else:  pass              NONE     ->  after the if: MAYBE
"""

from __future__ import annotations

NONE, SET, MAYBE = "none", "set", "maybe"


def join(a: str, b: str) -> str:
    """The state after two paths meet: equal states stay, different ones are MAYBE."""
    return a if a == b else MAYBE


def join_states(a: dict[str, str], b: dict[str, str]) -> dict[str, str]:
    """``join`` per variable (a missing variable is NONE), over both dicts' keys."""
    return {x: join(a.get(x, NONE), b.get(x, NONE)) for x in sorted(set(a) | set(b))}
