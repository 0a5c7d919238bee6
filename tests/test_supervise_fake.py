"""The supervisor's and the runner's rules, specified through the fake engine (tests/fakeengine.py):
scripted ranks in threads write the workload's own events, with thresholds of a fraction of a second.
test_supervise.py proves the same rules with real ranks on the host and docker engines."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from harness import matrix, matrixfile, outcome, runner, supervise
from harness.engines.base import CellSpec
from harness.record import RawAttempt

from .fakeengine import PASS, FakeEngine, Rank, busy, die, error, slow_end, stall

FAST = matrixfile.Timeouts(fingerprint=0.6, init=0.6, prepare=0.6, step=0.6, check=0.6, bandwidth=0.6, teardown=0.6,
                       cell=20)
M = matrix.load(matrix.DEFAULT_CPU_MATRIX)
CELL = next(c for c in M.runnable if c.launcher == "torchrun" and c.variant.name == "default")


@pytest.fixture(autouse=True)
def quick_forensics(monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor waits a second for SIGUSR1's stack dumps; the fake ranks answer at once."""
    monkeypatch.setattr(supervise, "STACK_DUMP_WAIT_S", 0.05)


def _spec(engine: FakeEngine, out: Path, timeouts: matrixfile.Timeouts = FAST) -> CellSpec:
    m = matrix.Matrix(**{**M.__dict__, "timeouts": timeouts})
    return runner.spec_for(CELL, m, engine, runner.RunOptions("fake", out.parent, (), 2), "", 1, out)


def _stall(record: RawAttempt) -> dict[str, Any]:
    assert record.stall is not None, record.ended_by
    return record.stall.to_json()  # as attempt.json holds it


def _supervise(tmp_path: Path, ranks: dict[int, Rank], timeouts: matrixfile.Timeouts = FAST,
               **hooks: Any) -> tuple[FakeEngine, RawAttempt, outcome.Outcome]:
    engine = FakeEngine(ranks)
    record = supervise.supervise(engine, _spec(engine, tmp_path / "attempt-1", timeouts), timeouts, **hooks)
    assert record.leftovers == [] and all(not r.alive for run in engine.started for r in run.ranks)
    return engine, record, outcome.classify(record.to_json())


def test_every_rank_passing_every_phase_is_a_pass_with_its_bandwidth(tmp_path: Path) -> None:
    _, record, result = _supervise(tmp_path, {0: PASS, 1: Rank(busbw=12.5)})
    assert result.status == "pass", result
    assert record.ended_by == "exited" and record.exit_code == 0
    assert "busbw 12.50 GB/s" in result.reason
    assert set(record.ranks) == {"0", "1"} and record.phases["bandwidth"].rows
    assert list(record.ranks["1"].phases_done) == list(matrix_phases())
    assert record.stall is None and record.forensics.to_json() == {}


def matrix_phases() -> tuple[str, ...]:
    return supervise.PHASES


def test_a_rank_that_stops_is_a_hang_in_its_phase_naming_it(tmp_path: Path) -> None:
    """Rank 1 stops in prepare (silent, as when SIGSTOPped); rank 0 went on to step and waits there,
    beating: the leading rank's phase is where rank 1 is awaited, and rank 1 is the one behind."""
    engine, record, result = _supervise(tmp_path, {0: stall("step", beating=True), 1: stall("prepare")})
    assert result.status == "hang", result
    assert record.ended_by == "stall" and result.phase == "step"
    assert result.detail["ranks_behind"] == [1]
    assert "rank 1 still in prepare" in result.reason
    # forensics: each rank was sent SIGUSR1; the beating rank answered, the stopped one could not
    assert sorted(sig for _, sig in engine.started[0].signals) == ["USR1", "USR1"]
    assert "Thread" in record.forensics.stacks["0"] and "did not answer" in record.forensics.stacks["1"]
    assert record.forensics.pids == {"0": 40000, "1": 40001}


def test_a_stall_waits_for_its_phase_threshold_and_no_longer(tmp_path: Path) -> None:
    timeouts = FAST.model_copy(update={"prepare": 1.2})
    _, record, result = _supervise(tmp_path, {0: stall("prepare", beating=True), 1: stall("prepare")}, timeouts)
    assert result.status == "hang" and result.phase == "prepare"
    assert 1.2 <= _stall(record)["since_progress"] < 1.2 + 0.5, record.stall
    assert _stall(record)["threshold"] == 1.2


def test_a_rank_that_dies_unnoticed_by_the_launcher_is_a_fail_not_a_hang(tmp_path: Path) -> None:
    """Rank 1 dies in check and the launcher does not notice (poll stays None); rank 0 went on to
    bandwidth and waits there. At the stall the supervisor asks Running.gone about the ranks behind, and
    classify calls rank 1 killed in its phase, rank 0 (still waiting) its victim."""
    _, record, result = _supervise(tmp_path, {0: stall("bandwidth", beating=True), 1: die("check")})
    assert record.ended_by == "stall" and _stall(record)["gone"] == [1]
    assert _stall(record)["why_behind"]["1"] == supervise.GONE
    assert result.status == "fail" and result.error_class == "killed" and result.phase == "check", result
    assert "rank 1 died in check" in result.reason and "launcher had not yet noticed" in result.reason
    assert result.detail["victims"] == {"0": "still waiting in bandwidth when the cell was stopped, after rank 1 failed"}


def test_a_silent_rank_in_the_leading_phase_is_not_asked_about_before_it_is_behind(tmp_path: Path) -> None:
    """A rank is behind when its phase trails the leader's or it has been silent for 1.5 heartbeats
    (3 s): with a 0.6 s threshold a rank that died in the leading phase is not yet either, so the
    supervisor does not ask whether it is gone, and the stall is a hang with every rank waiting."""
    _, record, result = _supervise(tmp_path, {0: stall("check", beating=True), 1: die("check")})
    assert _stall(record)["gone"] == [] and result.status == "hang" and result.phase == "check", result
    assert "all ranks waiting" in result.reason


