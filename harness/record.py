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

Every part is a codec.Model: `from_json` reads older and partial records (a missing field is its
default) and raises RecordError for JSON of the wrong shape (a field of the wrong type, an unknown
status), which results.load_run reports as a corrupt record; `to_json` writes the layout above. The
cell's fields are in cellfields.py (run.json lists them too), run.json's facts in runfacts.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import Field, model_validator

from .cellfields import CellFields, ImageRef
from .codec import Model, RecordError, Seconds, Str, Text, ints, one_of
from .evidence import NcclSummary, Placement, RankError, RankState, RawAttempt, Stall
from .kinds import (
    BUILD_STATUSES,
    CONTROL_ERROR_CLASSES,
    ENDED_BY,
    ENV_ORIGINS,
    ERROR_CLASSES,
    FAILED,
    GOOD,
    LAUNCHERS,
    MEASURED,
    NCCL_VIAS,
    PHASES,
    RESCUE_ENDS,
    RETRYABLE,
    STARTUP,
    STATUSES,
    WORKLOAD_ERROR_CLASSES,
    WORKLOAD_PHASES,
    BuildStatus,
    ControlStatus,
    EndedBy,
    EnvOrigin,
    ErrorClass,
    Launcher,
    Layer,
    NcclVia,
    Phase,
    RescueEnd,
    RescueStatus,
    Status,
    WorkloadPhase,
)
from .ladder import Budget, SearchEnd, Step
from .payloads import BandwidthRow, EnvChange, Fingerprint, P2pCheck, PeerAccess, ranges_apart
from .workload.redact import shown_env

# Variables only a launcher exports to its ranks (Accelerate's configuration, torch elastic's own).
_LAUNCHER_PREFIXES = ("ACCELERATE_", "TORCHELASTIC_")

if TYPE_CHECKING:
    from .images import BuildResult
    from .matrix import Cell


# ---------------------------------------------------------------- the outcome
class Outcome(Model):
    """A status, a reason, a duration, and for hangs and failures the phase and error class; says
    nothing of how it was produced (outcome.classify makes them from raw attempts)."""

    status: Annotated[Status, one_of(STATUSES)]
    reason: Text = ""
    seconds: Seconds = 0.0
    phase: Annotated[Phase, one_of(PHASES)] | None = None
    error_class: Annotated[ErrorClass, one_of(ERROR_CLASSES)] | None = None
    detail: dict[str, Any] = {}  # the classifier's evidence for its verdict (ranks behind, key line, log...)

    @classmethod
    def from_json(cls, data: Any, where: str = "outcome") -> Outcome:
        return cls.read(data, where)


class StepJson(Model):
    """A ladder step as the record keeps it (ladder.Step: its variables as an object)."""

    name: Str
    env: dict[str, Text] = {}
    why: Text = ""

    @classmethod
    def of(cls, step: Step) -> StepJson:
        return cls(name=step.name, env=dict(step.env), why=step.why)

    @property
    def step(self) -> Step:
        return Step(self.name, tuple(sorted(self.env.items())), self.why)


class SearchJson(Model):
    """Why a rescue search stopped (ladder.SearchEnd) as the record keeps it."""

    why: Annotated[RescueEnd, one_of(RESCUE_ENDS)]
    untried: tuple[Str, ...] = ()
    attempts: Annotated[int, ints(0, 10_000)] = 0
    seconds: Seconds = 0.0

    @classmethod
    def of(cls, end: SearchEnd) -> SearchJson:
        return cls(why=end.why, untried=end.untried, attempts=end.budget.attempts, seconds=end.budget.seconds)

    @property
    def end(self) -> SearchEnd:
        return SearchEnd(self.why, self.untried, Budget(self.attempts, self.seconds))


