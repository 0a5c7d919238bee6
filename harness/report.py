"""Markdown from recorded runs: the compatibility table (stacks x NCCL variants), notes for every
distinct failure, a recommendation per stack, known-issue hints, and per-cell detail with the command
that reruns it. Pure: it reads RunData and returns text, so old runs re-render without a GPU."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from . import hints
from .results import RunData

SYMBOLS = {
    "pass": "✅ pass",
    "wrong": "⚠️ wrong",
    "hang": "⏳ hang",
    "fail": "❌ fail",
    "slow": "🐢 slow",
    "build-error": "🧱 build-error",
    "infra-error": "🔌 infra-error",
    "interrupted": "⏸️ interrupted",
    "n/a": "— n/a",
    "missing": "❓ missing",
}
ROW_KEYS = ("cuda", "nccl", "torch", "accelerate", "launcher")


def esc(text: Any) -> str:
    """Safe inside a GFM table cell: no pipes, no line breaks."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def size_label(nbytes: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor} {unit}"
    return f"{nbytes} B"


def last_raw(record: dict) -> dict:
    attempts = record.get("attempts") or []
    return (attempts[-1].get("raw") or {}) if attempts else {}


def fingerprint(record: dict) -> dict:
    return ((last_raw(record).get("phases") or {}).get("fingerprint") or {}).get("fingerprint") or {}


def bandwidth_rows(record: dict) -> list[dict]:
    return ((last_raw(record).get("phases") or {}).get("bandwidth") or {}).get("rows") or []


def transports(record: dict) -> list[str]:
    """Transport kinds NCCL used, over every rank's log (empty for gloo and for one rank)."""
    kinds: dict[str, None] = {}
    for summary in (last_raw(record).get("nccl") or {}).values():
        for kind in (summary or {}).get("transports") or {}:
            kinds[kind] = None
    return list(kinds)


def nccl_label(record: dict) -> str:
    """NCCL as loaded when the cell got that far, else as asked for."""
    cell = record.get("cell", {})
    if cell.get("cuda") == "cpu":
        return "gloo (CPU)"
    via = cell.get("nccl_via", "bundled")
    loaded = (fingerprint(record).get("nccl_loaded") or {}).get("version")
    version = loaded or (cell.get("nccl") if cell.get("nccl") not in (None, "bundled") else None)
    how = {"bundled": "bundled", "pip": "pip", "system": "system"}.get(via, via)
    return f"{version} ({how})" if version else how


def busbw_at(record: dict, size: int | None) -> tuple[int, float] | None:
    rows = [r for r in bandwidth_rows(record) if r.get("busbw_gbs")]
    if not rows:
        return None
    exact = [r for r in rows if r.get("bytes") == size]
    row = exact[0] if exact else max(rows, key=lambda r: r.get("bytes", 0))
    return row["bytes"], row["busbw_gbs"]


@dataclass(frozen=True)
class Note:
    number: int
    text: str


class _Notes:
    def __init__(self) -> None:
        self.by_text: dict[str, Note] = {}

    def add(self, text: str) -> int:
        if text not in self.by_text:
            self.by_text[text] = Note(len(self.by_text) + 1, text)
        return self.by_text[text].number


def _cell_text(record: dict | None, problem: str | None, ref: int | None, notes: _Notes) -> str:
    if record is None:
        return f"{SYMBOLS['missing']} (note {notes.add(f'record missing or unreadable: {problem}')})"
    out = record.get("outcome", {})
    status = out.get("status", "missing")
    text = SYMBOLS.get(status, status)
    if status in ("pass", "slow"):
        bw = busbw_at(record, ref)
        if bw:
            text += f" {bw[1]:.1f} GB/s"
        kinds = transports(record)
        if kinds:
            text += f" via {'+'.join(kinds)}"
    elif status == "hang":
        note = notes.add(f"hang in {out.get('phase')}: {out.get('reason')}")
        text += f" in {out.get('phase')} (note {note})"
    elif status == "fail":
        text += f" {out.get('error_class') or ''} in {out.get('phase')} (note {notes.add(str(out.get('reason')))})"
    elif status in ("wrong", "build-error", "infra-error", "interrupted"):
        text += f" (note {notes.add(str(out.get('reason')))})"
    return text


