"""The evidence of one attempt, as the supervisor recorded it (RawAttempt), and tolerant views of it
for every reader: the workload's fingerprint and bandwidth payloads, rank summaries, NCCL log summaries,
the stall. A fact that is missing or of the wrong type reads as None or empty, never as an exception;
a record of the wrong shape as a whole is a RecordError (results.load_run names it as corrupt)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from .kinds import ATTEMPT_KINDS, ENDED_BY, STARTUP, AttemptKind, EndedBy


class RecordError(ValueError):
    """A record whose JSON does not have the record's shape."""


# ---------------------------------------------------------------- tolerant and strict readers
def _map(obj: Any) -> Mapping[str, Any]:
    return obj if isinstance(obj, Mapping) else {}


def _int(obj: Any) -> int | None:
    return obj if isinstance(obj, int) and not isinstance(obj, bool) else None


def _num(obj: Any) -> float | None:
    """A finite number (JSON allows NaN and Infinity through Python's json; no measurement is either)."""
    ok = isinstance(obj, int) and not isinstance(obj, bool) or isinstance(obj, float) and math.isfinite(obj)
    return obj if ok else None


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
    if not isinstance(value, types) or (kind in (float, int) and isinstance(value, bool)) or (
            kind is float and _num(value) is None):
        raise RecordError(f"{_at(where, key)} should be {name}, not {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    """A value in an error message: its JSON type and its JSON text, cut short."""
    kind = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
    return f"{kind} {json.dumps(value, default=str)[:60]}"


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where and key else where or key


def _object(data: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise RecordError(f"{where or 'the record'} should be an object, not {_shown(data)}")
    return data


def _one_of(data: Mapping[str, Any], key: str, values: tuple[str, ...], where: str) -> Any:
    """data[key], a string of the closed set `values` (kinds.py), or None; RecordError otherwise."""
    value = _field(data, key, str, where)
    if value is not None and value not in values:
        raise RecordError(f"{_at(where, key)} {value!r} is not one of {', '.join(values)}")
    return value


# The largest figures a real attempt can hold; beyond them a record was damaged, not measured. The
# fastest busbw measured here is 341 GB/s (2x H200 over NVLink, docs/benchmarks.md) and the workload's
# sizes fit in one GPU's memory (141 GB on an H200): a thousand times either is no measurement.
MAX_BYTES = 1 << 47  # 128 TiB
MAX_GBS = 1e6
MAX_SECONDS = 1e7  # four months: past any cell's hard cap


class _Facts:
    """Facts read out of one JSON object of the evidence. Tolerant (where=None): a fact that is missing
    or of the wrong type reads as None, so readers never raise. Strict (where set, at load): a fact of
    the wrong type, or a number out of range, is a RecordError that says where it is and what is wrong."""

    def __init__(self, data: Any, where: str | None = None) -> None:
        if where is not None and data is not None:
            _object(data, where)
        self.data, self.where = _map(data), where

    def _bad(self, key: str, value: Any, should: str) -> None:
        if self.where is not None and value is not None:
            raise RecordError(f"{_at(self.where, key)} should be {should}, not {_shown(value)}")
        return None

    def at(self, key: str) -> str | None:
        return None if self.where is None else _at(self.where, key)

    def str(self, key: str) -> str | None:
        value = self.data.get(key)
        return (value or None) if isinstance(value, str) else self._bad(key, value, "a string")

    def text(self, key: str) -> str | None:
        """A string kept as written (an empty one too)."""
        value = self.data.get(key)
        return value if isinstance(value, str) else self._bad(key, value, "a string")

    def int(self, key: str, low: int = -(1 << 63), high: int = 1 << 63) -> int | None:
        value = self.data.get(key)
        return value if _int(value) is not None and low <= value <= high else self._bad(
            key, value, f"an integer from {low} to {high}")

    def num(self, key: str, high: float = math.inf) -> float | None:
        value = self.data.get(key)
        return value if _num(value) is not None and 0 <= value <= high else self._bad(
            key, value, f"a number from 0 to {high:g}")

    def nums(self, key: str, high: float = math.inf) -> tuple[float, ...]:
        items = self.list(key)
        return tuple(float(v) for v in (_Facts({"": x}, self.at(f"{key}[{i}]")).num("", high)
                                         for i, x in enumerate(items)) if v is not None)

    def strs(self, key: str) -> tuple[str, ...]:
        items = self.list(key)
        return tuple(v for v in (_Facts({"": x}, self.at(f"{key}[{i}]")).text("") for i, x in enumerate(items)) if v is not None)

    def list(self, key: str) -> list[Any]:
        value = self.data.get(key)
        return value if isinstance(value, list) else self._bad(key, value, "a list") or []

    def obj(self, key: str) -> _Facts:
        value = self.data.get(key)
        if not isinstance(value, Mapping):
            self._bad(key, value, "an object")
        return _Facts(value, self.at(key))

    def objs(self, key: str) -> list[_Facts]:
        """The objects of a list (strict: every item must be one)."""
        return [f for f in (_Facts(x, self.at(f"{key}[{i}]")) for i, x in enumerate(self.list(key))) if f.data]

    def named(self, key: str) -> dict[str, Any]:
        """An object's entries with string keys (JSON keys always are)."""
        return {k: v for k, v in self.obj(key).data.items() if isinstance(k, str)}


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
    where: str | None = field(default=None, compare=False)  # set: read strictly (RawAttempt.validate)

    def __bool__(self) -> bool:
        return bool(self.data)

    @property
    def _facts(self) -> _Facts:
        return _Facts(self.data, self.where)

    def validate(self) -> None:
        """Read every fact strictly: RecordError for the first of the wrong type (load_run's check)."""
        for name in ("torch", "accelerate", "nccl_compiled", "nccl_loaded", "nccl_path", "driver", "gpu_names",
                     "gpu_count", "shm_bytes", "memlock_soft", "peer_access", "env", "env_changed", "launcher"):
            getattr(self, name)
        self.nccl_how(None)

    @property
    def torch(self) -> str | None:
        return self._facts.str("torch")

    @property
    def accelerate(self) -> str | None:
        return self._facts.str("accelerate")

    @property
    def nccl_compiled(self) -> str | None:
        return self._facts.str("nccl_compiled")

    @property
    def nccl_loaded(self) -> str | None:
        """The NCCL version the rank really loaded (ncclGetVersion on the mapped library)."""
        return self._facts.obj("nccl_loaded").str("version")

    @property
    def nccl_path(self) -> str | None:
        """The file of the libnccl the rank really used."""
        return self._facts.obj("nccl_loaded").str("path")

    def nccl_how(self, asked: str | None) -> str | None:
        """How the NCCL the rank used got there, from what it mapped: torch's own wheel (bundled), a
        pinned pip wheel (pip), a system libnccl the cell asked for (system), or one a host forced in
        over torch's own with LD_PRELOAD; None before the fingerprint."""
        path = self.nccl_path
        if not path:
            return None
        if "/nvidia/nccl/" in path:  # a pip wheel (nvidia-nccl-cuXX), torch's RPATH dependency
            return "pip" if asked == "pip" else "bundled"
        mapped = self._facts.obj("nccl_loaded").objs("all")
        over_torch = any("/nvidia/nccl/" in (e.str("path") or "") for e in mapped)
        if asked == "system":
            return "system"
        return "system, LD_PRELOAD by the host" if over_torch else "system"

    @property
    def driver(self) -> str | None:
        return self._facts.obj("driver").str("version")

    @property
    def gpu_names(self) -> tuple[str, ...]:
        return tuple(n for n in (g.str("name") for g in self._facts.objs("gpus")) if n)

    @property
    def device_count(self) -> int | None:
        return self._facts.int("device_count", 0, 1 << 16)

    @property
    def gpu_count(self) -> int | None:
        """GPUs the rank saw: torch's device count, or the GPUs listed when more; None when neither."""
        gpus = self.data.get("gpus")
        counts = [c for c in (self.device_count, len(gpus) if isinstance(gpus, list) else None) if c]
        return max(counts) if counts else None

    @property
    def shm_bytes(self) -> int | None:
        return self._facts.obj("shm").int("bytes", 0)

    @property
    def memlock_soft(self) -> float | None:
        """The soft memlock limit in bytes; math.inf for "unlimited"."""
        memlock = self._facts.obj("memlock")
        return math.inf if memlock.data.get("soft") == "unlimited" else memlock.int("soft", 0)

    @property
    def peer_access(self) -> tuple[PeerAccess, ...]:
        return tuple(PeerAccess(r.int("src", 0), r.int("dst", 0), r.data.get("claimed"), r.data.get("verified"))
                     for r in self._facts.objs("peer_access"))

    @property
    def env(self) -> dict[str, Any]:
        """The variables the rank saw (values masked by harness/workload/redact.py)."""
        facts = self._facts.obj("env")
        return {k: facts.text(k) for k in facts.data if isinstance(k, str)}

    @property
    def env_changed(self) -> dict[str, EnvChange]:
        """Variables the launcher changed: name -> (what the harness asked for, what the rank saw)."""
        changed = self._facts.obj("nccl_env_changed")
        return {k: EnvChange(c.text("expected"), c.text("actual"))
                for k, c in ((k, changed.obj(k)) for k in changed.data if isinstance(k, str))}

    @property
    def launcher(self) -> str | None:
        return self._facts.str("launcher")


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
    def of(cls, data: Any, where: str | None = None) -> BandwidthRow:
        """A row as the workload wrote it (any version); a value missing or of the wrong type is None/empty,
        or with `where`, a RecordError (a size or bandwidth out of range, a median outside its trials)."""
        f = _Facts(data, where)
        row = cls(f.int("bytes", 1, MAX_BYTES) or 0, f.num("time_s", MAX_SECONDS) or 0.0,
                  f.num("algbw_gbs", MAX_GBS) or 0.0, f.num("busbw_gbs", MAX_GBS) or 0.0,
                  f.num("first_call_s", MAX_SECONDS) or 0.0, f.nums("busbw_trials", MAX_GBS),
                  f.num("busbw_min", MAX_GBS), f.num("busbw_max", MAX_GBS), f.num("eager_us"), f.str("timing"),
                  f.int("wrong", 0), f.int("iters", 0))
        if where is not None and row.busbw_min is not None and row.busbw_max is not None \
                and not row.busbw_min <= row.busbw_gbs <= row.busbw_max:
            raise RecordError(f"{where}: busbw_gbs {row.busbw_gbs:g} lies outside its trials' "
                              f"{row.busbw_min:g}-{row.busbw_max:g}")
        if row.spread is None or where is not None:
            return row
        low, high = row.spread  # tolerant: a median outside its trials' range would draw a negative error bar
        return row if low <= row.busbw_gbs <= high else replace(row, busbw_min=None, busbw_max=None, busbw_trials=())

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
    def of(cls, data: Any, where: str | None = None) -> NcclSummary:
        f = _Facts(data, where)
        transports = f.data.get("transports")  # kind -> count, or a list of kinds
        if not isinstance(transports, (Mapping, list)):
            f._bad("transports", transports, "an object or a list")
        env = f.obj("env")
        return cls(f.str("version"),
                   tuple(k for k in (transports if isinstance(transports, (Mapping, list)) else ()) if isinstance(k, str)),
                   {k: env.text(k) for k in env.data if isinstance(k, str)}, f.strs("warnings"), f.strs("errors"))


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
class Placement:
    """Where a rank ran, as its start event says (workload/main.placement); records from before it have none."""

    node: str | None = None
    gpu: str | None = None  # the CUDA_VISIBLE_DEVICES entry of its local rank; None on CPU
    job_id: str | None = None  # Slurm's job and step, where it ran in one
    step: str | None = None

    @classmethod
    def of(cls, f: _Facts) -> Placement | None:
        found = cls(f.str("node"), f.str("gpu"), f.str("job_id"), f.str("step"))
        return found if found != cls() else None


@dataclass(frozen=True)
class RankSummary:
    """How far one rank got, as its event file says."""

    phase: str | None = None  # the phase it is in, or last finished
    phases_done: tuple[str, ...] = ()
    error: RankError | None = None
    result: Mapping[str, Any] | None = None  # the workload's result event, when the rank got to the end
    placement: Placement | None = None

    @classmethod
    def of(cls, data: Any, where: str | None = None) -> RankSummary:
        f = _Facts(data, where)
        error, result = f.obj("error"), f.obj("result")
        result.int("wrong_total", 0), result.num("largest_busbw_gbs", MAX_GBS)  # strict: what readers take
        return cls(f.str("phase"), f.strs("phases_done"),
                   RankError(error.str("phase"), error.str("error_class"), error.str("type"), error.text("message"),
                             error.num("wall")) if error.data else None,
                   result.data or None, Placement.of(f.obj("placement")))

    @property
    def node(self) -> str | None:
        return self.placement.node if self.placement else None

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
    # ranks behind whose process had already exited when the supervisor looked (Running.gone): they died,
    # and the launcher had not yet noticed; not a hang
    gone: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"ranks_behind": list(self.ranks_behind), "gone": list(self.gone),
                               "why_behind": {str(k): v for k, v in self.why_behind.items()}}

    @classmethod
    def of(cls, data: Any, where: str | None = None) -> Stall:
        f = _Facts(data, where)
        def ranks(key: str) -> tuple[int, ...]:
            found = [_Facts({"": r}, f.at(f"{key}[{i}]")).int("", 0) for i, r in enumerate(f.list(key))]
            return tuple(r for r in found if r is not None)

        why = f.obj("why_behind")
        return cls(f.str("phase") or STARTUP, f.num("threshold") or 0.0, f.num("since_progress") or 0.0,
                   ranks("ranks_behind"),
                   {int(k): why.text(k) or "" for k in why.data if isinstance(k, str) and k.isdigit()},
                   f.data.get("cap") is True, ranks("gone"))


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
    # the cell's own workload, or the NCCL-only control run for it (issue 16: evidence, not the verdict)
    kind: AttemptKind = "cell"

    def to_json(self) -> dict:
        data = asdict(self)
        if self.inherited_env is None:  # an older record reads and writes back unchanged
            del data["inherited_env"]
        if self.kind == "cell":  # records of the cell's own attempts read and write as before the control
            del data["kind"]
        return data

    @classmethod
    def from_json(cls, data: Any, where: str = "raw") -> RawAttempt:
        if data is None:
            return cls()
        data = _object(data, where)
        values = {k: _field(data, k, kind, where) for k, kind in _RAW_KINDS.items()}
        if values["ended_by"] not in (None, "", *ENDED_BY):
            raise RecordError(f"{_at(where, 'ended_by')} {values['ended_by']!r} is not one of {', '.join(ENDED_BY)}")
        if values["kind"] not in (None, *ATTEMPT_KINDS):
            raise RecordError(f"{_at(where, 'kind')} {values['kind']!r} is not one of {', '.join(ATTEMPT_KINDS)}")
        defaults = cls()
        raw = cls(**{k: (v if v is not None or k in ("exit_code", "stall", "inherited_env") else getattr(defaults, k))
                     for k, v in values.items()})
        raw.validate(where)
        return raw

    def validate(self, where: str = "raw") -> None:
        """Read every piece of evidence a reader uses strictly: RecordError naming the first that is
        of the wrong type or out of range (load_run reports it as a corrupt record, never a traceback)."""
        phases = _Facts(self.phases, _at(where, "phases"))
        for name in self.phases:
            phases.obj(name).num("seconds", MAX_SECONDS)
        Fingerprint(phases.obj("fingerprint").obj("fingerprint").data,
                    _at(where, "phases.fingerprint.fingerprint")).validate()
        for sweep in ("bandwidth", "nccl-allreduce"):  # the workload's sweep, the control's
            bandwidth = phases.obj(sweep)
            for i, row in enumerate(bandwidth.list("rows")):
                BandwidthRow.of(_object(row, bandwidth.at(f"rows[{i}]")), bandwidth.at(f"rows[{i}]"))
        phases.obj("init").obj("env_set")
        for name, kind in (("ranks", RankSummary), ("nccl", NcclSummary)):
            for key, value in getattr(self, name).items():
                kind.of(_object(value, _at(where, f"{name}.{key}")), _at(where, f"{name}.{key}"))
        if self.stall is not None:
            Stall.of(self.stall, _at(where, "stall"))

    # views for readers -------------------------------------------------
    @property
    def fingerprint(self) -> Fingerprint:
        return Fingerprint(_map(_dig(self.phases, "fingerprint", "fingerprint")))

    @property
    def bandwidth_rows(self) -> tuple[BandwidthRow, ...]:
        rows = _dig(self.phases, "nccl-allreduce" if self.kind == "control" else "bandwidth", "rows")
        return tuple(BandwidthRow.of(r) for r in (rows if isinstance(rows, list) else []) if isinstance(r, Mapping))

    @property
    def phase_timings(self) -> dict[str, float]:
        """Seconds of every phase rank 0 finished, in order."""
        return {p: _Facts(v).num("seconds", MAX_SECONDS) or 0.0 for p, v in self.phases.items() if isinstance(v, Mapping)}

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
    def nodes(self) -> dict[str, tuple[int, ...]]:
        """The nodes the ranks ran on (their start events), each with its ranks; {} before placements were recorded."""
        found: dict[str, list[int]] = {}
        for rank, state in sorted(self.rank_states.items()):
            if state.node:
                found.setdefault(state.node, []).append(rank)
        return {node: tuple(ranks) for node, ranks in found.items()}

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
              "verdict_after_progress": float, "nccl": dict, "inherited_env": dict, "kind": str}  # the JSON type of every RawAttempt field
assert set(_RAW_KINDS) == {f.name for f in fields(RawAttempt)}
