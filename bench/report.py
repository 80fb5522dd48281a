"""Markdown and JSON output of a benchmark run."""

from __future__ import annotations

import json
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
    return _table(header, rows)


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
            f"{meta.get('malloc', 'glibc default')};"
        ),
        (
            f"median of {meta['repeat']} interleaved repetitions; "
            f"full run took {meta['wall_s']:.0f} s; load average at the end "
            f"{meta.get('load_average_at_end', '?')} (other jobs share the machine)."
        ),
        "Versions: " + "; ".join(meta["versions"]) + ".",
        "",
        "## Median time per call (ratio to hand-written NumPy)",
        "",
        *timing_table(result),
        "",
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
    md, js = directory / f"{stem}.md", directory / f"{stem}.json"
    md.write_text(markdown(result), encoding="utf-8")
    js.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return md, js
