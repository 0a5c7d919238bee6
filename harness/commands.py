"""The faces of the commands that `invoke` (tasks.py) and `python -m harness` call. Each takes frozen
options, prints for people, and returns an exit code; problems arrive as HarnessError. The work lives
in its own module: pipeline (matrix), doctor, images, report, compare, publish."""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from . import baseimage, hints, images, reaper, results, userimages
from . import bugreport as bugreport_mod
from . import compare as compare_mod
from . import publish as publish_mod
from . import report as report_mod
from .bisectrun import BisectOptions, bisect
from .doctor import doctor
from .engines.dockerclient import DockerClient
from .errors import EXIT_CELLS_FAILED, EXIT_NOTHING_SELECTED, EXIT_OK, HarnessError, InfraError, closest
from .pipeline import MatrixOptions, checked_build_options, write_builds
from .pipeline import run as run_matrix
from .progress import Progress
from .selection import Selection, check_drop, resolve
from .workload.redact import shown_env

__all__ = ["Selection", "MatrixOptions", "run_matrix", "rescue", "bisect", "BisectOptions", "list_cells", "build",
           "base_image", "report", "compare",
           "publish", "doctor", "clean"]


def rescue(cell_id: str, selection: Selection, options: MatrixOptions) -> int:
    """`invoke rescue CELL`: the matrix run of that one cell (its id exactly, as `invoke list` prints it)
    with the rescue search on. An id the matrix does not have is bad input, with the closest one."""
    m, cells = resolve(selection, Progress())
    ids = [c.id for c in cells]
    if cell_id not in ids:
        guess = closest(cell_id, ids)
        raise HarnessError(f"rescue {cell_id!r}: no such cell in {m.path}. Fix: "
                           + (f"did you mean {guess}? " if guess else "")
                           + f"Give a cell id as `invoke list --matrix {m.path}` prints it.")
    return run_matrix(replace(selection, only=(cell_id,)), replace(options, rescue=True))


def list_cells(selection: Selection, as_json: bool = False) -> int:
    progress = Progress()
    reaper.sweep(progress)
    m, cells = resolve(selection, progress)
    if not cells:
        progress.say(f"{m.path.name}: no cell matches the --only/--exclude filters.")
        return EXIT_NOTHING_SELECTED
    runnable = [c for c in cells if c.na_reason is None]
    na = [c for c in cells if c.na_reason is not None]
    if as_json:
        json.dump(
            [c.fields() | {"na_reason": c.na_reason, "env": shown_env(c.variant.env_dict)} for c in cells], sys.stdout,
            indent=1
        )
        print()
        return EXIT_OK
    stacks = {c.stack.id for c in runnable}
    print(f"{m.path.name}: {len(cells)} cells, {len(runnable)} to run on {len(stacks)} images, {len(na)} n/a")
    width = max(len(c.id) for c in cells)
    for cell in runnable:
        env = " ".join(report_mod.assignment(k, v) for k, v in cell.variant.env) or "-"
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
    jobs: int = 1,
    verbose: bool = False,
) -> int:
    """Build the images of the selected cells; cells of an image that fails become build-error."""
    progress = Progress(verbose=verbose)
    if run_id is not None:
        results.check_run_id(run_id)
    m, cells = resolve(selection, progress)
    runnable = [c for c in cells if c.na_reason is None]
    options = checked_build_options(options, jobs)
    if not runnable:
        progress.say(f"{m.path.name}: nothing to build (no runnable cell selected).")
        return EXIT_NOTHING_SELECTED
    docker = DockerClient.connect()
    reaper.sweep(progress, docker)
    runnable = userimages.resolve(runnable, docker, progress, str(m.path))
    run = results.run_dir(results_dir, run_id or results.new_run_id())
    stacks = list({c.stack.id: c.stack for c in runnable}.values())
    with results.owned(run):
        progress.say(f"Building {len(stacks)} image(s) for {len(runnable)} cell(s); logs in {run / 'builds'}")
        built = images.build_all(stacks, docker, options, run / "builds", progress, jobs=jobs)
        outcomes = write_builds(run / "builds.json", m, runnable, built)["cells"]
    failed = [r for r in built.values() if not r.ok]
    progress.say(
        f"{len(built) - len(failed)} image(s) ready, {len(failed)} build-error"
        + (f" ({len(outcomes)} cell(s) will be build-error)" if failed else "")
        + f"; record: {run / 'builds.json'}"
    )
    return EXIT_CELLS_FAILED if failed else EXIT_OK


def base_image(ref: str = "harness-base:bookworm", mirror: str | None = None, verbose: bool = False) -> int:
    """Make the local base image unless the engine already has it."""
    progress = Progress(verbose=verbose)
    if not baseimage.is_local(ref):
        raise HarnessError(f"{ref}: not a base image the harness makes. Fix: use one of {', '.join(baseimage.LOCAL_BASES)}.")
    docker = DockerClient.connect()
    reaper.sweep(progress, docker)
    log = Path(results.DEFAULT_RESULTS) / "base-images.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    made = baseimage.ensure(docker, ref, log, progress, mirror)
    progress.say(f"{ref}: {'made' if made else 'already present'}")
    return EXIT_OK


