"""The evidence of one attempt, typed: one frozen model per concept (a rank's state, the stall, a
rank's NCCL log summary, the forensics, the attempt; the phases' payloads are in payloads.py), built by
the supervisor and read by classify, hints, report and compare as the same values. JSON appears only at
the file edge, through harness/codec.py: `RawAttempt.read` (strict, for what the harness wrote),
`Model.tolerant` (for what a rank wrote: a part of the wrong shape is left out, never the record),
`to_json` (the writer). Each model declares its fields once, with their bounds."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, model_validator

from .codec import Count, Flag, Model, RecordError, Seconds, Str, Text, ints, nums, one_of
from .flight import FlightDump
from .kinds import ATTEMPT_KINDS, ENDED_BY, STARTUP, AttemptKind, EndedBy
from .payloads import (
    MAX_BYTES,
    MAX_GBS,
    MAX_SECONDS,
    BandwidthRow,
    Bytes,
    Duration,
    EnvChange,
    Envelope,
    Fingerprint,
    GBs,
    P2pCheck,
    PeerAccess,
    PhaseEnd,
    RankNo,
    Wall,
    Written,
    ranges_apart,
)

__all__ = ["RecordError", "EnvChange", "PeerAccess", "Fingerprint", "BandwidthRow", "ranges_apart", "NcclSummary",
           "Event", "RankError", "Placement", "RankResult", "RankState", "PhaseEnd", "Forensics", "Stall", "RawAttempt",
           "MAX_BYTES", "MAX_GBS", "MAX_SECONDS"]


# ---------------------------------------------------------------- one rank (supervise.py)
class Event(Model):
    """A well-formed event line of a rank (workload/events.py): the fields the supervisor reads have
    their types (a dict `phase` crashed the supervisor with a TypeError, issue 14); the rest is the
    event's payload, read where it is used (PhaseEnd, RankResult, Placement)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    event: Str
    phase: Str | None = None
    source: Str | None = None
    pid: Annotated[int, ints()] | None = None
    seconds: Annotated[float, nums(low=-math.inf)] | None = None
    wall: Annotated[float, nums(low=-math.inf)] | None = None
    error_class: Str | None = None
    type: Str | None = None
    message: Text | None = None
    status: Str | None = None


class RankError(Model):
    """The error a rank recorded itself (the workload's error event, slimmed)."""

    phase: Str | None = None
    error_class: Str | None = None
    type: Str | None = None
    message: Text | None = None
    wall: Wall | None = None


class Placement(Model):
    """Where a rank ran, as its start event says (workload/main.placement); records from before it have none."""

    OMIT_DEFAULT: ClassVar[frozenset[str]] = frozenset({"node", "gpu", "job_id", "step", "cpus"})  # what it said
    node: Str | None = None
    gpu: Str | None = None  # the CUDA_VISIBLE_DEVICES entry of its local rank; None on CPU
    job_id: Str | None = None  # Slurm's job and step, where it ran in one
    step: Str | None = None
    cpus: Str | None = None  # the CPUs it may run on (its affinity), as taskset writes them: "0-7,16-23"


class RankResult(Envelope):
    """The workload's result event, the last a rank writes."""

    status: Str | None = None
    phases_done: tuple[Str, ...] | None = None
    exit_code: Annotated[int, ints(-255, 255)] | None = None
    wrong_total: Count | None = None
    largest_bytes: Bytes | None = None
    largest_busbw_gbs: GBs | None = None
    largest_algbw_gbs: GBs | None = None


class RankState(Model):
    """How far one rank got, as its event file says: what the supervisor follows while the attempt
    runs (RankState.after each event) and what the record keeps."""

    OMIT_DEFAULT: ClassVar[frozenset[str]] = frozenset({"placement", "malformed_events"})
    phase: Str | None = None  # the phase it is in, or last finished
    in_phase: Flag = False
    phases_done: tuple[Str, ...] = ()
    pid: Count | None = None
    events: Count = 0
    error: RankError | None = None
    result: RankResult | None = None
    placement: Placement | None = None
    malformed_events: Count = 0  # event lines that were not well-formed events (skipped, never fatal)

    @property
    def finished(self) -> bool:
        return self.result is not None

    @property
    def node(self) -> str | None:
        return self.placement.node if self.placement else None

    @property
    def wrong_total(self) -> int:
        return (self.result.wrong_total if self.result else None) or 0

    @property
    def largest_busbw_gbs(self) -> float:
        return (self.result.largest_busbw_gbs if self.result else None) or 0.0


