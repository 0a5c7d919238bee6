"""The fleet before an upgrade (issue 26), the pure part of `invoke fleet`: which nodes of a partition can be
tested now (Slurm's node states), the pairs between them, each node's and pair's outcome and bandwidth judged
against the rest of the fleet with compare's noise rule, the suspects (a node that fails or is an outlier, a
link that fails or is slow between two nodes that are fine alone), the drain lines for them, and the report.

A node is an outlier when its busbw at the largest size, against the others' (their median, their trials
pooled into one range: the fleet's noise), is a regression by compare's rule: beyond the threshold (a gloo
cell's beyond compare.GLOO_MIN_CHANGE) and with its trials below every other node's. Noise never names a
node: a node inside the fleet's spread is not flagged however far its median sits. Its distance from the
fleet is also given in MADs (median absolute deviations of every node's median, scaled by 1.4826 so that one
MAD is one standard deviation of normal noise), for reading, not for the verdict.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations

from .compare import GLOO_MIN_CHANGE, BusbwChange, Measured, busbw_change
from .escape import code, esc
from .kinds import MEASURED
from .record import CellRecord
from .report import gbs, pct

__all__ = ["ALL_PAIRS_UP_TO", "Member", "Judged", "Fleet", "usable", "pairs", "member", "judge", "against_baseline",
           "drain_argv", "drain_line", "drain_reason", "render", "variant_of"]

# Outcomes that say nothing of the node or the link: the cell did not run, or the harness or Slurm failed
# around it (a job that could not start, a build): reported as untested, never a suspect
UNTESTED = ("not run", "infra-error", "build-error", "interrupted", "n/a")
# Where a spread is unknown (one trial), a node's distance in MADs must reach this too (the usual cut for
# robust z-scores: Iglewicz and Hoaglin, 3.5)
MADS_WITHOUT_SPREAD = 3.5
# Every pair of up to this many nodes (6 pairs); beyond it a ring of pairs (N of them), unless --all-pairs
ALL_PAIRS_UP_TO = 4
# Slurm node states (sinfo %T) a job can never start on now: reported, not waited for; any other (idle,
# mixed, allocated, completing...) is tried, and a busy one waits at most the fleet's --wait.
UNAVAILABLE = ("down", "drain", "drained", "draining", "fail", "failing", "future", "maint", "power_down",
               "powered_down", "powering_down", "reboot_issued", "reboot_requested", "unknown", "not_responding",
               "inval")


def usable(states: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The nodes a job can start on, in order, and the others with their state (sinfo's %T, where a
    trailing * is a node not responding and ~ # ! % @ are power and reboot marks)."""
    ok: list[str] = []
    out: dict[str, str] = {}
    for node, state in states.items():
        words = re.split(r"[+]", state.lower().rstrip("*~#!%@$^-"))
        if state.endswith("*") or any(w in UNAVAILABLE for w in words):
            out[node] = state
        else:
            ok.append(node)
    return ok, out


def pairs(nodes: Sequence[str], all_pairs: bool = False) -> list[tuple[str, str]]:
    """Every pair of a small fleet (or with --all-pairs); a ring of pairs (each node with the next) of a
    larger one, so every node is in two pairs and a bad link between neighbours shows."""
    if len(nodes) < 2:
        return []
    if all_pairs or len(nodes) <= ALL_PAIRS_UP_TO:
        return list(combinations(nodes, 2))
    return [(nodes[i], nodes[(i + 1) % len(nodes)]) for i in range(len(nodes))]


def variant_of(nodes: Sequence[str]) -> str:
    """The variant name that places a cell: node-<n> on one node, pair-<a>-<b> on two."""
    return ("node-" if len(nodes) == 1 else "pair-") + "-".join(nodes)


@dataclass(frozen=True)
class Member:
    """One node's or one pair's cell as its record says: the outcome and the busbw at the largest size."""

    nodes: tuple[str, ...]
    cell_id: str
    status: str  # the record's status; "not run" where none
    reason: str = ""
    size: int | None = None
    busbw: float | None = None
    spread: tuple[float, float] | None = None
    gloo: bool = False
    record: CellRecord | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return "–".join(self.nodes)

    @property
    def measured(self) -> bool:
        return self.status in MEASURED and self.busbw is not None


