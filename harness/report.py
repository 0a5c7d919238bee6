"""Markdown from recorded runs: the compatibility table (stacks x NCCL variants), notes for every
distinct failure, a recommendation per stack, known-issue hints, and per-cell detail with the command
that reruns it. Pure: it reads RunData and returns text, so old runs re-render without a GPU."""

from __future__ import annotations

import shlex
from collections import Counter
from dataclasses import dataclass
from typing import Any

from . import advice, hints, nativestack, nccl_log
from .engines.container import gpu_text
from .escape import code, esc
from .payloads import size_label
from .record import MEASURED, STATUSES, BandwidthRow, CellFields, CellRecord, Status
from .results import RunData
from .runfacts import RunFacts
from .workload.redact import shown

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


def assignment(name: str, value: Any) -> str:
    """NAME=value as it may be shown (workload/redact.py: masked unless safe, even in an older record)."""
    return f"{name}={shown(name, value)}" if value is not None else f"{name} unset"


def gbs(value: float, digits: int | None = None) -> str:
    """A bandwidth in GB/s: one decimal from 10 GB/s, two below (gloo on a CPU moves under 1 GB/s)."""
    return f"{value:.{digits if digits is not None else (1 if value >= 10 else 2)}f}"


def busbw_text(row: BandwidthRow, digits: int | None = None) -> str:
    """The median busbw with its [min-max] over trials when known: `340.9 [340.1-341.3]`."""
    spread = row.spread
    text = gbs(row.busbw_gbs, digits)
    return f"{text} [{gbs(spread[0], digits)}-{gbs(spread[1], digits)}]" if spread else text


def pct(change: float) -> str:
    """A signed relative change: +0.3% under 10%, +20% from there."""
    return f"{change:+.1%}" if abs(change) < 0.095 else f"{change:+.0%}"


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
    """A table cell as markdown: the harness's words, with the record's own (transports, phase, error class) escaped."""
    if record is None:
        return f"{SYMBOLS['missing']} (note {notes.add(f'record missing or unreadable: {problem}')})"
    status = record.status or "missing"
    text = SYMBOLS.get(status, status)
    if status in MEASURED:
        row = record.bandwidth_at(ref)
        if row:
            text += f" {busbw_text(row)} GB/s"
        if record.transports:
            text += f" via {esc('+'.join(record.transports))}"
        if record.one_rank:
            text += " (1 rank)"
    elif status == "hang":
        note = notes.add(f"hang in {record.phase}: {record.reason}")
        text += f" in {esc(record.phase)} (note {note})"
    elif status == "fail":
        text += f" {esc(record.error_class or '')} in {esc(record.phase)} (note {notes.add(str(record.reason))})"
    elif status in ("wrong", "build-error", "infra-error", "interrupted"):
        text += f" (note {notes.add(str(record.reason))})"
    return text


def reference_size(data: RunData) -> int | None:
    """The largest size every passing cell measured: bandwidth is compared at one size."""
    sizes = [{r.bytes for r in rec.bandwidth_rows if r.busbw_gbs} for rec in data.records.values()]
    sizes = [s for s in sizes if s]
    common = set.intersection(*sizes) if sizes else set()
    return max(common) if common else None


# A variant is recommended over `default` only when it beats it by more than this (relative busbw at the
# reference size) AND beyond the noise both cells measured (their trial ranges apart). On 2x H200 the
# old rule turned p2p-nvl's 341.4 GB/s over default's 340.5 (+0.3%, inside run-to-run noise) into advice
# to set a variable; a gain worth a variable in every launch script is a few percent at least.
MIN_GAIN = 0.05
GLOO_NOTE = "gloo: NCCL variants have no effect"


def _variables(record: CellRecord) -> str:
    return " ".join(assignment(k, v) for k, v in record.env.items()) or "no variables"


def best_passing(cells: dict[str, CellRecord], ref: int | None) -> str | None:
    """The passing variant of a row with the highest busbw at `ref` (else its largest size); None when none passes."""
    passing = {v: r for v, r in cells.items() if r.status == "pass"}
    return max(passing, key=lambda v: _busbw(passing[v].bandwidth_at(ref))) if passing else None