# ---------------------------------------------------------------- NCCL's own log (nccl_log.py)
class NcclSummary(Model):
    """What one rank's NCCL_DEBUG log says (nccl_log.NcclLog.summary, as the supervisor recorded it)."""

    version: Str | None = None
    transports: dict[str, Count] = {}  # transport kind -> connections
    p2p_disabled: tuple[Text, ...] = ()
    env: dict[str, Text] = {}  # NCCL_* settings NCCL reported reading
    warnings: tuple[Text, ...] = ()
    errors: tuple[Text, ...] = ()
    init_complete: Flag = False

    @model_validator(mode="before")
    @classmethod
    def _older(cls, data: Any) -> Any:
        """Older records listed the kinds, or every connection (nccl_log.Connection, with its kind): counted."""
        if isinstance(data, Mapping) and isinstance(data.get("transports"), list):
            kinds = [t if isinstance(t, str) else t.get("kind") if isinstance(t, Mapping) else None
                     for t in data["transports"]]
            counts = Counter(k for k in kinds if isinstance(k, str))
            return {**data, "transports": {k: counts[k] if not all(isinstance(t, str) for t in data["transports"]) else 0
                                           for k in counts}}
        return data

    @property
    def transport_kinds(self) -> tuple[str, ...]:
        return tuple(self.transports)