def member(nodes: tuple[str, ...], cell_id: str, record: CellRecord | None) -> Member:
    if record is None:
        return Member(nodes, cell_id, "not run")
    rows = {r.bytes: r for r in record.collective_rows.get("all_reduce", ()) if r.busbw_gbs}
    size = max(rows, default=None)
    row = rows.get(size) if size is not None else None
    return Member(nodes, cell_id, record.status or "not run", (record.reason or "")[:300], size,
                  row.busbw_gbs if row else None, row.spread if row else None, bool(record.cell.is_cpu), record)


@dataclass(frozen=True)
class Judged:
    """A member judged against the fleet (nodes against nodes, pairs against pairs) and its own baseline."""

    member: Member
    flag: str = ""  # "" | fails | outlier | link | explained | faster | regressed | untested | unconfirmed
    why: str = ""
    change: BusbwChange | None = None  # against the rest of the fleet (the verdict's)
    mads: float | None = None
    distance: float | None = None  # from the median of every measured member of its kind (for reading)
    baseline: str = ""  # against the same node in the baseline run, where one was given

    @property
    def suspect(self) -> bool:
        return self.flag in ("fails", "outlier", "link", "regressed")


def _mad_distance(value: float, medians: Sequence[float]) -> float | None:
    if len(medians) < 4:  # three values' MAD is one gap between two of them: no scale to read a distance in
        return None
    centre = statistics.median(medians)
    mad = statistics.median(abs(m - centre) for m in medians) * 1.4826
    return None if mad == 0 else (value - centre) / mad


def _against_rest(m: Member, others: Sequence[Member], threshold: float) -> BusbwChange | None:
    """compare's rule with the others as the base: their median, their trials pooled into one range."""
    if not m.measured or len(others) < 2 or m.size is None or m.busbw is None:
        return None
    medians = [o.busbw for o in others if o.busbw is not None]
    points = [x for o in others for x in ((o.spread[0], o.spread[1]) if o.spread else (o.busbw or 0.0,))]
    before = Measured(statistics.median(medians), (min(points), max(points)), len(others))
    floor = max(threshold, GLOO_MIN_CHANGE) if m.gloo else threshold
    pooled = f"other {'nodes' if len(m.nodes) == 1 else 'pairs'}"
    change = BusbwChange(m.name, m.size, before, Measured(m.busbw, m.spread), m.gloo, floor, pooled=pooled)
    return change if abs(change.change) > threshold else None


def judge(members: Sequence[Member], threshold: float = 0.10, bad_nodes: Iterable[str] = ()) -> list[Judged]:
    """Each member against the others of its kind (nodes, or pairs): fails, outlier (slow beyond the fleet's
    noise), faster, or fine. Pairs are judged with `bad_nodes` (the nodes that are suspects alone): a pair
    that fails or is slow with one of them is explained by it; with neither, the link between them is the
    suspect."""
    bad = set(bad_nodes)
    comparable = [m for m in members if m.measured]
    medians = [m.busbw for m in comparable if m.busbw is not None]
    judged = []
    for m in members:
        others = [o for o in comparable if o.nodes != m.nodes and o.size == m.size]
        change = _against_rest(m, others, threshold)
        mads = _mad_distance(m.busbw, medians) if m.busbw is not None else None
        centre = statistics.median(medians) if medians else None
        distance = (m.busbw - centre) / centre if m.busbw is not None and centre else None
        if m.status in UNTESTED:
            flag, why = "untested", f"{m.status}: {m.reason}" if m.reason else m.status
        elif not m.measured:
            flag, why = "fails", f"{m.status}: {m.reason}" if m.reason else m.status
        elif change is not None and change.verdict == "regression" and (
                change.apart or (change.apart is None and mads is not None and mads <= -MADS_WITHOUT_SPREAD)):
            flag, why = "outlier", change.text()
        elif change is not None and change.verdict == "improvement":
            flag, why = "faster", change.text()
        else:
            flag, why = "", "within the fleet's noise" if change is None or change.verdict == "within noise" else ""
        if len(m.nodes) > 1 and flag in ("fails", "outlier"):
            culprits = [n for n in m.nodes if n in bad]
            flag, why = ("explained", f"{', '.join(culprits)} is a suspect alone; {why}") if culprits else ("link", why)
        judged.append(Judged(m, flag, why, change, mads, distance))
    return judged


