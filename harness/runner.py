"""Run selected cells one at a time (cells that share GPUs must not overlap, or bandwidth would not be
comparable), with retries of hangs and infra errors, and record each cell as soon as it ends."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import ladder, launch, outcome, results, supervise
from .engines.base import CellSpec, Engine
from .kinds import MEASURED, AttemptKind, ControlWhen, GpuApi
from .matrix import Cell, Matrix
from .record import RETRYABLE, AttemptRecord, CellRecord, ImageRef, Outcome
from .workload.cli import FAULT_ENV
from .workload.redact import shown_env


@dataclass(frozen=True)
class RunOptions:
    run_id: str
    results: Path
    gpus: tuple[str, ...] = ()  # () = CPU cells
    ranks: int = 2  # ranks of a CPU cell
    retries: int = 0
    extra_args: tuple[str, ...] = ()  # passed to the workload (tests only)
    extra_env: tuple[tuple[str, str], ...] = ()
    control: ControlWhen = "failing"  # `--control`: for which cells the NCCL-only control runs
    rescue: bool = False  # `--rescue`: the rescue search after a cell hangs or fails
    gpu_api: GpuApi | None = None  # how GPU cells' containers get the GPUs (Engine.gpu_api); None: not chosen


def spec_for(cell: Cell, m: Matrix, engine: Engine, opts: RunOptions, image: str, attempt: int, out: Path,
             kind: AttemptKind = "cell") -> CellSpec:
    """One attempt of a cell as the engine will start it: the real run and the dry run both use this.
    kind "control": the NCCL-only control for the cell, with the same engine, GPUs and variables."""
    ranks = len(opts.gpus) if opts.gpus else opts.ranks
    inherited = engine.inherited_env(image)
    lnch = engine.launch(cell, m, ranks=ranks, out=out, extra_args=() if kind == "control" else opts.extra_args,
                         inherited_env=inherited, control=kind == "control")
    if opts.extra_env:
        lnch = launch.Launch(lnch.argv, lnch.env + opts.extra_env, lnch.ranks, lnch.device)
    return CellSpec(opts.run_id, cell.id, lnch, out, image=image, gpus=opts.gpus, gpu_api=opts.gpu_api, attempt=attempt,
                    inherited_env=tuple(sorted(inherited.items())), kind=kind)


def control_due(cell: Cell, result: Outcome, when: ControlWhen) -> bool:
    """Whether the NCCL-only control runs after the cell's last attempt: `failing` (the default) for an
    NCCL cell that hung or failed (a gloo cell has no NCCL to isolate; a build, infra or Ctrl-C end says
    nothing about NCCL); `always` for every cell that ran to a verdict, gloo cells included (there the
    control reports nccl-not-found or cuda-not-found: it needs libnccl and a GPU); `never` for none."""
    if when == "never" or result.status in ("interrupted", "build-error", "n/a"):
        return False
    return when == "always" or (result.status in ("hang", "fail") and not cell.stack.is_cpu)


def cell_env(cell: Cell, opts: RunOptions) -> dict[str, str]:
    """The variables the harness sets for the cell's ranks: its variant's (and the tests' extra ones)."""
    return {**cell.variant.env_dict, **dict(opts.extra_env)}


def rescue_plan(cell: Cell, m: Matrix, opts: RunOptions,
                inherited: Mapping[str, str] | None = None) -> tuple[ladder.Step, ...] | str:
    """The steps the rescue search would try for the cell, in order and within the attempt budget; or
    why there is no search (rescue_candidates)."""
    found = rescue_candidates(cell, m, opts, inherited)
    return found if isinstance(found, str) else m.rescue_budget.planned(found)


def rescue_candidates(cell: Cell, m: Matrix, opts: RunOptions,
                      inherited: Mapping[str, str] | None = None) -> tuple[ladder.Step, ...] | str:
    """Every step the rescue search may try for the cell, in order, before the attempt budget; or why
    there is no search: gloo ignores every NCCL variable, so a CPU cell has nothing to rescue, unless
    its own environment turns the test faults on (HARNESS_TEST_FAULTS=1: then the variables act on a test
    fault, workload/cli.py HANG_UNLESS_ENV, which is how the search is tested on CPU).
    A change the ranks already have is skipped, whether the cell's variant sets it or the environment
    they inherit (the engine's inherited_env: the image's, or the host's). Seen on 2x H200: the site sets
    NCCL_NVLS_ENABLE=0, and the plan's first step was nvls-off, an attempt that could change nothing."""
    env = cell_env(cell, opts)
    if cell.stack.is_cpu and env.get(FAULT_ENV) != "1":
        return "not applicable (gloo): NCCL variables do not act on gloo"
    return ladder.candidates(m.ladder, {**(inherited or {}), **env})


def with_step(cell: Cell, step: ladder.Step) -> Cell:
    """The cell with the step's variables added to its variant's (same id: the attempt is the cell's)."""
    env = {**cell.variant.env_dict, **dict(step.env)}
    return replace(cell, variant=replace(cell.variant, env=tuple(sorted(env.items()))))


def run_cell(
    engine: Engine,
    cell: Cell,
    m: Matrix,
    opts: RunOptions,
    image: str = "",
    on_event: Callable[[int, dict], None] = lambda r, e: None,
    image_info: ImageRef | Mapping[str, Any] | None = None,
    on_start: Callable = lambda running: None,
) -> CellRecord:
    """Run one cell, retrying hangs and infra errors up to opts.retries times; every attempt is kept,
    and the cell's record is saved before this returns."""
    cell_dir = results.cell_dir(opts.results, opts.run_id, cell.id)
    attempts: list[AttemptRecord] = []
    for attempt in range(1, opts.retries + 2):
        attempts.append(_attempt(engine, cell, m, opts, image, cell_dir, attempt, "cell", on_event, on_start))
        status = _outcome(attempts[-1]).status
        if status not in RETRYABLE or status == "interrupted":
            break
    result = _outcome(attempts[-1])
    if control_due(cell, result, opts.control):
        # on_start is the caller's hold on the cell's own ranks (tests and benchmarks signal them): not the control's
        attempts.append(_attempt(engine, cell, m, opts, image, cell_dir, len(attempts) + 1, "control", on_event,
                                 lambda running: None))
    # never after Ctrl-C (SIGTERM, SIGHUP): the supervisor records an interrupted attempt and returns, and
    # a control interrupted after a hung cell would otherwise be followed by the whole ladder
    search = None
    if opts.rescue and result.status in ("hang", "fail") and not _interrupted(attempts):
        rescues, search = _rescue(engine, cell, m, opts, image, cell_dir, len(attempts) + 1, on_event)
        attempts += rescues
    record = CellRecord.of(cell, result, attempts, image_info, search)
    results.save_record(opts.results, opts.run_id, record)
    return record


def _interrupted(attempts: list[AttemptRecord]) -> bool:
    return any(a.outcome is not None and a.outcome.status == "interrupted" for a in attempts)


def _rescue(engine: Engine, cell: Cell, m: Matrix, opts: RunOptions, image: str, cell_dir: Path, first: int,
            on_event: Callable[[int, dict], None]) -> tuple[list[AttemptRecord], ladder.SearchEnd | None]:
    """The rescue search: one supervised attempt per planned step (attempt-N, kind rescue, the step's
    variables added to the cell's, the rescue thresholds), until one passes, the plan ends or the time
    budget is spent (the last attempt's hard cap is cut to what is left of it); and why it stopped."""
    found = rescue_candidates(cell, m, opts, engine.inherited_env(image))
    if isinstance(found, str):
        return [], None
    steps = m.rescue_budget.planned(found)
    started, done = time.monotonic(), []
    for n, step in enumerate(steps):
        left = m.rescue_budget.seconds - (time.monotonic() - started)
        if left <= 0:
            break
        timeouts = m.rescue_timeouts.model_copy(update={"cell": min(m.rescue_timeouts.cell, left)})
        attempt = _attempt(engine, with_step(cell, step), replace(m, timeouts=timeouts), opts, image, cell_dir,
                           first + n, "rescue", on_event, lambda running: None)
        shown = ladder.Step(step.name, tuple(sorted((k, v or "") for k, v in shown_env(dict(step.env)).items())),
                            step.why)  # as may be written down
        done.append(attempt.replace(step=shown))
        assert attempt.outcome is not None
        if attempt.outcome.status in MEASURED or _interrupted([attempt]):
            break
    last = done[-1].outcome if done else None
    return done, ladder.search_end(found, m.rescue_budget, len(done), last is not None and last.status in MEASURED,
                                   _interrupted(done))


def _outcome(attempt: AttemptRecord) -> Outcome:
    """The outcome of an attempt this run made: _attempt classifies every one."""
    if attempt.outcome is None:
        raise ValueError(f"attempt {attempt.attempt} of {attempt.raw.cell_id} was recorded without an outcome")
    return attempt.outcome


def _attempt(engine: Engine, cell: Cell, m: Matrix, opts: RunOptions, image: str, cell_dir: Path, attempt: int,
             kind: AttemptKind, on_event: Callable[[int, dict], None], on_start: Callable) -> AttemptRecord:
    """One supervised attempt in cell_dir/attempt-N, classified (the control and rescue attempts without a
    bandwidth floor: their busbw is a reference, not a verdict)."""
    out = cell_dir / f"attempt-{attempt}"
    if out.exists():  # a rerun into the same run replaces the attempt; stale events would mislead
        shutil.rmtree(out)
    spec = spec_for(cell, m, engine, opts, image, attempt, out, kind)
    raw = supervise.supervise(engine, spec, m.timeouts, on_event=on_event, on_start=on_start)
    result = outcome.classify(raw, m.min_busbw if kind == "cell" else None,
                              None if cell.stack.nccl_via == "bundled" else cell.stack.nccl)
    return AttemptRecord(attempt=attempt, outcome=result, raw=raw, command=tuple(spec.launch.argv))
