"""`invoke matrix`: from a selection to recorded outcomes. Flags are checked before anything starts;
then the engine says which cells it runs, images are built (or found by content hash) one after another,
and every cell runs under supervision as soon as its image is ready, while the next images build (one
cell at a time; on the slurm engine up to --jobs at once, each its own job on its own nodes), recorded as
soon as it ends; then the report is written. The dry run builds the same specs through the same functions
and prints them instead of running them."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import (
    __version__,
    engines,
    hints,
    hostinfo,
    images,
    owner,
    reaper,
    report,
    results,
    runner,
    schedule,
    statefile,
    userimages,
)
from .codec import RecordError
from .engines.base import Engine
from .engines.container import gpu_text
from .errors import EXIT_CELLS_FAILED, EXIT_INFRA, EXIT_INTERRUPTED, EXIT_NOTHING_SELECTED, EXIT_OK, HarnessError, WriteError
from .kinds import CONTROL_WHEN, ControlWhen, GpuApi
from .matrix import Cell, Matrix
from .progress import Progress
from .record import FAILED, CellFields, CellRecord, Outcome, build_error, not_applicable
from .runfacts import HostJson, MatrixJson, RunJson
from .selection import Selection, check_gpu_api, check_gpus, check_ranks, check_ranks_for_gpus, check_timeouts, resolve


@dataclass(frozen=True)
class MatrixOptions:
    engine: str | None = None  # docker | host | slurm | None = docker when reachable, else host
    slurm: engines.SlurmOptions | None = None  # --nodes, --partition...: the slurm engine's flags, when given
    gpus: str | None = None  # "all", "0,1", None = all GPUs for GPU cells
    ranks: int | None = None  # CPU cells; default from the matrix file
    retries: int = 0
    results: Path = results.DEFAULT_RESULTS
    run_id: str | None = None
    resume: bool = False
    timeouts: tuple[str, ...] = ()  # "phase=seconds" overrides
    jobs: int = 1  # parallel image builds; on the slurm engine also cells at the same time
    dry_run: bool = False
    as_json: bool = False
    verbose: bool = False  # plain output: also each phase of each rank and each build step
    build: images.BuildOptions = images.BuildOptions()
    extra_args: tuple[str, ...] = ()
    extra_env: tuple[tuple[str, str], ...] = ()
    control: ControlWhen = "failing"  # --control: for which cells the NCCL-only control runs
    rescue: bool = False  # --rescue (and `invoke rescue`): the rescue search after a hang or failure
    gpu_api: str | None = None  # --gpu-api cdi|nvidia: how containers get GPUs; None = a probe chooses (checked: GpuApi)


def checked_build_options(options: images.BuildOptions, jobs: int) -> images.BuildOptions:
    """The build flags of `build` and `matrix`, checked (bad ones name the flag) and made absolute."""
    if jobs < 1:
        raise HarnessError(f"--jobs {jobs}: must be at least 1. Fix: e.g. --jobs 2.")
    if options.ca_bundle and not options.ca_bundle.is_file():
        raise HarnessError(f"--ca-bundle {options.ca_bundle}: no such file. Fix: pass a PEM file of CA certificates.")
    return replace(options, wheelhouse=options.wheelhouse.resolve()) if options.wheelhouse else options


def _check_options(opts: MatrixOptions) -> tuple[MatrixOptions, tuple[str, ...]]:
    """Every flag checked before anything starts; returns the options made absolute and the GPU ids."""
    if opts.slurm is not None:
        opts.slurm.check()
        if opts.slurm.gpus_per_node and opts.gpus:
            raise HarnessError(f"--gpus {opts.gpus} and --gpus-per-node {opts.slurm.gpus_per_node}: two ways to say a GPU "
                               "cell's ranks. Fix: on a Slurm cluster use --gpus-per-node alone (Slurm picks each node's "
                               "GPUs); --gpus names this host's.")
    gpus = check_gpus(opts.gpus)
    check_ranks(opts.ranks)
    check_ranks_for_gpus(opts.ranks, gpus, opts.gpus)
    if opts.run_id is not None:
        results.check_run_id(opts.run_id)
    if opts.retries < 0:
        raise HarnessError(f"--retries {opts.retries}: must be 0 or more. Fix: e.g. --retries 1.")
    if opts.control not in CONTROL_WHEN:
        raise HarnessError(f"--control {opts.control}: not one of {', '.join(CONTROL_WHEN)}. Fix: e.g. --control always.")
    check_gpu_api(opts.gpu_api)
    return replace(opts, build=checked_build_options(opts.build, opts.jobs)), gpus


def read_images(engine: Engine, cells: list[Cell], m: Matrix, progress: Progress) -> list[Cell]:
    """The user's images of the selected image stacks, read before anything runs (userimages.resolve: exit 2
    for one that cannot be pulled or has no Python or no torch); an engine that builds no images runs the
    nodes' or host's own stack (its cells() has already replaced every stack)."""
    builder = engine.builder if engine.builds_images and any(c.stack.is_image for c in cells) else None
    return userimages.resolve(cells, builder, progress, str(m.path)) if builder is not None else cells


def _run_id(opts: MatrixOptions) -> str:
    if not opts.resume:
        return opts.run_id or results.new_run_id()
    run_id = opts.run_id
    if not run_id:
        earlier = results.runs(opts.results)
        run_id = earlier[-1] if earlier else None
    if run_id is None:
        raise HarnessError(f"--resume: no earlier run in {opts.results}. Fix: run without --resume first.")
    return run_id


def _already_done(run: Path, progress: Progress) -> tuple[set[str], bool]:
    """Cells of an earlier attempt at this run that need no rerun (--resume), and whether its run.json
    can be kept. A corrupt record is not done: its cell runs again, said so; a corrupt run.json is
    written again."""
    data = results.load_run(run)
    for cell_id, problem in data.problems.items():
        if (cell_id == "run.json" and problem != "missing") or (run / "cells" / cell_id / "record.json").exists():
            progress.say(f"--resume: {problem}; {'written again' if cell_id == 'run.json' else 'the cell runs again'}")
    return {cell_id for cell_id, record in data.records.items() if record.done}, "run.json" not in data.problems


def run(selection: Selection, opts: MatrixOptions) -> int:
    """Build what is missing, run the selected cells as their images are ready (one at a time, or --jobs at
    once on the slurm engine), record each as it ends. SIGTERM and SIGHUP end the run like Ctrl-C."""
    with owner.signals_as_interrupt():
        return _run(selection, opts)


def _run(selection: Selection, opts: MatrixOptions) -> int:
    progress = Progress(verbose=opts.verbose)
    opts, gpus = _check_options(opts)
    hints.check()  # a bad hints file is said now, not after the whole matrix has run
    m, cells = resolve(selection, progress)
    m = replace(m, timeouts=check_timeouts(opts.timeouts, m.timeouts))
    engine = engines.choose(opts.engine, progress, opts.slurm, opts.jobs)
    reaper.sweep(progress, engine.client)  # before anything is measured
    engine.preflight(progress)
    cells = read_images(engine, engine.cells(m, cells, progress), m, progress)
    runnable = [c for c in cells if c.na_reason is None]
    if not runnable:
        progress.say("Nothing to run: no runnable cell selected.")
        return EXIT_NOTHING_SELECTED
    slurm_gpus = opts.slurm is not None and opts.slurm.gpus_per_node  # the nodes' GPUs, given by Slurm
    if not gpus and not slurm_gpus and any(not c.stack.is_cpu for c in runnable):
        gpus = check_gpus("all")
        check_ranks_for_gpus(opts.ranks, gpus, None)
    run_id = _run_id(opts)
    ropts = runner.RunOptions(run_id, opts.results, gpus, opts.ranks or m.ranks, opts.retries, opts.extra_args,
                              opts.extra_env, opts.control, opts.rescue)
    if opts.dry_run:
        return _dry_run(m, runnable, engine, ropts, opts, progress)
    run = results.run_dir(opts.results, run_id)
    with results.owned(run) as stale:
        if stale:
            progress.say(f"{run}: took over the lock of {stale}, which ended without releasing it.")
        try:
            engine.check_results(run, progress)
            return _run_cells(run, m, cells, engine, opts, ropts, progress)
        except OSError as exc:  # a write outside the results store (an attempt folder, a log) failed
            if exc.errno not in results.WRITE_ERRNOS:
                raise
            failure = results.write_error(exc.filename or run, exc)
        except WriteError as exc:
            failure = exc
    raise _stopped(run, failure)


def _stopped(run: Path, failure: WriteError) -> WriteError:
    """A failed write ends the run (exit 4) keeping every record made before it, with the report when
    it can still be written. Seen before: a read-only folder mid-cell lost the record and the rest of
    the run with a PermissionError traceback; a full tmpfs left attempt.json at 0 bytes."""
    try:
        _write_report(run)
        report = f"; report: {run / 'report.md'}"
    except WriteError:
        report = "; the report could not be written either (`invoke report` writes it later)"
    return WriteError(f"{failure} The run stopped there: every record made before is kept in {run}{report}. "
                      f"Once fixed, `--resume --run-id {run.name}` continues it.")


def _write_report(run: Path) -> None:
    results.write_text(run / "report.md", report.render(results.load_run(run)))


def _run_cells(run: Path, m: Matrix, cells: list[Cell], engine: Engine, opts: MatrixOptions,
               ropts: runner.RunOptions, progress: Progress) -> int:
    """Record the run's facts, then build the images in the main thread while the lane runs the cells of those
    ready, every cell not yet done, each recorded as it ends."""
    run_id, gpus = ropts.run_id, ropts.gpus
    runnable = [c for c in cells if c.na_reason is None]
    done, keep_facts = _already_done(run, progress) if opts.resume else (set(), False)
    if done:
        progress.say(f"Resuming {run_id}: {len(done)} cell(s) already recorded are skipped.")
    if not keep_facts:
        # the host's and engine's facts are what nvidia-smi, git and the engine answered: one that does not fit
        # its declaration is left out (said in the progress), never a crash of the run
        unfit: list[str] = []
        facts = RunJson(
            run_id=run_id, started=time.strftime(results.STARTED),
            host=HostJson.tolerant(hostinfo.facts(engine.facts()), unfit, "run.json host"),
            engine=engine.name, gpus=tuple(gpus), harness_version=__version__,
            matrix=MatrixJson(path=str(m.path), sha256=m.sha256, timeouts=m.timeouts.model_dump(),
                              bandwidth_sizes=tuple(m.bandwidth_sizes)),
            cells=tuple(CellFields.from_cell(c).to_json() for c in cells))  # report places unreadable cells by these
        for problem in unfit:
            progress.say(f"run.json: left out {problem}")
        results.write_json(run / "run.json", facts.to_json())
    for cell in cells:
        if cell.na_reason is not None:
            results.save_record(opts.results, run_id, not_applicable(cell))
    todo = [c for c in runnable if c.id not in done]
    counts: Counter[str] = Counter()
    builder = engine.builder if engine.builds_images and todo else None  # connects (InfraError) when it must
    stacks = list({c.stack.id: c.stack for c in todo}.values())
    if builder is not None:  # before any cell holds the status line: debootstrap's shows there (a minute)
        images.ensure_bases(stacks, builder, run / "builds", progress)
    together = engine.concurrent_cells(opts.jobs) if len(todo) > 1 else 1
    progress.say(f"Running {len(todo)} cell(s) on the {engine.name} engine"
                 f"{f', up to {together} at a time' if together > 1 else ''}, each as soon as its image is ready; "
                 f"results in {run}")
    built: dict[str, images.BuildResult] = {}
    done_n = 0
    chosen: list[GpuApi | None] = []  # the run's GPU way, chosen once: before its first GPU cell starts
    choosing = threading.Lock()

    def cell_options(cell: Cell) -> runner.RunOptions:
        if cell.stack.is_cpu:
            return replace(ropts, gpus=())
        with choosing:
            if not chosen:  # the probe starts this cell's image, built by now
                api, why = choose_gpu_api(engine, [cell], ropts.gpus, opts.gpu_api,
                                          lambda c: built[c.stack.id].tag if c.stack.id in built else "")
                if api is not None:
                    progress.say(gpu_api_line(api, why, ropts.gpus).removeprefix("# "))
                    _record_gpu_api(run, api, progress)
                chosen.append(api)
        return replace(ropts, gpu_api=chosen[0])

    def run_one(cell: Cell) -> CellRecord:
        def show(rank: int, event: dict) -> None:
            if event.get("event") in ("phase_start", "phase_end", "error"):
                progress.detail(f"{cell.id + ': ' if together > 1 else ''}rank {rank} {event['event']} "
                                f"{event.get('phase', '')}")

        cell_opts, image = cell_options(cell), built.get(cell.stack.id)
        tally = ", ".join(f"{v} {k}" for k, v in sorted(dict(counts).items())) or "none yet"  # a copy: ended() adds
        with (progress.task(f"[{done_n + 1}/{len(todo)}] {cell.id} (so far: {tally})", echo=False) if together == 1
              else nullcontext()):
            return runner.run_cell(engine, cell, m, cell_opts, image.tag if image else "", on_event=show,
                                   image_info={"tag": image.tag, "id": image.image_id} if image else None)

    def ended(cell: Cell, result: CellRecord) -> None:
        """The cell's line and tally (a cell that ran, or one whose image failed)."""
        nonlocal done_n
        done_n += 1
        outcome = _outcome(result)
        counts[outcome.status] += 1
        progress.say(f"[{done_n}/{len(todo)}] {cell.id}: {outcome.status.upper()} - {outcome.reason} "
                     f"({outcome.seconds:.0f}s)")

    def build_failed(cell: Cell, build: images.BuildResult) -> CellRecord:
        record = build_error(cell, build)
        results.save_record(opts.results, run_id, record)
        return record

    def gpus_held(cell: Cell) -> frozenset[str]:
        return frozenset(ropts.gpus) if engine.shares_gpus and not cell.stack.is_cpu else frozenset()

    def image_known(result: images.BuildResult) -> None:
        result = replace(result, image_id=engine.image_id(result.tag)) if result.ok else result
        built[result.stack_id] = result
        lane.image(result)

    lane = _Lane(todo, together, gpus_held, run_one, ended, build_failed, engine.interrupt)
    with lane, (progress.task(f"{len(todo)} cell(s), up to {together} at a time", echo=False) if together > 1
                else nullcontext()):
        try:
            if builder is None:  # the cells run on the nodes' or this host's own stack
                lane.ready({s.id for s in stacks})
            else:
                images.build_all(stacks, builder, opts.build, run / "builds", progress, jobs=opts.jobs,
                                 on_built=image_known, beside_cells=True)
            lane.wait()
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: during a build, or while the last cells run
            lane.interrupt()
            lane.wait()  # each running cell ends `interrupted`; a second Ctrl-C stops waiting
        except BaseException:  # a failed write, the GPU probe's refusal: the run stops, ending its cells now
            lane.stop()
            raise
    if built:  # a copy: with --jobs > 1 an interrupted run's builds may still end in their threads
        write_builds(run / "builds.json", m, todo, dict(built), add=opts.resume)
    return _finish(run, counts, lane.interrupted, opts, progress)


