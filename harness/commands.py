"""What each command does, shared by `invoke` (tasks.py) and `python -m harness` (cli.py). Each takes
frozen options, prints for people, and returns an exit code; problems arrive as HarnessError."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from . import baseimage, images, matrix, results
from .engines.docker import DockerEngine
from .errors import EXIT_CELLS_FAILED, EXIT_NOTHING_SELECTED, EXIT_OK, HarnessError
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