def _rescued(cells: dict[str, CellRecord]) -> str | None:
    """The rescue with the highest busbw among a row's failing cells, as advice; None when none was rescued."""
    found = [(r.rescue, v, r) for v, r in cells.items() if r.rescue.status == "rescued" and r.rescue.step]
    if not found:
        return None
    rescue, variant, record = max(found, key=lambda f: f[0].busbw[1] if f[0].busbw else 0.0)
    assert rescue.step is not None
    return f"{variant}: set {rescue.step.assignments()} (smallest rescue; {variant}: {record.status})"


def _busbw(row: BandwidthRow | None) -> float:
    return row.busbw_gbs if row else 0.0


def recommend(cells: dict[str, CellRecord], ref: int | None) -> str:
    """One recommendation per row (variant -> record of one stack and launcher): `default` unless another
    passing variant beats it by more than MIN_GAIN and beyond noise; ties and small gains say so. A
    default that does not pass gives the best passing variant and the variables to set, or, when no
    variant passes, the rescue search's find (the fastest rescued cell's step, on its variant). gloo rows
    get none: gloo ignores every NCCL variable, so their variants measure one thing."""
    best = best_passing(cells, ref)
    default = cells.get("default")
    if best is None:
        searched = sum(len(r.rescue.tried) for r in cells.values())
        return _rescued(cells) or "no variant passes" + (f"; no rescue in {searched} attempt(s)" if searched else "")
    passing = {v: r for v, r in cells.items() if r.status == "pass"}
    if any(r.cell.is_cpu for r in cells.values()):
        return GLOO_NOTE + ("" if default is None or default.status == "pass" else f" (default: {default.status or 'missing'})")
    if default is None or "default" not in passing:
        if default is None:  # nothing to beat: name the variant and its variables, advise nothing
            return f"{best} ({_variables(passing[best])}; default not run)"
        text = f"{best}: set {_variables(passing[best])} (default: {default.status or 'missing'})"
        if default.rescue.step is not None:  # the smallest change to default that the search found, beside it
            text += f"; or on default {default.rescue.step.assignments()} (smallest rescue)"
        return text
    if all(r.one_rank for r in passing.values()):  # issue 22: the one-H200 host's report read like a verdict on paths
        return "default; one rank per cell: no path between GPUs was exercised (run on two or more GPUs to compare)"
    base = default.bandwidth_at(ref)
    if base is None:
        return "default"  # passes without a bandwidth measured: nothing to compare
    winners: list[tuple[float, str, bool | None]] = []
    others: list[str] = []  # variants within noise, or faster by less than MIN_GAIN
    for variant, record in passing.items():
        row = record.bandwidth_at(ref)
        if variant == "default" or row is None or row.bytes != base.bytes:
            continue
        gain = (row.busbw_gbs - base.busbw_gbs) / base.busbw_gbs
        apart = row.apart_from(base)  # None: a spread is unknown (older record, one trial): the gain alone decides
        if apart is False:
            others.append(f"{variant} within noise ({pct(gain)})")
        elif gain > MIN_GAIN:
            winners.append((gain, variant, apart))
        elif gain > 0:
            others.append(f"{variant} {pct(gain)}, under the {MIN_GAIN:.0%} minimum gain"
                        + ("" if apart else " (spread unknown)"))
    if winners:
        gain, variant, apart = max(winners)
        how = "ranges apart" if apart else "spread unknown"
        return f"{variant}: set {_variables(passing[variant])} ({pct(gain)} over default, {how})"
    return "; ".join(["default", *others])


def rerun_command(record: CellRecord, run: RunFacts) -> str:
    """The `invoke matrix` line that reruns exactly this cell, as this run ran it."""
    # the run's engine flags (--engine slurm --nodes=2 ...); runs from before they were kept: host or docker
    flags = run.engine_flags or (("--engine", "host") if record.cell.is_host else ())
    engine = "".join(f" {shlex.quote(f)}" for f in flags)
    gpu_flag = f" --gpus {','.join(run.gpus)}" if run.gpus and not record.cell.is_cpu else ""
    # the way this run's containers got the GPUs (a probe on the same engine would choose it again; given, it is not probed)
    gpu_flag += f" --gpu-api {run.gpu_api}" if run.gpu_api and gpu_flag else ""
    rescue = " --rescue" if record.rescue.status != "not-run" else ""
    # a user's image by what ran, not by its tag (which may point at another image by now)
    pin = record.cell.pin
    image = f" --image {shlex.quote(f'{record.cell.stack}={pin}')}" if record.cell.image and pin else ""
    return (f"invoke matrix --matrix {run.matrix_path or 'matrix.yaml'}{engine}{gpu_flag}{rescue}{image} "
            f"--only '{record.id}'")