def test_an_error_in_init_is_a_fail_with_its_class_and_the_peer_is_a_victim(tmp_path: Path) -> None:
    _, record, result = _supervise(tmp_path, {0: error("init", "nccl", "NCCL error: socket timeout"),
                                              1: stall("init", beating=True)})
    assert record.ended_by == "exited" and record.exit_code == 1
    assert result.status == "fail" and result.phase == "init" and result.error_class == "nccl", result
    assert "rank 0: RuntimeError: NCCL error: socket timeout" in result.reason
    assert set(result.detail["victims"]) == {"1"} and "after rank 0 failed" in result.detail["victims"]["1"]


def test_the_hard_cap_ends_a_cell_that_keeps_progressing(tmp_path: Path) -> None:
    """Both ranks keep making progress in bandwidth (heartbeats from the main thread): no stall ever,
    and the cell's hard cap ends it."""
    timeouts = FAST.model_copy(update={"cell": 0.8})
    _, record, result = _supervise(tmp_path, {0: busy("bandwidth"), 1: busy("bandwidth")}, timeouts)
    assert record.ended_by == "cap" and 0.8 <= record.seconds < 2.0
    assert result.status == "hang" and result.phase == "bandwidth"
    assert "hard cap of 1s for the cell reached" in result.reason


def test_a_slow_end_within_the_teardown_threshold_passes_and_beyond_it_hangs(tmp_path: Path) -> None:
    _, _, within = _supervise(tmp_path / "a", {0: PASS, 1: slow_end(0.3)})
    assert within.status == "pass", within
    _, record, beyond = _supervise(tmp_path / "b", {0: PASS, 1: slow_end(5.0)})
    assert beyond.status == "hang" and beyond.phase == "teardown" and record.ended_by == "stall", beyond
    assert "no progress for 1s in teardown (threshold 1s)" in beyond.reason
    assert record.ranks["0"].result.status == "ok" and record.ranks["1"].result is None


def test_ctrl_c_while_following_the_events_is_interrupted_and_leaves_nothing(tmp_path: Path) -> None:
    def ctrl_c(rank: int, event: dict[str, Any]) -> None:
        if event.get("event") == "phase_start" and event.get("phase") == "step":
            raise KeyboardInterrupt

    _, record, result = _supervise(tmp_path, {0: stall("step", beating=True), 1: stall("step", beating=True)},
                                   on_event=ctrl_c)
    assert record.ended_by == "interrupted" and result.status == "interrupted"
    assert record.forensics.to_json() == {}  # a Ctrl-C is not a hang: no forensics, the cell is killed at once


def test_ctrl_c_while_starting_reaches_the_caller_and_the_engine_still_cleans_up(tmp_path: Path) -> None:
    engine = FakeEngine({0: stall("init", beating=True), 1: stall("init", beating=True)})

    def ctrl_c(running: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        supervise.supervise(engine, _spec(engine, tmp_path / "attempt-1"), FAST, on_start=ctrl_c)
    (running,) = engine.started
    assert running.killed and running.leftovers() == []


def test_an_engine_interrupted_from_another_thread_ends_its_attempt_as_ctrl_c_does(tmp_path: Path) -> None:
    """engine.interrupt() is how the pipeline ends cells supervised in worker threads."""
    engine = FakeEngine({0: stall("step", beating=True), 1: stall("step", beating=True)})
    threading.Timer(0.3, engine.interrupt).start()
    record = supervise.supervise(engine, _spec(engine, tmp_path / "attempt-1"), FAST)
    assert record.ended_by == "interrupted" and record.leftovers == []
    assert outcome.classify(record.to_json()).status == "interrupted"


# ------------------------------------------------------------------------------------------ the runner
def test_a_hang_is_retried_and_every_attempt_is_kept(tmp_path: Path) -> None:
    def script(spec: CellSpec) -> dict[int, Rank]:
        return {1: stall("prepare")} if spec.attempt == 1 else {}

    engine = FakeEngine(script)
    m = matrix.Matrix(**{**M.__dict__, "timeouts": FAST})
    record = runner.run_cell(engine, CELL, m, runner.RunOptions("fake", tmp_path, (), 2, retries=1))
    assert [a.outcome.status for a in record.attempts if a.outcome] == ["hang", "pass"]
    assert record.outcome is not None and record.outcome.status == "pass"
    assert (tmp_path / "fake" / "cells" / CELL.id / "record.json").exists()


def test_a_fail_is_not_retried_and_ctrl_c_is_never_retried(tmp_path: Path) -> None:
    m = matrix.Matrix(**{**M.__dict__, "timeouts": FAST})
    failing = FakeEngine({0: error("step", "oom", "CUDA out of memory"), 1: stall("step", beating=True)})
    record = runner.run_cell(failing, CELL, m, runner.RunOptions("fail", tmp_path, (), 2, retries=2))
    assert [a.outcome.status for a in record.attempts if a.outcome] == ["fail"]
    assert record.outcome is not None and record.outcome.error_class == "oom"

    def ctrl_c(rank: int, event: dict[str, Any]) -> None:
        if event.get("event") == "phase_start" and event.get("phase") == "init":
            raise KeyboardInterrupt

    hanging = FakeEngine({1: stall("prepare")})
    record = runner.run_cell(hanging, CELL, m, runner.RunOptions("int", tmp_path, (), 2, retries=2), on_event=ctrl_c)
    assert [a.outcome.status for a in record.attempts if a.outcome] == ["interrupted"]