class AttemptRecord(Model):
    """One attempt of a cell as recorded: its number, its outcome, the raw attempt, the exact command,
    and for a rescue attempt the ladder step it ran with (its variables added to the cell's)."""

    OMIT_DEFAULT: ClassVar[frozenset[str]] = frozenset({"step_json"})  # other attempts as before the rescue
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset({"raw"})
    attempt: Annotated[int, ints()] | None = None
    outcome: Outcome | None = None
    raw: RawAttempt = RawAttempt()
    command: tuple[Text, ...] = ()
    step_json: StepJson | None = Field(None, alias="step")

    @model_validator(mode="before")
    @classmethod
    def _step(cls, data: Any) -> Any:
        """A ladder.Step given as `step` (the runner's rescue attempts) is recorded as its JSON."""
        if isinstance(data, Mapping):
            return {k: StepJson.of(v) if isinstance(v, Step) else v for k, v in data.items()}
        return data

    @property
    def step(self) -> Step | None:
        return self.step_json.step if self.step_json else None

    @classmethod
    def from_json(cls, data: Any, where: str = "attempt") -> AttemptRecord:
        return cls.read(data, where)

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
class CellRecord(Model):
    """One cell's record.json."""

    OMIT_DEFAULT: ClassVar[frozenset[str]] = frozenset({"search_json"})
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset({"cell", "attempts"})  # older and partial records
    POSITIONAL: ClassVar[tuple[str, ...]] = ("cell", "outcome", "env", "image", "attempts", "search_json")
    cell: CellFields = CellFields()
    env: dict[str, Text] = {}  # the variant's variables, as set (masked)
    outcome: Outcome | None = None
    image: ImageRef | None = None
    attempts: tuple[AttemptRecord, ...] = ()
    search_json: SearchJson | None = Field(None, alias="rescue_search")  # why the rescue search stopped

    @model_validator(mode="before")
    @classmethod
    def _search(cls, data: Any) -> Any:
        """`search`, a ladder.SearchEnd (CellRecord.of, replace), is recorded as its JSON."""
        if isinstance(data, Mapping) and "search" in data:
            data = {k: v for k, v in data.items() if k != "search"} | {
                "search_json": SearchJson.of(data["search"]) if isinstance(data["search"], SearchEnd) else data["search"]}
        return data

    # making and storing -------------------------------------------------
    @classmethod
    def of(cls, cell: Cell, outcome: Outcome, attempts: Iterable[AttemptRecord] = (),
           image: ImageRef | Mapping[str, Any] | None = None, search: SearchEnd | None = None) -> CellRecord:
        """The record of a matrix cell (results.save_record writes it)."""
        return cls(cell=CellFields.from_cell(cell), outcome=outcome, env=shown_env(cell.variant.env_dict),
                   image=ImageRef.read(image, "image") if image is not None else None, attempts=tuple(attempts),
                   search_json=SearchJson.of(search) if search else None)

    @property
    def search(self) -> SearchEnd | None:
        """Why the rescue search stopped, where one ran."""
        return self.search_json.end if self.search_json else None

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> CellRecord:
        """Read a record (older and partial ones too); RecordError when its JSON has the wrong shape."""
        return cls.read(data, where)

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
    def one_rank(self) -> bool:
        """Its last attempt ran one rank: nothing crossed from one GPU (or rank) to another, so it says
        nothing of the paths between them (the one-GPU host)."""
        return self.last_raw.expected_ranks == 1

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
    def collective_rows(self) -> dict[str, tuple[BandwidthRow, ...]]:
        """Every collective's sweep, all-reduce's first (the table's column); the others in the detail."""
        return self.last_raw.collective_rows

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
    def p2p_check(self) -> P2pCheck:
        """The IPC peer check of its last attempt (empty where it did not run)."""
        return self.last_raw.p2p_check

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
        """The image, CUDA, NCCL (nccl_label), torch, Accelerate, launcher: the report row of this cell."""
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


def not_applicable(cell: Cell) -> CellRecord:
    """The record of a cell that cannot exist (matrix.Cell.na_reason says why); it never runs."""
    return CellRecord.of(cell, Outcome(status="n/a", reason=cell.na_reason or ""))


def build_error(cell: Cell, build: BuildResult) -> CellRecord:
    """The record of a cell whose image could not be built."""
    return CellRecord.of(cell, Outcome(status="build-error", reason=build.reason, detail={"log": build.log}))


__all__ = ["Status", "STATUSES", "RETRYABLE", "GOOD", "FAILED", "MEASURED", "STARTUP", "WorkloadPhase", "Phase",
           "PHASES", "WORKLOAD_PHASES", "ErrorClass", "ERROR_CLASSES", "WORKLOAD_ERROR_CLASSES", "EndedBy", "ENDED_BY",
           "Launcher", "LAUNCHERS", "NcclVia", "NCCL_VIAS", "BuildStatus", "BUILD_STATUSES", "EnvOrigin",
           "ENV_ORIGINS", "RecordError",
           "Outcome", "CellFields", "ImageRef", "EnvChange", "PeerAccess", "P2pCheck", "Fingerprint", "BandwidthRow",
           "NcclSummary", "RankError", "RankState", "Placement", "Stall", "RawAttempt", "AttemptRecord", "CellRecord",
           "ranges_apart",
           "Control", "layer", "Rescue", "Tried", "Step", "StepJson", "SearchJson",
           "not_applicable", "build_error"]