def engine_text(run: RunFacts) -> str:
    """"docker 28.2.2 (runtimes: runc)"; a docker engine whose API podman's service answered says so."""
    runtimes = f" (runtimes: {', '.join(run.engine_runtimes)})" if run.engine_runtimes else ""
    if run.engine == "docker" and run.engine_product == "podman":
        return " ".join(x for x in ("podman", run.engine_version) if x) + " through its Docker-compatible API" + runtimes
    return " ".join(x for x in (run.engine, run.engine_version) if x) + runtimes


def _header(data: RunData) -> list[str]:
    run = data.facts
    gpu_names = ", ".join(f"{n} × {g}" for g, n in Counter(run.host_gpus).items()) if run.host_gpus else "none"
    rows = [
        ("Host", run.hostname),
        ("OS", run.os),
        ("Driver", run.driver or "no NVIDIA driver"),
        ("GPUs", gpu_names + (f" (cells used {', '.join(run.gpus)})" if run.gpus else "")),
        ("Engine", engine_text(run)),
        # only for runs that recorded it: older runs' reports stay as they were
        *([("GPUs to containers", gpu_text(run.gpu_api, run.gpus))] if run.gpu_api else []),
        ("Harness", f"{run.harness_version} (commit {run.git_commit or '?'})"),
        ("Matrix", f"{run.matrix_path} (sha256 {str(run.matrix_sha256)[:12]})"),
        ("Run", f"{data.run_id}, started {run.started or '?'}"),
    ]
    # Everything here comes from the run's own files (no clock, no local path): the same run renders
    # to the same bytes, wherever and whenever.
    title = f"# NCCL / Accelerate compatibility on {esc(run.hostname or '?')}"
    lines = [title, "", f"Results of run {code(data.run_id)}, started {esc(run.started or '?')}.", "", "| | |", "| --- | --- |"]
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
    gloo = any(r.cell.is_cpu for r in data.records.values())
    nccl = any(not r.cell.is_cpu for r in data.records.values())
    transport = " and NCCL's transport" if nccl else ""  # gloo has none to show
    lines += [f"Each cell: outcome, {ref_text} (median over trials, [min-max] where the trials are recorded)"
              f"{transport} for passes, the phase for hangs, the error class for failures; notes below. "
              f"Recommendation: `default` unless a variant beats it by more than {MIN_GAIN:.0%} and beyond "
              f"noise (trial ranges apart). Legend: {legend}."
              + (" On gloo (CPU) rows the NCCL variants have no effect: gloo ignores every NCCL variable, so "
                 "their cells are repeated measurements of one thing and no recommendation is made from them."
                 if gloo else ""), ""]
    # the image column only where a row is a user's image (`image:` stacks): built stacks' reports are unchanged
    images = any(key[0] for key in rows)
    head = ["image"] * images + ["CUDA", "NCCL", "torch", "Accelerate", "launcher"] + variants + ["recommendation"]
    lines += ["| " + " | ".join(esc(h) for h in head) + " |", "|" + " --- |" * len(head)]
    for key in sorted(rows):
        cells = rows[key]
        texts = [_cell_text(cells.get(v), missing.get((key, v)), ref, notes) if v in cells or (key, v) in missing else ""
                 for v in variants]
        fields = [esc(x) for x in list(key)[0 if images else 1:]]
        lines.append("| " + " | ".join(fields + texts + [esc(recommend(cells, ref))]) + " |")
    if data.problems:
        lines += ["", "Unreadable records: " + "; ".join(f"{code(k)}: {esc(v)}" for k, v in data.problems.items()) + "."]
    if notes.by_text:
        lines += ["", "### Notes", ""]
        lines += [f"{n.number}. {esc(n.text)}" for n in notes.by_text.values()]
    # one line per hint and certainty: "Possibly: ..." where the log matches but a fact was not measured
    matched: dict[tuple[str, str], tuple[hints.Match, list[str]]] = {}
    found_for = {cell_id: hints.match(record) for cell_id, record in data.records.items()}
    for cell_id in data.records:
        for found in found_for[cell_id]:
            matched.setdefault((found.hint.id, found.caveat), (found, []))[1].append(cell_id)
    if matched:
        lines += ["", "## Known issues that match", ""]
        for found, ids in matched.values():
            hint = found.hint
            listed = f"{len(ids)} cell(s): {', '.join(code(c) for c in ids[:6])}{' …' if len(ids) > 6 else ''}"
            title = (f"**{esc(hint.title)}** ({listed})" if found.certain
                     else f"Possibly: **{esc(hint.title)}** ({listed}; {found.caveat})")
            fix = f" Fix: {esc(hint.fix)}" if hint.fix else ""
            lines.append(f"- {title}. {esc(hint.explanation)}{fix} [{esc(hint.link)}]({esc(hint.link)})")
    lines += ["", "## Cells", ""]
    for cell_id in sorted(data.records):
        record = data.records[cell_id]
        lines += _detail(cell_id, record, data.facts, rows.get(record.row_key, {}), ref, found_for[cell_id])
    return "\n".join(lines) + "\n"


