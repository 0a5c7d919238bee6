"""Builds and cells overlapped: a cell starts as soon as its image is ready, while the next images build,
under the rules of before (a slot of Engine.concurrent_cells, GPUs never held by two running cells, the
matrix's order otherwise). schedule.startable is the pure step, specified by a table; the rest through whole
`invoke matrix` runs on the fake engine (tests/fakeengine.py) with scripted builds (FakeBuilder).
tests/test_schedule_engine.py proves the first verdict before the second image on the real engine."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from harness import images, pipeline, reaper, results, supervise
from harness import selection as selection_mod
from harness.record import CellRecord
from harness.schedule import Waiting, startable
from harness.selection import Selection

from .fakeengine import FakeBuilder, FakeEngine, slow_end, stall

G01 = frozenset({"0", "1"})
G0, G1 = frozenset({"0"}), frozenset({"1"})


@pytest.mark.parametrize("waiting, ready, running, slots, starts", [
    # nothing ready: nothing starts
    ([Waiting("a"), Waiting("b")], set(), [], 1, ()),
    # one slot: the first ready cell
    ([Waiting("a"), Waiting("a")], {"a"}, [], 1, (0,)),
    # a cell whose image is building is passed by a later one whose image is ready
    ([Waiting("a"), Waiting("b"), Waiting("b")], {"b"}, [], 1, (1,)),
    ([Waiting("a"), Waiting("b"), Waiting("b")], {"b"}, [], 2, (1, 2)),
    # the slots bound it: --jobs (Engine.concurrent_cells), running cells counted
    ([Waiting("a")] * 4, {"a"}, [], 3, (0, 1, 2)),
    ([Waiting("a")] * 4, {"a"}, [frozenset()], 3, (0, 1)),
    ([Waiting("a")] * 4, {"a"}, [frozenset()] * 3, 3, ()),
    # GPUs: never held by two running cells; cells holding none (CPU, or each on nodes of its own) never wait for GPUs
    ([Waiting("a", G01), Waiting("a", G01)], {"a"}, [], 2, (0,)),
    ([Waiting("a", G0), Waiting("a", G1)], {"a"}, [], 2, (0, 1)),
    ([Waiting("a", G01)], {"a"}, [G1], 2, ()),
    ([Waiting("a"), Waiting("a", G0)], {"a"}, [G01], 3, (0,)),
    # ... and a ready cell waiting for its GPUs is not passed by a later ready one: the order stays
    ([Waiting("a", G01), Waiting("a")], {"a"}, [G0], 3, ()),
    ([Waiting("a", G0), Waiting("a", G01), Waiting("a", G1)], {"a"}, [], 3, (0,)),
    # but a cell whose image is building never holds anything up
    ([Waiting("b", G01), Waiting("a", G01)], {"a"}, [], 2, (1,)),
])
def test_the_next_cells_to_start(waiting, ready, running, slots, starts):
    assert startable(waiting, ready, running, slots) == starts


# ------------------------------------------------------------------ whole runs on the fake engine
A, B = "cpu-torch2.13.0-acc1.15.0", "cpu-torch2.13.0-acc0.34.2"
TWO_STACKS = """version: 1
stacks:
  include:
    - {cuda: cpu, torch: "2.13.0", accelerate: "1.15.0"}
    - {cuda: cpu, torch: "2.13.0", accelerate: "0.34.2"}
