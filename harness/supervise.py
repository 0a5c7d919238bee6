"""Run one cell under supervision: start it through an engine, follow every rank's event file, declare
a hang when progress stops for longer than the phase's threshold (or the cell's hard cap passes),
collect forensics before killing, and always leave nothing behind.

The in-process timeouts of torch and Accelerate do not cover communicator init or the first barrier,
so this layer is the one that must never fail: it only reads files and kills from outside.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from . import nccl_log, rankfiles, results
from .engines.base import LAUNCHER_LOG, CellSpec, Engine, Running
from .errors import InfraError, WriteError
from .evidence import Event, Forensics, Placement, RankError, RankResult, RankState, RawAttempt, Stall
from .flight import FlightDump
from .kinds import CONTROL_THRESHOLDS, STARTUP, EndedBy, phase_index
from .kinds import WORKLOAD_PHASES as PHASES
from .matrixfile import Timeouts
from .payloads import PhaseEnd, size_label
from .workload.flight import REQUEST as FLIGHT_REQUEST

__all__ = ["PHASES", "STARTUP", "RawAttempt", "Stall", "EventTail", "Tracker", "Watch", "advance",
           "collect_forensics", "supervise", "phase_index"]
POLL_S = 0.1
HEARTBEAT_S = 2.0  # the workload's default interval
STACK_DUMP_WAIT_S = 1.0
PY_SPY_WAIT_S = 10.0
RAS_KEPT = 64 << 10  # NCCL's RAS status, its end: a job of thousands of ranks writes more
DUMP_KEPT = 512 << 10  # a rank's py-spy or native dump, its start: a rank of thousands of threads writes more
FLIGHT_BYTES = 1 << 20  # 24 entries of a few hundred bytes each


def well_formed(event: Any) -> bool:
    """A JSON object whose known fields have their types (evidence.Event; bool is not a number here)."""
    if not isinstance(event, dict):
        return False
    try:
        Event.model_validate(event)
    except ValidationError:
        return False
    return True


# An event line is a few KB (the fingerprint, with its environment and peer table, the largest: 30 KB on 8
# H200s); a longer one is not an event. Issue 22: one 600 MB line without a newline took the harness to
# 2.3 GB. And one read takes at most EVENTS_PER_READ of a file, so a rank that floods its events cannot keep
# the supervisor from its other work (the rest is read on the next poll).
MAX_EVENT_LINE = 4 << 20
EVENTS_PER_READ = 16 << 20


class EventTail:
    """Reads the complete JSON lines appended to a rank's event file since the last call: a torn last
    line (a rank killed mid-write, a full disk) waits for its end, and is never parsed without it; a
    line that is not a well-formed event, or longer than MAX_EVENT_LINE, is counted in `malformed` and
    skipped. The file is read as rankfiles reads: a link, a device or a hard link in its place is not read."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.malformed = path, 0, 0
        self.lines = rankfiles.Lines(MAX_EVENT_LINE)  # a torn last line waits in lines.partial for its end

    def read(self, whole: bool = False) -> list[dict[str, Any]]:
        """The new events; at most EVENTS_PER_READ of the file unless `whole` (the last read, after the
        ranks ended: all that they wrote, still in pieces)."""
        try:
            fd = rankfiles.open_regular(self.path)
        except OSError:
            return []
        events: list[dict[str, Any]] = []
        try:
            os.lseek(fd, self.offset, os.SEEK_SET)
            left = os.fstat(fd).st_size - self.offset if whole else EVENTS_PER_READ
            while left > 0:
                data = os.read(fd, min(left, rankfiles.PIECE))
                if not data:
                    break
                left -= len(data)
                self.offset += len(data)
                events += self._events(data)
        except OSError:
            pass
        finally:
            os.close(fd)
        return events

    def _events(self, data: bytes) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for line, cut in self.lines.feed(data):
            event: Any = None
            try:
                event = None if cut else json.loads(line)
            except (ValueError, RecursionError):
                pass
            if well_formed(event):
                events.append(event)
            elif line.strip():
                self.malformed += 1
        return events


# The launcher's output, where the engine writes it into the attempt folder (host, slurm), is cut to
# rankfiles.LOG_CAP this often (and once at the end): at 1 GB/s (a rank printing in a loop) it grows 0.5 GB
# between two looks.
LOG_CAP_EVERY_S = 0.5

MAX_UNREADABLE = 20  # parts of what the ranks wrote that were left out, said in the record


def advance(state: RankState, event: Mapping[str, Any], unreadable: list[str]) -> RankState:
    """A rank's state after one of its well-formed events (pure); what did not fit is said in `unreadable`."""
    kind = event.get("event")
    change: dict[str, Any] = {"events": state.events + 1}
    if isinstance(event.get("pid"), int):
        change["pid"] = event["pid"]
    if kind == "start" and isinstance(event.get("placement"), Mapping):
        placement = Placement.tolerant(event["placement"], unreadable, "start.placement")
        if placement != Placement():
            change["placement"] = placement
    elif kind == "phase_start":
        change |= {"phase": event.get("phase"), "in_phase": True}
    elif kind == "phase_end":
        change |= {"in_phase": False, "phases_done": (*state.phases_done, event.get("phase") or "")}
    elif kind == "error":
        change["error"] = RankError(**{k: event.get(k) for k in RankError.model_fields})
    elif kind == "result":
        change["result"] = RankResult.tolerant(event, unreadable, "result")
    return state.model_copy(update=change)


