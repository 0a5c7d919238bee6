"""Which collective each rank was in when a cell hung: torch's flight recorder, as each rank dumped it at
the supervisor's request (workload/flight.py), typed, and the pure reading of it (issue 24 item 1).

The reading compares the ranks on one process group: the newest collective any rank entered is the one
the cell is stuck in; a rank whose newest is older never entered it, and the ranks at it wait in it (it
cannot complete without the others). Where every rank is at it, NCCL's record says whether it completed;
gloo's says nothing of that (its entries stay "scheduled", seen on torch 2.13). A rank that wrote
nothing (stopped, gone, or a torch without the recorder) is said so, never guessed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .codec import Count, Str, Text
from .payloads import Written

KEPT_ENTRIES = 64


class FlightEntry(Written):
    """One collective as torch recorded it."""

    op: Str = "?"  # torch's profiling name: "nccl:all_reduce", "gloo:broadcast"
    seq: Count = 0  # collective_seq_id within its process group
    p2p_seq: Count = 0
    group: Str = "?"
    state: Str = "?"  # scheduled, started, completed (gloo's stay scheduled)
    input_sizes: tuple[tuple[Count, ...], ...] = ()
    output_sizes: tuple[tuple[Count, ...], ...] = ()

    def text(self) -> str:
        backend, _, name = self.op.partition(":")
        sizes = ", ".join("x".join(str(d) for d in shape) for shape in self.input_sizes)
        return f"{name or backend} #{self.seq}" + (f" ({backend}, input {sizes})" if name and sizes else "")


class FlightDump(Written):
    """What one rank's recorder held when the supervisor asked."""

    rank: Count | None = None
    torch: Str | None = None
    version: Str | None = None
    entries: tuple[FlightEntry, ...] = ()
    total: Count | None = None
    unavailable: Text | None = None  # why there is no record: torch without a recorder, a failed dump


def _group(dumps: Mapping[int, FlightDump]) -> str | None:
    """The group of the newest collective over every rank (the default group's name when it is that)."""
    newest = [e for d in dumps.values() for e in d.entries[-1:]]
    return max(newest, key=lambda e: e.seq).group if newest else None


@dataclass(frozen=True)
class Positions:
    """Where the ranks were: the line a verdict shows, and the ranks that never entered the collective
    the others are in (behind, though alive: their heartbeats go on, so the stall alone cannot tell)."""

    text: str | None
    behind: tuple[int, ...] = ()


def summary(dumps: Mapping[int, FlightDump], ranks: int, silent: Mapping[int, str] | None = None) -> str | None:
    """One line: "rank 1 never entered all_reduce #3 (its last: broadcast #2); rank 0 waits in it", each
    rank that wrote no record with why (`silent`: what the supervisor knows of it, e.g. "stopped")."""
    return read(dumps, ranks, silent).text


def read(dumps: Mapping[int, FlightDump], ranks: int, silent: Mapping[int, str] | None = None) -> Positions:
    """The ranks' positions on the process group of the newest collective (see summary)."""
    why = dict(silent or {})
    missing = [r for r in range(ranks) if r not in dumps or not dumps[r].entries]
    group = _group(dumps)
    last = {r: max((e for e in d.entries if e.group == group), key=lambda e: e.seq)
            for r, d in sorted(dumps.items()) if any(e.group == group for e in d.entries)}
    parts: list[str] = []
    behind: list[int] = []
    if last:
        lead = max(last.values(), key=lambda e: e.seq)
        at = sorted(r for r, e in last.items() if e.seq == lead.seq)
        done = [r for r in at if last[r].state == "completed"]
        behind = sorted(r for r, e in last.items() if e.seq < lead.seq)
        parts += [f"rank {r} never entered {lead.text()} (its last: {last[r].text()})" for r in behind]
        inside = [r for r in at if r not in done]
        if inside and not behind and lead.state == "scheduled" and lead.op.startswith("gloo:"):
            # gloo's entries stay "scheduled": done or not, the record cannot say (its native stack can)
            parts.append(f"{_ranks(inside)} last entered {lead.text()} (gloo records no completion)")
        elif inside:
            who = _ranks(inside)
            parts.append(f"{who} {'waits' if len(inside) == 1 else 'wait'} in "
                         + ("it" if behind else lead.text()))
        if done:
            parts.append(f"{_ranks(done)} completed {lead.text() if not inside and not behind else 'it'}")
    for r in missing:
        if r in dumps and not dumps[r].unavailable:
            parts.append(f"rank {r}'s flight record holds no collective yet" + (f" ({why[r]})" if why.get(r) else ""))
            continue
        reason = why.get(r) or (dumps[r].unavailable if r in dumps else None) or "no answer: stopped or gone"
        parts.append(f"rank {r} wrote no flight record ({reason})")
    return Positions("; ".join(parts) or None, tuple(behind))


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(str(r) for r in ranks)