# ---------------------------------------------------------------- a hang (supervise.Watch)
class Stall(Model):
    """Why the supervisor declared a hang: the phase awaited, its threshold, the ranks behind and why."""

    OMIT_DEFAULT: ClassVar[frozenset[str]] = frozenset({"step"})

    phase: Str = STARTUP
    threshold: Seconds = 0.0
    since_progress: Seconds = 0.0
    ranks_behind: tuple[RankNo, ...] = ()
    why_behind: dict[int, Text] = {}
    cap: Flag = False  # the cell's hard cap, not a phase threshold
    step: Str | None = None  # where in the phase the last progress was: "all_gather at 1 MiB" (the sweep)
    # ranks behind whose process had already exited when the supervisor looked (Running.gone): they died,
    # and the launcher had not yet noticed; not a hang
    gone: tuple[RankNo, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _rank_keys(cls, data: Any) -> Any:
        """why_behind's keys are ranks: JSON writes them as strings of digits."""
        if isinstance(data, Mapping) and isinstance(data.get("why_behind"), Mapping):
            why = data["why_behind"]
            if all((isinstance(k, int) and not isinstance(k, bool)) or (isinstance(k, str) and k.isdigit()) for k in why):
                return {**data, "why_behind": {int(k): v for k, v in why.items()}}
        return data


class Forensics(Written):
    """What the supervisor gathered before killing a hung attempt (supervise.collect_forensics)."""

    processes: Text | None = None
    pids: dict[str, Count] | None = None
    stacks: dict[str, Text] | None = None  # faulthandler's dump per rank
    py_spy: dict[str, Text] | None = None  # py-spy's per rank
    nccl_tail: dict[str, Text] | None = None  # the end of each rank's NCCL log
    native: dict[str, Text] | None = None  # every thread's native stack per rank (eu-stack or gdb)
    flight: dict[str, FlightDump] | None = None  # torch's flight recorder per rank that answered
    ras: Text | None = None  # NCCL's RAS service's STATUS report, where one answered


# ---------------------------------------------------------------- one attempt
class RawAttempt(Model):
    """The raw record of one attempt (supervise.supervise): everything classification and reports need."""

    OMIT_DEFAULT: ClassVar[frozenset[str]] = frozenset({"inherited_env", "kind", "unreadable"})
    cell_id: Text = ""
    engine: Text = ""
    attempt: Count = 0
    expected_ranks: Count = 0
    ended_by: Annotated[EndedBy | Literal[""], one_of(("", *ENDED_BY))] = ""  # "" until the attempt ends
    exit_code: Annotated[int, ints()] | None = None
    seconds: Duration = 0.0
    started_wall: Wall = 0.0
    infra_reason: Text = ""
    stall: Stall | None = None  # for hangs
    ranks: dict[str, RankState] = {}  # by rank ("0", "1", ...)
    phases: dict[str, PhaseEnd] = {}  # rank 0's phase_end events (fingerprint, bandwidth...)
    launcher_tail: Text = ""
    forensics: Forensics = Forensics()
    leftovers: list[Text] = []  # what of the attempt still existed after its cleanup (none, when all is well)
    out_dir: Text = ""
    # seconds from the last progress event to the end of the attempt (hang verdicts: stall
    # threshold + detection delay + forensics + kill); what bench/hang_latency.py measures.
    verdict_after_progress: Duration = 0.0
    nccl: dict[str, NcclSummary] = {}  # per rank: what its NCCL_DEBUG log says
    # the NCCL_/TORCH_/CUDA_/ACCELERATE_ variables the launcher started with (host or image; CellSpec)
    # (None: an older record, which did not keep it)
    inherited_env: dict[str, Text] | None = None
    # the cell's own workload, or the NCCL-only control run for it (issue 16: evidence, not the verdict)
    kind: Annotated[AttemptKind, one_of(ATTEMPT_KINDS)] = "cell"
    # parts of what the ranks wrote that did not fit their declaration, left out with why (at most 20)
    unreadable: tuple[Text, ...] = ()

    @classmethod
    def from_json(cls, data: Any, where: str = "raw") -> RawAttempt:
        """Read strictly (None: an attempt that recorded nothing); RecordError naming what does not fit."""
        return cls() if data is None else cls.read(data, where)

    # views for readers -------------------------------------------------
    @property
    def fingerprint(self) -> Fingerprint:
        phase = self.phases.get("fingerprint")
        return (phase.fingerprint if phase else None) or Fingerprint()

    @property
    def bandwidth_rows(self) -> tuple[BandwidthRow, ...]:
        phase = self.phases.get("nccl-allreduce" if self.kind == "control" else "bandwidth")
        return (phase.rows if phase else None) or ()

    @property
    def collective_rows(self) -> dict[str, tuple[BandwidthRow, ...]]:
        """Every collective's sweep by name, all-reduce's first (older records: all-reduce's alone)."""
        phase = self.phases.get("bandwidth") if self.kind != "control" else None
        others = {name: sweep.rows for name, sweep in ((phase.collectives if phase else None) or {}).items()}
        return {"all_reduce": self.bandwidth_rows, **{k: v for k, v in others.items() if k != "all_reduce"}}

    @property
    def p2p_check(self) -> P2pCheck:
        """The check phase's IPC peer check (empty where it did not run: CPU, one rank, older records)."""
        phase = self.phases.get("check")
        return (phase.p2p_ipc if phase else None) or P2pCheck()

    @property
    def phase_timings(self) -> dict[str, float]:
        """Seconds of every phase rank 0 finished, in order."""
        return {p: v.seconds or 0.0 for p, v in self.phases.items()}

    @property
    def transports(self) -> tuple[str, ...]:
        """Transport kinds NCCL used, over every rank's log (empty for gloo and for one rank)."""
        return tuple(dict.fromkeys(k for log in self.nccl.values() for k in log.transport_kinds))

    @property
    def loaded_nccl(self) -> str | None:
        """The NCCL version the ranks really loaded (fingerprint), else what NCCL's own log says."""
        return self.fingerprint.nccl_loaded or next((s.version for s in self.nccl.values() if s.version), None)

    @property
    def rank_states(self) -> dict[int, RankState]:
        return {int(r): s for r, s in self.ranks.items() if r.isdigit()}

    @property
    def nodes(self) -> dict[str, tuple[int, ...]]:
        """The nodes the ranks ran on (their start events), each with its ranks; {} before placements were recorded."""
        found: dict[str, list[int]] = {}
        for rank, state in sorted(self.rank_states.items()):
            if state.node:
                found.setdefault(state.node, []).append(rank)
        return {node: tuple(ranks) for node, ranks in found.items()}

    @property
    def harness_env(self) -> dict[str, Any]:
        """The variables the workload set itself before init (NCCL_DEBUG..., async error handling)."""
        init = self.phases.get("init")
        return dict((init.env_set if init else None) or {})

    @property
    def nccl_tails(self) -> tuple[str, ...]:
        """The NCCL log tails the forensics kept (hangs)."""
        return tuple(t for t in (self.forensics.nccl_tail or {}).values() if t)

    @property
    def thread_dumps(self) -> tuple[str, ...]:
        """The thread dumps the forensics kept (hangs): faulthandler's per rank, then py-spy's."""
        dumps = [*(self.forensics.stacks or {}).values(), *(self.forensics.py_spy or {}).values()]
        return tuple(t for t in dumps if t)
