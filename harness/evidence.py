"""The evidence of one attempt, as the supervisor recorded it (RawAttempt), and tolerant views of it
for every reader: the workload's fingerprint and bandwidth payloads, rank summaries, NCCL log summaries,
the stall. A fact that is missing or of the wrong type reads as None or empty, never as an exception;
a record of the wrong shape as a whole is a RecordError (results.load_run names it as corrupt)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from .kinds import ENDED_BY, STARTUP, EndedBy


class RecordError(ValueError):
    """A record whose JSON does not have the record's shape."""


# ---------------------------------------------------------------- tolerant and strict readers
def _map(obj: Any) -> Mapping[str, Any]:
    return obj if isinstance(obj, Mapping) else {}


def _str(obj: Any) -> str | None:
    return obj if isinstance(obj, str) and obj else None


def _int(obj: Any) -> int | None:
    return obj if isinstance(obj, int) and not isinstance(obj, bool) else None


def _num(obj: Any) -> float | None:
    return obj if isinstance(obj, (int, float)) and not isinstance(obj, bool) else None


def _strs(obj: Any) -> tuple[str, ...]:
    return tuple(x for x in obj if isinstance(x, str) and x) if isinstance(obj, list) else ()


def _dig(obj: Any, *keys: str) -> Any:
    """obj[k1][k2]...; None as soon as a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


_KINDS = {dict: (Mapping, "an object"), list: (list, "a list"), str: (str, "a string"),
          float: ((int, float), "a number"), int: (int, "an integer"), bool: (bool, "true or false")}


def _field(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    """data[key] checked against `kind`; None when missing or null, RecordError when of another type."""
    value = data.get(key)
    if value is None:
        return None
    types, name = _KINDS[kind]
    if not isinstance(value, types) or (kind in (float, int) and isinstance(value, bool)):
        raise RecordError(f"{_at(where, key)} should be {name}, not {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    """A value in an error message: its JSON type and its JSON text, cut short."""
    kind = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
    return f"{kind} {json.dumps(value, default=str)[:60]}"


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _object(data: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise RecordError(f"{where or 'the record'} should be an object, not {_shown(data)}")
    return data


# ---------------------------------------------------------------- views of the raw evidence
@dataclass(frozen=True)
class EnvChange:
    """A variable the launcher changed between what the harness asked for and what the rank saw."""

    expected: Any = None
    actual: Any = None


@dataclass(frozen=True)
class PeerAccess:
    src: int | None
    dst: int | None
    claimed: Any  # True/False as torch says, None when not asked
    verified: Any  # True, False, "timeout", ... or None when not checked


@dataclass(frozen=True)
class Fingerprint:
    """What rank 0 saw inside the container after the launcher ran (the workload's fingerprint phase)."""

    data: Mapping[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.data)

    @property
    def torch(self) -> str | None:
        return _str(self.data.get("torch"))

    @property
    def accelerate(self) -> str | None:
        return _str(self.data.get("accelerate"))

    @property
    def nccl_compiled(self) -> str | None:
        return _str(self.data.get("nccl_compiled"))

    @property
    def nccl_loaded(self) -> str | None:
        """The NCCL version the rank really loaded (ncclGetVersion on the mapped library)."""
        return _str(_dig(self.data, "nccl_loaded", "version"))

    @property
    def nccl_path(self) -> str | None:
        """The file of the libnccl the rank really used."""
        return _str(_dig(self.data, "nccl_loaded", "path"))

    def nccl_how(self, asked: str | None) -> str | None:
        """How the NCCL the rank used got there, from what it mapped: torch's own wheel (bundled), a
        pinned pip wheel (pip), a system libnccl the cell asked for (system), or one a host forced in
        over torch's own with LD_PRELOAD; None before the fingerprint."""
        path = self.nccl_path
        if not path:
            return None
        if "/nvidia/nccl/" in path:  # a pip wheel (nvidia-nccl-cuXX), torch's RPATH dependency
            return "pip" if asked == "pip" else "bundled"
        mapped = _dig(self.data, "nccl_loaded", "all")
        over_torch = isinstance(mapped, list) and any("/nvidia/nccl/" in str(_dig(e, "path")) for e in mapped)
        if asked == "system":
            return "system"
        return "system, LD_PRELOAD by the host" if over_torch else "system"

    @property
    def driver(self) -> str | None:
        return _str(_dig(self.data, "driver", "version"))

    @property
    def gpu_names(self) -> tuple[str, ...]:
        gpus = self.data.get("gpus")
        return tuple(n for n in (_str(_dig(g, "name")) for g in (gpus if isinstance(gpus, list) else [])) if n)

    @property
    def device_count(self) -> int | None:
        return _int(self.data.get("device_count"))

    @property
    def gpu_count(self) -> int | None:
        """GPUs the rank saw: torch's device count, or the GPUs listed when more; None when neither."""
        gpus = self.data.get("gpus")
        counts = [c for c in (self.device_count, len(gpus) if isinstance(gpus, list) else None) if c]
        return max(counts) if counts else None

    @property
    def shm_bytes(self) -> int | None:
        return _int(_dig(self.data, "shm", "bytes"))

    @property
    def memlock_soft(self) -> float | None:
        """The soft memlock limit in bytes; math.inf for "unlimited"."""
        soft = _dig(self.data, "memlock", "soft")
        return math.inf if soft == "unlimited" else _int(soft)

    @property
    def peer_access(self) -> tuple[PeerAccess, ...]:
        rows = self.data.get("peer_access")
        return tuple(PeerAccess(_int(r.get("src")), _int(r.get("dst")), r.get("claimed"), r.get("verified"))
                     for r in (rows if isinstance(rows, list) else []) if isinstance(r, Mapping))

    @property
    def env(self) -> dict[str, Any]:
        """The NCCL_*, TORCH_*, CUDA_*, ACCELERATE_* variables the rank saw (secrets masked)."""
        return {k: v for k, v in _map(self.data.get("env")).items() if isinstance(k, str)}

    @property
    def env_changed(self) -> dict[str, EnvChange]:
        """Variables the launcher changed: name -> (what the harness asked for, what the rank saw)."""
        return {k: EnvChange(_dig(v, "expected"), _dig(v, "actual"))
                for k, v in _map(self.data.get("nccl_env_changed")).items() if isinstance(k, str)}

    @property
    def launcher(self) -> str | None:
        return _str(self.data.get("launcher"))


@dataclass(frozen=True)
class BandwidthRow:
    """One size of the bandwidth sweep, nccl-tests style: time per op, algbw and busbw as the median over
    trials, busbw of every trial and its min and max, torch's eager per-call latency, how the time was
    taken, wrong elements. Rows of older records have no trials: their spread is unknown (None), never 0."""

    bytes: int
    time_s: float = 0.0  # median over trials of the time per op, seconds
    algbw_gbs: float = 0.0  # median over trials
    busbw_gbs: float = 0.0  # median over trials
    first_call_s: float = 0.0
    busbw_trials: tuple[float, ...] = ()  # busbw of every trial; empty in older records
    busbw_min: float | None = None
    busbw_max: float | None = None
    eager_us: float | None = None  # torch's eager per-call latency (what DDP pays per call), median, µs
    timing: str | None = None  # "cuda-graph" or "eager": how time_s was measured
    wrong: int | None = None  # elements that came back wrong at this size; None where not recorded
    iters: int | None = None

    @classmethod
    def of(cls, data: Any) -> BandwidthRow:
        """A row as the workload wrote it (any version); a value missing or of the wrong type is None/empty."""
        data = _map(data)
        trials = data.get("busbw_trials")
        return cls(_int(data.get("bytes")) or 0, _num(data.get("time_s")) or 0.0, _num(data.get("algbw_gbs")) or 0.0,
                   _num(data.get("busbw_gbs")) or 0.0, _num(data.get("first_call_s")) or 0.0,
                   tuple(float(t) for t in (trials if isinstance(trials, list) else []) if _num(t) is not None),
                   _num(data.get("busbw_min")), _num(data.get("busbw_max")), _num(data.get("eager_us")),
                   _str(data.get("timing")), _int(data.get("wrong")), _int(data.get("iters")))

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


@dataclass(frozen=True)
class NcclSummary:
    """What one rank's NCCL_DEBUG log says (nccl_log.parse_file as the supervisor recorded it)."""

    version: str | None = None
    transports: tuple[str, ...] = ()  # transport kinds used
    env: Mapping[str, Any] = field(default_factory=dict)  # NCCL_* settings NCCL reported reading
    warnings: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    @classmethod
    def of(cls, data: Any) -> NcclSummary:
        data = _map(data)
        transports = data.get("transports")
        return cls(_str(data.get("version")),
                   tuple(k for k in (transports if isinstance(transports, (Mapping, list)) else ()) if isinstance(k, str)),
                   {k: v for k, v in _map(data.get("env")).items() if isinstance(k, str)},
                   _strs(data.get("warnings")), _strs(data.get("errors")))


@dataclass(frozen=True)
class RankError:
    """The error a rank recorded itself (the workload's error event, slimmed)."""

    phase: str | None = None
    error_class: str | None = None
    type: str | None = None
    message: str | None = None
    wall: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RankSummary:
    """How far one rank got, as its event file says."""

    phase: str | None = None  # the phase it is in, or last finished
    phases_done: tuple[str, ...] = ()
    error: RankError | None = None
    result: Mapping[str, Any] | None = None  # the workload's result event, when the rank got to the end

    @classmethod
    def of(cls, data: Any) -> RankSummary:
        data = _map(data)
        error = data.get("error")
        result = data.get("result")
        return cls(_str(data.get("phase")), _strs(data.get("phases_done")),
                   RankError(_str(error.get("phase")), _str(error.get("error_class")), _str(error.get("type")),
                             error.get("message") if isinstance(error.get("message"), str) else None,
                             _num(error.get("wall"))) if isinstance(error, Mapping) and error else None,
                   result if isinstance(result, Mapping) and result else None)

    @property
    def wrong_total(self) -> int:
        return _int(_map(self.result).get("wrong_total")) or 0

    @property
    def largest_busbw_gbs(self) -> float:
        return _num(_map(self.result).get("largest_busbw_gbs")) or 0.0


@dataclass(frozen=True)
class Stall:
    """Why the supervisor declared a hang: the phase awaited, its threshold, the ranks behind and why."""

    phase: str
    threshold: float
    since_progress: float
    ranks_behind: tuple[int, ...]
    why_behind: dict[int, str]
    cap: bool = False  # the cell's hard cap, not a phase threshold

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"ranks_behind": list(self.ranks_behind),
                               "why_behind": {str(k): v for k, v in self.why_behind.items()}}

    @classmethod
    def of(cls, data: Any) -> Stall:
        data = _map(data)
        behind = data.get("ranks_behind")
        why = _map(data.get("why_behind"))
        return cls(_str(data.get("phase")) or STARTUP, _num(data.get("threshold")) or 0.0,
                   _num(data.get("since_progress")) or 0.0,
                   tuple(r for r in (behind if isinstance(behind, list) else []) if _int(r) is not None),
                   {int(k): str(v) for k, v in why.items() if isinstance(k, str) and k.isdigit()},
                   data.get("cap") is True)


