"""The typed cell record: its closed sets are defined once, it reads old and partial records, refuses
JSON of the wrong shape (which load_run reports as corrupt), and writes exactly the stored layout."""

from __future__ import annotations

import copy
import json
import math
import typing
from pathlib import Path

import pytest

from harness import hints, images, matrix, matrixfile, outcome, record, report, results, supervise
from harness.matrix import Cell, Stack, Variant
from harness.record import (
    AttemptRecord,
    CellFields,
    CellRecord,
    Outcome,
    RawAttempt,
    RecordError,
    build_error,
    not_applicable,
)
from harness.runfacts import RunFacts
from harness.workload import bandwidth, nccl_control
from harness.workload import classify as workload_classify
from harness.workload import cli as workload_cli

DATA = Path(__file__).parent / "data"
H200 = json.loads((DATA / "h200-preload-record.json").read_text())
STACK = Stack(cuda="12.4.1", torch="2.5.1+cu124", accelerate="1.2.1", base="nvidia/cuda:12.4.1-runtime-ubuntu22.04",
              python="3.10", template="cuda")
CELL = Cell(STACK, Variant("p2p-off", (("NCCL_P2P_DISABLE", "1"),)), "torchrun")


# ---------------------------------------------------------------- closed sets, defined once
def test_phases_and_error_classes_come_from_the_workload_and_the_control():
    assert record.WORKLOAD_PHASES is workload_cli.PHASES
    assert record.PHASES == ("startup", *workload_cli.PHASES, *nccl_control.PHASES)
    assert record.ERROR_CLASSES == (*workload_classify.ERROR_CLASSES, *nccl_control.ERROR_CLASSES, "killed")
    assert supervise.PHASES == workload_cli.PHASES and supervise.STARTUP == "startup"


def test_every_module_uses_the_record_sets():
    assert outcome.STATUSES is record.STATUSES and outcome.ERROR_CLASSES is record.ERROR_CLASSES
    assert outcome.RETRYABLE is record.RETRYABLE and outcome.Outcome is record.Outcome
    assert typing.get_args(matrixfile.Launcher) == record.LAUNCHERS  # the launchers a matrix takes: the one declaration
    assert hints.PHASES is record.PHASES and hints.STATUSES is record.STATUSES and hints.ERROR_CLASSES is record.ERROR_CLASSES
    assert supervise.RawAttempt is record.RawAttempt and supervise.Stall is record.Stall
    assert set(report.SYMBOLS) == {*record.STATUSES, "missing"}
    assert images.BuildResult.__annotations__["status"] == "BuildStatus"
    assert set(record.GOOD) | set(record.FAILED) | {"infra-error", "interrupted"} == set(record.STATUSES)


def test_the_launchers_a_matrix_accepts_are_the_record_launchers(write_matrix):
    text = ('version: 1\nstacks:\n  matrix:\n    cuda: ["cpu"]\n    torch: ["2.5.1"]\n    accelerate: ["1.2.1"]\n'
            f"variants: [default]\nlaunchers: [{', '.join(record.LAUNCHERS)}]\n")
    m = matrix.load(write_matrix(text))
    assert {c.launcher for c in m.cells} == set(record.LAUNCHERS)


# ---------------------------------------------------------------- layout
def test_a_real_record_reads_and_writes_back_unchanged():
    rec = CellRecord.from_json(H200)
    assert rec.to_json() == {k: v for k, v in H200.items() if k != "schema"} | {"image": None}  # older: no image yet
    assert list(rec.to_json()) == ["cell", "env", "outcome", "image", "attempts"]
    assert list(rec.to_json()["cell"]) == list(H200["cell"])
    assert CellRecord.from_json(rec.to_json()) == rec


def test_a_new_record_has_the_layout_runner_wrote():
    raw = RawAttempt.from_json(H200["attempts"][0]["raw"])
    result = outcome.classify(raw)
    rec = CellRecord.of(CELL, result, [AttemptRecord(1, result, raw, ("accelerate", "launch"))], {"tag": "t", "id": "i"})
    assert rec.to_json() == {"cell": CELL.fields(), "env": {"NCCL_P2P_DISABLE": "1"}, "outcome": result.to_json(),
                             "image": {"tag": "t", "id": "i"},
                             "attempts": [{"attempt": 1, "outcome": result.to_json(), "raw": H200["attempts"][0]["raw"],
                                           "command": ["accelerate", "launch"]}]}
    assert list(rec.to_json()["cell"]) == list(CELL.fields())