variants: [default, p2p-off]
launchers: [accelerate]
"""


@pytest.fixture(autouse=True)
def fake_world(monkeypatch: pytest.MonkeyPatch) -> None:
    """No wheel store and no pip (a build context without wheels), no sweep of real leftovers, and the
    supervisor's second for SIGUSR1's stack dumps shortened: the fake ranks answer at once."""
    monkeypatch.setattr(images, "prepare", lambda stack, options, log: images.render(stack, options))
    monkeypatch.setattr(reaper, "sweep", lambda *args, **kwargs: [])
    monkeypatch.setattr(supervise, "STACK_DUMP_WAIT_S", 0.05)


def _run(monkeypatch: pytest.MonkeyPatch, engine: FakeEngine, matrix: Path, results_dir: Path, **options) -> int:
    monkeypatch.setattr(pipeline.engines, "choose", lambda *args: engine)
    return pipeline.run(Selection(matrix), pipeline.MatrixOptions(results=results_dir, run_id="r", **options))


def _records(run: Path) -> dict[str, CellRecord]:
    return results.load_run(run).records


def _verdict(record: CellRecord) -> float:
    """When the cell's verdict came (time.time()): its last attempt's start and length."""
    raw = record.attempts[-1].raw
    return raw.started_wall + raw.seconds


def _built(run: Path) -> dict[str, dict]:
    return json.loads((run / "builds.json").read_text())["images"]


def test_a_cell_whose_image_is_ready_runs_while_the_next_image_builds(monkeypatch, tmp_path, capsys):
    matrix = tmp_path / "m.yaml"
    matrix.write_text(TWO_STACKS)
    first = tmp_path / "res" / "r" / "cells" / f"{A}+p2p-off" / "record.json"
    # B's build ends only once both of A's cells are recorded: without the overlap it would be held 20 s and fail
    builder = FakeBuilder(until={B: first.exists})
    assert _run(monkeypatch, FakeEngine(builder=builder), matrix, tmp_path / "res") == 0
    run = tmp_path / "res" / "r"
    records = _records(run)
    assert {k: r.status for k, r in records.items()} == {f"{s}+{v}": "pass" for s in (A, B) for v in ("default", "p2p-off")}
    built = _built(run)
    assert {k: v["status"] for k, v in built.items()} == {A: "built", B: "built"}
    b_ready = built[B]["started_wall"] + built[B]["seconds"]
    assert _verdict(records[f"{A}+default"]) < _verdict(records[f"{A}+p2p-off"]) < b_ready
    assert _verdict(records[f"{B}+default"]) > b_ready
    lines = capsys.readouterr().err.splitlines()
    said = [next(n for n, line in enumerate(lines) if line.startswith(start)) for start in (
        f"[1/2] building {A}", f"[1/2] {A}: built in", f"[1/4] {A}+default: PASS", f"[2/4] {A}+p2p-off: PASS",
        f"[2/2] {B}: built in", f"[3/4] {B}+default: PASS")]
    assert said == sorted(said), "\n".join(lines)  # the builds' lines and the cells' interleaved, in that order
    assert lines.index(next(l for l in lines if l.startswith(f"[2/2] building {B}"))) < said[3]


def test_a_failed_build_marks_its_cells_and_the_other_images_cells_run(monkeypatch, tmp_path, capsys):
    matrix = tmp_path / "m.yaml"
    matrix.write_text(TWO_STACKS)
    assert _run(monkeypatch, FakeEngine(builder=FakeBuilder(seconds={B: 0.3}, fail=(A,))), matrix, tmp_path / "res") == 1
    run = tmp_path / "res" / "r"
    records = _records(run)
    assert {k: r.status for k, r in records.items()} == {
        f"{A}+default": "build-error", f"{A}+p2p-off": "build-error", f"{B}+default": "pass", f"{B}+p2p-off": "pass"}
    assert "the fake build of" in records[f"{A}+default"].outcome.reason
    builds = json.loads((run / "builds.json").read_text())
    assert {k: v["status"] for k, v in builds["images"].items()} == {A: "build-error", B: "built"}
    assert set(builds["cells"]) == {f"{A}+default", f"{A}+p2p-off"}
    err = capsys.readouterr().err
    assert f"[1/4] {A}+default: BUILD-ERROR" in err and f"[4/4] {B}+p2p-off: PASS" in err
    assert "Summary: 2 build-error, 2 pass" in err


GPU_AND_CPU = """version: 1
stacks:
  include:
    - {cuda: "12.4.1", torch: "2.5.1", accelerate: "1.15.0"}
    - {cuda: cpu, torch: "2.13.0", accelerate: "1.15.0"}
