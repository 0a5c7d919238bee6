"""The cell record, typed: the closed vocabularies records are written in, one value per
results/<run>/cells/<cell-id>/record.json, and the accessors every reader uses. report, compare,
publish, hints and pipeline read records only through this module; nothing else digs into their JSON.

record.json (schema 1; `CellRecord.to_json` writes exactly this layout, `results.write_json` adds
"schema"):

    {"cell":     {cuda, torch, accelerate, nccl, base, python, torch_index, template, nccl_via, stack,
                  variant, launcher, id},
     "env":      {the variant's NCCL variables},
     "outcome":  {status, reason, seconds, phase, error_class, detail},
     "image":    {tag, id} or null (the image it ran in, docker engine),
     "attempts": [{"attempt": n, "outcome": {...}, "raw": RawAttempt, "command": [argv...],
                   "step": {name, env, why} (rescue attempts only: the ladder step it ran with)}],
     "rescue_search": {why, untried, attempts, seconds} (only where a rescue search ran: why it stopped)}

`from_json` reads older and partial records (a missing field is None or empty) and raises RecordError
for JSON of the wrong shape (a field of the wrong type, an unknown status), which results.load_run
reports as a corrupt record. Inside a raw attempt the evidence is kept as recorded (the workload's
fingerprint and bandwidth payloads, rank summaries, NCCL log summaries) and read through tolerant
views (Fingerprint, BandwidthRow, NcclSummary, RankSummary, Stall): a fact that is missing or of the
wrong type reads as None or empty, never as an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .evidence import (BandwidthRow, EnvChange, Fingerprint, NcclSummary, PeerAccess, Placement, RankError, RankSummary,
                       RawAttempt, RecordError, Stall, _at, _Facts, _field, _object, _one_of, _shown, ranges_apart)
from .ladder import Budget, SearchEnd, Step
from .workload.redact import shown_env
from .kinds import (BUILD_STATUSES, CONTROL_ERROR_CLASSES, ENDED_BY, ENV_ORIGINS, ERROR_CLASSES, FAILED, GOOD,
                    LAUNCHERS, MEASURED, NCCL_VIAS, PHASES, RESCUE_ENDS, RETRYABLE, STARTUP, STATUSES, WORKLOAD_ERROR_CLASSES,
                    WORKLOAD_PHASES, BuildStatus, ControlStatus, EndedBy, EnvOrigin, ErrorClass, Launcher, Layer,
                    NcclVia, Phase, RescueStatus, Status, WorkloadPhase)

# Variables only a launcher exports to its ranks (Accelerate's configuration, torch elastic's own).
_LAUNCHER_PREFIXES = ("ACCELERATE_", "TORCHELASTIC_")

if TYPE_CHECKING:
    from .images import BuildResult
    from .matrix import Cell

# ---------------------------------------------------------------- the outcome
@dataclass(frozen=True)
class Outcome:
    """A status, a reason, a duration, and for hangs and failures the phase and error class; says
    nothing of how it was produced (outcome.classify makes them from raw attempts)."""

    status: Status
    reason: str = ""
    seconds: float = 0.0
    phase: Phase | None = None
    error_class: ErrorClass | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any, where: str = "outcome") -> Outcome:
        data = _object(data, where)
        status = data.get("status")
        if status not in STATUSES:
            raise RecordError(f"{_at(where, 'status')} {status!r} is not one of {', '.join(STATUSES)}")
        seconds = _field(data, "seconds", float, where) or 0.0
        if seconds < 0:
            raise RecordError(f"{_at(where, 'seconds')} should be 0 or more, not {seconds:g}")
        return cls(status, _field(data, "reason", str, where) or "", seconds,
                   _one_of(data, "phase", PHASES, where), _one_of(data, "error_class", ERROR_CLASSES, where),
                   dict(_field(data, "detail", dict, where) or {}))


# ---------------------------------------------------------------- the cell
_CELL_KEYS = ("cuda", "torch", "accelerate", "nccl", "base", "python", "torch_index", "template", "nccl_via", "stack",
              "variant", "launcher", "id")  # the order of matrix.Cell.fields()


@dataclass(frozen=True)
class CellFields:
    """What a cell is (matrix.Cell.fields() as recorded); None where an older record lacks it."""

    cuda: str | None = None
    torch: str | None = None
    accelerate: str | None = None
    nccl: str | None = None  # "bundled" or the pinned version
    base: str | None = None
    python: str | None = None
    torch_index: str | None = None
    template: str | None = None
    nccl_via: NcclVia | None = None
    stack: str | None = None
    variant: str | None = None
    launcher: Launcher | None = None
    id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys this harness does not know, kept as read

    @classmethod
    def from_cell(cls, cell: Cell) -> CellFields:
        return cls.from_json(cell.fields())

    @classmethod
    def from_json(cls, data: Any, where: str = "cell") -> CellFields:
        data = _object(data, where)
        known = {k: _field(data, k, str, where) for k in _CELL_KEYS}
        known |= {k: _one_of(data, k, values, where) for k, values in (("launcher", LAUNCHERS), ("nccl_via", NCCL_VIAS))}
        return cls(**known, extra={k: v for k, v in data.items() if k not in _CELL_KEYS})

    def to_json(self) -> dict[str, Any]:
        known = {k: getattr(self, k) for k in _CELL_KEYS}
        return {k: v for k, v in known.items() if v is not None} | dict(self.extra)

    @property
    def is_cpu(self) -> bool:
        return self.cuda == "cpu"

    @property
    def is_host(self) -> bool:
        """Ran on the host engine (the stack installed in the harness's own Python)."""
        return self.base == "host"

    def nccl_label(self, loaded: str | None = None, how: str | None = None) -> str:
        """NCCL as loaded (when known), else as asked for, with how it got there (as the rank mapped it,
        when known, else as the cell asked); gloo for CPU cells."""
        if self.is_cpu:
            return "gloo (CPU)"
        via = how or self.nccl_via or "bundled"
        version = loaded or (self.nccl if self.nccl not in (None, "bundled") else None)
        return f"{version} ({via})" if version else via

    def row_key(self, loaded: str | None = None, how: str | None = None) -> tuple[str, ...]:
        """The report row this cell belongs to: CUDA, NCCL, torch, Accelerate, launcher."""
        return (self.cuda or "?", self.nccl_label(loaded, how), self.torch or "?", self.accelerate or "?",
                self.launcher or "accelerate")


@dataclass(frozen=True)
class ImageRef:
    """The image a cell ran in (docker engine)."""

    tag: str | None = None
    id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"tag": self.tag, "id": self.id}

    @classmethod
    def from_json(cls, data: Any, where: str = "image") -> ImageRef | None:
        if data is None:
            return None
        data = _object(data, where)
        return cls(_field(data, "tag", str, where), _field(data, "id", str, where))