def _outcome(record: CellRecord) -> Outcome:
    """The outcome of a record this run made: CellRecord.of (runner.run_cell, build_error) gives every one."""
    if record.outcome is None:
        raise ValueError(f"the record of {record.id} has no outcome")
    return record.outcome


class _Lane:
    """The run's cells, each started in a worker thread as soon as schedule.startable lets it: its image known
    (on_built, in the thread that built it, while the main thread goes on to the next build), a slot free
    (Engine.concurrent_cells: one on the docker and host engines, whose cells share this machine, so bandwidth
    stays comparable; on the slurm engine --jobs, each its own job with --exclusive: no node shared, see
    SlurmOptions.sbatch_args), none of its GPUs held by a running cell. Each cell is recorded by its worker
    and said here as it ends; the cells of an image that failed are build-error as it fails. Ctrl-C (SIGTERM,
    SIGHUP) reaches only the main thread: interrupt() ends every running cell through engine.interrupt() (each
    recorded `interrupted`), and cells not started are left for --resume. Leaving the lane waits for every
    worker, so a cell's kill and cleanup always finish."""

    def __init__(self, cells: list[Cell], slots: int, gpus: Callable[[Cell], frozenset[str]],
                 run_one: Callable[[Cell], CellRecord], ended: Callable[[Cell, CellRecord], None],
                 build_failed: Callable[[Cell, images.BuildResult], CellRecord], end_running: Callable[[], None]) -> None:
        self._slots, self._gpus = slots, gpus
        self._run_one, self._ended, self._build_failed, self._end_running = run_one, ended, build_failed, end_running
        self._waiting = list(cells)  # in the matrix's order
        self._ready: set[str] = set()  # stacks whose image is built or cached
        self._running: dict[Future[CellRecord], Cell] = {}
        self._changed = threading.Condition(threading.RLock())  # a done callback may run in the thread that submits
        self._pool = ThreadPoolExecutor(slots, thread_name_prefix="cell")
        self._failure: BaseException | None = None
        self._stopped = False
        self.interrupted = False

    def __enter__(self) -> _Lane:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True)

    def ready(self, stacks: set[str]) -> None:
        with self._changed:
            self._ready |= stacks
            self._start()

    def image(self, result: images.BuildResult) -> None:
        """An image is known: built or cached (its cells may start), or failed (its cells are build-error now).
        Raises what a cell's worker raised, so that the builds stop too."""
        with self._changed:
            if self._failure is not None:
                raise self._failure
            if self._stopped:
                return
            if result.ok:
                self._ready.add(result.stack_id)
            else:
                failed = [c for c in self._waiting if c.stack.id == result.stack_id]
                self._waiting = [c for c in self._waiting if c.stack.id != result.stack_id]
                for cell in failed:
                    self._ended(cell, self._build_failed(cell, result))
            self._start()

    def _start(self) -> None:
        """Start what schedule.startable picks (the lock held)."""
        if self._stopped:
            return
        picks = schedule.startable([schedule.Waiting(c.stack.id, self._gpus(c)) for c in self._waiting], self._ready,
                                   [self._gpus(c) for c in self._running.values()], self._slots)
        starting = [self._waiting[n] for n in picks]
        self._waiting = [c for n, c in enumerate(self._waiting) if n not in picks]
        for cell in starting:
            future = self._pool.submit(self._run_one, cell)
            self._running[future] = cell
            future.add_done_callback(self._done)

    def _done(self, future: Future[CellRecord]) -> None:
        with self._changed:
            cell = self._running.pop(future)
            try:
                self._ended(cell, future.result())
            except BaseException as exc:  # a failed write, the GPU probe's refusal: wait() and image() raise it
                self._failure = self._failure or exc
                self.stop()
            self._start()
            self._changed.notify_all()

    def wait(self) -> None:
        """Until every cell has ended (once every image is known), or after stop() every running one; raises what
        a worker raised. Wakes every second, so that Ctrl-C is seen."""
        with self._changed:
            while self._running or (self._waiting and not self._stopped):
                self._changed.wait(1.0)
            if self._failure is not None:
                raise self._failure

    def stop(self) -> None:
        """No cell starts any more, and every running one ends now (recorded `interrupted`)."""
        with self._changed:
            self._stopped = True
        self._end_running()  # engine.interrupt()

    def interrupt(self) -> None:
        self.interrupted = True
        self.stop()


