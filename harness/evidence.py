"""The evidence of one attempt, typed: one frozen model per concept (a rank's state, the stall, a
rank's NCCL log summary, the workload's phase payloads, the forensics, the attempt), built by the
supervisor and read by classify, hints, report and compare as the same values. JSON appears only at
the file edge, through harness/codec.py: `RawAttempt.read` (strict, for what the harness wrote),
`Model.tolerant` (for what a rank wrote: a part of the wrong shape is left out, never the record),
`to_json` (the writer). Each model declares its fields once, with their bounds.

What a rank writes (its events, the fingerprint, bandwidth rows) keeps the keys the rank wrote
(WRITTEN_ONLY) and unknown ones as written (extra="allow"); the harness reads only declared fields."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from .codec import Count, Flag, Json, Limit, Model, RecordError, Seconds, Str, Text, Verified, ints, invariant, nums, one_of
from .kinds import ATTEMPT_KINDS, ENDED_BY, STARTUP, AttemptKind, EndedBy

__all__ = ["RecordError", "EnvChange", "PeerAccess", "Fingerprint", "BandwidthRow", "ranges_apart", "NcclSummary",
           "Event", "RankError", "Placement", "RankResult", "RankState", "PhaseEnd", "Forensics", "Stall", "RawAttempt",
           "MAX_BYTES", "MAX_GBS", "MAX_SECONDS"]

# The largest figures a real attempt can hold; beyond them a record was damaged, not measured. The
# fastest busbw measured here is 341 GB/s (2x H200 over NVLink, docs/benchmarks.md) and the workload's
# sizes fit in one GPU's memory (141 GB on an H200): a thousand times either is no measurement. A
# one-rank all-reduce communicates nothing, and its "algbw" (about 1.2 million GB/s on an H200) is no
# bandwidth: the tolerant reader leaves such a figure out, so the record stays readable.
MAX_BYTES = 1 << 47  # 128 TiB
MAX_GBS = 1e6
MAX_SECONDS = 1e7  # four months: past any cell's hard cap

Bytes = Annotated[int, ints(1, MAX_BYTES)]
GBs = Annotated[float, nums(MAX_GBS)]
Duration = Annotated[float, nums(MAX_SECONDS)]
RankNo = Annotated[int, ints(0, 1 << 16)]
Wall = Annotated[float, nums()]  # a time.time() stamp


class _Written(Model):
    """What a rank wrote: the keys it set, unknown ones kept as written."""

    model_config = ConfigDict(frozen=True, extra="allow")
    WRITTEN_ONLY: ClassVar[bool] = True

    def __bool__(self) -> bool:
        return bool(self.model_fields_set or self.model_extra)


# ---------------------------------------------------------------- the fingerprint (workload/fingerprint.py)
class EnvChange(Model):
    """A variable the launcher changed between what the harness asked for and what the rank saw."""

    expected: Text | None = None
    actual: Text | None = None


class PeerAccess(_Written):
    src: RankNo | None = None
    dst: RankNo | None = None
    claimed: Flag | None = None  # as torch says; None when not asked
    verified: Verified | None = None  # True, False, "timeout", ... or None when not checked


class NcclLoaded(_Written):
    """A libnccl the rank mapped, with the version ncclGetVersion gave (or why it could not)."""

    version: Str | None = None
    code: Annotated[int, ints(0)] | None = None
    path: Str | None = None
    source: Str | None = None
    error: Text | None = None
    all: tuple[NcclLoaded, ...] | None = None  # every libnccl mapped, when more than one


class Driver(_Written):
    version: Str | None = None
    source: Str | None = None
    cuda_driver_api: Str | None = None


class Gpu(_Written):
    index: RankNo | None = None
    name: Str | None = None
    capability: Str | None = None
    total_memory: Count | None = None


class Shm(_Written):
    bytes: Count | None = None
    free_bytes: Count | None = None


class Memlock(_Written):
    soft: Limit | None = None
    hard: Limit | None = None


_FACT_ERROR = "error"  # a fact the workload could not collect is {"error": "Type: message"} in its place
_NOT_FACTS = frozenset({"nccl_loaded", "env", "nccl_env_changed"})  # objects whose own keys may be "error"


class Fingerprint(_Written):
    """What rank 0 saw inside the container after the launcher ran (the workload's fingerprint phase).
    A fact the workload could not collect is in `fact_errors` with why (an Accelerate that does not
    import, a driver that does not answer), not in its own field."""

    python: Str | None = None
    torch: Str | None = None
    torch_cuda: Str | None = None
    torch_git: Str | None = None
    cudnn: Annotated[int, ints(0)] | None = None
    accelerate: Str | None = None
    nccl_compiled: Str | None = None
    device: Str | None = None
    hostname: Str | None = None
    cuda_available: Flag | None = None
    cuda_init: Text | None = None
    # written as nccl_loaded and driver; the names readers use give the version (the properties below)
    nccl_loaded_lib: NcclLoaded | None = Field(None, alias="nccl_loaded")
    driver_info: Driver | None = Field(None, alias="driver")
    device_count: Count | None = None
    gpus: tuple[Gpu, ...] = ()
    peer_access: tuple[PeerAccess, ...] = ()
    shm: Shm | None = None
    memlock: Memlock | None = None
    env: dict[str, Text] = {}  # the variables the rank saw (values masked by workload/redact.py)
    nccl_env_changed: dict[str, EnvChange] = {}
    launcher: Str | None = None
    fact_errors: dict[str, Text] | None = None

    @model_validator(mode="before")
    @classmethod
    def _as_written(cls, data: Any) -> Any:
        """A fact the workload could not collect ({"error": ...} in its place) moves to fact_errors."""
        if not isinstance(data, Mapping):
            return data
        out: dict[str, Any] = {}
        errors = dict(data.get("fact_errors") or {}) if isinstance(data.get("fact_errors"), Mapping) else {}
        for key, value in data.items():
            if key == "fact_errors":
                continue
            if key not in _NOT_FACTS and isinstance(value, Mapping) and set(value) == {_FACT_ERROR} \
                    and isinstance(value[_FACT_ERROR], str):
                errors[key] = value[_FACT_ERROR]
                continue
            out[key] = value
        if errors:
            out["fact_errors"] = errors
        return out

    # readers --------------------------------------------------------------
    @property
    def nccl_loaded(self) -> str | None:
        """The NCCL version the rank really loaded (ncclGetVersion on the mapped library)."""
        return self.nccl_loaded_lib.version if self.nccl_loaded_lib else None

    @property
    def nccl_path(self) -> str | None:
        """The file of the libnccl the rank really used."""
        return self.nccl_loaded_lib.path if self.nccl_loaded_lib else None

    def nccl_how(self, asked: str | None) -> str | None:
        """How the NCCL the rank used got there, from what it mapped: torch's own wheel (bundled), a
        pinned pip wheel (pip), a system libnccl the cell asked for (system), or one a host forced in
        over torch's own with LD_PRELOAD; None before the fingerprint."""
        path = self.nccl_path
        if not path:
            return None
        if "/nvidia/nccl/" in path:  # a pip wheel (nvidia-nccl-cuXX), torch's RPATH dependency
            return "pip" if asked == "pip" else "bundled"
        mapped = (self.nccl_loaded_lib.all if self.nccl_loaded_lib else None) or ()
        over_torch = any("/nvidia/nccl/" in (e.path or "") for e in mapped)
        if asked == "system":
            return "system"
        return "system, LD_PRELOAD by the host" if over_torch else "system"

    @property
    def driver(self) -> str | None:
        return self.driver_info.version if self.driver_info else None

    @property
    def gpu_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.gpus if g.name)

    @property
    def gpu_count(self) -> int | None:
        """GPUs the rank saw: torch's device count, or the GPUs listed when more; None when neither."""
        counts = [c for c in (self.device_count, len(self.gpus)) if c]
        return max(counts) if counts else None

    @property
    def shm_bytes(self) -> int | None:
        return self.shm.bytes if self.shm else None

    @property
    def memlock_soft(self) -> float | None:
        """The soft memlock limit in bytes; math.inf for "unlimited"."""
        soft = self.memlock.soft if self.memlock else None
        return math.inf if soft == "unlimited" else soft if isinstance(soft, int) else None

    @property
    def env_changed(self) -> dict[str, EnvChange]:
        """Variables the launcher changed: name -> (what the harness asked for, what the rank saw)."""
        return dict(self.nccl_env_changed)


