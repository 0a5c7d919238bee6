"""Publish a run's report into a docs tree: the markdown, a bandwidth plot, and an index of every
published host and run, so a docs site can serve compatibility tables as they accumulate."""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import report
from .errors import HarnessError
from .record import BandwidthRow
from .results import RunData

INDEX = "index.md"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "host"


def plot(data: RunData, path: Path) -> bool:
    """busbw against message size (log2 axis), one panel per stack, one line per passing cell."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows: dict[str, list[tuple[str, list[BandwidthRow]]]] = {}
    for cell_id, record in sorted(data.records.items()):
        bw = [r for r in record.bandwidth_rows if r.busbw_gbs]
        if record.status == "pass" and bw:
            key = " · ".join(record.row_key)
            rows.setdefault(key, []).append((record.cell.variant or cell_id, bw))
    if not rows:
        return False
    fig, axes = plt.subplots(len(rows), 1, figsize=(8, 3.2 * len(rows)), squeeze=False)
    for ax, (title, lines) in zip(axes[:, 0], rows.items()):
        for label, bw in lines:
            ax.plot([r.bytes for r in bw], [r.busbw_gbs for r in bw], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(title, fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def publish(data: RunData, docs: Path) -> Path:
    """Write <docs>/<host>/<run-id>.md (+ .png) and rebuild <docs>/index.md; returns the report path."""
    hostname = data.facts.hostname or "unknown-host"
    folder = docs / slug(hostname)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HarnessError(f"--to {docs}: cannot write there ({exc.strerror}). Fix: pass a writable folder.") from None
    text = report.render(data)
    png = folder / f"{data.run_id}-busbw.png"
    if plot(data, png):
        text = text.replace("\n## Compatibility\n", f"\n![busbw by message size]({png.name})\n\n## Compatibility\n", 1)
    page = folder / f"{data.run_id}.md"
    page.write_text(text)
    counts: dict[str, int] = {}
    for record in data.records.values():
        status = record.status or "missing"
        counts[status] = counts.get(status, 0) + 1
    started = data.facts.started or ""
    (folder / f"{data.run_id}.json").write_text(json.dumps({"run": data.run_id, "started": started, "counts": counts}))
    write_index(docs)
    return page


def write_index(docs: Path) -> None:
    """The index lists every published report, newest first per host; rebuilt from the tree itself."""
    lines = ["# Published compatibility reports", ""]
    for folder in sorted(p for p in docs.iterdir() if p.is_dir()):
        pages = sorted((p for p in folder.glob("*.md")), reverse=True)
        if not pages:
            continue
        lines += [f"## {folder.name}", ""]
        for page in pages:
            lines.append(f"- [{page.stem}]({folder.name}/{page.name}){_summary(page.with_suffix('.json'))}")
        lines.append("")
    (docs / INDEX).write_text("\n".join(lines))


def _summary(sidecar: Path) -> str:
    """Start time and outcome counts of a published run, from the sidecar written beside its page."""
    try:
        info = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return ""
    counts = ", ".join(f"{n} {status}" for status, n in sorted(info.get("counts", {}).items()))
    return f" ({info.get('started', '?')}): {counts}" if counts else ""