def confirm(j: Judged, again: Member, peers: Sequence[Member], threshold: float = 0.10) -> Judged:
    """A suspect measured a second time, judged against the same peers (the members of its kind that were not
    suspects): it stays a suspect only when the second measurement says so too. Cells of one fleet run at
    different times (the pairs one after another), and a machine's load moves between them: seen on the
    container cluster of a 2-CPU machine under other work, a healthy pair 42% under the other pairs with its
    trials just apart from theirs, fine when run again. A second measurement that did not run keeps the first."""
    if again.status in UNTESTED:
        return replace(j, why=f"{j.why}; not measured again ({again.status})")
    second = judge([*peers, again], threshold)[-1]
    said = f"{again.status}, busbw {gbs(again.busbw)} GB/s" if again.busbw is not None else again.status
    if second.flag in ("fails", "outlier", "link"):
        return replace(j, why=f"{j.why}; measured again, the same: {second.why or said}")
    return replace(j, flag="unconfirmed", why=f"{j.why}; measured again: {said}, {second.why or 'within the others'}: "
                                              "noise, not named")


def against_baseline(j: Judged, old: Member | None, threshold: float) -> Judged:
    """The node against itself in an earlier fleet run (--baseline): an outcome that got worse, or a busbw
    regression by compare's rule, makes it a suspect even where the fleet moved with it."""
    if old is None or old.record is None:
        return replace(j, baseline="not in the baseline")
    new = j.member
    if old.measured and not new.measured and new.status != "not run":
        return replace(j, flag=j.flag or "regressed", baseline=f"{old.status} → {new.status}")
    if not (old.measured and new.measured and new.record is not None):
        return replace(j, baseline=f"{old.status} → {new.status}")
    change = busbw_change(new.name, old.record, new.record, threshold)
    if change is None:
        return replace(j, baseline=f"within {threshold:.0%} of its baseline")
    text = change.text()
    if change.verdict == "regression":
        return replace(j, flag=j.flag if j.suspect else "regressed", baseline=text)
    return replace(j, baseline=text)


_REASON = re.compile(r"[^A-Za-z0-9 .,:;%()/+=_-]")


def drain_reason(why: str, fleet_id: str) -> str:
    """Slurm's drain reason for a suspect: the fleet run and why, in characters a shell and Slurm keep."""
    return _REASON.sub("", f"nccl-harness fleet {fleet_id}: {why}")[:160]


def drain_argv(node: str, reason: str) -> list[str]:
    """The command that takes a suspect node out of service (printed; run only with --drain)."""
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]


def drain_line(node: str, reason: str) -> str:
    return f'scontrol update NodeName={node} State=DRAIN Reason="{reason}"'


@dataclass(frozen=True)
class Fleet:
    """A fleet run as judged: its nodes and pairs, the nodes that were not tested and why, and the
    suspects with their drain lines."""

    fleet_id: str
    cell: str
    run_id: str
    nodes: tuple[Judged, ...]
    pairs: tuple[Judged, ...]
    unavailable: tuple[tuple[str, str], ...] = ()
    threshold: float = 0.10
    baseline: str | None = None
    drained: bool = False  # --drain: the lines were run

    @property
    def suspects(self) -> list[Judged]:
        return [j for j in (*self.nodes, *self.pairs) if j.suspect]

    @property
    def untested(self) -> list[Judged]:
        return [j for j in (*self.nodes, *self.pairs) if j.flag == "untested"]

    def drains(self) -> list[tuple[str, str]]:
        """(node, reason) for every suspect node; a suspect link drains nothing (either node may be fine)."""
        return [(j.member.nodes[0], drain_reason(_short(j), self.fleet_id)) for j in self.nodes if j.suspect]

    def drain_lines(self) -> list[str]:
        return [drain_line(node, reason) for node, reason in self.drains()]

    def to_json(self) -> dict:
        def one(j: Judged) -> dict:
            m = j.member
            return {"nodes": list(m.nodes), "cell": m.cell_id, "status": m.status, "reason": m.reason, "bytes": m.size,
                    "busbw_gbs": m.busbw, "busbw_range": list(m.spread) if m.spread else None,
                    "from_fleet": round(j.distance, 4) if j.distance is not None else None,
                    "mads": round(j.mads, 2) if j.mads is not None else None,
                    "flag": j.flag, "suspect": j.suspect, "why": j.why, "baseline": j.baseline}
        return {"fleet": self.fleet_id, "cell": self.cell, "run": self.run_id, "threshold": self.threshold,
                "baseline": self.baseline, "nodes": [one(j) for j in self.nodes], "pairs": [one(j) for j in self.pairs],
                "unavailable": dict(self.unavailable), "suspects": [j.member.name for j in self.suspects],
                "untested": [j.member.name for j in self.untested],
                "drain": self.drain_lines()}