def _row_key(record: dict) -> tuple[str, ...]:
    cell = record.get("cell", {})
    return (cell.get("cuda", "?"), nccl_label(record), cell.get("torch", "?"), cell.get("accelerate", "?"),
            cell.get("launcher", "accelerate"))


def reference_size(data: RunData) -> int | None:
    """The largest size every passing cell measured: bandwidth is compared at one size."""
    sizes = [{r["bytes"] for r in bandwidth_rows(rec) if r.get("busbw_gbs")} for rec in data.records.values()]
    sizes = [s for s in sizes if s]
    common = set.intersection(*sizes) if sizes else set()
    return max(common) if common else None


def _recommend(cells: dict[str, dict], ref: int | None) -> str:
    passing = {v: r for v, r in cells.items() if r and r.get("outcome", {}).get("status") == "pass"}
    if not passing:
        return "no variant passes"
    speeds = {v: (busbw_at(r, ref) or (0, 0.0))[1] for v, r in passing.items()}
    best = max(speeds, key=lambda v: speeds[v])
    return f"{best} ({speeds[best]:.1f} GB/s)" if speeds[best] else f"{best} (passes; no bus bandwidth with one rank)"


def rerun_command(record: dict, run: dict) -> str:
    matrix_path = (run.get("matrix") or {}).get("path", "matrix.yaml")
    cell = record.get("cell", {})
    engine = " --engine host" if cell.get("base") == "host" else ""
    gpus = run.get("gpus") or []
    gpu_flag = f" --gpus {','.join(gpus)}" if gpus and cell.get("cuda") != "cpu" else ""
    return f"invoke matrix --matrix {matrix_path}{engine}{gpu_flag} --only '{cell.get('id')}'"


def _header(data: RunData) -> list[str]:
    run, host = data.run, data.run.get("host") or {}
    if isinstance(host, str):  # early run.json files held the hostname only
        host = {"hostname": host}
    engine = host.get("engine") or {"name": run.get("engine")}
    gpus = host.get("gpus") or []
    gpu_text = ", ".join(f"{n} × {g}" for g, n in Counter(gpus).items()) if gpus else "none"
    rows = [
        ("Host", host.get("hostname")),
        ("OS", host.get("os")),
        ("Driver", host.get("driver") or "no NVIDIA driver"),
        ("GPUs", gpu_text + (f" (cells used {', '.join(run['gpus'])})" if run.get("gpus") else "")),
        ("Engine", " ".join(str(x) for x in (engine.get("name"), engine.get("version")) if x)
         + (f" (runtimes: {', '.join(engine['runtimes'])})" if engine.get("runtimes") else "")),
        ("Harness", f"{host.get('harness_version') or run.get('harness_version')} (commit {host.get('git_commit') or '?'})"),
        ("Matrix", f"{(run.get('matrix') or {}).get('path')} (sha256 {str((run.get('matrix') or {}).get('sha256'))[:12]})"),
        ("Run", f"{data.run_id}, started {run.get('started', '?')}"),
    ]
    title = f"# NCCL / Accelerate compatibility on {host.get('hostname') or '?'}"
    lines = [title, "", f"Rendered {time.strftime('%Y-%m-%d %H:%M %Z')} from `{data.path}`.", "", "| | |", "| --- | --- |"]
    lines += [f"| {k} | {esc(v if v is not None else '?')} |" for k, v in rows]
    return lines