def step_json(step: Step) -> dict[str, Any]:
    return {"name": step.name, "env": dict(step.env), "why": step.why}


def search_json(end: SearchEnd) -> dict[str, Any]:
    return {"why": end.why, "untried": list(end.untried), "attempts": end.budget.attempts,
            "seconds": end.budget.seconds}


def search_of(data: Any, where: str) -> SearchEnd:
    """A recorded end of a rescue search, read strictly."""
    facts = _Facts(data, where)
    why = _one_of(facts.data, "why", RESCUE_ENDS, where)
    if why is None:
        raise RecordError(f"{_at(where, 'why')} should be one of {', '.join(RESCUE_ENDS)}, not missing")
    names = facts.list("untried")
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise RecordError(f"{_at(where, f'untried[{i}]')} should be a step name, not {_shown(name)}")
    return SearchEnd(why, tuple(names), Budget(facts.int("attempts", 0, 10_000) or 0, facts.num("seconds") or 0.0))


def step_of(data: Any, where: str) -> Step:
    """A recorded ladder step, read strictly: a name, an object of string values, a why."""
    facts = _Facts(data, where)
    name = facts.str("name")
    if name is None:
        raise RecordError(f"{_at(where, 'name')} should be a step name, not {_shown(facts.data.get('name'))}")
    env = facts.obj("env")
    return Step(name, tuple(sorted((k, env.text(k) or "") for k in env.data)), facts.text("why") or "")


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt of a cell as recorded: its number, its outcome, the raw attempt, the exact command,
    and for a rescue attempt the ladder step it ran with (its variables added to the cell's)."""

    attempt: int | None
    outcome: Outcome | None
    raw: RawAttempt
    command: tuple[str, ...] = ()
    step: Step | None = None

    def to_json(self) -> dict[str, Any]:
        data = {"attempt": self.attempt, "outcome": self.outcome.to_json() if self.outcome else None,
                "raw": self.raw.to_json(), "command": list(self.command)}
        return data | ({"step": step_json(self.step)} if self.step else {})  # other attempts as before the rescue

    @classmethod
    def from_json(cls, data: Any, where: str = "attempt") -> AttemptRecord:
        data = _object(data, where)
        outcome = data.get("outcome")
        step = data.get("step")
        command = _Facts(data, where).strs("command")  # strict: every argument a string
        return cls(_field(data, "attempt", int, where),
                   None if outcome is None else Outcome.from_json(outcome, _at(where, "outcome")),
                   RawAttempt.from_json(data.get("raw"), _at(where, "raw")), command,
                   None if step is None else step_of(step, _at(where, "step")))

    @property
    def busbw(self) -> tuple[int, float] | None:
        """(bytes, median busbw GB/s) at the largest size this attempt measured; None without one."""
        rows = [r for r in self.raw.bandwidth_rows if r.busbw_gbs]
        largest = max(rows, key=lambda r: r.bytes) if rows else None
        return (largest.bytes, largest.busbw_gbs) if largest else None


# ---------------------------------------------------------------- the NCCL-only control
# the control's outcome as what NCCL alone did: a pass below the floor still moved the data; wrong data is
# NCCL failing; an infra error or Ctrl-C says nothing about NCCL
_CONTROL_STATUS: dict[str, ControlStatus] = {"pass": "pass", "slow": "pass", "hang": "hang", "fail": "fail",
                                             "wrong": "fail"}


@dataclass(frozen=True)
class Control:
    """What the NCCL-only control (workload/nccl_control.py) did for a cell: evidence of which layer a
    hang or failure is in, never the cell's verdict."""

    status: ControlStatus
    reason: str = ""  # the control's outcome reason, or why it did not run
    phase: str | None = None
    error_class: str | None = None
    key_line: str = ""  # the most specific line of a failure (outcome.key_line)
    busbw: tuple[int, float] | None = None  # (bytes, median busbw GB/s) at the largest size

    @property
    def could_run(self) -> bool:
        """It got NCCL and a GPU: False when it could not load libnccl or libcudart (a CPU host, an image
        without them), where its failure says nothing about the cell."""
        return self.status != "not-run" and self.error_class not in CONTROL_ERROR_CLASSES

    @classmethod
    def of(cls, attempt: AttemptRecord | None, cell: CellFields) -> Control:
        if attempt is None or attempt.outcome is None:
            return cls("not-run", "not applicable (gloo)" if cell.is_cpu
                       else "not run (--control never, or a run from before the control)")
        out = attempt.outcome
        status = _CONTROL_STATUS.get(out.status, "not-run")
        return cls(status, out.reason, out.phase, out.error_class, str(out.detail.get("key_line") or ""),
                   attempt.busbw)


def layer(cell_status: Status | None, control: Control) -> Layer:
    """Where a hang or failure lies: "nccl" when NCCL alone, with the same library, GPUs and variables,
    hangs or fails too; "above-nccl" (torch's process group, Accelerate's prepare) when NCCL alone passes;
    "unknown" for a cell that did not hang or fail, or a control that did not run or could not load NCCL."""
    if cell_status not in ("hang", "fail") or not control.could_run:
        return "unknown"
    return "above-nccl" if control.status == "pass" else "nccl"


# ---------------------------------------------------------------- the rescue search
@dataclass(frozen=True)
class Tried:
    """One rescue attempt: the step, how it ended, how long it took."""

    step: Step
    status: Status | None
    seconds: float
    attempt: int | None = None


@dataclass(frozen=True)
class Rescue:
    """What the rescue search (ladder.py, runner) found for a cell: the step that made it pass (the
    first, so the least costly that was tried) with its busbw, or none, and every step tried. Evidence
    and advice, never the cell's verdict: a rescued cell still hangs or fails as it is."""

    status: RescueStatus
    reason: str = ""  # why no search ran
    step: Step | None = None
    busbw: tuple[int, float] | None = None  # (bytes, median busbw GB/s) of the rescuing attempt, largest size
    tried: tuple[Tried, ...] = ()
    ended: SearchEnd | None = None  # why the search stopped (None in runs from before it was recorded)

    @classmethod
    def of(cls, attempts: Iterable[AttemptRecord], cell: CellFields, ended: SearchEnd | None = None) -> Rescue:
        runs = [a for a in attempts if a.raw.kind == "rescue" and a.step is not None]
        if not runs:
            return cls("not-run", "not applicable (gloo): NCCL variables do not act on gloo" if cell.is_cpu
                       else "not run (no --rescue, or a run from before the rescue search)")
        tried = tuple(Tried(a.step, a.outcome.status if a.outcome else None, a.outcome.seconds if a.outcome else 0.0,
                            a.attempt) for a in runs if a.step)
        passed = [a for a in runs if a.outcome and a.outcome.status in MEASURED]
        if not passed:
            return cls("not-rescued", tried=tried, ended=ended)
        return cls("rescued", step=passed[0].step, busbw=passed[0].busbw, tried=tried, ended=ended)


# ---------------------------------------------------------------- the cell record
@dataclass(frozen=True)
class CellRecord:
    """One cell's record.json."""

    cell: CellFields
    outcome: Outcome | None
    env: Mapping[str, str] = field(default_factory=dict)
    image: ImageRef | None = None
    attempts: tuple[AttemptRecord, ...] = ()
    search: SearchEnd | None = None  # why the rescue search stopped, where one ran

    # making and storing -------------------------------------------------
    @classmethod
    def of(cls, cell: Cell, outcome: Outcome, attempts: Iterable[AttemptRecord] = (),
           image: ImageRef | Mapping[str, Any] | None = None, search: SearchEnd | None = None) -> CellRecord:
        """The record of a matrix cell (results.save_record writes it)."""
        if image is not None and not isinstance(image, ImageRef):
            image = ImageRef.from_json(image)
        return cls(CellFields.from_cell(cell), outcome, shown_env(cell.variant.env_dict), image, tuple(attempts),
                   search)

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell.to_json(), "env": dict(self.env),
                "outcome": self.outcome.to_json() if self.outcome else None,
                "image": self.image.to_json() if self.image else None,
                "attempts": [a.to_json() for a in self.attempts]} | (
                    {"rescue_search": search_json(self.search)} if self.search else {})

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> CellRecord:
        """Read a record (older and partial ones too); RecordError when its JSON has the wrong shape."""
        data = _object(data, where)
        cell = data.get("cell")
        outcome = data.get("outcome")
        attempts = _field(data, "attempts", list, where) or []
        return cls(CellFields.from_json({} if cell is None else cell, _at(where, "cell")),
                   None if outcome is None else Outcome.from_json(outcome, _at(where, "outcome")),
                   _env(data, where),
                   ImageRef.from_json(data.get("image"), _at(where, "image")),
                   tuple(AttemptRecord.from_json(a, _at(where, f"attempts[{i}]")) for i, a in enumerate(attempts)),
                   None if data.get("rescue_search") is None else search_of(data["rescue_search"],
                                                                             _at(where, "rescue_search")))

    @classmethod
    def parse(cls, data: Any) -> CellRecord | None:
        """The record `data` holds, or None when it holds none (for readers that must never raise)."""
        if isinstance(data, CellRecord):
            return data
        try:
            return cls.from_json(data)
        except RecordError:
            return None

    # the outcome ---------------------------------------------------------
    @property
    def id(self) -> str | None:
        return self.cell.id

    @property
    def status(self) -> Status | None:
        return self.outcome.status if self.outcome else None

    @property
    def reason(self) -> str | None:
        return self.outcome.reason if self.outcome else None

    @property
    def phase(self) -> str | None:
        return self.outcome.phase if self.outcome else None

    @property
    def error_class(self) -> str | None:
        return self.outcome.error_class if self.outcome else None

    @property
    def seconds(self) -> float | None:
        return self.outcome.seconds if self.outcome else None

    @property
    def done(self) -> bool:
        """Recorded with a final outcome: `--resume` does not run it again (an interrupted cell it does)."""
        return self.status not in (None, "interrupted")

    # the attempts --------------------------------------------------------
    @property
    def cell_attempts(self) -> tuple[AttemptRecord, ...]:
        """The attempts of the cell's own workload (not the NCCL-only control's)."""
        return tuple(a for a in self.attempts if a.raw.kind == "cell")

    @property
    def attempt_count(self) -> int:
        return len(self.cell_attempts)

    @property
    def last_attempt(self) -> AttemptRecord | None:
        """The cell's last attempt of its own workload: the one its outcome and evidence come from."""
        own = self.cell_attempts
        return own[-1] if own else None

    @property
    def last_raw(self) -> RawAttempt:
        """The raw record of the last attempt (empty when the cell never ran: n/a, build-error)."""
        last = self.last_attempt
        return last.raw if last else RawAttempt()

    @property
    def control(self) -> Control:
        """What the NCCL-only control run for this cell did (not-run when none ran: gloo, `--control never`)."""
        controls = [a for a in self.attempts if a.raw.kind == "control"]
        return Control.of(controls[-1] if controls else None, self.cell)

    @property
    def rescue(self) -> Rescue:
        """What the rescue search found for this cell (not-run when none ran: gloo, no --rescue)."""
        return Rescue.of(self.attempts, self.cell, self.search)

    @property
    def layer(self) -> Layer:
        """Where this cell's hang or failure lies, by the control (record.layer)."""
        return layer(self.status, self.control)

    @property
    def fingerprint(self) -> Fingerprint:
        return self.last_raw.fingerprint

    @property
    def loaded_nccl(self) -> str | None:
        """NCCL as the ranks loaded it (fingerprint), else as NCCL's log says; None when it never ran."""
        return self.last_raw.loaded_nccl

    @property
    def bandwidth_rows(self) -> tuple[BandwidthRow, ...]:
        return self.last_raw.bandwidth_rows

    @property
    def transports(self) -> tuple[str, ...]:
        return self.last_raw.transports

    @property
    def nodes(self) -> dict[str, tuple[int, ...]]:
        return self.last_raw.nodes

    @property
    def phase_timings(self) -> dict[str, float]:
        return self.last_raw.phase_timings

    @property
    def launcher_changes(self) -> dict[str, EnvChange]:
        return self.fingerprint.env_changed

    @property
    def image_tag(self) -> str | None:
        return self.image.tag if self.image else None

    @property
    def nccl_label(self) -> str:
        """NCCL as loaded when the cell got that far (fingerprint: version and how), else as asked for."""
        fp = self.fingerprint
        return self.cell.nccl_label(fp.nccl_loaded, fp.nccl_how(self.cell.nccl_via))

    @property
    def row_key(self) -> tuple[str, ...]:
        """CUDA, NCCL (nccl_label), torch, Accelerate, launcher: the report row of this cell."""
        fp = self.fingerprint
        return self.cell.row_key(fp.nccl_loaded, fp.nccl_how(self.cell.nccl_via))

    def env_origins(self) -> dict[str, tuple[Any, EnvOrigin]]:
        """Every variable the rank saw or the harness set, with its value and where it came from."""
        raw, fp = self.last_raw, self.fingerprint
        changed = fp.env_changed
        inherited = raw.inherited_env or {}
        recorded = raw.inherited_env is not None  # older records did not keep what the launcher started with
        found: dict[str, tuple[Any, EnvOrigin]] = {}
        for name, value in {**fp.env, **self.env}.items():
            if name in changed and changed[name].actual is not None:
                found[name] = (changed[name].actual, "launcher")
            elif name in self.env:
                found[name] = (fp.env.get(name, value), "variant")
            elif name in inherited:
                found[name] = (value, "inherited")
            elif name == "CUDA_VISIBLE_DEVICES":
                found[name] = (value, "harness")  # the host engine's --gpus
            elif name.startswith(_LAUNCHER_PREFIXES) or recorded:
                found[name] = (value, "launcher")
            else:
                found[name] = (value, "host or image")
        for name, change in changed.items():  # a variable the launcher removed
            if change.actual is None and name not in found:
                found[name] = (None, "launcher")
        for name, value in raw.harness_env.items():
            found[name] = (value, "harness")
        return dict(sorted(found.items()))

    def bandwidth_at(self, size: int | None) -> BandwidthRow | None:
        """The bandwidth row at `size`, else at the largest size measured; None without a busbw."""
        rows = [r for r in self.bandwidth_rows if r.busbw_gbs]
        if not rows:
            return None
        exact = [r for r in rows if r.bytes == size]
        return exact[0] if exact else max(rows, key=lambda r: r.bytes)

    def busbw_at(self, size: int | None) -> tuple[int, float] | None:
        """(bytes, median busbw GB/s) at `size`, else at the largest size measured; None without a busbw."""
        row = self.bandwidth_at(size)
        return (row.bytes, row.busbw_gbs) if row else None


