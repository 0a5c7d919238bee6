"""Run one cell under supervision: start it through an engine, follow every rank's event file, declare
a hang when progress stops for longer than the phase's threshold (or the cell's hard cap passes),
collect forensics before killing, and always leave nothing behind.

The in-process timeouts of torch and Accelerate do not cover communicator init or the first barrier,
so this layer is the one that must never fail: it only reads files and kills from outside.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from . import nccl_log, results
from .engines.base import CellSpec, Engine, Running
from .errors import InfraError, WriteError
from .matrix import Timeouts
from .kinds import CONTROL_THRESHOLDS, phase_index
from .record import STARTUP, Stall
from .record import WORKLOAD_PHASES as PHASES
from .record import RawAttempt as Attempt  # the raw record of one attempt, filled in here

__all__ = ["PHASES", "STARTUP", "Attempt", "Stall", "EventTail", "RankState", "Watch", "collect_forensics",
           "supervise", "phase_index"]
POLL_S = 0.1
HEARTBEAT_S = 2.0  # the workload's default interval
STACK_DUMP_WAIT_S = 1.0
PY_SPY_WAIT_S = 10.0


# The type of every event field the supervisor reads; an event with another type in one of them is
# malformed, dropped and counted (a dict `phase` crashed the supervisor with a TypeError, issue 14).
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "event": (str,), "phase": (str,), "source": (str,), "pid": (int,), "seconds": (int, float),
    "wall": (int, float), "error_class": (str,), "type": (str,), "message": (str,), "status": (str,),
}


def well_formed(event: Any) -> bool:
    """A JSON object whose known fields have their types (bool is not a number here)."""
    return isinstance(event, dict) and isinstance(event.get("event"), str) and all(
        isinstance(event[k], types) and not isinstance(event[k], bool)
        for k, types in FIELD_TYPES.items() if k in event and event[k] is not None)


class EventTail:
    """Reads the complete JSON lines appended to a rank's event file since the last call: a torn last
    line (a rank killed mid-write, a full disk) waits for its end, and is never parsed without it; a
    line that is not a well-formed event is counted in `malformed` and skipped."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial, self.malformed = path, 0, b"", 0

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        events = []
        for line in lines:
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                event = None
            if well_formed(event):
                events.append(event)
            elif line.strip():
                self.malformed += 1
        return events


@dataclass
class RankState:
    rank: int
    phase: str | None = None  # the phase it is in, or last finished
    in_phase: bool = False
    phases_done: list[str] = field(default_factory=list)
    pid: int | None = None
    last_progress: float = 0.0  # host monotonic clock
    last_beat: float = 0.0
    events: int = 0
    error: dict | None = None
    result: dict | None = None
    phase_ends: dict[str, dict] = field(default_factory=dict)
    placement: dict[str, str] = field(default_factory=dict)  # node, gpu, job_id, step (its start event)

    def feed(self, event: dict, now: float) -> None:
        kind = event.get("event")
        self.events += 1
        self.last_beat = now
        self.pid = event.get("pid", self.pid)
        if kind == "start" and isinstance(event.get("placement"), dict):
            self.placement = {k: v for k, v in event["placement"].items() if isinstance(v, str)}
        if kind == "heartbeat" and event.get("source") != "main":
            return  # alive, but not progress: a rank stuck in a collective keeps beating
        self.last_progress = now
        if kind == "phase_start":
            self.phase, self.in_phase = event.get("phase"), True
        elif kind == "phase_end":
            self.in_phase = False
            self.phases_done.append(event.get("phase"))
            self.phase_ends[event.get("phase")] = event
        elif kind == "error":
            self.error = event
        elif kind == "result":
            self.result = event

    @property
    def finished(self) -> bool:
        return self.result is not None

    def summary(self) -> dict:
        return {
            "phase": self.phase,
            "in_phase": self.in_phase,
            "phases_done": self.phases_done,
            "pid": self.pid,
            "events": self.events,
            "error": _slim_error(self.error),
            "result": self.result,
            **({"placement": self.placement} if self.placement else {}),
        }


def _slim_error(error: dict | None) -> dict | None:
    if error is None:
        return None
    return {k: error.get(k) for k in ("phase", "error_class", "type", "message", "wall")}


