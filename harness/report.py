"""Markdown from recorded runs: the compatibility table (stacks x NCCL variants), notes for every
distinct failure, a recommendation per stack, known-issue hints, and per-cell detail with the command
that reruns it. Pure: it reads RunData and returns text, so old runs re-render without a GPU."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from . import hints
from .record import MEASURED, STATUSES, CellFields, CellRecord, RunFacts, Status
from .results import RunData

SYMBOLS: dict[Status | str, str] = {  # every status, and "missing" for a record that cannot be read
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
assert set(SYMBOLS) == {*STATUSES, "missing"}


def esc(text: Any) -> str:
    """Safe inside a GFM table cell: no pipes, no line breaks."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def size_label(nbytes: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor} {unit}"
    return f"{nbytes} B"


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


def _cell_text(record: CellRecord | None, problem: str | None, ref: int | None, notes: _Notes) -> str:
    if record is None:
        return f"{SYMBOLS['missing']} (note {notes.add(f'record missing or unreadable: {problem}')})"
    status = record.status or "missing"
    text = SYMBOLS.get(status, status)
    if status in MEASURED:
        bw = record.busbw_at(ref)
        if bw:
            text += f" {bw[1]:.1f} GB/s"
        if record.transports:
            text += f" via {'+'.join(record.transports)}"
    elif status == "hang":
        note = notes.add(f"hang in {record.phase}: {record.reason}")
        text += f" in {record.phase} (note {note})"
    elif status == "fail":
        text += f" {record.error_class or ''} in {record.phase} (note {notes.add(str(record.reason))})"
    elif status in ("wrong", "build-error", "infra-error", "interrupted"):
        text += f" (note {notes.add(str(record.reason))})"
    return text


def reference_size(data: RunData) -> int | None:
    """The largest size every passing cell measured: bandwidth is compared at one size."""
    sizes = [{r.bytes for r in rec.bandwidth_rows if r.busbw_gbs} for rec in data.records.values()]
    sizes = [s for s in sizes if s]
    common = set.intersection(*sizes) if sizes else set()
    return max(common) if common else None


def _recommend(cells: dict[str, CellRecord], ref: int | None) -> str:
    passing = {v: r for v, r in cells.items() if r.status == "pass"}
    if not passing:
        return "no variant passes"
    speeds = {v: (r.busbw_at(ref) or (0, 0.0))[1] for v, r in passing.items()}
    best = max(speeds, key=lambda v: speeds[v])
    return f"{best} ({speeds[best]:.1f} GB/s)" if speeds[best] else f"{best} (passes; no bus bandwidth with one rank)"


def rerun_command(record: CellRecord, run: RunFacts) -> str:
    """The `invoke matrix` line that reruns exactly this cell, as this run ran it."""
    engine = " --engine host" if record.cell.is_host else ""
    gpu_flag = f" --gpus {','.join(run.gpus)}" if run.gpus and not record.cell.is_cpu else ""
    return f"invoke matrix --matrix {run.matrix_path or 'matrix.yaml'}{engine}{gpu_flag} --only '{record.id}'"


def _header(data: RunData) -> list[str]:
    run = data.facts
    gpu_text = ", ".join(f"{n} × {g}" for g, n in Counter(run.host_gpus).items()) if run.host_gpus else "none"
    rows = [
        ("Host", run.hostname),
        ("OS", run.os),
        ("Driver", run.driver or "no NVIDIA driver"),
        ("GPUs", gpu_text + (f" (cells used {', '.join(run.gpus)})" if run.gpus else "")),
        ("Engine", " ".join(x for x in (run.engine, run.engine_version) if x)
         + (f" (runtimes: {', '.join(run.engine_runtimes)})" if run.engine_runtimes else "")),
        ("Harness", f"{run.harness_version} (commit {run.git_commit or '?'})"),
        ("Matrix", f"{run.matrix_path} (sha256 {str(run.matrix_sha256)[:12]})"),
        ("Run", f"{data.run_id}, started {run.started or '?'}"),
    ]
    # Everything here comes from the run's own files (no clock, no local path): the same run renders
    # to the same bytes, wherever and whenever.
    title = f"# NCCL / Accelerate compatibility on {run.hostname or '?'}"
    lines = [title, "", f"Results of run `{data.run_id}`, started {run.started or '?'}.", "", "| | |", "| --- | --- |"]
    lines += [f"| {k} | {esc(v if v is not None else '?')} |" for k, v in rows]
    return lines