@dataclass
class Tracker:
    """One rank as the supervisor follows it: its state (evidence.RankState), when it last made
    progress and last beat (host monotonic clock), and its phase_end events."""

    rank: int
    state: RankState = field(default_factory=RankState)
    last_progress: float = 0.0
    last_beat: float = 0.0
    phase_ends: dict[str, PhaseEnd] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    step: str | None = None  # where in its phase it last made progress ("all_gather at 1 MiB"), where it says

    def feed(self, event: Mapping[str, Any], now: float) -> None:
        self.last_beat = now
        self.state = advance(self.state, event, self.unreadable)
        if event.get("event") == "heartbeat" and event.get("source") != "main":
            return  # alive, but not progress: a rank stuck in a collective keeps beating
        self.last_progress = now
        if event.get("event") == "phase_start":
            self.step = None
        elif event.get("event") == "heartbeat" and isinstance(event.get("collective"), str):
            size = event.get("bytes")  # the sweep's progress: which collective, which size
            self.step = str(event["collective"]) + (f" at {size_label(size)}" if isinstance(size, int) and size > 0 else "")
        if event.get("event") == "phase_end":
            self.phase_ends[str(event.get("phase"))] = PhaseEnd.tolerant(event, self.unreadable,
                                                                         f"rank {self.rank} {event.get('phase')}")

    @property
    def phase(self) -> str | None:
        return self.state.phase

    @property
    def pid(self) -> int | None:
        return self.state.pid

    @property
    def finished(self) -> bool:
        return self.state.finished