def test_save_record_is_atomic_json_with_the_schema(tmp_path):
    path = results.save_record(tmp_path, "R", not_applicable(Cell(STACK, Variant("default"), na_reason="no wheel")))
    assert path == tmp_path / "R" / "cells" / "cu12.4.1-torch2.5.1+cu124-acc1.2.1+default" / "record.json"
    data = json.loads(path.read_text())
    assert data["schema"] == 1 and data["outcome"]["status"] == "n/a" and data["outcome"]["reason"] == "no wheel"
    assert data["attempts"] == [] and data["image"] is None
    assert list(path.parent.iterdir()) == [path]  # no temporary file left


def test_build_error_record_keeps_the_log():
    built = images.BuildResult("s", "tag", "build-error", "pip failed", 1.0, "/logs/s.log")
    rec = build_error(CELL, built)
    assert (rec.status, rec.reason, rec.outcome.detail) == ("build-error", "pip failed", {"log": "/logs/s.log"})
    assert rec.attempt_count == 0 and rec.last_attempt is None and rec.bandwidth_rows == ()


# ---------------------------------------------------------------- old, partial and wrong records
@pytest.mark.parametrize("data", [{}, {"attempts": []}, {"attempts": None}, {"attempts": [{"raw": None}]},
                                  {"cell": {"id": "x"}, "outcome": None},
                                  {"outcome": {"status": "pass"}, "attempts": [{"outcome": {"status": "pass"}}]}])
def test_partial_records_read_with_nothing_made_up(data):
    rec = CellRecord.from_json(data)
    assert rec.fingerprint.nccl_loaded is None and rec.bandwidth_rows == () and rec.transports == ()
    assert rec.busbw_at(None) is None and rec.phase_timings == {} and rec.launcher_changes == {}
    assert rec.image_tag is None and rec.row_key[:2] == ("", "?")
    if rec.outcome is None:
        assert (rec.status, rec.reason, rec.phase, rec.error_class) == (None, None, None, None) and not rec.done


@pytest.mark.parametrize("data, words", [
    ([], "the record should be an object"),
    ({"outcome": "hang"}, "outcome should be an object"),
    ({"outcome": {"status": "maybe"}}, "outcome.status 'maybe' is not one of"),
    ({"outcome": {"status": "fail", "seconds": "ten"}}, "outcome.seconds should be a number"),
    ({"cell": []}, "cell should be an object"),
    ({"cell": {"torch": 2.5}}, "cell.torch should be a string"),
    ({"env": "NCCL_P2P_DISABLE=1"}, "env should be an object"),
    ({"attempts": {}}, "attempts should be a list"),
    ({"attempts": [None]}, "attempts[0] should be an object"),
    ({"attempts": [{"raw": {"ranks": []}}]}, "attempts[0].raw.ranks should be an object"),
    ({"attempts": [{"raw": {"ended_by": "tired"}}]}, "attempts[0].raw.ended_by 'tired' is not one of"),
    ({"image": "nccl-harness/x"}, "image should be an object"),
    ({"attempts": [{"raw": {"ranks": {"0": {"placement": {"node": 7}}}}}]},
     "attempts[0].raw.ranks.0.placement.node should be a string"),
])
def test_a_record_of_the_wrong_shape_is_refused_with_where(data, words):
    with pytest.raises(RecordError) as err:
        CellRecord.from_json(data)
    assert words in str(err.value)
    assert CellRecord.parse(data) is None


def test_load_run_reports_a_wrong_shape_as_corrupt(tmp_path):
    run = tmp_path / "R"
    results.save_record(tmp_path, "R", CellRecord.from_json(H200))
    bad = results.cell_dir(tmp_path, "R", "bad") / "record.json"
    results.write_json(bad, H200 | {"attempts": [{"raw": {"phases": []}}]})
    data = results.load_run(run)
    assert list(data.records) == [H200["cell"]["id"]] and isinstance(data.records[H200["cell"]["id"]], CellRecord)
    assert data.problems == {"bad": "corrupt record cells/bad/record.json: attempts[0].raw.phases should be an object, not list []",
                             "run.json": "missing"}