def _place_unreadable(data: RunData, rows: dict[tuple[str, ...], dict[str, CellRecord]],
                      variants: list[str]) -> dict[tuple[tuple[str, ...], str], str]:
    """(row, variant) of every cell whose record is missing or corrupt, from run.json's cell fields: the
    row of its stack and launcher where another cell of them has one, else a row of its own. A cell
    that run.json names only by id (early runs) is not placed; the list of unreadable records names it."""
    missing: dict[tuple[tuple[str, ...], str], str] = {}
    for cell_id, problem in data.problems.items():
        cell: CellFields | None = data.facts.cells.get(cell_id)
        if cell is None:
            continue
        keys = [key for key, cells in rows.items()
                if any(r.cell.stack == cell.stack and r.cell.launcher == cell.launcher for r in cells.values())]
        for key in keys or [cell.row_key()]:
            rows.setdefault(key, {})
            missing[(key, cell.variant or "?")] = problem
        if (cell.variant or "?") not in variants:
            variants.append(cell.variant or "?")
    return missing


def render(data: RunData) -> str:
    """The whole report of one run."""
    notes = _Notes()
    ref = reference_size(data)
    variants: list[str] = []
    rows: dict[tuple[str, ...], dict[str, CellRecord]] = {}
    for record in data.records.values():
        variant = record.cell.variant or "?"
        if variant not in variants:
            variants.append(variant)
        rows.setdefault(record.row_key, {})[variant] = record
    missing = _place_unreadable(data, rows, variants)
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
    # one line per hint and certainty: "Possibly: ..." where the log matches but a fact was not measured
    matched: dict[tuple[str, str], tuple[hints.Match, list[str]]] = {}
    for cell_id, record in data.records.items():
        for found in hints.match(record):
            matched.setdefault((found.hint.id, found.caveat), (found, []))[1].append(cell_id)
    if matched:
        lines += ["", "## Known issues that match", ""]
        for found, cells in matched.values():
            hint = found.hint
            listed = f"{len(cells)} cell(s): {', '.join(f'`{c}`' for c in cells[:6])}{' …' if len(cells) > 6 else ''}"
            head = (f"**{esc(hint.title)}** ({listed})" if found.certain
                    else f"Possibly: **{esc(hint.title)}** ({listed}; {found.caveat})")
            fix = f" Fix: {hint.fix}" if hint.fix else ""
            lines.append(f"- {head}. {hint.explanation}{fix} [{hint.link}]({hint.link})")
    lines += ["", "## Cells", ""]
    for cell_id in sorted(data.records):
        lines += _detail(cell_id, data.records[cell_id], data.facts)
    return "\n".join(lines) + "\n"


def _origins(record: CellRecord) -> str:
    """Each variable the rank saw with where it came from, grouped: variant, inherited, launcher, harness."""
    groups: dict[str, list[str]] = {}
    for name, (value, origin) in record.env_origins().items():
        groups.setdefault(origin, []).append(f"{name}={value}" if value is not None else f"{name} unset")
    order = ("variant", "inherited", "host or image", "launcher", "harness")
    return "; ".join(f"{origin}: {' '.join(groups[origin])}" for origin in order if origin in groups) or "none"


def _detail(cell_id: str, record: CellRecord, run: RunFacts) -> list[str]:
    lines = [f"### {cell_id}", "", f"{SYMBOLS.get(record.status, record.status)}: {esc(record.reason or '')}"
             + (f" ({record.seconds:.0f} s)" if record.seconds else ""), ""]
    fp = record.fingerprint
    facts = [("NCCL variables", " ".join(f"{k}={v}" for k, v in record.env.items()) or "none"),
             ("NCCL compiled / loaded", f"{fp.nccl_compiled or '?'} / {fp.nccl_loaded or '?'}"
              if fp and not record.cell.is_cpu else None),
             ("torch / Accelerate", f"{fp.torch} / {fp.accelerate}" if fp else None),
             ("launcher changed", ", ".join(f"{k}: {c.expected} → {c.actual}" for k, c in record.launcher_changes.items())
              or "nothing" if fp else None),
             ("variables by origin", _origins(record) if fp else None),
             ("attempts", str(record.attempt_count)),
             ("image", record.image_tag)]
    lines += [f"- {k}: {esc(v)}" for k, v in facts if v]
    timings = record.phase_timings
    if timings:
        lines += ["", "| phase | seconds |", "| --- | --- |"]
        lines += [f"| {p} | {seconds:.2f} |" for p, seconds in timings.items()]
    rows = record.bandwidth_rows
    if rows:
        lines += ["", "| size | time per op | algbw (GB/s) | busbw (GB/s) | first call |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {size_label(r.bytes)} | {r.time_s * 1e6:.1f} µs | {r.algbw_gbs:.2f} | {r.busbw_gbs:.2f} "
                  f"| {r.first_call_s * 1e3:.2f} ms |" for r in rows]
    if record.attempts:
        lines += ["", f"Rerun: `{rerun_command(record, run)}`"]
    return lines + [""]