def write_builds(path: Path, m: Matrix, cells: list[Cell], built: dict[str, images.BuildResult],
                 add: bool = False) -> dict:
    """results/<run>/builds.json, written by `build` and `matrix`: each image's BuildResult (status
    built, cached or build-error, seconds, log, reason) and the build-error outcome of every cell whose
    image failed. With `add` (--resume) what is already recorded there stays, but for the images built again and their cells."""
    record: dict[str, Any] = {"matrix": str(m.path), "images": {k: v.to_json() for k, v in built.items()},
                              "cells": {c.id: _outcome(build_error(c, built[c.stack.id])).to_json()
                                        for c in cells if c.stack.id in built and not built[c.stack.id].ok}}
    if add and path.exists():
        # unreadable or of another shape (not JSON, lists for objects, a FIFO): counted as absent, since what
        # this attempt built is still true and each cell's own record holds its build-error
        try:
            earlier = statefile.read_json(path, results.MAX_RECORD_BYTES)
        except (OSError, statefile.Damaged):
            earlier = None
        if isinstance(earlier, dict) and isinstance(earlier.get("images"), dict) and isinstance(earlier.get("cells"), dict):
            fixed = {c.id for c in cells if c.stack.id in built and built[c.stack.id].ok}
            record = {**record, "images": earlier["images"] | record["images"],
                      "cells": {k: v for k, v in earlier["cells"].items() if k not in fixed} | record["cells"]}
    results.write_json(path, record)
    return record