_LAYER_TEXT = {"nccl": "the fault is in NCCL or its configuration",
               "above-nccl": "the fault is above NCCL, in the torch/Accelerate path"}


def control_text(record: CellRecord) -> str | None:
    """What the NCCL-only control did, and so the layer of the fault, for a cell that hung or failed
    (any cell it ran for): `pass (324.9 GB/s at 1 GiB): the fault is above NCCL, in the torch/Accelerate
    path (prepare)`; None for a cell that passed without one."""
    control = record.control
    if control.status == "not-run" and record.status not in ("hang", "fail"):
        return None
    if control.status == "not-run":
        return control.reason
    if control.status == "pass":
        what = f"{gbs(control.busbw[1])} GB/s at {size_label(control.busbw[0])}" if control.busbw else control.reason
    elif control.status == "hang":
        what = f"in {control.phase}" if control.phase else control.reason
    else:
        what = f"{control.error_class or '?'}, '{control.key_line or control.reason}'"
    text = f"{control.status} ({what})"
    found = record.layer
    if found in _LAYER_TEXT:
        return f"{text}: {_LAYER_TEXT[found]}" + (f" ({record.phase})" if found == "above-nccl" and record.phase else "")
    if record.status in ("hang", "fail") and not control.could_run:
        return f"{text}: the control could not load libnccl or libcudart here (it needs libnccl and a GPU); the layer is unknown"
    return text


def rescue_text(record: CellRecord, cells: dict[str, CellRecord], ref: int | None) -> str | None:
    """What the rescue search found for a cell that hung or failed: `smallest rescue: NCCL_P2P_DISABLE=1
    (step p2p-off, attempt 3; busbw 27.1 GB/s at 1 GiB, 8% of the best passing variant, default)`, or
    `no rescue in 3 attempt(s): tried a (hang), b (hang), c (fail)`, or why none ran; None for a cell
    that did not hang or fail and had no search. `cells`: the cell's row, for the best passing variant."""
    rescue = record.rescue
    if rescue.status == "not-run":
        return rescue.reason if record.status in ("hang", "fail") else None
    if rescue.status == "not-rescued":
        tried = ", ".join(f"{t.step.name} ({t.status or '?'})" for t in rescue.tried)
        ended = f"; {rescue.ended.text()}" if rescue.ended else ""
        return f"no rescue in {len(rescue.tried)} attempt(s): tried {tried}{ended}"
    assert rescue.step is not None
    where = next((f"attempt {t.attempt}" for t in rescue.tried if t.step == rescue.step and t.attempt), "")
    text = f"smallest rescue: {rescue.step.assignments()} (step {rescue.step.name}{', ' + where if where else ''}"
    if rescue.busbw is None:
        return text + ")"
    nbytes, busbw = rescue.busbw
    text += f"; busbw {gbs(busbw)} GB/s at {size_label(nbytes)}"
    best = best_passing(cells, nbytes)
    row = cells[best].bandwidth_at(nbytes) if best else None
    if row is None or row.bytes != nbytes or not row.busbw_gbs:
        return text + ", no passing variant to compare with)"
    return text + f", {busbw / row.busbw_gbs:.0%} of the best passing variant, {best})"