# ---------------------------------------------------------------- the bandwidth sweep (workload/bandwidth.py)
class BandwidthRow(_Written):
    """One size of the bandwidth sweep, nccl-tests style: time per op, algbw and busbw as the median over
    trials, busbw of every trial and its min and max, torch's eager per-call latency, how the time was
    taken, wrong elements. Rows of older records have no trials: their spread is unknown (None), never 0."""

    bytes: Bytes = 0  # 0: a row without its size (never written so)
    dtype: Str | None = None
    iters: Count | None = None
    time_s: Duration = 0.0  # median over trials of the time per op, seconds
    algbw_gbs: GBs = 0.0  # median over trials
    busbw_gbs: GBs = 0.0  # median over trials
    first_call_s: Duration = 0.0
    busbw_trials: tuple[GBs, ...] = ()  # busbw of every trial; empty in older records
    busbw_min: GBs | None = None
    busbw_max: GBs | None = None
    eager_us: Annotated[float, nums()] | None = None  # torch's eager per-call latency (what DDP pays per call), µs
    timing: Str | None = None  # "cuda-graph" or "eager": how time_s was measured
    wrong: Count | None = None  # elements that came back wrong at this size; None where not recorded

    @model_validator(mode="after")
    def _median_within_trials(self) -> BandwidthRow:
        if self.busbw_min is not None and self.busbw_max is not None and not \
                self.busbw_min <= self.busbw_gbs <= self.busbw_max:
            raise invariant(f"busbw_gbs {self.busbw_gbs:g} lies outside its trials' "
                            f"{self.busbw_min:g}-{self.busbw_max:g}")
        return self

    @property
    def trials(self) -> int:
        """How many trials the median is over (0: an older record, which did not say)."""
        return len(self.busbw_trials)

    @property
    def spread(self) -> tuple[float, float] | None:
        """(min, max) busbw over the trials; None when unknown (an older record, or a single trial)."""
        if self.trials == 1:
            return None
        low = self.busbw_min if self.busbw_min is not None else min(self.busbw_trials, default=None)
        high = self.busbw_max if self.busbw_max is not None else max(self.busbw_trials, default=None)
        if low is None or high is None or high < low:
            return None
        return low, high

    @property
    def relative_spread(self) -> float | None:
        """(max - min) / median busbw; None when the spread or the median is unknown."""
        spread = self.spread
        if spread is None or not self.busbw_gbs:
            return None
        return (spread[1] - spread[0]) / self.busbw_gbs

    def apart_from(self, other: BandwidthRow) -> bool | None:
        """Whether the two rows' trial ranges do not overlap; None when either spread is unknown."""
        return ranges_apart(self.spread, other.spread)