class Watch:
    """What the event files say about the cell, and whether it has stalled. No I/O, no clock."""

    def __init__(self, ranks: int, timeouts: Timeouts, started: float, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.ranks, self.timeouts, self.started, self.heartbeat_s = ranks, timeouts, started, heartbeat_s
        self.states: dict[int, RankState] = {}

    def feed(self, rank: int, event: dict, now: float) -> None:
        self.states.setdefault(rank, RankState(rank)).feed(event, now)

    def phase(self) -> str:
        """The phase of the most advanced rank: where the others are awaited."""
        best = max(self.states.values(), key=lambda s: phase_index(s.phase), default=None)
        return best.phase if best is not None and best.phase else STARTUP

    def all_finished(self) -> bool:
        return len(self.states) == self.ranks and all(s.finished for s in self.states.values())

    def threshold(self, phase: str) -> float:
        phase = CONTROL_THRESHOLDS.get(phase, phase)
        return getattr(self.timeouts, phase if phase in PHASES else "fingerprint")

    def behind(self, now: float) -> dict[int, str]:
        lead = phase_index(self.phase())
        stale_after = 1.5 * self.heartbeat_s  # a live rank beats every heartbeat_s, even when stuck
        why: dict[int, str] = {}
        for rank in range(self.ranks):
            state = self.states.get(rank)
            if state is None:
                why[rank] = "never started (no events)"
            elif state.finished:
                continue
            elif phase_index(state.phase) < lead:
                why[rank] = f"still in {state.phase or STARTUP}"
            elif now - state.last_beat > stale_after:
                why[rank] = f"silent for {now - state.last_beat:.0f}s (stopped or frozen)"
        return why

    def stalled(self, now: float) -> Stall | None:
        phase = self.phase()
        if now - self.started > self.timeouts.cell:
            behind = self.behind(now)
            return Stall(phase, self.timeouts.cell, now - self.last_progress(), tuple(behind), behind, cap=True)
        if self.all_finished():
            phase = "teardown"  # every rank reported; waiting for the launcher to exit
        threshold = self.threshold(phase)
        since = now - self.last_progress()
        if since <= threshold:
            return None
        behind = self.behind(now)
        return Stall(phase, threshold, since, tuple(behind), behind)

    def last_progress(self) -> float:
        return max((s.last_progress for s in self.states.values()), default=self.started)


def _pids(out: Path) -> dict[int, int]:
    pids = {}
    for path in out.glob("pid-rank*"):
        try:
            pids[int(path.name[len("pid-rank"):])] = int(path.read_text().strip())
        except ValueError:
            continue
    return pids


def collect_forensics(running: Running, out: Path, ranks: int) -> dict[str, Any]:
    """Before the kill: every rank's threads (faulthandler via SIGUSR1), NCCL log tails, processes."""
    processes = running.process_list()
    pids = _pids(out)
    started = time.monotonic()
    elsewhere = running.dump_ranks(pids)  # ranks on other machines (slurm): dumped where they run
    for pid in pids.values() if elsewhere is None else ():
        try:
            running.signal(pid, "USR1")
        except Exception:  # noqa: BLE001 - forensics must never stop the kill
            pass
    native: dict[str, str] = {}

    def py_spy(rank: int, pid: int) -> None:
        try:
            dump = running.native_dump(pid)
        except Exception as exc:  # noqa: BLE001
            dump = f"(py-spy failed: {exc})"
        if dump:
            native[str(rank)] = dump

    native.update(elsewhere or {})
    threads = [threading.Thread(target=py_spy, args=item, daemon=True) for item in pids.items() if elsewhere is None]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, PY_SPY_WAIT_S - (time.monotonic() - started)))
    time.sleep(max(0.0, STACK_DUMP_WAIT_S - (time.monotonic() - started)))
    stacks, nccl = {}, {}
    for rank in range(ranks):
        text = nccl_log.tail_file(out / f"stacks-rank{rank}.txt", 200)
        stacks[str(rank)] = text or "(no dump: the rank did not answer SIGUSR1; stopped or gone)"
        nccl[str(rank)] = nccl_log.tail_file(out / f"nccl-rank{rank}.log", 40)
    forensics = {"processes": processes, "pids": {str(k): v for k, v in pids.items()}, "stacks": stacks,
                 "py_spy": native, "nccl_tail": nccl}
    results.write_json(out / "forensics.json", forensics)
    return forensics


