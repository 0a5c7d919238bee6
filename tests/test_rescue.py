"""The rescue search (issue 16 items 2-3): the ladder's plan (order, skipping, pairs, budget), the test
fault it is exercised with on CPU, the record's rescue value and the report's lines; then one real
search in containers and one on the host engine, where a gloo cell with the test fault hangs, the
ladder runs in order and stops at the first step that passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import ladder, matrix, report, runner
from harness.evidence import RawAttempt, RecordError
from harness.ladder import Budget, Step
from harness.record import AttemptRecord, CellFields, CellRecord, Outcome
from harness.workload import bandwidth
from harness.workload import cli as workload_cli

from .conftest import REPO, WHEELHOUSE

A = Step("a", (("NCCL_ALGO", "Ring"),), "why a")
B = Step("b", (("NCCL_P2P_LEVEL", "NVL"),), "why b")
C = Step("c", (("NCCL_P2P_LEVEL", "PIX"),), "why c")
D = Step("d", (("NCCL_P2P_DISABLE", "1"),), "why d")


def _names(steps) -> list[str]:
    return [s.name for s in steps]


# ---------------------------------------------------------------- the plan (pure)
def test_single_changes_come_first_in_declared_order_then_pairs():
    assert _names(ladder.plan((A, B, D), {}, Budget(100))) == ["a", "b", "d", "a+b", "a+d", "b+d"]


def test_a_pair_never_sets_one_variable_twice():
    assert _names(ladder.plan((B, C), {}, Budget(100))) == ["b", "c"]
    assert ladder.plan((A, D), {}, Budget(100))[-1].env == (("NCCL_ALGO", "Ring"), ("NCCL_P2P_DISABLE", "1"))


def test_a_change_the_cell_already_has_is_skipped_alone_and_in_pairs():
    # variant p2p-off already sets NCCL_P2P_DISABLE=1: trying d would only repeat the cell
    assert _names(ladder.plan((A, B, D), {"NCCL_P2P_DISABLE": "1"}, Budget(100))) == ["a", "b", "a+b"]
    # another value of the same variable is a change (p2p-nvl's cell may still try PIX)
    assert _names(ladder.plan((B, C), {"NCCL_P2P_LEVEL": "NVL"}, Budget(100))) == ["c"]


def test_the_plan_is_cut_to_the_attempt_budget():
    assert _names(ladder.plan((A, B, D), {}, Budget(attempts=4))) == ["a", "b", "d", "a+b"]
    assert len(ladder.plan(ladder.DEFAULT, {}, Budget())) == Budget().attempts


@pytest.mark.parametrize("tried, rescued, interrupted, budget, why, untried", [
    (2, True, False, Budget(4), "rescued", ["d", "a+b"]),
    (1, False, True, Budget(4), "interrupted", ["b", "d", "a+b"]),
    (2, False, False, Budget(4, 60), "time", ["d", "a+b"]),  # fewer than the plan: the seconds ran out
    (3, False, False, Budget(3), "attempts", ["a+b"]),  # the plan, cut to 3 of the 4 candidates
    (4, False, False, Budget(12), "steps", []),  # every candidate
])
def test_the_search_says_why_it_stopped_and_what_it_did_not_try(tried, rescued, interrupted, budget, why, untried):
    end = ladder.search_end((A, B, D, ladder.pair(A, B)), budget, tried, rescued, interrupted)
    assert end.why == why and list(end.untried) == untried and end.budget == budget


def test_the_reason_a_search_stopped_says_which_budget_to_raise():
    steps = (A, B, D)
    assert ladder.search_end(steps, Budget(3, 60), 1, False, False).text() == (
        "the time budget of 60 s was spent; not tried: b, d (raise matrix.yaml rescue: seconds to try them)")
    assert ladder.search_end(steps, Budget(2), 2, False, False).text() == (
        "the attempt budget of 2 was reached; not tried: d (raise matrix.yaml rescue: attempts to try them)")
    assert ladder.search_end(steps, Budget(3), 3, False, False).text() == "every candidate step was tried"
    many = tuple(Step(f"s{i}", ((f"V{i}", "1"),)) for i in range(9))
    assert ladder.search_end(many, Budget(1), 1, False, True).text() == (
        "stopped by Ctrl-C; not tried: s1, s2, s3, s4, s5, s6 and 2 more")


def test_the_default_ladder_covers_the_issue_and_says_why_for_each_step():
    env = {pair for step in ladder.DEFAULT for pair in step.env}
    assert {("NCCL_P2P_LEVEL", "NVL"), ("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1"),
            ("NCCL_CUMEM_ENABLE", "0"), ("NCCL_CUMEM_HOST_ENABLE", "0"), ("NCCL_NVLS_ENABLE", "0"),
            ("NCCL_IB_DISABLE", "1"), ("NCCL_PROTO", "Simple"), ("NCCL_ALGO", "Ring")} <= env
    assert all(step.why and len(step.env) == 1 for step in ladder.DEFAULT)
    assert len({s.name for s in ladder.DEFAULT}) == len(ladder.DEFAULT)
    # the transport limits, which cost bandwidth, come last: P2P off after the P2P level limits
    names = _names(ladder.DEFAULT)
    assert names.index("p2p-nvl") < names.index("p2p-off") and names.index("nvls-off") < names.index("p2p-off")


def test_the_matrix_file_replaces_the_ladder_and_sets_the_budget(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(Path(REPO / "tests" / "fixtures" / "rescue-cpu.yaml").read_text())
    m = matrix.load(path)
    assert _names(m.ladder) == ["ring", "p2p-off", "shm-off", "ib-off"]
    assert m.rescue_budget == Budget(attempts=6, seconds=300)
    assert m.rescue_timeouts.prepare == 3
    default = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    assert default.ladder == ladder.DEFAULT
    assert default.rescue_timeouts.prepare < default.timeouts.prepare  # short thresholds by default


def test_a_gloo_cell_has_no_search_unless_its_own_environment_turns_the_test_faults_on():
    m = matrix.load(REPO / "tests" / "fixtures" / "rescue-cpu.yaml")
    (stuck,) = m.cells
    plain = matrix.Cell(stuck.stack, matrix.Variant("default"), stuck.launcher)
    opts = runner.RunOptions("r", Path("/nonexistent"))
    assert runner.rescue_plan(plain, m, opts) == "not applicable (gloo): NCCL variables do not act on gloo"
    assert _names(runner.rescue_plan(stuck, m, opts)) == ["ring", "p2p-off", "shm-off", "ib-off", "ring+p2p-off",
                                                          "ring+shm-off"]


def test_a_change_the_ranks_inherit_already_is_not_tried():
    """On 2x H200 the site sets NCCL_NVLS_ENABLE=0 for every process: the plan began with nvls-off, an
    attempt that could change nothing. What the ranks inherit (the engine's inherited_env) counts as had."""
    m = matrix.load(REPO / "tests" / "fixtures" / "rescue-cpu.yaml")
    (stuck,) = m.cells
    opts = runner.RunOptions("r", Path("/nonexistent"))
    inherited = {"NCCL_ALGO": "Ring", "NCCL_DEBUG": "WARN"}
    assert _names(runner.rescue_plan(stuck, m, opts, inherited)) == ["p2p-off", "shm-off", "ib-off", "p2p-off+shm-off",
                                                                     "p2p-off+ib-off", "shm-off+ib-off"]
    other = {"NCCL_ALGO": "Tree"}  # inherited with another value: setting Ring is a change
    assert _names(runner.rescue_plan(stuck, m, opts, other))[0] == "ring"


def test_the_dry_run_prints_the_plan_and_what_the_attempt_budget_leaves_out():
    from harness import pipeline

    m = matrix.load(FIXTURE)
    (stuck,) = m.cells
    lines = pipeline.rescue_lines(stuck, m, runner.RunOptions("r", Path("/tmp")), {}).splitlines()
    assert lines[0].endswith("up to 6 attempt(s) within 300 s, stopping at the first pass")
    assert lines[1:4] == ["#   1. ring: NCCL_ALGO=Ring", "#   2. p2p-off: NCCL_P2P_DISABLE=1",
                          "#   3. shm-off: NCCL_SHM_DISABLE=1"]
    assert lines[-1] == ("#   not tried, beyond the attempt budget of 6 (matrix.yaml rescue: attempts): ring+ib-off, "
                         "p2p-off+shm-off, p2p-off+ib-off, shm-off+ib-off")


def test_a_step_adds_its_variables_to_the_cell_and_keeps_its_id():
    m = matrix.load(REPO / "tests" / "fixtures" / "rescue-cpu.yaml")
    (stuck,) = m.cells
    stepped = runner.with_step(stuck, D)
    assert stepped.id == stuck.id
    assert stepped.variant.env_dict == {**stuck.variant.env_dict, "NCCL_P2P_DISABLE": "1"}


# ---------------------------------------------------------------- the test-only fault
@pytest.mark.parametrize("env, error", [
    ({workload_cli.HANG_UNLESS_ENV: "NCCL_SHM_DISABLE=1"}, "test-only switch"),  # without HARNESS_TEST_FAULTS=1
    ({workload_cli.HANG_UNLESS_ENV: "NCCL_SHM_DISABLE=1", workload_cli.FAULT_ENV: "0"}, "test-only switch"),
    ({workload_cli.HANG_UNLESS_ENV: "NCCL_SHM_DISABLE", workload_cli.FAULT_ENV: "1"}, "expected VAR=value"),
])
def test_the_hang_unless_fault_is_refused_unless_turned_on_on_purpose(env, error, capsys):
    with pytest.raises(SystemExit) as exit_:
        workload_cli.parse_args(["--out", "/tmp/x"], env)
    assert exit_.value.code == 2 and error in capsys.readouterr().err


def test_the_hang_unless_fault_reads_its_variable_and_value():
    env = {workload_cli.HANG_UNLESS_ENV: "NCCL_SHM_DISABLE=1", workload_cli.FAULT_ENV: "1"}
    assert workload_cli.parse_args(["--out", "/tmp/x"], env).hang_unless == ("NCCL_SHM_DISABLE", "1")
    assert workload_cli.parse_args(["--out", "/tmp/x"], {}).hang_unless is None


# ---------------------------------------------------------------- the record
ROW = bandwidth.bandwidth_row(1 << 30, 20, [0.0066] * 5, 0.01, 2)


def _searched(statuses: list[str], steps=(A, B, D), variant: str = "default", cell_status: str = "hang") -> CellRecord:
    """A record shaped as run_cell writes it: the cell's hung attempt, then one rescue attempt per status."""
    hang = Outcome(cell_status, "no progress for 30s in prepare", 40.0, "prepare")
    attempts = [AttemptRecord(1, hang, RawAttempt(cell_id="c", attempt=1, ended_by="stall"))]
    for n, (status, step) in enumerate(zip(statuses, steps), 2):
        rows = [ROW] if status == "pass" else []
        raw = RawAttempt(cell_id="c", attempt=n, ended_by="exited", kind="rescue",
                         phases={"bandwidth": {"seconds": 2.0, "rows": rows}})
        attempts.append(AttemptRecord(n, Outcome(status, "", 10.0 + n), raw, ("python",), step))
    return CellRecord(CellFields(cuda="12.4.1", variant=variant, id=f"c+{variant}"), hang, {}, None, tuple(attempts))


def test_the_rescue_is_the_first_step_that_passed_with_its_busbw_and_every_step_tried():
    rescue = _searched(["hang", "pass"]).rescue
    assert rescue.status == "rescued" and rescue.step == B
    assert rescue.busbw == (1 << 30, ROW["busbw_gbs"])
    assert [(t.step.name, t.status, t.attempt) for t in rescue.tried] == [("a", "hang", 2), ("b", "pass", 3)]


def test_a_rescued_cell_keeps_its_own_verdict_and_attempt_count():
    rec = _searched(["hang", "pass"])
    assert rec.status == "hang" and rec.attempt_count == 1 and rec.last_attempt.attempt == 1


def test_the_rescue_round_trips_through_json_and_old_records_still_load():
    rec = _searched(["fail", "hang", "pass"])
    again = CellRecord.from_json(json.loads(json.dumps(rec.to_json())))
    assert again.rescue == rec.rescue and again.to_json() == rec.to_json()
    old = _searched([]).to_json()
    assert "step" not in old["attempts"][0]  # the cell's own attempts write as before the search
    assert CellRecord.from_json(old).rescue.status == "not-run"
    assert CellRecord.from_json(old).rescue.reason.startswith("not run")


def test_why_the_search_stopped_round_trips_and_a_malformed_one_is_a_corrupt_record():
    end = ladder.search_end((A, B, D), Budget(2, 30), 2, False, False)
    rec = _searched(["hang", "fail"]).replace(search=end)
    data = json.loads(json.dumps(rec.to_json()))
    assert data["rescue_search"] == {"why": "attempts", "untried": ["d"], "attempts": 2, "seconds": 30}
    assert CellRecord.from_json(data).rescue.ended == end
    assert "rescue_search" not in _searched(["hang"]).to_json()  # records without a search write as before
    for bad, where in (({"why": "bored"}, "rescue_search.why"), ({"why": "time", "untried": [3]}, r"untried\[0\]"),
                       ({"untried": []}, "rescue_search.why")):
        with pytest.raises(RecordError, match=where):
            CellRecord.from_json({**data, "rescue_search": bad})


@pytest.mark.parametrize("step, where", [
    ("p2p-off", "attempts[1].step should be an object"),
    ({"env": {"NCCL_P2P_DISABLE": "1"}}, "attempts[1].step.name"),
    ({"name": "p2p-off", "env": {"NCCL_P2P_DISABLE": 1}}, "attempts[1].step.env.NCCL_P2P_DISABLE"),
    ({"name": "p2p-off", "env": ["NCCL_P2P_DISABLE=1"]}, "attempts[1].step.env"),
])
def test_a_malformed_step_is_a_corrupt_record_naming_where(step, where):
    data = _searched(["pass"]).to_json()
    data["attempts"][1]["step"] = step
    with pytest.raises(RecordError, match=where.replace("[", r"\[").replace("]", r"\]")):
        CellRecord.from_json(data)


# ---------------------------------------------------------------- the report
def test_the_report_names_the_smallest_rescue_against_the_best_passing_variant():
    rec = _searched(["hang", "pass"])
    best = CellRecord(CellFields(cuda="12.4.1", variant="p2p-off", id="c+p2p-off"), Outcome("pass"),
                      {"NCCL_P2P_DISABLE": "1"}, None,
                      (AttemptRecord(1, Outcome("pass"), RawAttempt(phases={"bandwidth": {"rows": [
                          bandwidth.bandwidth_row(1 << 30, 20, [0.0033] * 5, 0.01, 2)]}})),))
    row = {"default": rec, "p2p-off": best}
    busbw = report.gbs(ROW["busbw_gbs"])
    assert report.rescue_text(rec, row, 1 << 30) == (
        f"smallest rescue: NCCL_P2P_LEVEL=NVL (step b, attempt 3; busbw {busbw} GB/s at 1 GiB, 50% of the best "
        "passing variant, p2p-off)")
    assert report.rescue_text(rec, {"default": rec}, 1 << 30) == (
        f"smallest rescue: NCCL_P2P_LEVEL=NVL (step b, attempt 3; busbw {busbw} GB/s at 1 GiB, no passing variant "
        "to compare with)")
    assert report.recommend(row, 1 << 30) == ("p2p-off: set NCCL_P2P_DISABLE=1 (default: hang); or on default "
                                              "NCCL_P2P_LEVEL=NVL (smallest rescue)")
    assert report.recommend({"default": rec}, 1 << 30) == "default: set NCCL_P2P_LEVEL=NVL (smallest rescue; default: hang)"


def test_the_report_lists_what_was_tried_when_nothing_rescued_the_cell():
    rec = _searched(["hang", "fail", "hang"])
    assert report.rescue_text(rec, {"default": rec}, None) == "no rescue in 3 attempt(s): tried a (hang), b (fail), d (hang)"
    assert report.recommend({"default": rec}, None) == "no variant passes; no rescue in 3 attempt(s)"
    ended = rec.replace(search=ladder.search_end((A, B, D, C), Budget(3), 3, False, False))
    assert report.rescue_text(ended, {"default": ended}, None) == (
        "no rescue in 3 attempt(s): tried a (hang), b (fail), d (hang); the attempt budget of 3 was reached; not "
        "tried: c (raise matrix.yaml rescue: attempts to try them)")
    assert report.rescue_text(_searched([]), {}, None) == "not run (no --rescue, or a run from before the rescue search)"
    assert report.rescue_text(_searched([], cell_status="pass"), {}, None) is None


# ---------------------------------------------------------------- real searches
STUCK = "cpu-torch2.13.0-acc1.15.0+stuck"
FIXTURE = REPO / "tests" / "fixtures" / "rescue-cpu.yaml"


def _check_search(run: Path, cell_id: str) -> str:
    """The ladder ran in order and stopped at the first pass (shm-off, the step that sets the fault's
    variable); every attempt is in the record; the report shows the rescue. Returns the report."""
    data = json.loads((run / "cells" / cell_id / "record.json").read_text())
    attempts = [(a["raw"].get("kind", "cell"), (a.get("step") or {}).get("name"), a["outcome"]["status"])
                for a in data["attempts"]]
    assert attempts == [("cell", None, "hang"), ("rescue", "ring", "hang"), ("rescue", "p2p-off", "hang"),
                        ("rescue", "shm-off", "pass")], attempts
    assert data["outcome"]["status"] == "hang" and data["outcome"]["phase"] == "prepare"  # the cell's own verdict
    assert sorted(p.name for p in (run / "cells" / cell_id).glob("attempt-*")) == [f"attempt-{n}" for n in range(1, 5)]
    text = (run / "report.md").read_text()
    assert "- rescue search: smallest rescue: NCCL_SHM_DISABLE=1 (step shm-off, attempt 4; busbw " in text
    assert "stuck: set NCCL_SHM_DISABLE=1 (smallest rescue; stuck: hang)" in text
    return text


@pytest.mark.engine
@pytest.mark.slow
def test_invoke_rescue_in_containers_walks_the_ladder_and_stops_at_the_first_pass(engine, cpu_image, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "invoke", "rescue", STUCK, "--matrix", str(FIXTURE), "--wheelhouse",
                           str(WHEELHOUSE), "--results", str(tmp_path), "--run-id", "rescue"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]  # the cell still hangs as it is
    _check_search(tmp_path / "rescue", STUCK)


def test_the_search_on_the_host_engine(tmp_path):
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, "-m", "harness", "matrix", "--rescue", "--engine", "host", "--matrix",
                           str(FIXTURE), "--results", str(tmp_path), "--run-id", "host"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    (cell_id,) = [p.name for p in (tmp_path / "host" / "cells").iterdir()]
    _check_search(tmp_path / "host", cell_id)


def test_the_search_stops_when_its_time_budget_is_spent(tmp_path):
    """Nothing on the ladder cures this fault; with 12 s for the whole search, it ends after what fits
    (the last attempt's hard cap cut to what is left), not after the 4 planned steps."""
    pytest.importorskip("torch")
    text = FIXTURE.read_text().replace('"NCCL_SHM_DISABLE=1"', '"NCCL_NET_GDR_LEVEL=SYS"').replace("seconds: 300", "seconds: 12")
    (tmp_path / "m.yaml").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "harness", "matrix", "--rescue", "--engine", "host", "--matrix",
                           str(tmp_path / "m.yaml"), "--results", str(tmp_path), "--run-id", "budget"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    (record,) = (tmp_path / "budget" / "cells").glob("*/record.json")
    attempts = json.loads(record.read_text())["attempts"]
    rescues = [a for a in attempts if a["raw"].get("kind") == "rescue"]
    assert 1 <= len(rescues) < 4, [(a["step"]["name"], a["outcome"]["status"]) for a in rescues]
    assert all(a["outcome"]["status"] == "hang" for a in rescues)
    assert sum(a["outcome"]["seconds"] for a in rescues) < 12 + 5  # a cap is ended within a few seconds
    report = (tmp_path / "budget" / "report.md").read_text()
    assert f"no rescue in {len(rescues)} attempt(s): tried ring (hang)" in report
    assert "the time budget of 12 s was spent; not tried: " in report
    assert json.loads(record.read_text())["rescue_search"]["why"] == "time"


class _Engine:
    def inherited_env(self, image: str) -> dict[str, str]:
        return {}


@pytest.mark.parametrize("control, ran", [
    ("interrupted", ["cell", "control"]),  # Ctrl-C during the control: the run is ending
    ("pass", ["cell", "control", "rescue"]),  # the search runs, and stops at its first pass
])
def test_no_search_after_ctrl_c_in_the_control(monkeypatch, tmp_path, control, ran):
    """A hung NCCL cell, then its control: the supervisor records Ctrl-C as an interrupted attempt and
    returns rather than raising, so a control interrupted after a hung cell must not start the ladder."""
    m = matrix.load(REPO / "tests" / "fixtures" / "rescue-cpu.yaml")
    (stuck,) = m.cells
    kinds = []

    def attempt(engine, cell, m, opts, image, cell_dir, n, kind, on_event, on_start):
        kinds.append(kind)
        status = {"cell": "hang", "control": control}.get(kind, "pass")
        return AttemptRecord(n, Outcome(status, kind), RawAttempt(cell_id=cell.id, kind=kind))

    monkeypatch.setattr(runner, "_attempt", attempt)
    monkeypatch.setattr(runner.results, "save_record", lambda *args: None)
    rec = runner.run_cell(_Engine(), stuck, m, runner.RunOptions("r", tmp_path, control="always", rescue=True))
    assert kinds == ran
    assert (rec.search.why if rec.search else None) == ("rescued" if "rescue" in ran else None)
