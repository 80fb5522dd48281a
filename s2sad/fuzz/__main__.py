"""``python -m s2sad.fuzz``: generate, check, count per class, shrink and save failures.

Each failing program (any class but ok, refused and invalid) is shrunk, up to
``--max-shrink`` programs per failure key (class, phase, exception type), and
its minimal reproduction is written to ``OUT/<class>_<n>.py``; identical
minimal programs (after blanking numeric literals) are written once.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import tempfile
import time

from s2sad.fuzz.check import check
from s2sad.fuzz.grammar import generate
from s2sad.fuzz.shrink import reproduction, shrink

FAILURES = ("crash", "wrong", "false_refusal", "unrefused", "unlocated")


def seed_range(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m s2sad.fuzz", description=__doc__)
    ap.add_argument("--seeds", default="0", help="e.g. 0-4 or 0,3,7")
    ap.add_argument("--count", type=int, default=100, help="programs per seed")
    ap.add_argument("--out", default=None, help="folder for the reproductions")
    ap.add_argument(
        "--max-shrink", type=int, default=3, help="shrunk programs per failure key"
    )
    ap.add_argument("--shrink-checks", type=int, default=300, help="checks per shrink")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument(
        "--forward",
        action="store_true",
        help="also check forward mode (s2sad.jvp along a random tangent)",
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    ns = ap.parse_args(argv)
    os.environ.setdefault(
        "S2SAD_CACHE_DIR", tempfile.mkdtemp(prefix="s2sad-fuzz-cache-")
    )
    work = tempfile.mkdtemp(prefix="s2sad-fuzz-")
    if ns.out:
        os.makedirs(ns.out, exist_ok=True)
    counts: collections.Counter = collections.Counter()
    keys: collections.Counter = collections.Counter()
    shrunk: collections.Counter = collections.Counter()
    written: dict[str, str] = {}
    start = time.monotonic()
    phases = ("plain", "buffered") + (("forward",) if ns.forward else ())
    for seed in seed_range(ns.seeds):
        for index in range(ns.count):
            prog = generate(seed, index)
            res = check(prog, work, phases=phases)
            counts[res.cls] += 1
            if ns.verbose:
                print(
                    f"seed {seed} program {index}: {res.cls} {res.phase} {res.exc}",
                    flush=True,
                )
            if res.cls not in FAILURES:
                continue
            keys[res.key()] += 1
            if ns.no_shrink or shrunk[res.key()] >= ns.max_shrink:
                continue
            shrunk[res.key()] += 1
            small, sres, used = shrink(
                prog, res, max_checks=ns.shrink_checks, directory=work
            )
            norm = re.sub(r"\d+\.\d+|\d+", "N", small.source)
            if norm in written:
                continue
            name = f"{sres.cls}_{len(written) + 1}.py"
            written[norm] = name
            print(
                f"seed {seed} program {index}: {'/'.join(filter(None, res.key()))}"
                f" -> {len(small.source.splitlines())} lines after {used} checks"
                + (f" ({name})" if ns.out else ""),
                flush=True,
            )
            if ns.out:
                with open(os.path.join(ns.out, name), "w") as f:
                    f.write(reproduction(small, sres))
            else:
                print(small.source)
    total = sum(counts.values())
    print(f"\n{total} programs in {time.monotonic() - start:.0f} s")
    for cls in ("ok", "refused", *FAILURES, "invalid"):
        print(f"{cls:>14}: {counts[cls]}")
    if keys:
        print("\nfailure keys (class, phase, exception):")
        for key, n in keys.most_common():
            print(f"{n:6d}  {' / '.join(k for k in key if k)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
