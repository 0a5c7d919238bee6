"""`invoke bisect CELL --axis A --good V --bad V` (issue 25): find the release of one axis that broke a cell.

Each step is an ordinary run of the matrix pipeline (`invoke matrix`) on a matrix file derived from the cell's
own: the same variant, launcher, ranks, timeouts and bandwidth settings, the one stack with the axis moved to
the step's version. So a step builds its image once (or finds it cached: images are named by what is in them,
wheels are locked), is supervised like any cell, and leaves a run that report, compare and publish read; its
Rerun line repeats it. The search itself is bisection.py (pure). Nothing is kept apart from the runs but a
summary: a second `invoke bisect` with the same arguments (after Ctrl-C, or to see the answer again) finds
each step's record in its run and runs only what is missing.
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from . import bisection, compare, compat, proc, results
from .bisection import Plan, Step
from .errors import EXIT_BAD_INPUT, EXIT_CELLS_FAILED, EXIT_INTERRUPTED, EXIT_OK, HarnessError, InfraError, WriteError
from .matrix import Cell, Matrix, Stack, stack_entry
from .pipeline import MatrixOptions
from .pipeline import run as run_matrix
from .progress import Progress
from .record import CellRecord
from .selection import Selection, by_id, check_drop, resolve

__all__ = ["BisectOptions", "bisect", "released", "derived_matrix"]


@dataclass(frozen=True)
class BisectOptions:
    cell: str
    axis: str
    good: str
    bad: str
    versions: tuple[str, ...] = ()  # --versions: the releases to walk, instead of the index's list
    max_steps: int = 20  # steps run (not those found in earlier runs) before the search stops
    seconds: float = 6 * 3600.0  # the whole search's time; a step under way is finished
    bisect_id: str | None = None  # the name its runs start with (default from the cell, axis and ends)
    metric: str = "outcome"  # outcome | busbw: what makes a step bad (bisection.METRICS)
    threshold: float = 0.10  # --metric busbw: the relative drop that counts, beyond the noise (compare's rule)


_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_id(cell_id: str, axis: str, good: str, bad: str, metric: str = "outcome") -> str:
    what = axis if metric == "outcome" else f"{axis}-{metric}"
    return _SAFE.sub("-", f"bisect-{what}-{good}-{bad}-{cell_id}")[:80]


def released(axis: str, stack: Stack, timeout: float = 120.0) -> list[str]:
    """The axis's releases as pip sees them from this host (`pip index versions`, the index and proxy that
    the wheel store downloads through)."""
    _, package = bisection.AXES[axis]
    if axis in bisection.LISTED_ONLY:
        which = "image tags in the order they were made" if axis == "image" else "CUDA versions (base images)"
        raise HarnessError(f"bisect --axis {axis}: no package index lists {which}. Fix: give them, both ends "
                           "included, with --versions A,B,C.")
    if package is None:
        package = f"nvidia-nccl-cu{stack.cuda.split('.')[0]}" if not stack.is_cpu else None
    if package is None:
        raise HarnessError(f"bisect --axis {axis}: a CPU stack has no NCCL to move. Fix: bisect a GPU cell's nccl, "
                           "or another axis.")
    args = [sys.executable, "-m", "pip", "index", "versions", package]
    if stack.python:
        args += ["--python-version", stack.python, "--only-binary=:all:"]
    done = proc.run(args, timeout=timeout)
    found = re.search(r"Available versions: ([^\n]+)", done.output)
    if done.returncode != 0 or not found:
        raise InfraError(f"pip could not list the releases of {package} ({done.output.strip()[-300:]}). Fix: check the "
                         "index is reachable (pip config list), or give the releases with --versions A,B,C.")
    return [v.strip() for v in found.group(1).split(",") if v.strip()]


def derived_matrix(m: Matrix, cell: Cell, stack: Stack) -> dict:
    """The cell's matrix file with its one stack, variant and launcher: everything else as the file has it."""
    original = yaml.safe_load(m.path.read_text())
    return original | {
        "description": f"bisect step of {cell.id} (from {m.path})",
        "stacks": {"include": [stack_entry(stack)]},
        "variants": [cell.variant.name],
        "launchers": [cell.launcher],
        "exclude": [],
    }