# ---------------------------------------------------------------- one attempt
@dataclass
class RawAttempt:
    """The raw record of one attempt (supervise.Attempt): everything classification and reports need,
    as plain data. The supervisor fills it in while the attempt runs; read-only once it returns."""

    cell_id: str = ""
    engine: str = ""
    attempt: int = 0
    expected_ranks: int = 0
    ended_by: EndedBy | Literal[""] = ""  # "" until the attempt ends
    exit_code: int | None = None
    seconds: float = 0.0
    started_wall: float = 0.0
    infra_reason: str = ""
    stall: dict | None = None  # Stall.to_json(), for hangs
    ranks: dict[str, dict] = field(default_factory=dict)  # per rank: supervise.RankState.summary()
    phases: dict[str, dict] = field(default_factory=dict)  # rank 0's phase_end payloads (fingerprint, bandwidth...)
    launcher_tail: str = ""
    forensics: dict[str, Any] = field(default_factory=dict)
    leftovers: list[str] = field(default_factory=list)
    out_dir: str = ""
    # seconds from the last progress event to the end of the attempt (hang verdicts: stall
    # threshold + detection delay + forensics + kill); what bench/hang_latency.py measures.
    verdict_after_progress: float = 0.0
    nccl: dict[str, dict] = field(default_factory=dict)  # per rank: what its NCCL_DEBUG log says
    # the NCCL_/TORCH_/CUDA_/ACCELERATE_ variables the launcher started with (host or image; CellSpec)
    # (None: an older record, which did not keep it)
    inherited_env: dict[str, str] | None = None

    def to_json(self) -> dict:
        data = asdict(self)
        if self.inherited_env is None:  # an older record reads and writes back unchanged
            del data["inherited_env"]
        return data

    @classmethod
    def from_json(cls, data: Any, where: str = "raw") -> RawAttempt:
        if data is None:
            return cls()
        data = _object(data, where)
        values = {k: _field(data, k, kind, where) for k, kind in _RAW_KINDS.items()}
        if values["ended_by"] not in (None, "", *ENDED_BY):
            raise RecordError(f"{_at(where, 'ended_by')} {values['ended_by']!r} is not one of {', '.join(ENDED_BY)}")
        defaults = cls()
        return cls(**{k: (v if v is not None or k in ("exit_code", "stall", "inherited_env") else getattr(defaults, k))
                      for k, v in values.items()})

    # views for readers -------------------------------------------------
    @property
    def fingerprint(self) -> Fingerprint:
        return Fingerprint(_map(_dig(self.phases, "fingerprint", "fingerprint")))

    @property
    def bandwidth_rows(self) -> tuple[BandwidthRow, ...]:
        rows = _dig(self.phases, "bandwidth", "rows")
        return tuple(BandwidthRow.of(r) for r in (rows if isinstance(rows, list) else []) if isinstance(r, Mapping))

    @property
    def phase_timings(self) -> dict[str, float]:
        """Seconds of every phase rank 0 finished, in order."""
        return {p: _num(v.get("seconds")) or 0.0 for p, v in self.phases.items() if isinstance(v, Mapping)}

    @property
    def nccl_logs(self) -> dict[str, NcclSummary]:
        return {r: NcclSummary.of(s) for r, s in self.nccl.items()}

    @property
    def transports(self) -> tuple[str, ...]:
        """Transport kinds NCCL used, over every rank's log (empty for gloo and for one rank)."""
        return tuple(dict.fromkeys(k for log in self.nccl_logs.values() for k in log.transports))

    @property
    def loaded_nccl(self) -> str | None:
        """The NCCL version the ranks really loaded (fingerprint), else what NCCL's own log says."""
        return self.fingerprint.nccl_loaded or next((s.version for s in self.nccl_logs.values() if s.version), None)

    @property
    def rank_states(self) -> dict[int, RankSummary]:
        return {int(r): RankSummary.of(s) for r, s in self.ranks.items() if isinstance(r, str) and r.isdigit()}

    @property
    def stall_info(self) -> Stall | None:
        return Stall.of(self.stall) if isinstance(self.stall, Mapping) else None

    @property
    def harness_env(self) -> dict[str, Any]:
        """The variables the workload set itself before init (NCCL_DEBUG..., async error handling)."""
        return {k: v for k, v in _map(_dig(self.phases, "init", "env_set")).items() if isinstance(k, str)}

    @property
    def nccl_tails(self) -> tuple[str, ...]:
        """The NCCL log tails the forensics kept (hangs)."""
        tails = _map(self.forensics.get("nccl_tail")).values()
        return tuple(t for t in tails if isinstance(t, str) and t)

    @property
    def thread_dumps(self) -> tuple[str, ...]:
        """The thread dumps the forensics kept (hangs): faulthandler's per rank, then py-spy's."""
        dumps = [*_map(self.forensics.get("stacks")).values(), *_map(self.forensics.get("py_spy")).values()]
        return tuple(t for t in dumps if isinstance(t, str) and t)


_RAW_KINDS = {"cell_id": str, "engine": str, "attempt": int, "expected_ranks": int, "ended_by": str, "exit_code": int,
              "seconds": float, "started_wall": float, "infra_reason": str, "stall": dict, "ranks": dict, "phases": dict,
              "launcher_tail": str, "forensics": dict, "leftovers": list, "out_dir": str,
              "verdict_after_progress": float, "nccl": dict, "inherited_env": dict}  # the JSON type of every RawAttempt field
assert set(_RAW_KINDS) == {f.name for f in fields(RawAttempt)}