def _finish(run: Path, counts: Counter, interrupted: bool, opts: MatrixOptions, progress: Progress) -> int:
    """The report beside the results, a summary for people (or JSON), and the exit code."""
    _write_report(run)
    data = results.load_run(run)
    if interrupted:
        progress.say(f"Interrupted: results so far are kept in {run}; continue with --resume --run-id {run.name}.")
    progress.say("Summary: " + (", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "nothing ran")
                 + f"; report: {run / 'report.md'}")
    if opts.as_json:
        json.dump({"run_id": run.name, "results": str(run), "report": str(run / "report.md"), "counts": dict(counts),
                   "cells": [{"id": k, "status": r.status, "reason": r.reason, "phase": r.phase, "error_class": r.error_class}
                             for k, r in sorted(data.records.items())]}, sys.stdout, indent=1)
        print()
    if interrupted:
        return EXIT_INTERRUPTED
    if counts.get("infra-error"):
        return EXIT_INFRA
    bad = sum(counts[s] for s in FAILED)
    return EXIT_CELLS_FAILED if bad else EXIT_OK


def choose_gpu_api(engine: Engine, cells: list[Cell], gpus: tuple[str, ...], given: str | None,
                   image_of: Callable[[Cell], str]) -> tuple[GpuApi | None, str]:
    """How the run's GPU cells get their GPUs, chosen once (after the images are built: the probe starts the
    first GPU cell's image, or a local base image where it does not exist yet, as in a dry run), and why:
    --gpu-api, or a probe; (None, "") for a run without GPU cells. The real run and the dry run both ask here."""
    gpu_cells = [c for c in cells if not c.stack.is_cpu]
    if not gpus or not gpu_cells:
        return None, ""
    first = gpu_cells[0]
    # a user's image is on the engine already (read before anything runs) where its thin layer may not be yet
    api = engine.gpu_api(gpus, image_of(first) or first.stack.image, check_gpu_api(given))
    return api, "--gpu-api" if given is not None else "probed"


def gpu_api_line(api: GpuApi, why: str, gpus: tuple[str, ...]) -> str:
    """The run's (and the dry run's) one line on it: `# GPUs through CDI (nvidia.com/gpu=0; probed)`."""
    return f"# GPUs to containers through {gpu_text(api, gpus)} ({why})"


def _record_gpu_api(run: Path, api: GpuApi, progress: Progress) -> None:
    """run.json's gpu_api, once chosen: run.json is written before the images are built, the probe after."""
    path = run / "run.json"
    try:
        facts = RunJson.read(statefile.read_json(path, results.MAX_RECORD_BYTES), str(path))
    except (OSError, ValueError, RecordError) as exc:
        progress.say(f"run.json: the GPU way ({api}) is not recorded: {exc}")
        return
    if facts.gpu_api != api:
        results.write_json(path, facts.replace(gpu_api=api).to_json())


def _dry_run(m: Matrix, cells: list[Cell], engine: Engine, ropts: runner.RunOptions, opts: MatrixOptions,
             progress: Progress) -> int:
    """What would be built, and each cell's equivalent command line from the same spec the real run
    starts, copy-pasteable (the GPUs through the way the real run would take: the same choice, the probe
    starting the GPU cell's image if it is cached); nothing is built, run or written."""
    tags: dict[str, str] = {}
    builder = engine.builder if engine.builds_images else None
    ready: dict[str, str] = {}
    if builder is not None:
        stacks = list({c.stack.id: c.stack for c in cells}.values())
        print(f"# {len(stacks)} image(s):")
        for stack, tag, cached in images.plan(stacks, builder, opts.build):
            tags[stack.id] = tag
            state = "cached" if cached else "would build"
            print(f"# {state}: {tag} from images/{stack.template}.Dockerfile.j2"
                  + (f" on {stack.image} ({userimages.describe(stack)})" if stack.is_image else ""))
            if cached:
                ready[stack.id] = tag
    # the probe starts an image that exists: a cached one, a user's image, else a local base
    api, why = choose_gpu_api(engine, cells, ropts.gpus, opts.gpu_api, lambda c: ready.get(c.stack.id, ""))
    if api is not None:
        print(gpu_api_line(api, why, ropts.gpus))
        ropts = replace(ropts, gpu_api=api)
    print(f"# {len(cells)} cell(s):")
    for cell in cells:
        cell_opts = replace(ropts, gpus=()) if cell.stack.is_cpu else ropts
        out = (Path(ropts.results) / ropts.run_id / "cells" / cell.id / "attempt-1").resolve()
        spec = runner.spec_for(cell, m, engine, cell_opts, tags.get(cell.stack.id, ""), 1, out)
        print(f"# {cell.id}\n{engine.equivalent(spec)}")
        if ropts.control == "always":  # with `failing` it runs only after a hang or failure, attempt-N
            control = runner.spec_for(cell, m, engine, cell_opts, tags.get(cell.stack.id, ""), 2,
                                      out.with_name("attempt-2"), "control")
            print(f"# {cell.id}: the NCCL-only control, after the cell's last attempt\n{engine.equivalent(control)}")
        if ropts.rescue:
            print(rescue_lines(cell, m, cell_opts, engine.inherited_env(tags.get(cell.stack.id, ""))))
    return EXIT_OK


def rescue_lines(cell: Cell, m: Matrix, ropts: runner.RunOptions, inherited: dict[str, str]) -> str:
    """What the rescue search would try for the cell after a hang or failure, in order, within its budget."""
    found = runner.rescue_candidates(cell, m, ropts, inherited)
    if isinstance(found, str):
        return f"# {cell.id}: no rescue search: {found}"
    budget = m.rescue_budget
    steps = budget.planned(found)
    beyond = found[len(steps):]
    head = (f"# {cell.id}: the rescue search, after a hang or failure: up to {len(steps)} attempt(s) within "
            f"{budget.seconds:g} s, stopping at the first pass")
    tail = ([f"#   not tried, beyond the attempt budget of {budget.attempts} (matrix.yaml rescue: attempts): "
             f"{', '.join(s.name for s in beyond)}"] if beyond else [])
    return "\n".join([head] + [f"#   {n}. {step.name}: {step.assignments()}" for n, step in enumerate(steps, 1)] + tail)
