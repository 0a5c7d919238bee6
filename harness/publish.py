"""Publish a run's report into a docs tree: the markdown, a bandwidth plot, and an index of every
published host and run, so a docs site can serve compatibility tables as they accumulate."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import report, statefile
from .codec import Count, Model, Str
from .errors import HarnessError
from .escape import esc, terminal
from .record import MEASURED, BandwidthRow
from .results import RunData, epoch, write_text

INDEX = "index.md"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "host"  # never "." or "..": a folder of --to


def _label(text: str) -> str:
    """Text from the records as matplotlib draws it: controls as their codes (escape.terminal; its lines
    kept), and `$` escaped: a `$...$` in an image name or a hostname is parsed as mathtext, and a bad one
    (`$\\frac{$`) made savefig raise ValueError, failing the publish."""
    return terminal(text, lines=True).replace("$", r"\$")


def figure(data: RunData) -> Any:
    """The run's bandwidth figure (a matplotlib Figure), or None when no cell measured a busbw: busbw
    against message size (log2 x, log y), one panel per stack (report row) with every variant that
    measured one, a y axis shared by all panels, host and run id in the title, measured points marked,
    and the spread over trials (busbw_min to busbw_max) as a band with error bars where recorded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    panels: dict[tuple[str, ...], list[tuple[str, list[BandwidthRow]]]] = {}
    gloo: set[tuple[str, ...]] = set()
    for cell_id, record in sorted(data.records.items()):
        rows = sorted((r for r in record.bandwidth_rows if r.busbw_gbs), key=lambda r: r.bytes)
        if record.status in MEASURED and rows:
            label = (record.cell.variant or cell_id) + ("" if record.status == "pass" else f" ({record.status})")
            panels.setdefault(record.row_key, []).append((label, rows))
            if record.cell.is_cpu:
                gloo.add(record.row_key)
    if not panels:
        return None
    count = len(panels)
    cols = 1 if count == 1 else 2
    nrows = -(-count // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6.5 * cols, 3.6 * nrows + 0.6), sharey=True, squeeze=False)
    flat = list(axes.flat)
    for ax in flat[count:]:
        fig.delaxes(ax)  # an odd panel count leaves one slot of the grid empty
    for ax, (key, lines) in zip(flat, sorted(panels.items())):
        for label, rows in lines:
            x = [r.bytes for r in rows]
            y = [r.busbw_gbs for r in rows]
            (line,) = ax.plot(x, y, marker="o", markersize=4, label=_label(label))
            spread = [r.spread for r in rows]
            if any(spread):
                low = [s[0] if s else r.busbw_gbs for s, r in zip(spread, rows)]
                high = [s[1] if s else r.busbw_gbs for s, r in zip(spread, rows)]
                ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
                ax.errorbar(x, y, yerr=[[m - lo for m, lo in zip(y, low)], [hi - m for m, hi in zip(y, high)]],
                            fmt="none", ecolor=line.get_color(), capsize=2, linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        sizes = sorted({r.bytes for _, rows in lines for r in rows})
        ax.set_xticks(sizes, [report.size_label(b) for b in sizes], fontsize=7)
        ax.xaxis.set_minor_locator(NullLocator())  # the measured sizes only
        ax.set_xlabel("message size")
        ax.set_ylabel("busbw (GB/s)")
        image, cuda, nccl, torch, accelerate, launcher = (list(key) + ["?"] * 6)[:6]
        title = (f"{image}\n" if image else "") + (f"CUDA {cuda} · NCCL {nccl} · torch {torch} · Accelerate {accelerate} "
                                                    f"· {launcher}")
        if key in gloo:
            title += "\n(gloo: NCCL variants have no effect)"
        ax.set_title(_label(title), fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(_label(f"all-reduce busbw on {data.facts.hostname or 'unknown host'}, run {data.run_id} "
                        "(median over trials; band: min-max)"), fontsize=10)
    fig.tight_layout()
    return fig


def plot(data: RunData, path: Path) -> bool:
    """Write the run's bandwidth figure to `path` (PNG); False when no cell measured a busbw."""
    fig = figure(data)
    if fig is None:
        return False
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


class Sidecar(Model):
    """<docs>/<host>/<run-id>.json, written beside each published page: what the index says of that run."""

    run: Str = ""
    started: Str = "?"
    counts: dict[Str, Count] = {}  # outcome -> cells


MAX_SIDECAR_BYTES = 1 << 20  # a run id, a time and a few counts: about 100 bytes


@dataclass(frozen=True)
class Published:
    """Where a run's page went, and the other runs' sidecars that could not be read (each a line to say)."""

    page: Path
    damaged: tuple[str, ...] = ()


def publish(data: RunData, docs: Path) -> Published:
    """Write <docs>/<host>/<run-id>.md (+ .png) and rebuild <docs>/index.md."""
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
    sidecar = Sidecar(run=data.run_id, started=data.facts.started or "", counts=counts)
    write_text(folder / f"{data.run_id}.json", json.dumps(sidecar.to_json()))  # replaces whatever lay there
    return Published(page, write_index(docs))


def write_index(docs: Path) -> tuple[str, ...]:
    """The index lists every published report, newest first per host (the run that started last first, by
    its sidecar, as "the latest" means everywhere: results.runs; a page without one by its name, after);
    rebuilt from the tree itself. Returns what is wrong with the sidecars that could not be read (their runs
    are listed without a summary)."""
    damaged: list[str] = []
    lines = ["# Published compatibility reports", ""]
    for folder in sorted(p for p in docs.iterdir() if p.is_dir()):
        pages = [(page, _sidecar(page.with_suffix(".json"), damaged)) for page in folder.glob("*.md")]
        if not pages:
            continue
        lines += [f"## {esc(folder.name)}", ""]
        for page, info in sorted(pages, key=lambda p: (_started(p[1]), p[0].name), reverse=True):
            link = quote(f"{folder.name}/{page.name}")
            summary = _summary(info)
            lines.append(f"- [{esc(page.stem)}]({link})" + (f" {esc(summary)}" if summary else ""))
        lines.append("")
    (docs / INDEX).write_text("\n".join(lines))
    return tuple(damaged)


def _sidecar(sidecar: Path, damaged: list[str]) -> Sidecar | None:
    """The sidecar written beside a published page; None without one. A damaged sidecar counts as absent,
    said in `damaged` with the fix: the index is rebuilt from the tree on every publish, so one run's bad
    sidecar must not stop publishing the others (it was a traceback in every later publish, issue 22), and
    publishing that run again writes it anew."""
    try:
        return statefile.read_model(Sidecar, sidecar, MAX_SIDECAR_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, statefile.Damaged) as exc:
        what = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        damaged.append(f"{sidecar}: not a published run's summary ({what}); the index lists {sidecar.stem} without "
                       f"one. Fix: publish that run again (its sidecar is written anew), or delete the file.")
        return None


def _started(info: Sidecar | None) -> float:
    """When a published run started, in seconds since the epoch; 0 when its sidecar does not say."""
    return (epoch(info.started) if info and info.started else None) or 0.0


def _summary(info: Sidecar | None) -> str:
    """Start time and outcome counts of a published run; "" without its sidecar."""
    if info is None:
        return ""
    counts = ", ".join(f"{n} {status}" for status, n in sorted(info.counts.items()))
    return f"({info.started}): {counts}" if counts else ""