def _short(j: Judged) -> str:
    m = j.member
    if j.flag == "fails":  # the reason's first clause: "the command X does not exist on node n4 (launcher exit 127)"
        first = m.reason.split(";")[0].strip()
        return f"{m.status}: {first if len(first) <= 110 else first[:109] + '…'}" if first else m.status
    if j.distance is not None and j.flag == "outlier":
        return f"busbw {pct(j.distance)} from the fleet median"
    return j.baseline or j.flag


def _rows(judged: Sequence[Judged], kind: str) -> list[str]:
    order = sorted(judged, key=lambda j: (not j.suspect, j.flag != "explained", j.member.name))
    lines = [f"| {kind} | verdict | busbw GB/s [min-max] | from the {kind}s' median | MADs | flag |", "|---|---|---|---|---|---|"]
    for j in order:
        m = j.member
        bw = "-" if m.busbw is None else gbs(m.busbw) + (f" [{gbs(m.spread[0])}-{gbs(m.spread[1])}]" if m.spread else "")
        away = pct(j.distance) if j.distance is not None else "-"
        mads = f"{j.mads:+.1f}" if j.mads is not None else "-"
        flag = f"**{j.flag}**" if j.suspect else j.flag
        lines.append(f"| {code(m.name)} | {m.status} | {bw} | {away} | {mads} | {flag} |")
    return lines


def render(f: Fleet) -> str:
    suspects = f.suspects
    lines = [f"# Fleet {code(f.fleet_id)}: {code(f.cell)} on {len(f.nodes)} node(s) and {len(f.pairs)} pair(s)", ""]
    if suspects:
        lines.append(f"**{len(suspects)} suspect(s):** " + "; ".join(
            f"{code(j.member.name)} {j.flag} ({esc(_short(j))})" for j in suspects) + ".")
    elif f.untested:
        lines.append(f"No suspect among those tested; **{len(f.untested)} untested** (below): the fleet is not known good.")
    else:
        lines.append("No suspect: every node and pair passed, none outside the fleet's noise"
                     + (f" ({len(again)} only when first measured, not again: below)." if (again := [
                         j for j in (*f.nodes, *f.pairs) if j.flag == "unconfirmed"]) else "."))
    lines += ["", f"A node (a pair) is an outlier when its busbw at the largest size is below every other one's trials "
              f"and more than {f.threshold:.0%} under their median (a gloo cell's more than "
              f"{max(f.threshold, GLOO_MIN_CHANGE):.0%}): compare's rule, the rest of the fleet as the base. A pair that "
              "fails or is slow while both its nodes are fine alone names the link.", "", "## Nodes", ""]
    lines += _rows(f.nodes, "node")
    if f.pairs:
        lines += ["", "## Pairs", ""] + _rows(f.pairs, "pair")
    details = [j for j in (*f.nodes, *f.pairs) if j.flag or j.baseline]
    if details:
        lines += ["", "## Why", ""] + [f"- {code(j.member.name)}: {j.flag or 'fine'}: {esc(j.why)}"
                                       + (f"; against its baseline: {esc(j.baseline)}" if j.baseline else "")
                                       for j in details]
    if f.unavailable:
        lines += ["", "## Not tested", ""] + [f"- {code(n)}: {esc(state)} (a job cannot start there now)"
                                             for n, state in f.unavailable]
    drains = f.drain_lines()
    if drains:
        title = "Drained (--drain ran these)" if f.drained else "Drain (printed, not run; `--drain` runs them)"
        lines += ["", f"## {title}", "", "```"] + drains + ["```"]
    lines += ["", f"Records: run {code(f.run_id)} (`invoke report --run {f.run_id}`)."]
    return "\n".join(lines) + "\n"
