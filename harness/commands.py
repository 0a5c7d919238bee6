"""What each command does, shared by `invoke` (tasks.py) and `python -m harness` (cli.py). Each takes
frozen options, prints for people, and returns an exit code; problems arrive as HarnessError."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import time
from collections import Counter

from . import __version__, baseimage, hostinfo, images, matrix, results, runner
from .engines.docker import DockerEngine
from .engines.host import HostEngine
from .errors import EXIT_CELLS_FAILED, EXIT_INFRA, EXIT_NOTHING_SELECTED, EXIT_OK, HarnessError, InfraError
from .matrix import Cell, Matrix
from .outcome import Outcome
from .progress import Progress


@dataclass(frozen=True)
class Selection:
    matrix: Path | None = None
    only: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


def gpus_visible() -> bool:
    """NVIDIA GPUs on this host, as the driver exposes them (no nvidia-smi needed)."""
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia/gpus").is_dir()


def default_matrix(progress: Progress) -> Path:
    if gpus_visible():
        return matrix.DEFAULT_GPU_MATRIX
    progress.say(
        f"No NVIDIA GPU on this host: using {matrix.DEFAULT_CPU_MATRIX.name} "
        f"(pass --matrix {matrix.DEFAULT_GPU_MATRIX.name} for the GPU matrix)."
    )
    return matrix.DEFAULT_CPU_MATRIX


def resolve(selection: Selection, progress: Progress) -> tuple[Matrix, list[Cell]]:
    """Load the matrix and apply --only/--exclude; both flags are checked before the file is read."""
    only = [matrix.parse_filter(t, "--only") for t in selection.only]
    exclude = [matrix.parse_filter(t, "--exclude") for t in selection.exclude]
    m = matrix.load(selection.matrix or default_matrix(progress))
    return m, matrix.select(m.cells, only, exclude)


def list_cells(selection: Selection, as_json: bool = False) -> int:
    progress = Progress()
    m, cells = resolve(selection, progress)
    if not cells:
        progress.say(f"{m.path.name}: no cell matches the --only/--exclude filters.")
        return EXIT_NOTHING_SELECTED
    runnable = [c for c in cells if c.na_reason is None]
    na = [c for c in cells if c.na_reason is not None]
    if as_json:
        json.dump(
            [c.fields() | {"na_reason": c.na_reason, "env": c.variant.env_dict} for c in cells], sys.stdout, indent=1
        )
        print()
        return EXIT_OK
    stacks = {c.stack.id for c in runnable}
    print(f"{m.path.name}: {len(cells)} cells, {len(runnable)} to run on {len(stacks)} images, {len(na)} n/a")
    width = max(len(c.id) for c in cells)
    for cell in runnable:
        env = " ".join(f"{k}={v}" for k, v in cell.variant.env) or "-"
        print(f"  {cell.id:<{width}}  {env}")
    if na:
        print("n/a (these combinations do not exist; listed, never run):")
        for cell in na:
            print(f"  {cell.id:<{width}}  {cell.na_reason}")
    return EXIT_OK


def build(
    selection: Selection,
    options: images.BuildOptions,
    results_dir: Path = results.DEFAULT_RESULTS,
    run_id: str | None = None,
) -> int:
    """Build the images of the selected cells; cells of an image that fails become build-error."""
    progress = Progress()
    m, cells = resolve(selection, progress)
    runnable = [c for c in cells if c.na_reason is None]
    if not runnable:
        progress.say(f"{m.path.name}: nothing to build (no runnable cell selected).")
        return EXIT_NOTHING_SELECTED
    if options.ca_bundle and not options.ca_bundle.is_file():
        raise HarnessError(f"--ca-bundle {options.ca_bundle}: no such file. Fix: pass a PEM file of CA certificates.")
    if options.wheelhouse:
        options = replace(options, wheelhouse=options.wheelhouse.resolve())
    run = results.run_dir(results_dir, run_id or results.new_run_id())
    engine = DockerEngine.connect()
    stacks = list({c.stack.id: c.stack for c in runnable}.values())
    progress.say(f"Building {len(stacks)} image(s) for {len(runnable)} cell(s); logs in {run / 'builds'}")
    built = images.build_all(stacks, engine, options, run / "builds", progress)
    outcomes = {
        c.id: Outcome("build-error", built[c.stack.id].reason).to_json()
        for c in runnable
        if not built[c.stack.id].ok
    }
    results.write_json(
        run / "builds.json",
        {"matrix": str(m.path), "images": {k: v.to_json() for k, v in built.items()}, "cells": outcomes},
    )
    failed = [r for r in built.values() if not r.ok]
    progress.say(
        f"{len(built) - len(failed)} image(s) ready, {len(failed)} build-error"
        + (f" ({len(outcomes)} cell(s) will be build-error)" if failed else "")
        + f"; record: {run / 'builds.json'}"
    )
    return EXIT_CELLS_FAILED if failed else EXIT_OK


def base_image(ref: str = "harness-base:bookworm", mirror: str | None = None) -> int:
    """Make the local base image unless the engine already has it."""
    progress = Progress()
    if not baseimage.is_local(ref):
        raise HarnessError(f"{ref}: not a base image the harness makes. Fix: use one of {', '.join(baseimage.LOCAL_BASES)}.")
    engine = DockerEngine.connect()
    log = Path(results.DEFAULT_RESULTS) / "base-images.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    made = baseimage.ensure(engine, ref, log, progress, mirror)
    progress.say(f"{ref}: {'made' if made else 'already present'}")
    return EXIT_OK


@dataclass(frozen=True)
class MatrixOptions:
    engine: str | None = None  # docker | host | None = docker when reachable, else host
    gpus: str | None = None  # "all", "0,1", None = all GPUs for GPU cells
    ranks: int | None = None  # CPU cells; default from the matrix file
    retries: int = 0
    results: Path = results.DEFAULT_RESULTS
    run_id: str | None = None
    build: images.BuildOptions = images.BuildOptions()
    extra_args: tuple[str, ...] = ()
    extra_env: tuple[tuple[str, str], ...] = ()


def _engine(choice: str | None, progress: Progress):
    if choice not in (None, "docker", "host"):
        raise HarnessError(f"--engine {choice}: unknown engine. Fix: use --engine docker or --engine host.")
    if choice == "host":
        return HostEngine()
    try:
        return DockerEngine.connect()
    except InfraError:
        if choice == "docker":
            raise
    progress.say(
        "No Docker engine reachable: running the host engine on the stack installed in this Python "
        "(NCCL variants still apply). For the full matrix in containers: scripts/setup.sh, then run again."
    )
    return HostEngine()


def run_matrix(selection: Selection, opts: MatrixOptions) -> int:
    """Build what is missing, run the selected cells one at a time, record each as it ends."""
    progress = Progress()
    gpus = runner.check_gpus(opts.gpus)
    if opts.ranks is not None and opts.ranks < 1:
        raise HarnessError(f"--ranks {opts.ranks}: must be at least 1. Fix: e.g. --ranks 2.")
    m, cells = resolve(selection, progress)
    engine = _engine(opts.engine, progress)
    if isinstance(engine, HostEngine):
        stack = runner.host_stack()
        progress.say(f"Host stack: {stack.id} (python {stack.python})")
        cells = [c for c in runner.host_cells(m, stack)
                 if any(c.variant == s.variant and c.launcher == s.launcher for s in cells)]
    runnable = [c for c in cells if c.na_reason is None]
    if not runnable:
        progress.say("Nothing to run: no runnable cell selected.")
        return EXIT_NOTHING_SELECTED
    if not gpus and any(not c.stack.is_cpu for c in runnable):
        gpus = runner.check_gpus("all")
    run_id = opts.run_id or results.new_run_id()
    run = results.run_dir(opts.results, run_id)
    results.write_json(run / "run.json", {
        "run_id": run_id, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": hostinfo.facts(engine),
        "engine": engine.name, "gpus": list(gpus), "harness_version": __version__,
        "matrix": {"path": str(m.path), "sha256": m.sha256, "timeouts": m.timeouts.model_dump(),
                   "bandwidth_sizes": list(m.bandwidth_sizes)},
        "cells": [c.id for c in cells],
    })
    for cell in cells:
        if cell.na_reason is not None:
            runner.CellResult(cell, Outcome("n/a", cell.na_reason)).save(opts.results, run_id)
    tags: dict[str, str] = {}
    image_ids: dict[str, str] = {}
    counts: Counter[str] = Counter()
    if isinstance(engine, DockerEngine):
        stacks = list({c.stack.id: c.stack for c in runnable}.values())
        built = images.build_all(stacks, engine, opts.build, run / "builds", progress)
        tags = {k: v.tag for k, v in built.items() if v.ok}
        image_ids = {k: engine.client.images.get(tag).id for k, tag in tags.items()}
        for cell in runnable:
            if not built[cell.stack.id].ok:
                failed = Outcome("build-error", built[cell.stack.id].reason, detail={"log": built[cell.stack.id].log})
                runner.CellResult(cell, failed).save(opts.results, run_id)
                counts["build-error"] += 1
    todo = [c for c in runnable if isinstance(engine, HostEngine) or c.stack.id in tags]
    ropts = runner.RunOptions(run_id, opts.results, gpus, opts.ranks or m.ranks, opts.retries, opts.extra_args,
                              opts.extra_env)
    progress.say(f"Running {len(todo)} cell(s) on the {engine.name} engine; results in {run}")
    for n, cell in enumerate(todo, 1):
        cell_opts = replace(ropts, gpus=()) if cell.stack.is_cpu else ropts

        def show(rank: int, event: dict) -> None:
            if event.get("event") in ("phase_start", "error"):
                task.detail(f"rank {rank} {event['event']} {event.get('phase', '')}")

        with progress.task(f"[{n}/{len(todo)}] {cell.id}") as task:
            tag = tags.get(cell.stack.id, "")
            result = runner.run_cell(engine, cell, m, cell_opts, tag, on_event=show,
                                     image_info={"tag": tag, "id": image_ids[cell.stack.id]} if tag else None)
        counts[result.outcome.status] += 1
        progress.say(f"[{n}/{len(todo)}] {cell.id}: {result.outcome.status.upper()} - {result.outcome.reason} "
                     f"({result.outcome.seconds:.0f}s)")
        if result.outcome.status == "interrupted":
            progress.say(f"Interrupted: results so far are kept in {run}.")
            return 130
    progress.say("Summary: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + f"; results in {run}")
    if counts.get("infra-error"):
        return EXIT_INFRA
    bad = sum(counts[s] for s in ("fail", "hang", "wrong", "build-error", "slow"))
    return EXIT_CELLS_FAILED if bad else EXIT_OK


def report(run: str | None, results_dir: Path = results.DEFAULT_RESULTS, out: Path | None = None) -> int:
    """Render a recorded run (default: the latest) as markdown, to stdout or a file."""
    from . import report as report_mod

    data = results.load_run(results.resolve_run(results_dir, run))
    text = report_mod.render(data)
    if out:
        out.write_text(text)
        Progress().say(f"report of {data.run_id} written to {out}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def compare(base: str, new: str, results_dir: Path = results.DEFAULT_RESULTS, threshold: float = 0.10,
            out: Path | None = None) -> int:
    """Markdown diff of two runs; exit 1 when something regressed, 0 otherwise."""
    from . import compare as compare_mod

    if not 0 < threshold < 10:
        raise HarnessError(f"--threshold {threshold}: expected a fraction like 0.1 (10%). Fix: e.g. --threshold 0.1.")
    a = results.load_run(results.resolve_run(results_dir, base))
    b = results.load_run(results.resolve_run(results_dir, new))
    d = compare_mod.diff(a, b, threshold)
    text = compare_mod.render(a, b, d, threshold)
    if out:
        out.write_text(text)
    sys.stdout.write(text)
    return EXIT_CELLS_FAILED if d.regressed else EXIT_OK


def publish(run: str | None, to: Path, results_dir: Path = results.DEFAULT_RESULTS) -> int:
    """Write the report and its plot into a docs tree and refresh the index."""
    from . import publish as publish_mod

    data = results.load_run(results.resolve_run(results_dir, run))
    page = publish_mod.publish(data, to)
    Progress().say(f"published {data.run_id} to {page} (index: {to / publish_mod.INDEX})")
    return EXIT_OK