def native_text(record: CellRecord) -> str | None:
    """Where each hung rank's threads waited, by their native stacks (the bug report has the frames)."""
    native = record.last_raw.forensics.native if record.attempts else None
    if not native:
        return None
    return "; ".join(f"rank {r}: {nativestack.where(t) or 'no thread in NCCL, CUDA or gloo'}"
                     for r, t in sorted(native.items()))


def _answer(value: bool | str | None) -> str:
    """A check's answer in words: ok, wrong data, no answer in time, or the error that stopped it."""
    return {True: "ok", False: "WRONG DATA", "timeout": "no answer in time"}.get(value, str(value)) \
        if value is not None else "not checked"


def peer_copy_text(record: CellRecord) -> str | None:
    """Each ordered GPU pair as rank 0's fingerprint saw it: the driver's claim and a copy-engine copy
    (`0→1 claimed, copy ok`); None where rank 0 saw fewer than two GPUs."""
    pairs = record.fingerprint.peer_access
    if not pairs:
        return None
    claims = {True: "claimed", False: "not claimed", None: "claim unknown"}
    return "; ".join(f"{p.src}→{p.dst} {claims[p.claimed]}"
                     + (f", copy {_answer(p.verified)}" if p.verified is not None else "") for p in pairs)


def p2p_ipc_text(record: CellRecord) -> str | None:
    """The IPC peer check (workload/p2pipc.py): each ordered pair read by the peer rank's kernel through
    CUDA IPC, as NCCL's P2P transport does (`GPU 0→1 ok (4 MiB, 1.2 ms)`), or why it did not run; None
    where it was not asked for (CPU, one rank, older records)."""
    check = record.p2p_check
    if check.skipped or check.error:
        return f"not run: {check.skipped or check.error}"
    said = [f"GPU {r.src}→{r.dst} (rank {r.owner}'s buffer read by rank {r.reader}) {_answer(r.result)}"
            + (f", {r.wrong} wrong" if r.wrong else "")
            + (f" ({size_label(r.bytes)}, {r.seconds * 1e3:.1f} ms)" if r.bytes and r.seconds is not None else "")
            for r in check.pairs if r.owner is not None and r.reader is not None]
    said += [f"rank {u.rank} offered no buffer: {u.error}" for u in check.unpublished]
    return "; ".join(said) or None


def origins_text(record: CellRecord) -> str:
    """Each variable the rank saw with where it came from, grouped: variant, inherited, launcher, harness."""
    groups: dict[str, list[str]] = {}
    for name, (value, origin) in record.env_origins().items():
        groups.setdefault(origin, []).append(assignment(name, value))
    order = ("variant", "inherited", "host or image", "launcher", "harness")
    return "; ".join(f"{origin}: {' '.join(groups[origin])}" for origin in order if origin in groups) or "none"


def _affinity(record: CellRecord) -> str | None:
    """The CPUs each rank could run on (ranks pinned to the wrong NUMA node are a known slow path)."""
    cpus = {rank: state.placement.cpus for rank, state in sorted(record.last_raw.rank_states.items())
            if state.placement and state.placement.cpus}
    return "; ".join(f"rank {rank}: {c}" for rank, c in cpus.items()) or None


def nodes_text(record: CellRecord) -> str | None:
    """Each node with its ranks, and for ranks on several nodes NCCL's transport between them (its log)."""
    nodes = record.nodes
    if not nodes:
        return None
    text = ", ".join(f"{node} (rank{'s' if len(r) > 1 else ''} {','.join(map(str, r))})" for node, r in nodes.items())
    net = [t for t in record.transports if t in nccl_log.NETWORK_KINDS]
    return text + (f"; between nodes: {'+'.join(net)}" if len(nodes) > 1 and net else "")


def _user_image(cell: CellFields) -> str | None:
    """What an image stack ran: the image as named, the one that ran, and its Python and distribution."""
    if not cell.image:
        return None
    ran = ", ".join(x for x in (cell.image_digest, cell.image_id) if x)
    inside = ", ".join(x for x in (f"Python {cell.python} ({cell.python_path})" if cell.python_path else None, cell.distro) if x)
    return f"{cell.image}" + (f" = {ran}" if ran else "") + (f"; {inside}" if inside else "")