class Watch:
    """What the event files say about the cell, and whether it has stalled. No I/O, no clock."""

    def __init__(self, ranks: int, timeouts: Timeouts, started: float, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.ranks, self.timeouts, self.started, self.heartbeat_s = ranks, timeouts, started, heartbeat_s
        self.states: dict[int, Tracker] = {}

    def feed(self, rank: int, event: Mapping[str, Any], now: float) -> None:
        self.states.setdefault(rank, Tracker(rank)).feed(event, now)

    def phase(self) -> str:
        """The phase of the most advanced rank: where the others are awaited."""
        best = max(self.states.values(), key=lambda s: phase_index(s.phase), default=None)
        return best.phase if best is not None and best.phase else STARTUP

    def all_finished(self) -> bool:
        return len(self.states) == self.ranks and all(s.finished for s in self.states.values())

    def threshold(self, phase: str) -> float:
        phase = CONTROL_THRESHOLDS.get(phase, phase)
        return self.timeouts.of(phase if phase in PHASES else "fingerprint")

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
            return Stall(phase=phase, threshold=self.timeouts.cell, since_progress=now - self.last_progress(),
                         ranks_behind=tuple(behind), why_behind=behind, cap=True)
        if self.all_finished():
            phase = "teardown"  # every rank reported; waiting for the launcher to exit
        threshold = self.threshold(phase)
        since = now - self.last_progress()
        if since <= threshold:
            return None
        behind = self.behind(now)
        # where the rank that progressed last was: the collective and size a sweep hangs in
        last = max((s for s in self.states.values() if s.phase == phase), key=lambda s: s.last_progress, default=None)
        return Stall(phase=phase, threshold=threshold, since_progress=since, ranks_behind=tuple(behind), why_behind=behind,
                     step=last.step if last else None)

    def last_progress(self) -> float:
        return max((s.last_progress for s in self.states.values()), default=self.started)


def _pids(out: Path) -> dict[int, int]:
    pids = {}
    for path in out.glob("pid-rank*"):
        try:
            pids[int(path.name[len("pid-rank"):])] = int(rankfiles.text(path, 64).strip())
        except (ValueError, OSError):
            continue
    return pids


def _flight(out: Path, ranks: int) -> dict[str, FlightDump]:
    """The flight records the ranks wrote at the request (workload/flight.py), read as theirs."""
    found = {}
    for rank in range(ranks):
        path = out / f"flight-rank{rank}.json"
        if path.exists():
            try:
                found[str(rank)] = FlightDump.tolerant(json.loads(rankfiles.head(path, FLIGHT_BYTES)))
            except (OSError, ValueError, RecursionError):
                continue
    return found


def collect_forensics(running: Running, out: Path, ranks: int) -> Forensics:
    """Before the kill: every rank's threads (faulthandler via SIGUSR1), its flight record (which
    collective it was in), every thread's native stack and py-spy's, NCCL log tails, processes."""
    try:
        (out / FLIGHT_REQUEST).touch()  # each rank's flight server answers within 0.1 s
    except OSError:
        pass
    processes = running.process_list()
    pids = _pids(out)
    started = time.monotonic()
    elsewhere = running.dump_ranks(pids)  # ranks on other machines (slurm): dumped where they run
    for pid in pids.values() if elsewhere is None else ():
        try:
            running.signal(pid, "USR1")
        except Exception:  # noqa: BLE001 - forensics must never stop the kill
            pass
    spied: dict[str, str] = dict(elsewhere.py_spy) if elsewhere else {}
    native: dict[str, str] = dict(elsewhere.native) if elsewhere else {}

    def dumps(rank: int, pid: int) -> None:
        for into, take in ((spied, running.native_dump), (native, running.native_stacks)):
            try:
                dump = take(pid)
            except Exception as exc:  # noqa: BLE001
                dump = f"(failed: {exc})"
            if dump:
                into[str(rank)] = dump[:DUMP_KEPT]

    ras: list[str] = [elsewhere.ras] if elsewhere else []

    def ask_ras() -> None:
        try:
            ras.append(running.nccl_ras())
        except Exception:  # noqa: BLE001
            pass

    threads = [threading.Thread(target=dumps, args=item, daemon=True) for item in pids.items() if elsewhere is None]
    threads += [threading.Thread(target=ask_ras, daemon=True)] if elsewhere is None else []
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
    forensics = Forensics(processes=processes, pids={str(k): v for k, v in pids.items()}, stacks=stacks,
                          py_spy=dict(spied), nccl_tail=nccl, flight=_flight(out, ranks),
                          **({"native": dict(native)} if native else {}),
                          **({"ras": ras[0][-RAS_KEPT:]} if ras and ras[0] else {}))
    results.write_json(out / "forensics.json", forensics.to_json())
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
    return stall.model_copy(update={"gone": tuple(sorted(gone)),
                                    "why_behind": {**stall.why_behind, **{rank: GONE for rank in gone}}})


def supervise(
    engine: Engine,
    spec: CellSpec,
    timeouts: Timeouts,
    on_event: Callable[[int, dict[str, Any]], None] = lambda rank, event: None,
    on_start: Callable[[Running], None] = lambda running: None,
) -> RawAttempt:
    """Run one attempt of one cell to its end (exit, stall, cap or Ctrl-C); never leaves it running.
    `on_start` gets the running cell (tests and benchmarks signal its ranks through it)."""
    out = spec.out_dir
    results.make_dir(out)
    started = time.monotonic()
    started_wall = time.time()
    watch = Watch(spec.launch.ranks, timeouts, started)
    tails: dict[int, EventTail] = {}
    ended_by: EndedBy | Literal[""] = ""
    exit_code: int | None = None
    stall: Stall | None = None
    forensics = Forensics()
    launcher_tail, infra_reason, leftovers = "", "", list[str]()
    capped = started

    def drain(now: float, whole: bool = False) -> None:
        for path in out.glob("events-rank*.jsonl"):
            if not path.stem[len("events-rank"):].isdigit():
                continue
            rank = int(path.stem[len("events-rank"):])
            tail = tails.setdefault(rank, EventTail(path))
            for event in tail.read(whole):
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
                        drain(time.monotonic(), whole=True)
                        ended_by, exit_code = "exited", code
                        break
                    if now - capped > LOG_CAP_EVERY_S:
                        rankfiles.cap(out / LAUNCHER_LOG)
                        capped = now
                    stalled = watch.stalled(now)
                    if stalled is not None:
                        ended_by = "cap" if stalled.cap else "stall"
                        forensics = collect_forensics(running, out, spec.launch.ranks)
                        stall = with_gone(stalled, running, out)
                        break
                    time.sleep(POLL_S)
            except KeyboardInterrupt:
                ended_by = "interrupted"
            rankfiles.cap(out / LAUNCHER_LOG)
            launcher_tail = running.output_tail()
            if ended_by != "exited":
                running.kill()
        leftovers = running.leftovers()
    except WriteError:
        raise  # the results folder failed: the run stops (pipeline), nothing more can be recorded
    except InfraError as exc:
        ended_by, infra_reason = "infra", str(exc)
    ranks = {str(r): t.state.model_copy(update={"malformed_events": tails[r].malformed})
             if r in tails and tails[r].malformed else t.state for r, t in sorted(watch.states.items())}
    lead = watch.states.get(0)
    unreadable = [text for t in watch.states.values() for text in t.unreadable][:MAX_UNREADABLE]
    record = RawAttempt(
        cell_id=spec.cell_id, engine=engine.name, attempt=spec.attempt, expected_ranks=spec.launch.ranks,
        ended_by=ended_by, exit_code=exit_code, seconds=time.monotonic() - started, started_wall=started_wall,
        infra_reason=infra_reason, stall=stall, ranks=ranks, phases=lead.phase_ends if lead else {},
        launcher_tail=launcher_tail, forensics=forensics, leftovers=leftovers, out_dir=str(out),
        verdict_after_progress=time.monotonic() - watch.last_progress(),
        nccl={path.stem[len("nccl-rank"):]: nccl_log.parse_file(path).summary()
              for path in sorted(out.glob("nccl-rank*.log"))},
        inherited_env=dict(spec.inherited_env), kind=spec.kind, unreadable=tuple(unreadable))
    results.write_json(out / "attempt.json", record.to_json())
    return record