GONE = "gone: its process had exited (killed or crashed) and the launcher had not yet noticed"


def with_gone(stall: Stall, running: Running, out: Path) -> Stall:
    """The stall, with the ranks behind whose process has already exited marked gone: a rank killed
    while its launcher has not yet noticed (Slurm's job end, a launcher's slow monitor) is silent like a
    stopped one, but it died; outcome.classify calls that a fail, not a hang."""
    pids = {rank: pid for rank, pid in _pids(out).items() if rank in stall.ranks_behind}
    try:
        gone = running.gone(pids) if pids else set()
    except Exception:  # noqa: BLE001 - an engine that cannot tell leaves the stall as it is
        gone = set()
    if not gone:
        return stall
    return replace(stall, gone=tuple(sorted(gone)),
                   why_behind={**stall.why_behind, **{rank: GONE for rank in gone}})


def supervise(
    engine: Engine,
    spec: CellSpec,
    timeouts: Timeouts,
    on_event: Callable[[int, dict], None] = lambda rank, event: None,
    on_start: Callable[[Running], None] = lambda running: None,
) -> Attempt:
    """Run one attempt of one cell to its end (exit, stall, cap or Ctrl-C); never leaves it running.
    `on_start` gets the running cell (tests and benchmarks signal its ranks through it)."""
    out = spec.out_dir
    results.make_dir(out)
    record = Attempt(spec.cell_id, engine.name, spec.attempt, spec.launch.ranks, out_dir=str(out),
                     inherited_env=dict(spec.inherited_env), kind=spec.kind)
    started = time.monotonic()
    record.started_wall = time.time()
    watch = Watch(spec.launch.ranks, timeouts, started)
    tails: dict[int, EventTail] = {}

    def drain(now: float) -> None:
        for path in out.glob("events-rank*.jsonl"):
            if not path.stem[len("events-rank"):].isdigit():
                continue
            rank = int(path.stem[len("events-rank"):])
            tail = tails.setdefault(rank, EventTail(path))
            for event in tail.read():
                watch.feed(rank, event, now)
                on_event(rank, event)

    try:
        with engine.start(spec) as running:
            on_start(running)
            try:
                while True:
                    now = time.monotonic()
                    drain(now)
                    code = running.poll()
                    if code is not None:
                        drain(time.monotonic())
                        record.ended_by, record.exit_code = "exited", code
                        break
                    stall = watch.stalled(now)
                    if stall is not None:
                        record.ended_by = "cap" if stall.cap else "stall"
                        record.forensics = collect_forensics(running, out, spec.launch.ranks)
                        record.stall = with_gone(stall, running, out).to_json()
                        break
                    time.sleep(POLL_S)
            except KeyboardInterrupt:
                record.ended_by = "interrupted"
            record.launcher_tail = running.output_tail()
            if record.ended_by != "exited":
                running.kill()
        record.leftovers = running.leftovers()
    except WriteError:
        raise  # the results folder failed: the run stops (pipeline), nothing more can be recorded
    except InfraError as exc:
        record.ended_by, record.infra_reason = "infra", str(exc)
    record.seconds = time.monotonic() - started
    record.verdict_after_progress = time.monotonic() - watch.last_progress()
    record.ranks = {str(r): s.summary() for r, s in sorted(watch.states.items())}
    for rank, tail in tails.items():
        if tail.malformed and str(rank) in record.ranks:
            record.ranks[str(rank)]["malformed_events"] = tail.malformed  # noted, never fatal
    for path in sorted(out.glob("nccl-rank*.log")):
        log = nccl_log.parse_file(path)
        record.nccl[path.stem[len("nccl-rank"):]] = {
            "version": log.version, "transports": log.transport_summary, "p2p_disabled": list(log.p2p_disabled),
            "env": log.env_settings, "warnings": list(log.warnings)[:20], "errors": list(log.errors)[:20],
            "init_complete": log.init_complete,
        }
    lead = watch.states.get(0)
    if lead is not None:
        record.phases = lead.phase_ends
    results.write_json(out / "attempt.json", record.to_json())
    return record