GARBAGE = {"ranks": {"0": None, "1": {"error": "boom", "result": []}}, "nccl": {"0": {"warnings": "x"}},
           "forensics": {"nccl_tail": []}, "stall": {"ranks_behind": "1"},
           "phases": {"fingerprint": {"fingerprint": {"gpus": {"error": 1}, "memlock": {"soft": "lots"},
                                                      "nccl_loaded": 22803, "peer_access": {}}},
                      "bandwidth": {"rows": [None, {"bytes": "1M"}]}}}


def test_garbage_inside_the_evidence_reads_as_missing_through_the_views():
    raw = RawAttempt.tolerant(GARBAGE)  # as the supervisor reads what a rank wrote: what does not fit is left out
    fp = raw.fingerprint
    assert (fp.gpu_names, fp.gpu_count, fp.memlock_soft, fp.nccl_loaded, fp.peer_access) == ((), None, None, None, ())
    assert raw.rank_states[1].error is None and raw.rank_states[1].result is None and raw.rank_states[0].phase is None
    assert raw.nccl["0"].warnings == () and raw.nccl_tails == () and raw.stall.ranks_behind == ()
    assert raw.bandwidth_rows == (record.BandwidthRow(),)


@pytest.mark.parametrize("key, words", [
    ("ranks", "raw.ranks.0 should be an object, not null"),
    ("nccl", "raw.nccl.0.warnings should be a list, not string"),
    ("stall", "raw.stall.ranks_behind should be a list, not string"),
    ("phases", "raw.phases.fingerprint.fingerprint.nccl_loaded should be an object, not number 22803"),
])
def test_garbage_inside_the_evidence_is_refused_when_read_from_json(key, words):
    with pytest.raises(RecordError) as err:
        RawAttempt.from_json({key: GARBAGE[key]})
    assert words in str(err.value)


@pytest.mark.parametrize("row, words", [
    ({"bytes": "1M"}, "rows[0].bytes should be an integer from 1 to"),
    ({"bytes": 1 << 60}, "rows[0].bytes should be an integer from 1 to"),
    ({"bytes": 1024, "busbw_gbs": float("nan")}, "rows[0].busbw_gbs should be a number from 0 to 1e+06, not number NaN"),
    ({"bytes": 1024, "busbw_gbs": -1.0}, "rows[0].busbw_gbs should be a number from 0"),
    ({"bytes": 1024, "busbw_gbs": 9.0, "busbw_min": 1.0, "busbw_max": 2.0}, "busbw_gbs 9 lies outside its trials' 1-2"),
    ({"bytes": 1024, "busbw_trials": ["a"]}, "rows[0].busbw_trials[0] should be a number"),
])
def test_a_bandwidth_row_out_of_range_is_refused(row, words):
    with pytest.raises(RecordError) as err:
        RawAttempt.from_json({"phases": {"bandwidth": {"rows": [row]}}})
    assert words in str(err.value)
    assert record.BandwidthRow.tolerant(row).busbw_gbs >= 0  # read tolerantly, the same row gives no exception


# ---------------------------------------------------------------- accessors
def test_accessors_of_a_real_record():
    rec = CellRecord.from_json(H200)
    assert (rec.id, rec.status, rec.phase, rec.error_class, rec.done) == (H200["cell"]["id"], "pass", None, None, True)
    assert rec.cell.variant == "default" and rec.cell.launcher == "accelerate" and rec.cell.is_host
    assert rec.loaded_nccl == "2.28.3" and rec.fingerprint.nccl_compiled == "2.28.9"
    # the system 2.28.3 forced in with LD_PRELOAD over torch's own 2.28.9 wheel (issue 11: it read "bundled")
    assert rec.nccl_label == "2.28.3 (system, LD_PRELOAD by the host)"
    assert rec.row_key == ("", "13.0", "2.28.3 (system, LD_PRELOAD by the host)", "2.11.0", "1.15.0", "accelerate")
    assert rec.fingerprint.driver == "580.159.04" and rec.fingerprint.gpu_names == ("NVIDIA H200",)
    assert rec.fingerprint.memlock_soft == math.inf and rec.fingerprint.shm_bytes == 137438953472
    assert list(rec.phase_timings) == list(record.WORKLOAD_PHASES)
    assert [r.bytes for r in rec.bandwidth_rows][-1] == 2147483648
    assert rec.busbw_at(None) is None  # one rank: no bus bandwidth
    assert rec.attempt_count == 1 and rec.last_attempt.command == tuple(H200["attempts"][0]["command"])


