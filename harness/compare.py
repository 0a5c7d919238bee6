"""Two runs side by side, keyed by cell id: what got worse, what got better, and the fingerprint
differences that explain it (driver, NCCL as loaded). This is the before/after-a-driver-upgrade view."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .record import GOOD, CellRecord, Fingerprint
from .report import esc, size_label
from .results import RunData

FINGERPRINT_FACTS: tuple[tuple[str, Callable[[Fingerprint], str | None]], ...] = (
    ("driver", lambda fp: fp.driver),
    ("NCCL loaded", lambda fp: fp.nccl_loaded),
    ("torch", lambda fp: fp.torch),
    ("Accelerate", lambda fp: fp.accelerate),
    ("GPUs", lambda fp: ", ".join(fp.gpu_names) or None),
)


@dataclass
class Diff:
    regressions: list[str] = field(default_factory=list)
    improvements: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    fingerprint: list[str] = field(default_factory=list)
    unchanged: int = 0

    @property
    def regressed(self) -> bool:
        return bool(self.regressions or self.missing)


def _status(record: CellRecord) -> str:
    return record.status or "missing"


def diff(base: RunData, new: RunData, threshold: float = 0.10) -> Diff:
    """Pure comparison; `threshold` is the relative busbw drop (or gain) that counts."""
    d = Diff()
    for cell_id in sorted(set(base.records) | set(new.records)):
        old, cur = base.records.get(cell_id), new.records.get(cell_id)
        if old is None:
            d.added.append(f"`{cell_id}`: {_status(cur)}")
            continue
        if cur is None:
            d.missing.append(f"`{cell_id}` (was {_status(old)})")
            continue
        a, b = _status(old), _status(cur)
        changed = False
        if a != b:
            line = f"`{cell_id}`: {a} → {b}" + (f" ({esc(cur.reason or '')})" if b not in GOOD else "")
            (d.improvements if b in GOOD and a not in GOOD else d.regressions).append(line)
            changed = True
        elif a == "pass":
            before, after = old.busbw_at(None), cur.busbw_at(None)
            if before and after and before[0] == after[0] and before[1] > 0:
                change = (after[1] - before[1]) / before[1]
                if abs(change) > threshold:
                    line = (f"`{cell_id}`: busbw {before[1]:.2f} → {after[1]:.2f} GB/s at {size_label(after[0])} "
                            f"({change:+.0%})")
                    (d.regressions if change < 0 else d.improvements).append(line)
                    changed = True
        if changed:
            facts = _fingerprint_changes(old, cur)
            if facts:
                d.fingerprint.append(f"`{cell_id}`: {facts}")
        else:
            d.unchanged += 1
    driver_a, driver_b = base.facts.driver, new.facts.driver
    if driver_a != driver_b:
        d.fingerprint.insert(0, f"host driver: {driver_a} → {driver_b}")
    return d


def _fingerprint_changes(old: CellRecord, cur: CellRecord) -> str:
    fa, fb = old.fingerprint, cur.fingerprint
    parts = []
    for name, get in FINGERPRINT_FACTS:
        x, y = get(fa) if fa else None, get(fb) if fb else None
        if x != y and (x or y):
            parts.append(f"{name} {x} → {y}")
    if not parts and old.nccl_label != cur.nccl_label:
        parts.append(f"NCCL {old.nccl_label} → {cur.nccl_label}")
    return "; ".join(parts)


def render(base: RunData, new: RunData, d: Diff, threshold: float) -> str:
    lines = [f"# Compare `{base.run_id}` → `{new.run_id}`", "",
             f"Busbw changes count beyond {threshold:.0%}. "
             + ("**Regressed.**" if d.regressed else "Nothing regressed."), ""]
    for title, items in (("Regressions", d.regressions), ("Missing cells", d.missing),
                         ("Improvements", d.improvements), ("Added cells", d.added),
                         ("Fingerprint differences", d.fingerprint)):
        if items:
            lines += [f"## {title}", ""] + [f"- {item}" for item in items] + [""]
    lines.append(f"{d.unchanged} cell(s) unchanged.")
    return "\n".join(lines) + "\n"