variants: [default, p2p-off]
launchers: [accelerate]
"""


def test_the_jobs_bound_holds_and_no_gpu_is_held_by_two_running_cells(monkeypatch, tmp_path):
    """An engine that runs two cells at once (as the slurm engine does with --jobs 2) on GPUs it shares (as
    the docker and host engines do): the two GPU cells never overlap, a CPU cell runs beside a GPU cell,
    never more than two run, and no later cell passes a ready one waiting for its GPUs."""
    monkeypatch.setattr(selection_mod, "present_gpus", lambda: ["0", "1"])
    matrix = tmp_path / "m.yaml"
    matrix.write_text(GPU_AND_CPU)
    engine = FakeEngine({0: slow_end(0.4)}, together=2)
    assert _run(monkeypatch, engine, matrix, tmp_path / "res", gpus="0,1", jobs=2) == 0
    records = _records(tmp_path / "res" / "r")
    spans = {k: (r.attempts[-1].raw.started_wall, _verdict(r)) for k, r in records.items()}
    gpu = sorted(v for k, v in spans.items() if k.startswith("cu12.4.1"))
    assert len(gpu) == 2 and gpu[0][1] <= gpu[1][0]  # the GPU cells one after the other
    starts = sorted(s for s, _ in spans.values())
    at_once = max(sum(1 for s, e in spans.values() if s <= t < e) for t in starts)
    assert at_once == 2  # a CPU cell beside a GPU cell, never three
    order = sorted(spans, key=lambda k: spans[k][0])
    # the matrix's order: the first GPU cell and the CPU cell beside it, then the second GPU cell
    assert order[0].startswith("cu12.4.1") and order[0].endswith("+default")
    assert order.index("cu12.4.1-torch2.5.1-acc1.15.0+p2p-off") < order.index(f"{A}+p2p-off")


@pytest.mark.parametrize("jobs", [1, 2])
def test_sigterm_mid_build_ends_the_running_cell_keeps_the_rest_and_resumes(monkeypatch, tmp_path, capsys, jobs):
    """The first image's cell runs (its ranks stuck in step) while the second image builds; SIGTERM (as
    Ctrl-C) during that build: the cell ends `interrupted` with nothing of it left, the cells not started are
    not recorded, builds.json keeps the image built, the report is written, exit 130; --resume runs the rest.
    With --jobs 2 the builds run in worker threads, and the signal still ends the run at once."""
    matrix = tmp_path / "m.yaml"
    matrix.write_text(TWO_STACKS)
    signalled, finished = threading.Event(), threading.Event()
    engine = FakeEngine(lambda spec: {0: stall("step", beating=True), 1: stall("step", beating=True)}
                        if spec.cell_id == f"{A}+default" else {})

    def running_then_sigterm() -> bool:
        if engine.started and not signalled.is_set():
            signalled.set()
            os.kill(os.getpid(), signal.SIGTERM)  # the harness's handler raises it in the main thread
        return finished.is_set()  # the build ends only once this test has looked (--jobs 2: in its own thread)

    engine.builder = FakeBuilder(until={B: running_then_sigterm}, hold_s=30)
    engine.builds_images = True
    started = time.monotonic()
    try:
        code = _run(monkeypatch, engine, matrix, tmp_path / "res", jobs=jobs)
        assert time.monotonic() - started < 10  # at once, not after the held build
    finally:
        finished.set()
    assert code == 130
    run = tmp_path / "res" / "r"
    assert {k: r.status for k, r in _records(run).items()} == {f"{A}+default": "interrupted"}
    assert all(r.leftovers() == [] for r in engine.started)
    assert {k: v["status"] for k, v in _built(run).items()} == {A: "built"}
    assert (run / "report.md").exists()
    assert "continue with --resume --run-id r" in capsys.readouterr().err

    again = FakeEngine(builder=FakeBuilder())
    assert _run(monkeypatch, again, matrix, tmp_path / "res", resume=True) == 0
    assert {r.status for r in _records(run).values()} == {"pass"} and len(_records(run)) == 4