def test_busbw_at_a_size_else_the_largest():
    rows = [{"bytes": b, "time_s": 1.0, "algbw_gbs": 1.0, "busbw_gbs": bw} for b, bw in ((1024, 1.0), (4096, 3.0), (2048, 0))]
    data = copy.deepcopy(H200)
    data["attempts"][0]["raw"]["phases"]["bandwidth"]["rows"] = rows
    rec = CellRecord.from_json(data)
    assert rec.busbw_at(1024) == (1024, 1.0) and rec.busbw_at(2048) == (4096, 3.0) and rec.busbw_at(None) == (4096, 3.0)


def test_bandwidth_rows_with_trials_and_without():
    new = {"bytes": 1 << 30, "dtype": "float32", "iters": 20, "time_s": 0.00315, "algbw_gbs": 340.9, "busbw_gbs": 340.9,
           "busbw_trials": [340.1, 340.9, 341.3], "busbw_min": 340.1, "busbw_max": 341.3, "eager_us": 3170.5,
           "timing": "cuda-graph", "wrong": 0, "first_call_s": 0.35}
    old = {"bytes": 1 << 30, "time_s": 0.00315, "algbw_gbs": 340.9, "busbw_gbs": 340.9, "first_call_s": 0.35}
    data = copy.deepcopy(H200)
    data["attempts"][0]["raw"]["phases"]["bandwidth"]["rows"] = [new, old, new | {"busbw_trials": [340.9], "busbw_min": 340.9,
                                                                                   "busbw_max": 340.9},
                                                                 ]
    rec = CellRecord.from_json(data)
    with_trials, without, one = rec.bandwidth_rows
    garbage = record.BandwidthRow.tolerant(new | {"busbw_trials": "many", "busbw_min": None, "wrong": "0"})
    assert (with_trials.trials, with_trials.spread, with_trials.eager_us, with_trials.timing, with_trials.wrong,
            with_trials.iters) == (3, (340.1, 341.3), 3170.5, "cuda-graph", 0, 20)
    assert with_trials.busbw_gbs == 340.9 and round(with_trials.relative_spread, 5) == round(1.2 / 340.9, 5)
    assert (without.trials, without.spread, without.relative_spread, without.eager_us, without.timing, without.wrong) == (
        0, None, None, None, None, None)  # an older record: spread unknown, never zero
    assert one.spread is None and one.relative_spread is None  # one trial says nothing about noise
    assert garbage.busbw_trials == () and garbage.wrong is None and garbage.spread is None
    assert with_trials.apart_from(without) is None and record.ranges_apart((1.0, 2.0), (2.5, 3.0)) is True
    assert record.ranges_apart((1.0, 2.0), (1.5, 3.0)) is False
    assert rec.bandwidth_at(1 << 30) == with_trials and rec.busbw_at(1 << 30) == (1 << 30, 340.9)
    assert CellRecord.from_json(rec.to_json()) == rec  # the rows are kept as recorded


def test_nccl_label_as_loaded_else_as_asked():
    pinned = CellFields(cuda="12.4.1", nccl="2.21.5", nccl_via="pip")
    assert pinned.nccl_label() == "2.21.5 (pip)" and pinned.nccl_label("2.21.5") == "2.21.5 (pip)"
    assert CellFields(cuda="12.4.1", nccl="bundled", nccl_via="bundled").nccl_label() == "bundled"
    assert CellFields(cuda="cpu").nccl_label("2.21.5") == "gloo (CPU)"
    assert CellFields(cuda="12.4.1", nccl="2.27.3", nccl_via="system").row_key() == ("", "12.4.1", "2.27.3 (system)", "?", "?", "accelerate")