def _env(data: Mapping[str, Any], where: str) -> dict[str, str]:
    """The record's `env`: variable names to string values (as the variant set them, masked)."""
    env = _Facts(data, where).obj("env")
    return {k: v for k, v in ((k, env.text(k)) for k in env.data) if v is not None}


def not_applicable(cell: Cell) -> CellRecord:
    """The record of a cell that cannot exist (matrix.Cell.na_reason says why); it never runs."""
    return CellRecord.of(cell, Outcome("n/a", cell.na_reason or ""))


def build_error(cell: Cell, build: BuildResult) -> CellRecord:
    """The record of a cell whose image could not be built."""
    return CellRecord.of(cell, Outcome("build-error", build.reason, detail={"log": build.log}))


# ---------------------------------------------------------------- run.json
@dataclass(frozen=True)
class RunFacts:
    """The facts of a run (run.json) that reports read; None where the file lacks them (early run.json
    files held the hostname only, and their `cells` only ids)."""

    run_id: str | None = None
    started: str | None = None
    hostname: str | None = None
    os: str | None = None
    driver: str | None = None
    host_gpus: tuple[str, ...] = ()  # GPU names on the host
    gpus: tuple[str, ...] = ()  # the GPU ids the cells used (--gpus)
    engine: str | None = None
    engine_version: str | None = None
    engine_runtimes: tuple[str, ...] = ()
    engine_flags: tuple[str, ...] = ()  # the `invoke matrix` flags that chose the engine; () in older runs
    harness_version: str | None = None
    git_commit: str | None = None
    matrix_path: str | None = None
    matrix_sha256: str | None = None
    cell_ids: tuple[str, ...] = ()  # every cell of the run, in order
    cells: Mapping[str, CellFields] = field(default_factory=dict)  # id -> fields, where run.json has them

    @classmethod
    def from_json(cls, run: Any, problems: list[str] | None = None) -> RunFacts:
        """Never raises: a fact of the wrong type reads as missing, and is said in `problems` when given
        (results.load_run names run.json as corrupt with them)."""
        seen: list[str] = []
        facts = cls._read(run, seen)
        if problems is not None:
            problems.extend(seen)
        return facts

    @classmethod
    def _read(cls, run: Any, problems: list[str]) -> RunFacts:
        def safe(read: Callable[[], Any], default: Any = None) -> Any:
            try:
                return read()
            except RecordError as exc:
                problems.append(str(exc))
                return default

        if not isinstance(run, Mapping):
            problems.append(f"run.json should be an object, not {_shown(run)}")
            run = {}
        top = _Facts(run, "")
        host = {"hostname": run["host"]} if isinstance(run.get("host"), str) else safe(lambda: top.obj("host").data, {})
        h = _Facts(host, "host")
        engine = _Facts(safe(lambda: h.obj("engine").data, {}) or {"name": run.get("engine")}, "host.engine")
        matrix = _Facts(safe(lambda: top.obj("matrix").data, {}), "matrix")
        ids: list[str] = []
        cells: dict[str, CellFields] = {}
        for i, entry in enumerate(safe(lambda: top.list("cells"), [])):
            where = f"cells[{i}]"
            if isinstance(entry, str):
                ids.append(entry)
            elif (cell_id := safe(lambda: _Facts(entry, where).str("id"))) is None:
                problems.append(f"{where} has no cell id")
            else:
                ids.append(cell_id)
                cells |= {cell_id: fields for fields in [safe(lambda: CellFields.from_json(entry, where))] if fields}
        return cls(safe(lambda: top.str("run_id")), safe(lambda: top.str("started")), safe(lambda: h.str("hostname")),
                   safe(lambda: h.str("os")), safe(lambda: h.str("driver")), safe(lambda: h.strs("gpus"), ()),
                   safe(lambda: top.strs("gpus"), ()), safe(lambda: engine.str("name")),
                   safe(lambda: engine.str("version")), safe(lambda: engine.strs("runtimes"), ()), safe(lambda: engine.strs("flags"), ()),
                   safe(lambda: h.str("harness_version")) or safe(lambda: top.str("harness_version")),
                   safe(lambda: h.str("git_commit")), safe(lambda: matrix.str("path")), safe(lambda: matrix.str("sha256")),
                   tuple(dict.fromkeys(ids)), cells)


__all__ = ["Status", "STATUSES", "RETRYABLE", "GOOD", "FAILED", "MEASURED", "STARTUP", "WorkloadPhase", "Phase",
           "PHASES", "WORKLOAD_PHASES", "ErrorClass", "ERROR_CLASSES", "WORKLOAD_ERROR_CLASSES", "EndedBy", "ENDED_BY",
           "Launcher", "LAUNCHERS", "NcclVia", "NCCL_VIAS", "BuildStatus", "BUILD_STATUSES", "EnvOrigin",
           "ENV_ORIGINS", "RecordError",
           "Outcome", "CellFields", "ImageRef", "EnvChange", "PeerAccess", "Fingerprint", "BandwidthRow",
           "NcclSummary", "RankError", "RankSummary", "Placement", "Stall", "RawAttempt", "AttemptRecord", "CellRecord", "ranges_apart",
           "Control", "layer", "Rescue", "Tried", "Step",
           "not_applicable", "build_error", "RunFacts"]