def render(data: RunData) -> str:
    """The whole report of one run."""
    notes = _Notes()
    ref = reference_size(data)
    variants: list[str] = []
    rows: dict[tuple[str, ...], dict[str, dict]] = {}
    for cell_id, record in data.records.items():
        cell = record.get("cell", {})
        variant = cell.get("variant", "?")
        if variant not in variants:
            variants.append(variant)
        rows.setdefault(_row_key(record), {})[variant] = record
    missing: dict[tuple[tuple[str, ...], str], str] = {}
    for cell_id, problem in data.problems.items():
        stack, _, rest = cell_id.partition("+")
        variant = rest.split("+")[0]
        launcher = "torchrun" if rest.endswith("+torchrun") else "accelerate"
        for key, cells in rows.items():
            if any(r.get("cell", {}).get("stack") == stack and key[-1] == launcher for r in cells.values()):
                missing[(key, variant)] = problem
                if variant not in variants:
                    variants.append(variant)
    lines = _header(data)
    lines += ["", "## Compatibility", ""]
    legend = " · ".join(v for k, v in SYMBOLS.items() if k != "missing")
    ref_text = f"bus bandwidth at {size_label(ref)}" if ref else "bus bandwidth at the largest size measured"
    lines += [f"Each cell: outcome, {ref_text} and NCCL's transport for passes, the phase for hangs, the "
              f"error class for failures; notes below. Legend: {legend}.", ""]
    head = ["CUDA", "NCCL", "torch", "Accelerate", "launcher"] + variants + ["recommendation"]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for key in sorted(rows):
        cells = rows[key]
        texts = [_cell_text(cells.get(v), missing.get((key, v)), ref, notes) if v in cells or (key, v) in missing else ""
                 for v in variants]
        lines.append("| " + " | ".join(esc(x) for x in list(key) + texts + [_recommend(cells, ref)]) + " |")
    if data.problems:
        lines += ["", "Unreadable records: " + "; ".join(f"`{k}`: {v}" for k, v in data.problems.items()) + "."]
    if notes.by_text:
        lines += ["", "### Notes", ""]
        lines += [f"{n.number}. {esc(n.text)}" for n in notes.by_text.values()]
    matched: dict[str, tuple[hints.Hint, list[str]]] = {}
    for cell_id, record in data.records.items():
        for hint in hints.match(record):
            matched.setdefault(hint.id, (hint, []))[1].append(cell_id)
    if matched:
        lines += ["", "## Known issues that match", ""]
        for hint, cells in matched.values():
            lines.append(f"- **{esc(hint.title)}** ({len(cells)} cell(s): {', '.join(f'`{c}`' for c in cells[:6])}"
                         f"{' …' if len(cells) > 6 else ''}). {hint.explanation} [{hint.link}]({hint.link})")
    lines += ["", "## Cells", ""]
    for cell_id in sorted(data.records):
        lines += _detail(cell_id, data.records[cell_id], data.run)
    return "\n".join(lines) + "\n"


def _detail(cell_id: str, record: dict, run: dict) -> list[str]:
    out = record.get("outcome", {})
    lines = [f"### {cell_id}", "", f"{SYMBOLS.get(out.get('status'), out.get('status'))}: {esc(out.get('reason', ''))}"
             + (f" ({out.get('seconds', 0):.0f} s)" if out.get("seconds") else ""), ""]
    env = record.get("env") or {}
    fp = fingerprint(record)
    facts = [("NCCL variables", " ".join(f"{k}={v}" for k, v in env.items()) or "none"),
             ("NCCL compiled / loaded", f"{fp.get('nccl_compiled', '?')} / {(fp.get('nccl_loaded') or {}).get('version', '?')}"
              if fp and record.get("cell", {}).get("cuda") != "cpu" else None),
             ("torch / Accelerate", f"{fp.get('torch')} / {fp.get('accelerate')}" if fp else None),
             ("launcher changed", ", ".join(f"{k}: {v.get('expected')} → {v.get('actual')}"
                                            for k, v in (fp.get("nccl_env_changed") or {}).items()) or "nothing" if fp else None),
             ("attempts", str(len(record.get("attempts") or []))),
             ("image", (record.get("image") or {}).get("tag"))]
    lines += [f"- {k}: {esc(v)}" for k, v in facts if v]
    phases = last_raw(record).get("phases") or {}
    if phases:
        lines += ["", "| phase | seconds |", "| --- | --- |"]
        lines += [f"| {p} | {v.get('seconds', 0):.2f} |" for p, v in phases.items()]
    rows = bandwidth_rows(record)
    if rows:
        lines += ["", "| size | time per op | algbw (GB/s) | busbw (GB/s) | first call |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {size_label(r['bytes'])} | {r['time_s'] * 1e6:.1f} µs | {r['algbw_gbs']:.2f} | {r['busbw_gbs']:.2f} "
                  f"| {r.get('first_call_s', 0) * 1e3:.2f} ms |" for r in rows]
    if record.get("attempts"):
        lines += ["", f"Rerun: `{rerun_command(record, run)}`"]
    return lines + [""]