def test_launcher_changes_and_done():
    data = copy.deepcopy(H200)
    data["attempts"][0]["raw"]["phases"]["fingerprint"]["fingerprint"]["nccl_env_changed"] = {
        "NCCL_P2P_DISABLE": {"expected": None, "actual": "1"}}
    data["outcome"]["status"] = "interrupted"
    rec = CellRecord.from_json(data)
    assert rec.launcher_changes == {"NCCL_P2P_DISABLE": record.EnvChange(None, "1")}
    assert not rec.done


def test_classify_takes_the_typed_attempt_or_its_json():
    raw = H200["attempts"][0]["raw"]
    assert outcome.classify(raw) == outcome.classify(RawAttempt.from_json(raw))


def test_stall_round_trips():
    stall = record.Stall("prepare", 120.0, 121.5, (1,), {1: "silent"})
    assert stall.to_json() == {"phase": "prepare", "threshold": 120.0, "since_progress": 121.5, "ranks_behind": [1],
                               "why_behind": {"1": "silent"}, "cap": False, "gone": []}
    assert record.Stall.read(stall.to_json()) == stall
    gone = record.Stall("bandwidth", 4.0, 4.5, (1, 2), {1: "gone", 2: "silent"}, gone=(1,))
    assert record.Stall.read(gone.to_json()) == gone
    # a stall written before `gone` existed reads as one with no rank gone
    early = {k: v for k, v in stall.to_json().items() if k != "gone"}
    assert record.Stall.read(early, "attempt.json: stall") == stall


# ---------------------------------------------------------------- run.json
def test_run_facts_of_new_and_early_run_json():
    new = RunFacts.from_json({"started": "2026-01-01T00:00:00+0000", "gpus": ["0"], "matrix": {"path": "m.yaml"},
                              "host": {"hostname": "h", "driver": "550", "gpus": ["A", "A"], "engine": {"name": "docker"}},
                              "cells": [CELL.fields(), "old-style-id"]})
    assert (new.started, new.hostname, new.driver, new.host_gpus, new.gpus, new.engine, new.matrix_path) == (
        "2026-01-01T00:00:00+0000", "h", "550", ("A", "A"), ("0",), "docker", "m.yaml")
    assert new.cell_ids == (CELL.id, "old-style-id") and new.cells[CELL.id] == CellFields.from_cell(CELL)
    early = RunFacts.from_json({"host": "box", "engine": "host", "cells": "garbage"})
    assert (early.hostname, early.engine, early.cell_ids, early.started) == ("box", "host", (), None)
    assert RunFacts.from_json(None) == RunFacts()


def test_hints_read_typed_records_and_their_json_alike():
    assert hints.facts(H200) == hints.facts(CellRecord.from_json(H200))
    assert hints.facts({"outcome": "hang"}) == hints.Facts()


# ---------------------------------------------------------------- the NCCL-only control: which layer
def _with_control(cell_status: str, control: Outcome | None, rows: list[dict] | None = None,
                  cuda: str = "12.4.1") -> CellRecord:
    """A record shaped as run_cell writes it: the cell's attempt, then the control's (kind control)."""
    failed = cell_status == "fail"
    cell_outcome = Outcome(cell_status, "rank 1 silent", 130.0, "prepare") if cell_status == "hang" else \
        Outcome(cell_status, "rank 0: DistBackendError", 30.0, "init" if failed else None, "nccl" if failed else None)
    attempts = [AttemptRecord(1, cell_outcome, RawAttempt(cell_id="c", attempt=1, ended_by="exited"))]
    if control is not None:
        raw = RawAttempt(cell_id="c", attempt=2, ended_by="exited", kind="control",
                         phases={"nccl-allreduce": {"seconds": 3.0, "rows": rows or []}})
        attempts.append(AttemptRecord(2, control, raw))
    return CellRecord(CellFields(cuda=cuda, id="c"), cell_outcome, attempts=tuple(attempts))


GIB_ROW = bandwidth.bandwidth_row(1 << 30, 20, [0.0066] * 5, 0.01, 2, timing="nccl-control")
NO_SOCKET = Outcome("fail", "rank 0: NcclError: ...", 5.0, "nccl-init", "nccl",
                    {"key_line": "Bootstrap : no socket interface found"})
NOT_FOUND = Outcome("fail", "rank 0: LibraryNotFound: no loadable libnccl", 1.0, "nccl-load", "nccl-not-found",
                    {"key_line": "no loadable libnccl"})