def report(run: str | None, results_dir: Path = results.DEFAULT_RESULTS, out: Path | None = None) -> int:
    """Render a recorded run (default: the latest) as markdown, to stdout or a file."""
    hints.check()
    reaper.sweep(Progress())
    data = results.load_run(results.resolve_run(results_dir, run))
    return _emit(report_mod.render(data), out, f"report of {data.run_id}")


def compare(base: str, new: str, results_dir: Path = results.DEFAULT_RESULTS, threshold: float = 0.10,
            out: Path | None = None, stacks: str | None = None) -> int:
    """Markdown diff of two runs (with `stacks` OLD=NEW: of stack OLD's cells in `base` against stack NEW's in
    `new`, which may be the same run); exit 1 when something regressed, 0 otherwise."""
    hints.check()
    pair = compare_mod.parse_stacks(stacks) if stacks is not None else None
    reaper.sweep(Progress())
    check_drop(threshold)  # as bisect and fleet: a regression is a drop, so 1 (100%) or more would hide them all
    a = results.load_run(results.resolve_run(results_dir, base))
    b = results.load_run(results.resolve_run(results_dir, new))
    if pair:
        a, b = compare_mod.of_stack(a, pair[0]), compare_mod.of_stack(b, pair[1])
    d = compare_mod.diff(a, b, threshold)
    text = compare_mod.render(a, b, d, threshold, pair)
    if out:
        _write_out(out, text)
    sys.stdout.write(text)
    return EXIT_CELLS_FAILED if d.regressed else EXIT_OK


def bugreport(cell_id: str, run: str | None, results_dir: Path = results.DEFAULT_RESULTS, template: str = "nccl",
              out: Path | None = None) -> int:
    """The body of an upstream bug report for one recorded cell (default run: the latest), to stdout or a file."""
    hints.check()
    reaper.sweep(Progress())
    data = results.load_run(results.resolve_run(results_dir, run))
    record = data.records.get(cell_id)
    last = record.last_attempt if record else None
    folder = data.path / "cells" / cell_id / f"attempt-{last.attempt}" if last else None
    logs = {path.stem[len("nccl-rank"):]: _readable(path)
            for path in (sorted(folder.glob("nccl-rank*.log")) if folder and folder.is_dir() else [])}
    return _emit(bugreport_mod.render(data, cell_id, template, bugreport_mod.Logs(logs)), out,
                 f"bug report for {cell_id} of {data.run_id}")


def _emit(text: str, out: Path | None, what: str) -> int:
    """A rendered text to --out FILE (saying so), else to stdout."""
    if out:
        _write_out(out, text)
        Progress().say(f"{what} written to {out}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _readable(path: Path) -> str:
    """A rank's log as text; an unreadable one (permissions, a disk error) as its error, in its place."""
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        return f"({path.name} could not be read: {exc.strerror or exc})"


def _write_out(out: Path, text: str) -> None:
    """--out FILE: a folder that does not exist is the flag's fault (exit 2); the write itself is the
    results store's atomic one (a full or read-only disk: exit 4, naming the file)."""
    if not out.parent.is_dir():
        raise HarnessError(f"--out {out}: the folder {out.parent} does not exist. Fix: give a file in a folder that "
                           "exists and that you can write.")
    results.write_text(out, text)


def publish(run: str | None, to: Path, results_dir: Path = results.DEFAULT_RESULTS) -> int:
    """Write the report and its plot into a docs tree and refresh the index."""
    hints.check()
    reaper.sweep(Progress())
    data = results.load_run(results.resolve_run(results_dir, run))
    published = publish_mod.publish(data, to)
    progress = Progress()
    for note in published.damaged:
        progress.say(note)
    progress.say(f"published {data.run_id} to {published.page} (index: {to / publish_mod.INDEX})")
    return EXIT_OK


def clean(remove_images: bool = False) -> int:
    """Remove what harnesses that have ended left behind, on every engine: host processes, containers and
    Slurm jobs of dead harnesses, and containers of older harness versions (no owner label); a live harness's cells
    are never touched. Without a Docker engine only the host is swept (and said), not an error. With
    `remove_images`, also the images the harness built."""
    progress = Progress()
    docker = reaper.connect_docker()
    if docker is None:
        progress.say("No Docker engine reachable: no containers to remove; host processes only.")
    removed = reaper.sweep(progress, docker, unowned=True, connect=False)
    kinds = Counter(item.engine for item in removed)
    print(f"removed {kinds['host']} process(es) and {kinds['docker']} container(s)"
          + (f", cancelled {kinds['slurm']} Slurm job(s)" if kinds["slurm"] else ""))
    if remove_images:
        if docker is None:
            raise InfraError("--images: no Docker engine reachable, so no image can be removed. Fix: start the "
                             "engine (scripts/setup.sh), or set DOCKER_HOST to it.")
        print(f"removed {docker.remove_built_images()} image(s) "
              "(the base images stay; `docker rmi harness-base:bookworm` removes that)")
    return EXIT_OK