def ranges_apart(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool | None:
    """Whether two (min, max) ranges do not overlap; None when either is unknown."""
    if a is None or b is None:
        return None
    return a[1] < b[0] or b[1] < a[0]


class PhaseEnd(_Written):
    """A phase_end event of rank 0 (workload/main.py): the envelope, the phase's time, and the payloads
    readers use; the rest of what the phase returned is kept as written."""

    v: Json = None
    event: Str | None = None
    rank: RankNo | None = None
    world: Count | None = None
    wall: Wall | None = None
    mono: Annotated[float, nums(low=-math.inf)] | None = None
    pid: Count | None = None
    phase: Str | None = None
    seconds: Duration | None = None
    fingerprint: Fingerprint | None = None  # the fingerprint phase
    env_set: dict[str, Json] | None = None  # init: the variables the workload set itself before init
    rows: tuple[BandwidthRow, ...] | None = None  # bandwidth, and the control's nccl-allreduce


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

    node: Str | None = None
    gpu: Str | None = None  # the CUDA_VISIBLE_DEVICES entry of its local rank; None on CPU
    job_id: Str | None = None  # Slurm's job and step, where it ran in one
    step: Str | None = None
    cpus: Str | None = None  # the CPUs it may run on (its affinity), as taskset writes them: "0-7,16-23"


class RankResult(_Written):
    """The workload's result event, the last a rank writes."""

    v: Json = None
    event: Str | None = None
    rank: RankNo | None = None
    world: Count | None = None
    wall: Wall | None = None
    mono: Annotated[float, nums(low=-math.inf)] | None = None
    pid: Count | None = None
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

    phase: Str = STARTUP
    threshold: Seconds = 0.0
    since_progress: Seconds = 0.0
    ranks_behind: tuple[RankNo, ...] = ()
    why_behind: dict[int, Text] = {}
    cap: Flag = False  # the cell's hard cap, not a phase threshold
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


class Forensics(_Written):
    """What the supervisor gathered before killing a hung attempt (supervise.collect_forensics)."""

    processes: Text | None = None
    pids: dict[str, Count] | None = None
    stacks: dict[str, Text] | None = None  # faulthandler's dump per rank
    py_spy: dict[str, Text] | None = None  # py-spy's per rank
    nccl_tail: dict[str, Text] | None = None  # the end of each rank's NCCL log


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