def _detail(cell_id: str, record: CellRecord, run: RunFacts, row: dict[str, CellRecord] | None = None,
            ref: int | None = None, matched: list[hints.Match] | None = None) -> list[str]:
    status = record.status or "missing"
    lines = [f"### {esc(cell_id)}", "", f"{SYMBOLS.get(status, status)}: {esc(record.reason or '')}"
             + (f" ({record.seconds:.0f} s)" if record.seconds else ""), ""]
    fp = record.fingerprint
    facts = [("NCCL variables", " ".join(assignment(k, v) for k, v in record.env.items()) or "none"),
             ("NCCL compiled / loaded", f"{fp.nccl_compiled or '?'} / {fp.nccl_loaded or '?'}"
              if fp and not record.cell.is_cpu else None),
             ("torch / Accelerate", f"{fp.torch} / {fp.accelerate}" if fp else None),
             ("NCCL variables the launcher changed",
              ", ".join(f"{k}: {shown(k, c.expected) or 'unset'} → {shown(k, c.actual) or 'unset'}"
                        for k, c in record.launcher_changes.items()) or "none" if fp else None),
             ("variables by origin", origins_text(record) if fp else None),
             ("nodes", nodes_text(record)),
             ("GPU peer copy (driver's claim, copy engine)", peer_copy_text(record)),
             ("GPU peer read through CUDA IPC (as NCCL's P2P)", p2p_ipc_text(record)),
             ("CPU affinity", _affinity(record)),
             ("attempts", str(record.attempt_count)),
             ("native stacks", native_text(record)),
             ("NCCL alone", control_text(record)),
             ("rescue search", rescue_text(record, row or {}, ref)),
             ("user's image", _user_image(record.cell)),
             ("image", record.image_tag)]
    lines += [f"- {k}: {esc(v)}" for k, v in facts if v]
    advised = advice.advise(record, matched)  # the hints the summary found for it, not matched again
    if advised is not None:
        lines.append(f"- next step: {esc(advised.text())}")
    timings = record.phase_timings
    if timings:
        lines += ["", "| phase | seconds |", "| --- | --- |"]
        lines += [f"| {esc(p)} | {seconds:.2f} |" for p, seconds in timings.items()]
    rows = record.bandwidth_rows
    if rows:
        lines += _bandwidth_table(rows)
    for name, others in list(record.collective_rows.items())[1:]:  # all-reduce's is the table above
        if others:
            lines += ["", f"{name} (nccl-tests' size and bus factor):", *_bandwidth_table(others, name)[1:]]
    if record.attempts:
        lines += ["", f"Rerun: {code(rerun_command(record, run))}"]
    return lines + [""]


_TIMINGS = {"cuda-graph": "the timed all-reduces captured in one CUDA graph and replayed (no launch cost)",
            "eager": "back-to-back eager all-reduces and one synchronise (nccl-tests' default)"}


def _bandwidth_table(rows: tuple[BandwidthRow, ...], collective: str = "all_reduce") -> list[str]:
    """The per-cell table, with nccl-tests' columns: size, time, algbw, busbw (median [min-max]), #wrong,
    torch's eager per-call latency, the first call. Unknown values (older records) read `–`."""
    calls = {"all_reduce": "all-reduces"}.get(collective, f"{collective} calls")
    def known(value: float | int | None, fmt: str) -> str:
        return "–" if value is None else format(value, fmt)

    lines = [""]
    trials = sorted({r.trials for r in rows if r.trials})
    iters = sorted({r.iters for r in rows if r.iters})
    timings = sorted({r.timing for r in rows if r.timing})
    if trials or timings:
        what = "one trial" if trials in ([], [1]) else f"median of {'/'.join(map(str, trials))} trials"
        what += f" of {'/'.join(map(str, iters))} {calls}" if iters else ""
        timed = esc("; ".join(_TIMINGS.get(t, t) for t in timings))
        lines += [f"Bandwidth: {what}, [min-max] over the trials" + (f"; time per op from {timed}" if timed else "")
                  + f"; eager per call: torch's own latency per {calls[:-1]} (what DDP pays per call).", ""]
    lines += ["| size | time (µs) | algbw (GB/s) | busbw (GB/s) | #wrong | eager per call (µs) | first call (ms) |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {size_label(r.bytes)} | {r.time_s * 1e6:.1f} | {r.algbw_gbs:.2f} | {busbw_text(r, 2)} "
              f"| {known(r.wrong, 'd')} | {known(r.eager_us, '.1f')} | {r.first_call_s * 1e3:.2f} |" for r in rows]
    return lines