def _find(selection: Selection, cell_id: str, axis: str) -> tuple[Matrix, Cell]:
    m, cells = resolve(replace(selection, only=(), exclude=()), Progress())
    cell = by_id(m, cells, cell_id, "bisect")
    if cell.stack.is_image and axis != "image":
        raise HarnessError(f"bisect {cell_id} --axis {axis}: an image stack's versions are read from the image, not "
                           "chosen. Fix: bisect its images with --axis image --versions OLD,...,NEW (tags in the order "
                           "they were made), or bisect a built stack.")
    if axis == "image" and not cell.stack.is_image:
        raise HarnessError(f"bisect {cell_id} --axis image: this cell's stack is built from versions, not one of your "
                           "images. Fix: bisect one of its versions (--axis torch, accelerate, nccl or cuda), or give "
                           "an image stack's cell.")
    return m, cell


def _recorded(results_dir: Path, run_id: str, cell_id: str) -> CellRecord | None:
    """The step's record where its run holds one that ended (an interrupted step is run again)."""
    path = results_dir / run_id / "cells" / cell_id / "record.json"  # looked at, not made (cell_dir makes it)
    if not path.is_file():
        return None
    record = CellRecord.parse(json.loads(path.read_text()))
    return None if record is None or record.status == "interrupted" else record


def _outcome(record: CellRecord | None) -> tuple[str, str | None, str]:
    if record is None or record.outcome is None:
        return "not run", None, ""
    o = record.outcome
    return o.status or "", o.error_class or None, (o.reason or "")[:200]


