"""Two runs side by side, keyed by cell id: what got worse, what got better, and the fingerprint
differences that explain it (driver, NCCL as loaded). This is the before/after-a-driver-upgrade view.

A busbw change counts only beyond both `--threshold` and the noise the two runs measured; changes
inside the noise are listed as such, and only a counted drop (or a worse outcome, or a missing cell)
is a regression."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from .errors import HarnessError
from .escape import code, esc
from .record import GOOD, MEASURED, BandwidthRow, CellFields, CellRecord, Fingerprint, ranges_apart
from .report import gbs, pct, size_label
from .results import RunData

FINGERPRINT_FACTS: tuple[tuple[str, Callable[[Fingerprint], str | None]], ...] = (
    ("driver", lambda fp: fp.driver),
    ("NCCL loaded", lambda fp: fp.nccl_loaded),
    ("torch", lambda fp: fp.torch),
    ("Accelerate", lambda fp: fp.accelerate),
    ("GPUs", lambda fp: ", ".join(fp.gpu_names) or None),
)

# gloo (CPU) cells: the noise of a shared CPU is not in one cell's trials. Seen on a shared 2-core CPU
# machine (issue 12), in containers: within one run, the identical gloo cells of one stack ranged
# 0.73-0.91 GB/s (max/min 1.25, so one cell sits up to 25% from another with nothing changed), and two
# plain runs of the same images differed cell by cell from -63% to +48%. Two rules follow.
# 1. Pool the baseline: gloo ignores every NCCL variable, and the launcher and Accelerate only start
#    the ranks, so every gloo cell of one torch in the base run times the same all-reduce: their trials
#    together are the base run's noise for each of them. The new run's cell is judged by its own trials
#    (pooling the new run too would hide a slowdown of one cell behind its unaffected twin: seen in
#    containers, one cell held to half a CPU read -71%, 0.24-0.32 GB/s against 0.86-1.05, and a pooled
#    new run still overlapped through the other cell's 1.07). A change counts when the cell's trials lie
#    outside the base run's pooled range.
# 2. A floor: where a pool holds one measurement only (an older record, the other cells failed), a gloo
#    cell's change must still exceed GLOO_MIN_CHANGE, above the 25% two identical cells of one run were
#    seen apart; a halving (-50%) stays well beyond it.
GLOO_MIN_CHANGE = 0.30

Verdict = Literal["regression", "improvement", "within noise"]


@dataclass(frozen=True)
class Measured:
    """What one run measured for one cell at one size: the median, and the range that is its noise
    (the cell's trials; for gloo cells of the base run the trials of its whole pool), None when unknown."""

    median: float
    range: tuple[float, float] | None
    pool: int = 1  # cells pooled into the range (gloo)


@dataclass(frozen=True)
class BusbwChange:
    """A busbw change beyond the threshold, with the noise that decides whether it counts."""

    cell_id: str
    size: int
    before: Measured
    after: Measured
    gloo: bool
    floor: float  # the relative change it had to exceed: the threshold, or the gloo floor
    collective: str = "all_reduce"  # the table's column; the other collectives' changes are named
    pooled: str = "gloo cells of this torch"  # what the base's range pools (invoke fleet: the other nodes)

    @property
    def change(self) -> float:
        return (self.after.median - self.before.median) / self.before.median

    @property
    def apart(self) -> bool | None:
        """The two runs' ranges do not overlap; None when either is unknown."""
        return ranges_apart(self.before.range, self.after.range)

    @property
    def verdict(self) -> Verdict:
        if abs(self.change) <= self.floor or self.apart is False:
            return "within noise"
        return "regression" if self.change < 0 else "improvement"

    def text(self) -> str:
        b, a = self.before, self.after
        which = "" if self.collective == "all_reduce" else f" of {self.collective}"
        head = (f"{code(self.cell_id)}: busbw{which} {pct(self.change)} at {size_label(self.size)}, "
                f"{gbs(b.median)} → {gbs(a.median)} GB/s")
        if abs(self.change) <= self.floor:
            return f"{head} (under the {self.floor:.0%} floor for gloo cells)"
        if b.range is None or a.range is None:
            which = " and ".join(w for w, m in (("before", b), ("after", a)) if m.range is None)
            return f"{head} (spread unknown {which}: an older record or one trial; the threshold alone decides)"
        pool = f" pooled over its {b.pool} {self.pooled}" if b.pool > 1 else ""
        ranges = f"before{pool} {gbs(b.range[0])}-{gbs(b.range[1])}, after {gbs(a.range[0])}-{gbs(a.range[1])} GB/s"
        return f"{head} ({ranges}: {'ranges apart' if self.apart else 'ranges overlap'})"


@dataclass
class Diff:
    """What changed, each item a line of markdown: cell ids as code, the records' own text escaped."""

    regressions: list[str] = field(default_factory=list)
    improvements: list[str] = field(default_factory=list)
    within_noise: list[str] = field(default_factory=list)  # busbw changes beyond the threshold, inside the noise
    added: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    fingerprint: list[str] = field(default_factory=list)
    changes: list[BusbwChange] = field(default_factory=list)  # every busbw change beyond the threshold
    unreadable: list[str] = field(default_factory=list)  # missing or corrupt records of either run, named
    images: list[str] = field(default_factory=list)  # a stack that ran from another image (a re-pushed tag)
    unchanged: int = 0

    @property
    def regressed(self) -> bool:
        return bool(self.regressions or self.missing)


def _status(record: CellRecord | None) -> str:
    return (record.status if record else None) or "missing"


def _rows(record: CellRecord, collective: str = "all_reduce") -> dict[int, BandwidthRow]:
    return {r.bytes: r for r in record.collective_rows.get(collective, ()) if r.busbw_gbs}


def _pool_key(record: CellRecord) -> tuple[str | None, ...] | None:
    """The gloo cells that time the same all-reduce: same torch on the CPU (None for NCCL cells)."""
    return ("cpu", record.cell.torch) if record.cell.is_cpu else None


def _points(row: BandwidthRow) -> tuple[float, ...]:
    """What a row says about its noise: min, median and max when the trials are known, else the median."""
    spread = row.spread
    return (spread[0], row.busbw_gbs, spread[1]) if spread else (row.busbw_gbs,)


Pools = dict[tuple[tuple[str | None, ...], str, int], list[BandwidthRow]]


def _pools(run: RunData) -> Pools:
    """(pool key, collective, size) -> the rows of every measured gloo cell of the pool at that size."""
    pools: Pools = {}
    for record in run.records.values():
        key = _pool_key(record)
        if key is not None and record.status in MEASURED:
            for collective in record.collective_rows:
                for size, row in _rows(record, collective).items():
                    pools.setdefault((key, collective, size), []).append(row)
    return pools


def _measured(record: CellRecord, row: BandwidthRow, pools: Pools) -> Measured:
    key = _pool_key(record)
    if key is None:
        return Measured(row.busbw_gbs, row.spread)
    rows = pools.get((key, row.collective, row.bytes)) or [row]
    points = [x for r in rows for x in _points(r)]
    known = len(rows) >= 2 or row.spread is not None  # two cells, or one cell's trials
    return Measured(row.busbw_gbs, (min(points), max(points)) if known else None, len(rows))


def busbw_change(cell_id: str, old: CellRecord, cur: CellRecord, threshold: float,
                 base_pools: Pools | None = None, collective: str = "all_reduce") -> BusbwChange | None:
    """The change of median busbw of `collective` at the largest size both cells measured, when it
    exceeds `threshold`."""
    before, after = _rows(old, collective), _rows(cur, collective)
    common = set(before) & set(after)
    if not common:
        return None
    size = max(common)
    if abs(after[size].busbw_gbs - before[size].busbw_gbs) <= threshold * before[size].busbw_gbs:
        return None
    gloo = old.cell.is_cpu or cur.cell.is_cpu
    return BusbwChange(cell_id, size, _measured(old, before[size], base_pools or {}),
                       Measured(after[size].busbw_gbs, after[size].spread), gloo,
                       max(threshold, GLOO_MIN_CHANGE) if gloo else threshold, collective)


def diff(base: RunData, new: RunData, threshold: float = 0.10) -> Diff:
    """Pure comparison; `threshold` is the relative change of median busbw that counts, where the noise
    of both runs allows (see BusbwChange.verdict)."""
    d = Diff(unreadable=[f"{side} {code(run.run_id)}: {code(name)}: {esc(problem)}"
                         for side, run in (("base", base), ("new", new)) for name, problem in run.problems.items()])
    base_pools = _pools(base)
    for cell_id in sorted(set(base.records) | set(new.records)):
        old, cur = base.records.get(cell_id), new.records.get(cell_id)
        if old is None:
            d.added.append(f"{code(cell_id)}: {_status(cur)}")
            continue
        if cur is None:
            d.missing.append(f"{code(cell_id)} (was {_status(old)})")
            continue
        images = image_change(old.cell, cur.cell)
        if images and images not in d.images:
            d.images.append(images)
        a, b = _status(old), _status(cur)
        changed = False
        if a != b:  # outcome changes always count
            line = f"{code(cell_id)}: {a} → {b}" + (f" ({esc(cur.reason or '')})" if b not in GOOD else "")
            worse = not (b in GOOD and a not in GOOD)
            (d.regressions if worse else d.improvements).append(
                line + _bisect_item(old.cell, cur.cell, base.facts.matrix_path, "outcome") if worse else line)
            changed = True
        elif a in MEASURED:
            for collective in [c for c in old.collective_rows if c in cur.collective_rows]:  # all-reduce first
                change = busbw_change(cell_id, old, cur, threshold, base_pools, collective)
                if change is not None:
                    d.changes.append(change)
                    text = change.text()
                    if change.verdict == "regression" and collective == "all_reduce":
                        text += _bisect_item(old.cell, cur.cell, base.facts.matrix_path, "busbw")
                    {"regression": d.regressions, "improvement": d.improvements,
                     "within noise": d.within_noise}[change.verdict].append(text)
                    changed = changed or change.verdict != "within noise"
        if changed:
            facts = _fingerprint_changes(old, cur)
            if facts:
                d.fingerprint.append(f"{code(cell_id)}: {facts}")
        else:
            d.unchanged += 1
    driver_a, driver_b = base.facts.driver, new.facts.driver
    if driver_a != driver_b:
        d.fingerprint.insert(0, f"host driver: {esc(driver_a or 'none')} → {esc(driver_b or 'none')}")
    return d


# The version axes `invoke bisect` walks, as a cell record names them
BISECT_AXES = ("torch", "accelerate", "nccl", "cuda")


def bisect_command(old: CellFields, cur: CellFields, matrix: str | None, metric: str = "outcome") -> str | None:
    """The `invoke bisect` command that finds which release between two cells broke it: where the two cells'
    stacks differ in one axis only (or are two images of one stack), None otherwise (several axes moved, a
    driver upgrade, an NCCL that was not pinned)."""
    if not old.id:
        return None
    tail = (f" --matrix {matrix}" if matrix else "") + (" --metric busbw" if metric == "busbw" else "")
    if old.image or cur.image:
        if not (old.image and cur.image) or old.image == cur.image:
            return None
        return (f"invoke bisect '{old.id}' --axis image --good {old.image} --bad {cur.image} "
                f"--versions {old.image},{cur.image}{tail}")
    moved = [axis for axis in BISECT_AXES if getattr(old, axis) != getattr(cur, axis)]
    if len(moved) != 1 or old.nccl_via != cur.nccl_via:
        return None
    axis = moved[0]
    before, after = getattr(old, axis), getattr(cur, axis)
    if not before or not after or (axis == "nccl" and old.nccl_via != "pip") or (axis == "cuda" and "cpu" in (before, after)):
        return None
    versions = f" --versions {before},{after}" if axis == "cuda" else ""
    return f"invoke bisect '{old.id}' --axis {axis} --good {before} --bad {after}{versions}{tail}"


def _bisect_item(old: CellFields, cur: CellFields, matrix: str | None, metric: str) -> str:
    """The bisect command as a sub-item of a regression line ("" where none applies)."""
    command = bisect_command(old, cur, matrix, metric)
    if command is None:
        return ""
    note = " (list the images made between them in --versions, in order)" if "--axis image" in command else (
        " (list the CUDA versions between them in --versions)" if "--axis cuda" in command else "")
    return f"\n  - find the release that broke it: {code(command)}{note}"


STACK_FACTS: tuple[tuple[str, str], ...] = (("cuda", "CUDA"), ("torch", "torch"), ("nccl", "NCCL"),
                                           ("accelerate", "Accelerate"), ("python", "Python"), ("distro", "distribution"))


def image_change(old: CellFields, cur: CellFields) -> str | None:
    """Two different users' images behind the cells compared (a re-pushed tag, or two stacks side by side):
    which image each is, and the versions that differ as read inside them; None for the same image."""
    if not (old.image_id and cur.image_id) or old.image_id == cur.image_id:
        return None

    def named(cell: CellFields) -> str:
        return esc(f"{cell.image} ({cell.short_image_id})")

    versions = [f"{label} {esc(getattr(old, key) or '?')} → {esc(getattr(cur, key) or '?')}" for key, label in STACK_FACTS
                if getattr(old, key) != getattr(cur, key)]
    return f"{named(old)} → {named(cur)}: " + ("; ".join(versions) or "the same versions, another image")


def of_stack(run: RunData, stack: str, flag: str = "--stacks") -> RunData:
    """The run's cells of one stack, keyed by the rest of their id (variant, launcher), so that two stacks'
    cells can be compared side by side, in one run or two: last month's image against this month's.
    HarnessError naming the flag when the run has no cell of that stack."""
    prefix = f"{stack}+"  # stack ids never hold '+': it separates a cell id's parts
    records = {cid.removeprefix(prefix): r for cid, r in run.records.items() if cid.startswith(prefix)}
    problems = {cid.removeprefix(prefix): p for cid, p in run.problems.items() if cid.startswith(prefix)}
    if not records and not problems:
        have = sorted({r.cell.stack for r in run.records.values() if r.cell.stack})
        raise HarnessError(f"{flag}: run `{run.run_id}` has no cell of stack `{stack}` (its stacks: "
                           f"{', '.join(have) or 'none'}). Fix: name a stack of that run, as its report's cell ids begin.")
    return replace(run, records=records, problems=problems)


def parse_stacks(text: str) -> tuple[str, str]:
    """--stacks OLD=NEW."""
    old, _, new = text.partition("=")
    if not old.strip() or not new.strip() or "+" in text:
        raise HarnessError(f"--stacks {text}: expected OLD=NEW, two stack ids (a cell id's first part). "
                           "Fix: e.g. --stacks train-2026-11=train-2026-12.")
    return old.strip(), new.strip()


def _fingerprint_changes(old: CellRecord, cur: CellRecord) -> str:
    fa, fb = old.fingerprint, cur.fingerprint
    parts = []
    for name, get in FINGERPRINT_FACTS:
        x, y = get(fa) if fa else None, get(fb) if fb else None
        if x != y and (x or y):
            parts.append(f"{name} {esc(x or 'not recorded')} → {esc(y or 'not recorded')}")
    if not parts and old.nccl_label != cur.nccl_label:
        parts.append(f"NCCL {esc(old.nccl_label)} → {esc(cur.nccl_label)}")
    return "; ".join(parts)


def _rule(threshold: float, changes: Iterable[BusbwChange]) -> str:
    text = (f"A busbw change counts beyond {threshold:.0%} and beyond the noise both runs measured (their trial "
            "ranges apart)")
    if any(c.gloo for c in changes):
        text += (f"; a gloo cell is held against the trials of every gloo cell of the same torch in the base run "
                 f"and must move more than {max(threshold, GLOO_MIN_CHANGE):.0%}")
    return text + ". Where a spread is unknown (an older record, one trial), the threshold alone decides."


def render(base: RunData, new: RunData, d: Diff, threshold: float, stacks: tuple[str, str] | None = None) -> str:
    def named(run: RunData, side: int) -> str:
        return code(run.run_id) + (f" stack {code(stacks[side])}" if stacks else "")

    lines = [f"# Compare {named(base, 0)} → {named(new, 1)}", "",
             _rule(threshold, d.changes) + " " + ("**Regressed.**" if d.regressed else "Nothing regressed."), ""]
    for title, items in (("Regressions", d.regressions), ("Missing cells", d.missing),
                         ("Improvements", d.improvements), ("Within noise (not counted)", d.within_noise),
                         ("Added cells", d.added), ("Fingerprint differences", d.fingerprint),
                         ("Images compared (users' images, as read inside them)", d.images),
                         ("Unreadable records (compared as missing)", d.unreadable)):
        if items:
            lines += [f"## {title}", ""] + [f"- {item}" for item in items] + [""]
    lines.append(f"{d.unchanged} cell(s) unchanged" + (f" ({len(d.within_noise)} within noise)." if d.within_noise else "."))
    return "\n".join(lines) + "\n"