@pytest.mark.parametrize("cell_status, control, layer", [
    ("hang", Outcome("pass", "busbw 324.90 GB/s at the largest size", 20.0), "above-nccl"),  # stopped torch rank
    ("fail", NO_SOCKET, "nccl"),  # a bad NCCL_SOCKET_IFNAME: NCCL alone fails the same way
    ("hang", Outcome("hang", "no progress for 91s in nccl-init", 100.0, "nccl-init"), "nccl"),
    ("fail", Outcome("wrong", "all-reduce returned 3 wrong element(s)", 20.0, "check"), "nccl"),
    ("fail", Outcome("slow", "busbw below the floor", 20.0, "bandwidth"), "above-nccl"),  # NCCL alone moved the data
    ("fail", NOT_FOUND, "unknown"),  # the control never reached NCCL
    ("hang", Outcome("infra-error", "docker went away", 1.0), "unknown"),
    ("hang", Outcome("interrupted", "stopped by Ctrl-C", 1.0), "unknown"),
    ("hang", None, "unknown"),  # --control never, or a run from before the control
    ("pass", Outcome("pass", "busbw 324.90 GB/s", 20.0), "unknown"),  # --control always on a passing cell
    ("wrong", NO_SOCKET, "unknown"),  # only hangs and failures are placed
])
def test_the_layer_of_a_fault_follows_what_nccl_alone_did(cell_status, control, layer):
    rec = _with_control(cell_status, control, [GIB_ROW])
    assert rec.layer == layer
    assert rec.status == cell_status  # the control is evidence, never the verdict
    assert CellRecord.from_json(json.loads(json.dumps(rec.to_json()))).layer == layer


def test_the_control_reads_as_its_status_class_key_line_and_busbw_at_the_largest_size():
    small = bandwidth.bandwidth_row(1 << 20, 20, [0.0001] * 5, 0.01, 2, timing="nccl-control")
    rec = _with_control("hang", Outcome("pass", "busbw", 20.0), [small, GIB_ROW])
    assert rec.control.status == "pass" and rec.control.busbw == (1 << 30, GIB_ROW["busbw_gbs"])
    assert rec.last_attempt.attempt == 1 and rec.attempt_count == 1  # the cell's evidence is its own attempt
    failed = _with_control("fail", NO_SOCKET).control
    assert (failed.status, failed.error_class, failed.key_line) == ("fail", "nccl", "Bootstrap : no socket interface found")
    assert _with_control("fail", None, cuda="cpu").control.reason == "not applicable (gloo)"


def test_a_cell_attempt_is_written_without_a_kind_and_a_control_attempt_with_one():
    rec = _with_control("hang", Outcome("pass", "busbw", 20.0))
    cell_raw, control_raw = (a["raw"] for a in rec.to_json()["attempts"])
    assert "kind" not in cell_raw and control_raw["kind"] == "control"
    bad = copy.deepcopy(rec.to_json())
    bad["attempts"][1]["raw"]["kind"] = "rescue?"
    with pytest.raises(RecordError, match="kind"):
        CellRecord.from_json(bad)


def test_a_control_row_of_the_wrong_shape_is_a_corrupt_record():
    bad = _with_control("hang", Outcome("pass", "busbw", 20.0), [GIB_ROW]).to_json()
    bad["attempts"][1]["raw"]["phases"]["nccl-allreduce"]["rows"][0]["busbw_gbs"] = "fast"  # damaged on disk
    with pytest.raises(RecordError, match="nccl-allreduce"):
        CellRecord.from_json(bad)


def test_a_one_rank_run_says_in_its_table_and_advice_that_no_path_was_exercised():
    """Issue 22, on the one-H200 host: eight passing one-rank cells read like a verdict on the GPU paths."""
    one = CellRecord.from_json(H200)
    assert one.one_rank
    page = report.render(results.RunData(Path("/results/h200"), {"run_id": "h200"}, {one.id: one}, {}))
    row = next(line for line in page.splitlines() if line.startswith("| 13.0 "))
    assert "✅ pass (1 rank)" in row and "GB/s" not in row
    assert row.endswith("| default; one rank per cell: no path between GPUs was exercised (run on two or more GPUs "
                        "to compare) |")