def bisect(selection: Selection, options: MatrixOptions, b: BisectOptions) -> int:
    progress = Progress(verbose=options.verbose)
    if b.axis not in bisection.AXES:
        raise HarnessError(f"--axis {b.axis!r} is not an axis bisect walks. Fix: one of {', '.join(bisection.AXES)}.")
    if b.metric not in bisection.METRICS:
        raise HarnessError(f"--metric {b.metric!r} is not a metric bisect judges by. Fix: one of "
                           f"{', '.join(bisection.METRICS)} (busbw: a step is bad when its bandwidth regressed).")
    check_drop(b.threshold)
    m, cell = _find(selection, b.cell, b.axis)
    versions = list(b.versions) or released(b.axis, cell.stack)
    plan = bisection.plan(b.axis, cell.id, b.good, b.bad, versions,
                          lambda v: compat.why_not(bisection.stack_at(cell.stack, b.axis, v)))
    ident = results.check_run_id(b.bisect_id or default_id(cell.id, b.axis, b.good, b.bad, b.metric), "--bisect-id")
    by = "" if b.metric == "outcome" else f", judged by busbw (a drop beyond {b.threshold:.0%} and the noise)"
    progress.say(f"bisect {cell.id} on {b.axis}{by}: {len(plan.versions)} releases from good {plan.good} to bad "
                 f"{plan.bad}, at most {plan.worst_case_steps} steps"
                 + (f"; n/a: {', '.join(f'{v} ({why})' for v, why in plan.na)}" if plan.na else ""))
    if options.dry_run:
        for v in plan.versions:
            progress.say(f"  {v}" + (f"  n/a: {dict(plan.na)[v]}" if v in dict(plan.na) else ""))
        return EXIT_OK
    folder = options.results / ident
    results.make_dir(folder)
    steps: dict[str, Step] = {}
    good_end: tuple[str, str | None] = ("", None)
    bad_end: tuple[str, str | None] = ("", None)
    good_record: CellRecord | None = None
    started, ran = time.monotonic(), 0
    while (version := bisection.next_version(plan, steps)) is not None:
        stack = bisection.stack_at(cell.stack, b.axis, version)
        step_cell = replace(cell, stack=stack)
        run_id = results.check_run_id(f"{ident}-{version}"[:100])
        record = _recorded(options.results, run_id, step_cell.id)
        if record is None:
            if ran >= b.max_steps or time.monotonic() - started > b.seconds:
                progress.say(f"Stopped at the budget ({ran} steps, {time.monotonic() - started:.0f} s); the same "
                             "command goes on from here.")
                break
            path = folder / f"matrix-{version}.yaml"
            results.write_text(path, yaml.safe_dump(derived_matrix(m, cell, stack), sort_keys=False))
            progress.say(f"step {len(steps) + 1}: {b.axis} {version} ({step_cell.id}), run {run_id}")
            try:
                code = run_matrix(Selection(matrix=path, only=(step_cell.id,)),
                                  replace(options, run_id=run_id, resume=True, rescue=False))
            except WriteError:
                raise  # the results cannot be written: nothing more can be kept
            except HarnessError as exc:  # the step stopped before its cell ran (an image that cannot be had)
                ran += 1
                problem = " ".join(str(exc).split())[:300]
                steps[version] = Step(version, "skip", "not run", f"the step could not run: {problem}", run_id)
                progress.say(f"  {version}: skip (the step could not run: {problem})")
                _save(folder, plan, steps, metric=b.metric)
                continue
            ran += 1
            if code == EXIT_INTERRUPTED:
                progress.say(f"Interrupted: {len(steps)} step(s) done are kept in their runs ({ident}-*); the same "
                             "`invoke bisect` command goes on from there.")
                return EXIT_INTERRUPTED
            record = _recorded(options.results, run_id, step_cell.id)
        status, klass, reason = _outcome(record)
        if version == plan.good:
            good_end, good_record = (status, klass), record
        if version == plan.bad:
            bad_end = (status, klass)
        if b.metric == "busbw" and version != plan.good:
            verdict, why = bisection.judge_busbw(status, *_busbw_change(step_cell.id, good_record, record, b.threshold))
            if version == plan.bad and verdict != "bad":
                verdict, why = "skip", f"{why}: the bad end does not hold here (no busbw regression)"
        elif version in (plan.good, plan.bad):
            verdict, why = bisection.judge_end("good" if version == plan.good else "bad", status, klass)
        else:
            verdict, why = bisection.judge(status, klass, good_end[0], bad_end[0], bad_end[1])
        steps[version] = Step(version, verdict, status, f"{why}; {reason}" if reason else why, run_id)
        progress.say(f"  {version}: {verdict} ({why})")
        _save(folder, plan, steps, metric=b.metric)
    said = bisection.answer(plan, steps)
    progress.say(said)
    if said.startswith("first bad"):
        lo, hi = bisection.bounds(plan, steps)
        progress.say(f"The smallest change that reproduces it: {b.axis} {plan.versions[lo]} -> {plan.versions[hi]} in "
                     f"{cell.id}, nothing else moved (variant {cell.variant.name}, launcher {cell.launcher}); the first "
                     f"bad step's record: {steps[plan.versions[hi]].why}")
        for label, version in (("last good", plan.versions[lo]), ("first bad", plan.versions[hi])):
            step_id = replace(cell, stack=bisection.stack_at(cell.stack, b.axis, version)).id
            progress.say(f"Rerun ({label}): invoke matrix --matrix {folder / f'matrix-{version}.yaml'} --only "
                         f"'{step_id}' --run-id {steps[version].run_id}")
    _save(folder, plan, steps, said, b.metric)
    if said.startswith("first bad"):
        return EXIT_OK
    return EXIT_BAD_INPUT if "nothing to bisect" in said else EXIT_CELLS_FAILED


def _busbw_change(cell_id: str, good: CellRecord | None, step: CellRecord | None,
                  threshold: float) -> tuple[str | None, str]:
    """compare's verdict on the step's busbw against the good end's, and its line (no verdict: no change
    beyond the threshold, or nothing both measured)."""
    if good is None or step is None:
        return None, ""
    change = compare.busbw_change(cell_id, good, step, threshold)
    if change is None:
        return None, ""
    return change.verdict, change.text()


def _save(folder: Path, plan: Plan, steps: dict[str, Step], answer: str | None = None, metric: str = "outcome") -> None:
    """bisect.json beside the derived matrices: the plan, each step with its run, and the answer."""
    data = {"axis": plan.axis, "cell": plan.cell_id, "metric": metric, "versions": list(plan.versions), "na": dict(plan.na),
            "steps": [s.__dict__ for s in bisection.order_steps(plan, steps.values())], "answer": answer}
    results.write_json(folder / "bisect.json", data)
