"""Markdown and JSON output of a benchmark run."""

from __future__ import annotations

import json
import math
from pathlib import Path

CALL_MEANING = {
    "grad": "one value-and-grad",
    "sgd": "one SGD step (value-and-grad + in-place update)",
}


def fmt_time(seconds: float | None) -> str:
    """Seconds as a short human unit, three significant digits."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_ratio(ratio: float | None) -> str:
    """A ratio with two decimals, or three significant digits below 0.1."""
    if ratio is None:
        return "-"
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.3g}x"


def _cell(result: dict, problem: str, column: str) -> str:
    entry = result["timings"].get(problem, {}).get(column)
    if entry is None:
        return "skipped"
    ratio = entry.get("ratio")
    suffix = f" ({ratio:.2f}x)" if ratio is not None else ""
    return fmt_time(entry["median_s"]) + suffix


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def timing_table(result: dict) -> list[str]:
    cols = result["columns"]
    header = ["problem", "one call is"] + [result["labels"][c] for c in cols]
    rows = []
    for name, meta in result["problems"].items():
        row = [f"{name} ({meta['description']})" if meta["description"] else name]
        row.append(CALL_MEANING[meta["kind"]])
        rows.append(row + [_cell(result, name, c) for c in cols])
    means = ratios(result, cols, ["handwritten"])["geomean"]
    rows.append(
        ["**geomean** of the ratios", ""]
        + [fmt_ratio(means.get((c, "handwritten"), 1.0)) for c in cols]
    )
    return _table(header, rows)


# s2sad's time over each of these columns' times (s2sad / hand-written first)
PEERS = ["handwritten", "jax_jit", "jax_eager", "torch", "autograd"]
# the columns whose value-and-gradient is divided by the primal's time
GRADIENT_COLUMNS = ["handwritten", "s2sad", "s2sad_out", "jax_jit", "torch", "autograd"]


def _median(result: dict, problem: str, column: str) -> float | None:
    entry = result["timings"].get(problem, {}).get(column)
    return entry["median_s"] if entry else None


def geomean(values: list[float]) -> float | None:
    """Geometric mean of positive numbers (None for none)."""
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ratios(result: dict, numerators: list[str], denominators: list[str]) -> dict:
    """{problem: {(num, den): t_num / t_den}} plus a "geomean" row over problems.

    A pair is missing where either column did not run; the geomean of a pair
    is over the problems where it ran (the row says how many).
    """
    table: dict = {}
    for name in result["timings"]:
        row = {}
        for num in numerators:
            for den in denominators:
                a, b = _median(result, name, num), _median(result, name, den)
                if num != den and a is not None and b:
                    row[(num, den)] = a / b
        table[name] = row
    pairs = {p for row in table.values() for p in row}
    table["geomean"] = {
        p: geomean([row[p] for row in table.values() if p in row]) for p in pairs
    }
    return table


def summary(result: dict) -> dict:
    """The two ratio tables as JSON-friendly dicts (also saved in latest.json)."""
    cols = result["columns"]
    s2sad = [c for c in ("s2sad",) if c in cols]
    peers = [c for c in PEERS if c in cols]
    grads = [c for c in GRADIENT_COLUMNS if c in cols]
    primal = ["numpy_fwd"] if "numpy_fwd" in cols else []
    out = {}
    for key, table in (
        ("s2sad_over", ratios(result, s2sad, peers)),
        ("gradient_to_primal", ratios(result, grads, primal)),
    ):
        out[key] = {
            problem: {f"{n}/{d}": v for (n, d), v in row.items()}
            for problem, row in table.items()
        }
    return out


def _ratio_rows(table: dict, keys: list[str]) -> list[list[str]]:
    rows = []
    for problem, row in table.items():
        cells = [fmt_ratio(row.get(k)) for k in keys]
        label = f"**{problem}**" if problem == "geomean" else problem
        rows.append([label] + cells)
    return rows


def ratio_tables(result: dict) -> list[str]:
    """Markdown: s2sad over each peer, and each gradient over the primal."""
    labels, cols = result["labels"], result["columns"]
    summ = summary(result)
    out = []
    peers = [c for c in PEERS if c in cols]
    if "s2sad" in cols and peers:
        keys = [f"s2sad/{p}" for p in peers]
        out += [
            "## s2sad time over each column's time (below 1: s2sad is faster)",
            "",
            *_table(
                ["problem"] + [f"over {labels[p]}" for p in peers],
                _ratio_rows(summ["s2sad_over"], keys),
            ),
            "",
        ]
    grads = [c for c in GRADIENT_COLUMNS if c in cols]
    if "numpy_fwd" in cols and grads:
        keys = [f"{g}/numpy_fwd" for g in grads]
        out += [
            (
                "## Gradient-to-primal cost ratio (value-and-gradient time over the "
                "NumPy loss's time; an SGD step includes the update)"
            ),
            "",
            *_table(
                ["problem"] + [labels[g] for g in grads],
                _ratio_rows(summ["gradient_to_primal"], keys),
            ),
            "",
        ]
    return out


def compile_table(result: dict) -> list[str]:
    header = [
        "problem",
        "JAX jit first call (trace + compile + run)",
        "s2sad cold: first call, fresh cache",
        "s2sad warm: first call, new process, filled cache",
    ]
    rows = []
    for name, entry in result["compile"].items():
        rows.append(
            [
                name,
                fmt_time(entry.get("jax_jit_first_call_s")),
                fmt_time(entry.get("s2sad_cold_first_call_s")),
                fmt_time(entry.get("s2sad_warm_first_call_s")),
            ]
        )
    return _table(header, rows)


def markdown(result: dict) -> str:
    """The whole report as markdown."""
    meta = result["meta"]
    out = [
        "# s2sad benchmarks",
        "",
        (
            f"Run {meta['date']} at commit {meta.get('commit', '?')} on "
            f"{meta['machine']}; {meta['threads']} thread(s); malloc: "
            f"{meta.get('malloc', 'glibc default')}; OpenBLAS kernels: "
            f"{meta.get('blas_core', 'not recorded')};"
        ),
        (
            f"median of {meta['repeat']} interleaved repetitions "
            f"({meta.get('clock', 'wall')} clock); "
            f"full run took {meta['wall_s']:.0f} s; load average at the end "
            f"{meta.get('load_average_at_end', '?')} (other jobs share the machine)."
        ),
        "Versions: " + "; ".join(meta["versions"]) + ".",
        "",
        "## Median time per call (ratio to hand-written NumPy)",
        "",
        *timing_table(result),
        "",
        *ratio_tables(result),
        "## First-call times",
        "",
        *compile_table(result),
        "",
    ]
    if result["skipped"]:
        out += ["## Skipped", ""]
        out += [f"- {s}" for s in result["skipped"]] + [""]
    out += ["## Notes", ""] + [f"- {n}" for n in result["notes"]] + [""]
    return "\n".join(out)


def save(result: dict, directory: Path, stem: str = "latest") -> tuple[Path, Path]:
    """Write <stem>.md and <stem>.json; return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    result = dict(result, summary=summary(result))
    md, js = directory / f"{stem}.md", directory / f"{stem}.json"
    md.write_text(markdown(result), encoding="utf-8")
    js.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return md, js
