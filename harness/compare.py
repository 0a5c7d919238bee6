"""Two runs side by side, keyed by cell id: what got worse, what got better, and the fingerprint
differences that explain it (driver, NCCL as loaded). This is the before/after-a-driver-upgrade view."""

from __future__ import annotations

from dataclasses import dataclass, field

from .report import busbw_at, esc, fingerprint, nccl_label, size_label
from .results import RunData

GOOD = ("pass", "n/a")
FINGERPRINT_FACTS = (
    ("driver", lambda fp: (fp.get("driver") or {}).get("version")),
    ("NCCL loaded", lambda fp: (fp.get("nccl_loaded") or {}).get("version")),
    ("torch", lambda fp: fp.get("torch")),
    ("Accelerate", lambda fp: fp.get("accelerate")),
    ("GPUs", lambda fp: ", ".join(g.get("name", "?") for g in fp.get("gpus") or []) or None),
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


def _status(record: dict) -> str:
    return record.get("outcome", {}).get("status", "missing")


def _host_driver(data: RunData) -> str | None:
    host = data.run.get("host")
    return host.get("driver") if isinstance(host, dict) else None


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
            line = f"`{cell_id}`: {a} → {b}" + (f" ({esc(cur['outcome'].get('reason', ''))})" if b not in GOOD else "")
            (d.improvements if b in GOOD and a not in GOOD else d.regressions).append(line)
            changed = True
        elif a == "pass":
            before, after = busbw_at(old, None), busbw_at(cur, None)
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
    driver_a, driver_b = _host_driver(base), _host_driver(new)
    if driver_a != driver_b:
        d.fingerprint.insert(0, f"host driver: {driver_a} → {driver_b}")
    return d


def _fingerprint_changes(old: dict, cur: dict) -> str:
    fa, fb = fingerprint(old), fingerprint(cur)
    parts = []
    for name, get in FINGERPRINT_FACTS:
        x, y = get(fa) if fa else None, get(fb) if fb else None
        if x != y and (x or y):
            parts.append(f"{name} {x} → {y}")
    if not parts and nccl_label(old) != nccl_label(cur):
        parts.append(f"NCCL {nccl_label(old)} → {nccl_label(cur)}")
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
